"""A snapshot of a server's public surface, so a change that alters it fails a test until it is accepted.

The surface is what a client can list: the tools (names, descriptions, input and output schemas, annotations), the
resources, the resource templates and the prompts, each sorted, as the connected client received them. It is kept
as JSON in a file next to the test; a test compares the server's surface with it and fails with what was added,
removed or changed (and a diff). Re-recording is explicit (``--mcp-update-snapshots`` in the pytest plugin, or
``update=True``)::

    snapshot = SurfaceSnapshot(Path("tests/__snapshots__/surface.json"))
    async with Client(app) as client:
        await snapshot.check(client)
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from ..client.client import Client

KINDS = ("tools", "resources", "resourceTemplates", "prompts")
"""The parts of a surface, in the order they are listed."""
_KEYS = {"tools": "name", "resources": "uri", "resourceTemplates": "uriTemplate", "prompts": "name"}
MAX_DIFF_LINES = 80
"""Lines of the diff an assertion message shows at most."""


def _dump(item: Any) -> Any:
    dump = getattr(item, "model_dump", None)
    return dump(by_alias=True, exclude_none=True, mode="json") if dump is not None else item


async def surface(client: Client) -> dict[str, list[Any]]:
    """The public surface of the server ``client`` is connected to: ``{"tools": [...], "resources": [...],
    "resourceTemplates": [...], "prompts": [...]}``, each list sorted by name or URI (a kind the server does not
    declare is an empty list)."""
    caps = client.server_capabilities
    lists: dict[str, list[Any]] = {kind: [] for kind in KINDS}
    if "tools" in caps:
        lists["tools"] = [_dump(t) for t in await client.list_tools()]
    if "resources" in caps:
        lists["resources"] = [_dump(r) for r in await client.list_resources()]
        lists["resourceTemplates"] = [_dump(t) for t in await client.list_resource_templates()]
    if "prompts" in caps:
        lists["prompts"] = [_dump(p) for p in await client.list_prompts()]
    for kind, items in lists.items():
        items.sort(key=lambda item, k=_KEYS[kind]: str(item.get(k, "")) if isinstance(item, dict) else "")  # type: ignore[misc]
    return lists


def render(value: dict[str, list[Any]]) -> str:
    """The snapshot file's text: JSON, keys sorted, two-space indent, a final newline."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two surfaces, one line per item: ``tool 'add' changed``, ``prompt 'x' removed``."""
    lines = []
    for kind in KINDS:
        key = _KEYS[kind]
        before = {str(i.get(key)): i for i in old.get(kind, []) if isinstance(i, dict)}
        after = {str(i.get(key)): i for i in new.get(kind, []) if isinstance(i, dict)}
        what = {"resourceTemplates": "resource template"}.get(kind, kind.rstrip("s"))
        for name in sorted(before.keys() - after.keys()):
            lines.append(f"{what} {name!r} removed")
        for name in sorted(after.keys() - before.keys()):
            lines.append(f"{what} {name!r} added")
        for name in sorted(before.keys() & after.keys()):
            if before[name] != after[name]:
                fields = sorted(
                    k for k in before[name].keys() | after[name].keys() if before[name].get(k) != after[name].get(k)
                )
                lines.append(f"{what} {name!r} changed: {', '.join(fields)}")
    return lines


class SurfaceChanged(AssertionError):
    """The server's surface differs from its snapshot (or there is no snapshot yet)."""


class SurfaceSnapshot:
    """The recorded surface in ``path``; :meth:`check` compares a client's server with it.

    Args:
        path: the JSON file (created, with its directories, when the snapshot is recorded).
        update: record the surface instead of comparing (what ``--mcp-update-snapshots`` sets).
        update_hint: how to re-record, named in the failure message.
    """

    def __init__(
        self, path: Path | str, *, update: bool = False, update_hint: str = "pass update=True to record it"
    ) -> None:
        self.path: Path = Path(path)
        self.update = update
        self.update_hint = update_hint
        #: whether the last check wrote the file
        self.written: bool = False

    def read(self) -> dict[str, Any] | None:
        """The recorded surface, or None when there is none yet."""
        if not self.path.is_file():
            return None
        recorded: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))
        return recorded

    def assert_matches(self, current: dict[str, list[Any]]) -> None:
        """Compare ``current`` (a :func:`surface`) with the recording; record it instead when updating. Raises
        :class:`SurfaceChanged` with the changes and a diff."""
        __tracebackhide__ = True  # (pytest shows the test's line, not this one)
        text = render(current)
        recorded = self.path.read_text(encoding="utf-8") if self.path.is_file() else None
        if self.update:
            if recorded != text:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.path.write_text(text, encoding="utf-8")
                self.written = True
            return
        if recorded is None:
            raise SurfaceChanged(f"no surface snapshot at {self.path} yet: {self.update_hint}")
        if recorded == text:
            return
        listed = changes(json.loads(recorded), current) or ["(the same items, in another form)"]
        diff = list(difflib.unified_diff(recorded.splitlines(), text.splitlines(), "recorded", "now", lineterm=""))
        if len(diff) > MAX_DIFF_LINES:
            diff = [*diff[:MAX_DIFF_LINES], f"... ({len(diff) - MAX_DIFF_LINES} more diff lines)"]
        raise SurfaceChanged(
            f"the server's public surface differs from {self.path}:\n  "
            + "\n  ".join(listed)
            + f"\nIf the change is meant: {self.update_hint}.\n"
            + "\n".join(diff)
        )

    async def check(self, client: Client) -> dict[str, list[Any]]:
        """Read the surface of ``client``'s server and :meth:`assert_matches` it; returns it."""
        __tracebackhide__ = True  # (pytest shows the test's line, not this one)
        current = await surface(client)
        self.assert_matches(current)
        return current


class McpSnapshot:
    """What the ``mcp_snapshot`` fixture gives a test (annotate the parameter with it): the surface snapshot of
    that test, one file per era shared by its transports (its :attr:`path` is named after the test). ``await
    mcp_snapshot.check(mcp_client)`` fails when the server's tools, resources or prompts changed; pytest's
    ``--mcp-update-snapshots`` records them. The plugin builds it; a test does not."""

    def __init__(self, path: Path, update: bool, written: list[str], *, read_from: Path | None = None) -> None:
        hint = "run pytest with --mcp-update-snapshots"
        if read_from is not None:  # (recorded under the earlier name: compared until recorded under this one)
            hint += f" (it records {path.name}; {read_from.name} is the earlier name of this test's snapshot)"
        #: the snapshot compared with (:class:`SurfaceSnapshot`)
        self.snapshot: SurfaceSnapshot = SurfaceSnapshot(read_from or path, update=update, update_hint=hint)
        self._written = written

    @property
    def path(self) -> Path:
        """The snapshot file."""
        return self.snapshot.path

    async def check(self, client: Client) -> dict[str, list[Any]]:
        """Compare the surface of ``client``'s server with the recording (record it with
        ``--mcp-update-snapshots``); returns it."""
        __tracebackhide__ = True  # (pytest shows the test's line, not this one)
        current = await self.snapshot.check(client)
        self._note_written()
        return current

    def assert_matches(self, current: dict[str, list[Any]]) -> None:
        """Compare a surface already read (:func:`surface`) with the recording."""
        __tracebackhide__ = True
        self.snapshot.assert_matches(current)
        self._note_written()

    def _note_written(self) -> None:
        if self.snapshot.written and str(self.path) not in self._written:
            self._written.append(str(self.path))


__all__ = ["KINDS", "McpSnapshot", "SurfaceChanged", "SurfaceSnapshot", "changes", "render", "surface"]
