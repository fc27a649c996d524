"""Which tools, resources, templates and prompts a caller sees: one rule for listing and for calling.

A component is visible when all of these hold:

- its tags meet ``include_tags`` (when given: at least one tag in common) and miss ``exclude_tags``;
- it was not disabled, by its key (a tool's or prompt's name, a resource's URI, a template's URI template) or by
  one of its tags (``app.disable(...)``, undone by ``app.enable(...)``; clients get ``list_changed``);
- the per-principal filter, when one is set (``app.set_view_filter(fn)``), says yes for the caller's principal
  (the one the installed authorization names, e.g. :func:`mcpkit.auth.protect`'s; None without one).

``tools/list`` and ``tools/call`` ask the same question (:meth:`Visibility.allows`), so a hidden tool cannot be
called: it is answered exactly like a tool that does not exist. The same holds for ``resources/read``,
``prompts/get`` and ``completion/complete``.

Lists are kept per *view*: one snapshot of the visible items (with its page texts and windows, see
:class:`~mcpkit.server.pagination.Snapshot`) per principal when a per-principal filter is set, else one shared
by everyone. A view's cursors carry the view (its list name includes a digest of the principal), so a cursor
handed to one principal is refused (-32602) when another presents it. Views are bounded in bytes with everything
else the app keeps for its lists (its :class:`~mcpkit.server.pagination.ListCache`: a view costs
:data:`~mcpkit.server.pagination.VIEW_BYTES` plus :data:`~mcpkit.server.pagination.VIEW_ITEM_BYTES` per visible
item, plus its pages), the least recently used view dropped to make room; all are dropped whenever a list or a rule
changes. A per-principal filter's answer is cached per principal: it must depend on the principal and the
component only.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .pagination import VIEW_BYTES, VIEW_ITEM_BYTES, ListCache, Listed, Snapshot

#: ``fn(component, principal) -> bool``: whether the caller ``principal`` (None when unauthenticated) sees it
ViewFilter = Callable[[Any, "str | None"], bool]

#: the lists of an app, as ``MCPKit`` names them (``page_size`` keys)
KINDS = ("tools", "resources", "resource_templates", "prompts")


def _tags(values: Iterable[str] | str | None) -> frozenset[str]:
    if values is None:
        return frozenset()
    if isinstance(values, str):
        return frozenset((values,))
    return frozenset(values)


class Visibility:
    """The visibility rules of one app and the list views they make (see the module docstring)."""

    def __init__(self, include_tags: Iterable[str] | None = None, exclude_tags: Iterable[str] | None = None) -> None:
        self.include_tags: frozenset[str] | None = _tags(include_tags) if include_tags is not None else None
        self.exclude_tags: frozenset[str] = _tags(exclude_tags)
        self.disabled: set[tuple[str, str]] = set()  # (kind, key)
        self.disabled_tags: set[str] = set()
        self.view_filter: ViewFilter | None = None
        # (kind, principal or None) -> (its snapshot, its list name, the bytes it charged), least recently used first
        self._views: OrderedDict[tuple[str, str | None], tuple[Snapshot[Any], str, int]] = OrderedDict()
        self._cache: ListCache | None = None  # the app's, given with the first view

    # ------------------------------------------------------------------ the rule

    def shown(self, kind: str, key: str, item: Listed) -> bool:
        """The part of the rule that is the same for every caller (tags, disabled keys and tags)."""
        tags = item.tags
        if self.include_tags is not None and not (tags & self.include_tags):
            return False
        if tags and (tags & self.exclude_tags or tags & self.disabled_tags):
            return False
        return (kind, key) not in self.disabled

    def allows(self, kind: str, key: str, item: Listed, principal: str | None) -> bool:
        """Whether ``principal`` may see (and so call, read or get) ``item``, registered as ``key`` in ``kind``."""
        if not self.shown(kind, key, item):
            return False
        view_filter = self.view_filter
        return view_filter is None or bool(view_filter(item, principal))

    @property
    def per_principal(self) -> bool:
        """True when lists differ per principal (a per-principal filter is set): they are then ``private``."""
        return self.view_filter is not None

    # ------------------------------------------------------------------ changing it

    def set(self, enabled: bool, keys: Iterable[str], tags: Iterable[str] | str | None, kinds: Iterable[str]) -> None:
        """Disable (``enabled=False``) or enable again ``keys`` in ``kinds`` and ``tags``."""
        kinds = tuple(kinds)
        for kind in kinds:
            if kind not in KINDS:
                raise ValueError(f"unknown list {kind!r}; use {', '.join(KINDS)}")
        pairs = {(kind, key) for kind in kinds for key in keys}
        if enabled:
            self.disabled -= pairs
            self.disabled_tags -= _tags(tags)
        else:
            self.disabled |= pairs
            self.disabled_tags |= _tags(tags)
        self.invalidate(KINDS)

    def invalidate(self, kinds: Iterable[str]) -> None:
        """Forget the views of ``kinds`` (a list or a rule changed); the next page rebuilds them."""
        kinds = set(kinds)
        for view_key in [k for k in self._views if k[0] in kinds]:
            self._drop(view_key)

    def _drop(self, view_key: tuple[str, str | None]) -> None:
        snapshot, _, cost = self._views.pop(view_key)
        snapshot.invalidate()  # (gives back its pages and windows)
        if self._cache is not None:
            self._cache.give(cost)

    # ------------------------------------------------------------------ views

    def view(
        self,
        kind: str,
        registry: Mapping[str, Listed],
        principal: str | None,
        cache: ListCache,
        base: Snapshot[Any] | None = None,
    ) -> tuple[Snapshot[Any], str]:
        """The snapshot of ``kind`` that ``principal`` sees, and the list name its cursors carry (``kind`` itself for
        the view everyone shares, ``kind/<digest of the principal>`` for a per-principal one). Views are charged to
        ``cache`` (the app's list cache), the least recently used ones dropped to make room; a view that does not
        fit even then answers this page and is not kept. ``base``: the registry's own snapshot, whose sequence
        numbers the view's cursors carry (so a cursor resumes at the same place whatever the rules hide since)."""
        view_key = (kind, principal if self.view_filter is not None else None)
        views = self._views
        found = views.get(view_key)
        if found is not None:
            views.move_to_end(view_key)
            return found[0], found[1]
        self._cache = cache
        visible = {key: item for key, item in registry.items() if self.allows(kind, key, item, principal)}
        if self.view_filter is None:
            name = kind
        else:
            digest = hashlib.sha256(("" if principal is None else "p:" + principal).encode()).hexdigest()[:16]
            name = f"{kind}/{digest}"
        cost = VIEW_BYTES + VIEW_ITEM_BYTES * len(visible)
        while not cache.take(cost):
            if not views:
                return Snapshot(visible, ListCache(0), base), name  # (keeps nothing)
            self._drop(next(iter(views)))
        snapshot = Snapshot(visible, cache, base)
        views[view_key] = (snapshot, name, cost)
        return snapshot, name


def everything(kind: str, key: str, item: Any, caller: Any) -> bool:
    """The visibility of a read the app makes itself: everything is there."""
    return True


def pop_labels(options: dict[str, Any]) -> tuple[Any, Any, bool]:
    """Take ``tags``, ``scopes`` and ``enabled`` out of a registration's options (the rest builds the component)."""
    return options.pop("tags", None), options.pop("scopes", None), options.pop("enabled", True)


class Rules:
    """The visibility and scope API of :class:`~mcpkit.server.app.MCPKit` (a base class of it; the rule itself is
    :class:`Visibility`, made at the first use, so an app without rules pays nothing)."""

    _visibility: Visibility | None
    handlers_version: int
    if TYPE_CHECKING:
        _tools: dict[str, Any]
        _resources: dict[str, Any]
        _templates: dict[str, Any]
        _prompts: dict[str, Any]

        def _changed(self, kind: str) -> None: ...

        def asked_too(self, method: str, params: Mapping[str, Any]) -> tuple[dict[str, Any], ...]: ...

        def inner_requests(self, method: str, params: Mapping[str, Any]) -> tuple[tuple[str, dict[str, Any]], ...]: ...

    def disable(self, *keys: str, tags: Iterable[str] | str | None = None, kinds: Iterable[str] = KINDS) -> None:
        """Hide components at run time: by key (a tool's or prompt's name, a resource's URI, a template's URI
        template) and/or by tag, in ``kinds`` (default all: tools, resources, resource_templates, prompts). A
        hidden component is neither listed nor callable, readable or gettable. Clients get ``list_changed`` for
        the lists where something disappeared."""
        self._switch(False, keys, tags, kinds)

    def enable(self, *keys: str, tags: Iterable[str] | str | None = None, kinds: Iterable[str] = KINDS) -> None:
        """Undo :meth:`disable` for these keys and tags. Clients get ``list_changed`` for the lists where something
        appeared."""
        self._switch(True, keys, tags, kinds)

    def _switch(
        self, enabled: bool, keys: Iterable[str], tags: Iterable[str] | str | None, kinds: Iterable[str]
    ) -> None:
        """Disable or enable, then announce the lists whose visible items changed: only the components named by
        ``keys`` (in ``kinds``) or carrying one of ``tags`` (in every list: tags are disabled everywhere) can."""
        rules, keys, kinds, tagged = self._rules(), tuple(keys), tuple(kinds), _tags(tags)
        registries = {"tools": self._tools, "resources": self._resources}
        registries.update(resource_templates=self._templates, prompts=self._prompts)
        named = [(kind, key) for kind in kinds if kind in registries for key in keys if key in registries[kind]]
        if tagged:
            named += [(kind, key) for kind, reg in registries.items() for key, c in reg.items() if c.tags & tagged]
        before = [rules.shown(kind, key, registries[kind][key]) for kind, key in named]
        rules.set(enabled, keys, tags, kinds)
        changed = {
            kind
            for (kind, key), was in zip(named, before, strict=True)
            if rules.shown(kind, key, registries[kind][key]) != was
        }
        for kind in ("tools", "resources", "prompts"):  # (templates are announced as resources)
            if kind in changed or (kind == "resources" and "resource_templates" in changed):
                self._changed(kind)

    def set_view_filter(self, fn: ViewFilter | None) -> None:
        """Filter per principal: ``fn(component, principal) -> bool`` (``principal``: the caller's, as the installed
        authorization names it, e.g. :func:`mcpkit.auth.protect`'s; None when unauthenticated). Its answer is
        cached per principal, so it must depend on the principal and the component only. Lists then differ per
        principal: their cursors are bound to it and their cache scope is ``private`` (a read's too). None removes
        it."""
        rules = self._rules()
        rules.view_filter = fn
        rules.invalidate(KINDS)
        self._rules_changed()

    def _visible(self, kind: str, key: str, item: Any, ctx: Any) -> bool:
        """Whether the caller of the request ``ctx`` (a ``ServerRequestContext``) may see ``item``."""
        return self._visibility is None or self._visibility.allows(kind, key, item, ctx.principal)

    def _rules(self) -> Visibility:
        if self._visibility is None:
            self._visibility = Visibility()
            self.handlers_version += 1  # (the quick path of tools/call re-reads whether it applies)
        return self._visibility

    def _rules_changed(self) -> None:
        for kind in ("tools", "resources", "prompts"):
            self._changed(kind)

    def _label(self, kind: str, key: str, item: Listed, labels: tuple[Any, Any, bool]) -> None:
        tags, scopes, enabled = labels
        if tags is not None:
            item.tags = frozenset((tags,) if isinstance(tags, str) else tags)
        if scopes is not None:
            item.scopes = tuple((scopes,) if isinstance(scopes, str) else scopes)
        if not enabled:
            self._rules().disabled.add((kind, key))

    @property
    def scope_rule(self) -> Callable[[str, Mapping[str, Any]], list[str]]:
        """The OAuth scopes each request needs by the ``scopes=`` of what it calls, reads or gets (mounted
        components included, under their prefixed names; a call of tool search's ``call_tool``, or of
        ``read_resource``/``get_prompt`` of resources and prompts as tools, needs those of what it calls, reads
        or gets too): give it to :func:`mcpkit.auth.protect` as ``scope_rule=app.scope_rule``."""

        def rule(method: str, params: Mapping[str, Any]) -> list[str]:
            item: Any = None
            if method == "tools/call":
                tool = self._tools.get(str(params.get("name")))
                needed = list(tool.needed_scopes(params.get("arguments"))) if tool is not None else []
                for inner in self.asked_too(method, params):  # (a caller tool's call: the inner tool's too)
                    called = self._tools.get(inner["name"])
                    if called is not None:
                        needed.extend(s for s in called.needed_scopes(inner["arguments"]) if s not in needed)
                for inner_method, inner_params in self.inner_requests(method, params):  # (read_resource's read)
                    needed.extend(s for s in rule(inner_method, inner_params) if s not in needed)
                return needed
            if method == "prompts/get":
                item = self._prompts.get(str(params.get("name")))
            elif method == "resources/read":
                uri = str(params.get("uri"))
                item = self._resources.get(uri)
                if item is None:
                    item = next((t for t in self._templates.values() if t.match(uri) is not None), None)
            return list(item.scopes) if item is not None else []

        return rule


__all__ = ["KINDS", "Rules", "ViewFilter", "Visibility", "everything", "pop_labels"]
