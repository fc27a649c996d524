"""MCP extensions: what each side declares under ``capabilities.extensions``, in both eras.

An extension is named by an identifier ``{vendor-prefix}/{extension-name}`` (``io.modelcontextprotocol/ui``) and
declared with a settings object (``{}`` when it has none). The client declares the ones it supports in its
capabilities (``initialize`` in the handshake era, every request's ``_meta`` in 2026-07-28), the server in its own
(the ``initialize`` result, ``server/discover``). An extension is in use for a request when both declared it; the
side that needs it checks the other's declaration (:func:`declared_settings`) and falls back to core behaviour, or
refuses, when it is missing.

:class:`Extensions` is the one registry both sides keep: ``{id: settings}`` (a mutable mapping), each entry
declared in every revision or only in some (``versions=``: the 2026-07-28 tasks extension, for one, replaces a
core capability of 2025-11-25 and is declared in 2026-07-28 only). :meth:`Extensions.for_version` is what goes
under ``capabilities.extensions`` for a revision, built once per change.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import Any

JSONDict = dict[str, Any]

#: MCP Apps (SEP-1865): interactive ``ui://`` views of tools.
UI_EXTENSION = "io.modelcontextprotocol/ui"
#: Skills (SEP-2640): Agent Skills served as resources, ``skills/list`` and ``skills/get``.
SKILLS_EXTENSION = "io.modelcontextprotocol/skills"

# {vendor-prefix}/{name}: a reversed domain name (dot-separated labels), a slash, a name.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_ID = re.compile(rf"^{_LABEL}(?:\.{_LABEL})+/[A-Za-z0-9][A-Za-z0-9._-]*$")
MAX_ID_LENGTH = 256


def check_extension_id(extension_id: str) -> str:
    """``extension_id`` if it is an extension identifier (``vendor.prefix/name``), else ``ValueError``."""
    if not isinstance(extension_id, str) or len(extension_id) > MAX_ID_LENGTH or not _ID.match(extension_id):
        raise ValueError(
            f"{extension_id!r} is not an extension identifier: use '{{vendor-prefix}}/{{extension-name}}' with a "
            "reversed domain name you own as the prefix (e.g. 'com.example/my-extension')"
        )
    return extension_id


def declared_settings(capabilities: Mapping[str, Any] | None, extension_id: str) -> JSONDict | None:
    """The settings a peer declared for ``extension_id`` in its ``capabilities``, or None when it did not declare
    it (a settings value that is not an object is no declaration: the schema says an object)."""
    if not capabilities:
        return None
    extensions = capabilities.get("extensions")
    if not isinstance(extensions, dict):
        return None
    settings = extensions.get(extension_id)
    return settings if isinstance(settings, dict) else None


def declares(capabilities: Mapping[str, Any] | None, extension_id: str) -> bool:
    """Whether ``capabilities`` declare ``extension_id`` (see :func:`declared_settings`)."""
    return declared_settings(capabilities, extension_id) is not None


class Extensions(MutableMapping[str, JSONDict]):
    """The extensions one side declares: ``{id: settings}``.

    ``extensions[id] = settings`` declares one in every revision; :meth:`declare` can limit it to some
    revisions. ``on_change`` is called after every change (the server drops its cached capabilities).
    """

    __slots__ = ("_by_version", "_entries", "on_change")

    def __init__(self, on_change: Callable[[], None] | None = None) -> None:
        self._entries: dict[str, tuple[JSONDict, frozenset[str] | None]] = {}
        self._by_version: dict[str, JSONDict | None] = {}
        self.on_change: Callable[[], None] | None = on_change

    def declare(
        self, extension_id: str, settings: Mapping[str, Any] | None = None, *, versions: Iterable[str] | None = None
    ) -> None:
        """Declare ``extension_id`` with its ``settings`` (``{}`` by default) in the revisions ``versions`` (every
        revision by default). Declaring it again replaces the earlier declaration."""
        check_extension_id(extension_id)
        if settings is None:
            settings = {}
        if not isinstance(settings, Mapping):
            raise TypeError(f"the settings of {extension_id!r} must be a JSON object (a dict), not {settings!r}")
        only = frozenset(versions) if versions is not None else None
        if only is not None and not only:
            raise ValueError(f"{extension_id!r}: versions is empty (None declares it in every revision)")
        self._entries[extension_id] = (dict(settings), only)
        self._changed()

    def versions_of(self, extension_id: str) -> frozenset[str] | None:
        """The revisions ``extension_id`` is declared in (None: every one); KeyError when it is not declared."""
        return self._entries[extension_id][1]

    def for_version(self, version: str) -> JSONDict | None:
        """What goes under ``capabilities.extensions`` in revision ``version`` (None: nothing). Do not mutate it."""
        try:
            return self._by_version[version]
        except KeyError:
            pass
        out = {key: settings for key, (settings, only) in self._entries.items() if only is None or version in only}
        shown = out or None
        self._by_version[version] = shown
        return shown

    def _changed(self) -> None:
        self._by_version.clear()
        if self.on_change is not None:
            self.on_change()

    # MutableMapping
    def __getitem__(self, extension_id: str) -> JSONDict:
        return self._entries[extension_id][0]

    def __setitem__(self, extension_id: str, settings: JSONDict) -> None:
        self.declare(extension_id, settings)

    def __delitem__(self, extension_id: str) -> None:
        del self._entries[extension_id]
        self._changed()

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Extensions({ {k: v[0] for k, v in self._entries.items()}!r})"


def as_extensions(value: Extensions | Mapping[str, Mapping[str, Any] | None] | None) -> Extensions:
    """``value`` itself when it is an :class:`Extensions`, else a new one declaring each ``{id: settings}`` of it
    in every revision (``None`` settings: ``{}``)."""
    if isinstance(value, Extensions):
        return value
    out = Extensions()
    for extension_id, settings in (value or {}).items():
        out.declare(extension_id, settings)
    return out


__all__ = [
    "SKILLS_EXTENSION",
    "UI_EXTENSION",
    "Extensions",
    "as_extensions",
    "check_extension_id",
    "declared_settings",
    "declares",
]
