"""Composition: one app serving the tools, resources, templates and prompts of others.

``app.mount(other, prefix="weather")`` is live: the parent lists ``other``'s components under prefixed names
(``weather_forecast``) and URIs (``data://weather/today``), and whatever ``other`` registers or removes later shows
at once, with ``list_changed`` to the parent's clients. ``app.import_server(other, prefix=...)`` copies what
``other`` has now and never looks again.

What passes through: a mounted function gets a :class:`~mcpkit.server.context.Context` whose ``app`` is the
server it was registered on (so ``ctx.lifespan_state`` is that server's), over the parent's request, so progress,
logging, sampling, elicitation and roots reach the parent's client in either era; its tags and OAuth scopes
follow it (``MCPKit.scope_rule`` names the prefixed tool), and so does a tool's task support (the parent enables
tasks for it); the mounted server's lifespan runs inside the parent's. A request for a mounted component (a call, a
read, a prompt, the completion of a prompt's argument or a template's variable) runs the parent's interceptors,
then the mounted server's own (all but its task entry) around its own handler, as when it is served alone
(:meth:`Mount.run`); a mounted server without interceptors costs one attribute test per call.
A component hidden in the mounted server (``other.disable(...)``, its tag rules) is not mounted.

Names: ``<prefix>_<name>``; URIs: ``scheme://<prefix>/rest`` (``scheme:<prefix>/rest`` without ``//``,
``<prefix>/rest`` without a scheme). A name the
parent already has is refused when mounting (``ValueError``); one that appears later in the mounted server and
collides is left out, with a warning in the log.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ..protocol.apps import relinked_tool_meta
from ..protocol.errors import ResourceNotFound
from ..protocol.versions import Features
from .context import Context
from .interceptors import Call, Interceptor, call_for, run_chain
from .lowlevel import InputRequired, ServerRequestContext
from .pagination import Listed
from .prefixes import check_prefix, prefixed_content, prefixed_name, prefixed_uri, unprefixed_uri
from .prompts import Prompt
from .resources import Resource, ResourceTemplate
from .schema import ArgumentProblem
from .tools import Tool
from .uri_template import UriTemplate

logger: logging.Logger = logging.getLogger("mcpkit.server.compose")
JSONDict = dict[str, Any]

# what a mounted server's interceptors get of the parent's request besides the component's own names
_PASSED_ON = ("_meta", "inputResponses", "requestState")
# registries of an app, by list name; templates live in "resource_templates"
_REGISTRY = {"tools": "_tools", "resources": "_resources", "resource_templates": "_templates", "prompts": "_prompts"}


class Composable(Protocol):
    """What composition needs of an app (an :class:`~mcpkit.server.app.MCPKit`; typed by these members so this
    module, which the app imports, imports nothing of the app back)."""

    name: str
    debug: bool
    _tools: dict[str, Tool]
    _resources: dict[str, Resource]
    _templates: dict[str, ResourceTemplate]
    _prompts: dict[str, Prompt]
    _completers: dict[tuple[str, str, str], Any]
    _mounts: dict[str | None, Mount]
    _mounted_in: list[tuple[Any, Mount]]
    _visibility: Any
    _lifespan: Any
    _intercepting: Any
    _tool_search: Any
    _routing: Any
    _registries: dict[str, Mapping[str, Any]]
    tasks: Any

    def _route_calls(self) -> None: ...

    def enable_tasks(self) -> Any: ...

    def _changed(self, kind: str) -> None: ...

    def _enable_completion(self) -> None: ...

    def _serve_lists(self, kinds: Iterable[str]) -> None: ...

    def _refresh_skills(self) -> None: ...


def _prefixed_result(result: JSONDict, prefix: str) -> JSONDict:
    """A ``CallToolResult`` whose content names resources by the parent's URIs (the result itself when none)."""
    content = result.get("content")
    if not isinstance(content, list) or not any(
        isinstance(c, dict) and c.get("type") in ("resource", "resource_link") for c in content
    ):
        return result
    return {**result, "content": [prefixed_content(c, prefix) if isinstance(c, dict) else c for c in content]}


async def _prefixed_later(pending: Awaitable[JSONDict], prefix: str) -> JSONDict:
    return _prefixed_result(await pending, prefix)


@dataclass(eq=False)
class Mount:
    """One server mounted (or imported) into an app: its prefix and the parent's keys it put in each list."""

    child: Any
    prefix: str | None
    live: bool
    tags: frozenset[str] = frozenset()
    owned: dict[str, set[str]] = field(default_factory=lambda: {k: set() for k in _REGISTRY})

    def context(self, ctx: Context | None) -> Context | None:
        """The Context a mounted function gets: over the same request, ``app`` being the server it belongs to."""
        if ctx is None or not self.live:
            return ctx
        return Context(self.child, ctx.request_context)

    def chain(self, method: str) -> tuple[Interceptor, ...]:
        """The mounted server's own interceptors for ``method`` (empty: none, or an import, which copies the
        components only), but its task entry: the parent's decides whether the call runs as a task."""
        intercepting = self.child._intercepting
        if intercepting is None or not self.live:
            return ()
        chain: tuple[Interceptor, ...] = intercepting.chain(method)
        tasks = self.child.tasks
        if tasks is not None and chain:
            chain = tuple(fn for fn in chain if fn != tasks.intercept)
        return chain

    async def run(
        self,
        chain: tuple[Interceptor, ...],
        method: str,
        params: JSONDict,
        ctx: Context,
        template: ResourceTemplate | None = None,
        served: str | None = None,
    ) -> JSONDict:
        """A request for one of the mounted server's components through its own interceptors (``chain``), as if
        it served the request alone: ``params`` name the component as it knows it, and the innermost step is its
        own handler of ``method``; a read of ``template`` (the one the parent matched) tries it first, so the
        answer is the one the parent's match gives without interceptors, not the first of the mounted server's
        overlapping templates; a call of a tool the client called ``served`` (its name in the parent) names it so
        in its refusals, when the chain calls that tool. What the chain returns is the handler's unshaped result;
        the parent shapes it.
        An ``InputRequired`` the component raised is the ``input_required`` result inside the chain (as the
        dispatcher makes it), raised again after it so that the parent answers it as its own."""
        sctx = ctx.request_context
        sent = sctx.rc.params or {}
        for key in _PASSED_ON:  # (the request as the client sent it: its answers of an input round too)
            value = sent.get(key)
            if value is not None:
                params[key] = value
        parent: Any = sctx.server  # (the dispatching server: it seals the requestState of an input round)
        called = params.get("name")  # (the tool ``served`` names, unless an interceptor calls another)
        asked: list[InputRequired] = []

        async def handle(call: Call) -> JSONDict:
            try:
                if template is not None and call.method == "resources/read" and self._reads_registries():
                    pending = self.child._read_resource(sctx, call.params, template)
                elif served is not None and call.params.get("name") == called and self._calls_registry():
                    pending = self.child._call_tool(sctx, call.params, served)
                else:
                    pending = self.child._call_handler(sctx, call.method, call.params, sctx.features)
                result = await pending if inspect.isawaitable(pending) else pending
            except (InputRequired, ResourceNotFound) as exc:
                if isinstance(exc, InputRequired):
                    asked.append(exc)
                settled: JSONDict = parent._settle(exc, sctx, method, sent, sctx.features)
                return settled
            if not isinstance(result, dict):  # a pydantic model (a handler of the mounted server's own)
                result = result.model_dump(by_alias=True, exclude_none=True, mode="json")
            return result  # type: ignore[no-any-return]

        result = await run_chain(chain, call_for(method, params, sctx), handle)
        if not isinstance(result, dict):
            raise TypeError(f"an interceptor of {method!r} returned {type(result).__name__}, not a result dict")
        if asked and result.get("resultType") == "input_required":
            raise asked[0]
        return result

    def _calls_registry(self) -> bool:
        """The mounted server answers ``tools/call`` from its registry (not with a handler of its own)."""
        child = self.child
        return bool(child._handlers.get("tools/call") == child._call_tool)

    def _reads_registries(self) -> bool:
        """The mounted server answers ``resources/read`` from its registries (not with a handler of its own)."""
        child = self.child
        return bool(child._handlers.get("resources/read") == child._read_resource)


class _MountedInfo:
    """A mounted tool's view of its original's ``info``: the parent builds the request's Context for it while the
    mounted server has interceptors (its chain needs the request), even when the function takes none."""

    __slots__ = ("_inner", "_mount")

    def __init__(self, inner: Any, mount: Mount) -> None:
        self._inner = inner
        self._mount = mount

    @property
    def context_param(self) -> str | None:
        own: str | None = self._inner.context_param
        mount = self._mount
        return own if own is not None or mount.child._intercepting is None or not mount.live else "ctx"

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


# ---------------------------------------------------------------------------------------------- the wrappers


def _wrap(wrapper: Any, inner: Listed, mount: Mount) -> None:
    """Make ``wrapper`` a copy of ``inner``'s state (the wrappers skip their base class's ``__init__``: there is no
    function of their own to read; copying the instance's attributes forgets none, where naming them one by one
    left out what was added later, e.g. a tool's task support), with definitions of its own and the mount's
    labels."""
    vars(wrapper).update(vars(inner))
    wrapper.inner = inner
    wrapper.mount = mount
    wrapper.tags = inner.tags | mount.tags
    wrapper.scopes = inner.scopes
    Listed.__init__(wrapper)


class MountedTool(Tool):
    """A tool of a mounted server, under its prefixed name (calls go to the original, which is not touched).
    ``unlisted``: the mounted server does not list it (it has tool search: the parent lists what it lists, the
    others stay callable and found by its search tool)."""

    inner: Tool
    mount: Mount

    def __init__(self, inner: Tool, name: str, mount: Mount, unlisted: bool = False) -> None:
        _wrap(self, inner, mount)
        self.name = name
        self.unlisted = unlisted
        self.info: _MountedInfo = _MountedInfo(inner.info, mount)  # type: ignore[assignment]
        if mount.prefix is not None:  # (its view is served under the prefix too: the link names it there)
            self.meta: JSONDict | None = relinked_tool_meta(inner.meta, lambda uri: prefixed_uri(mount.prefix, uri))

    @property
    def returns(self) -> Any:
        return self.inner.returns

    def definition(self, feats: Features) -> JSONDict:
        cached = self._defs.get(feats.version)
        if cached is None:
            cached = {**self.inner.definition(feats), "name": self.name}
            if self.meta is not self.inner.meta:
                cached["_meta"] = self.meta
            self._defs[feats.version] = cached
        return cached

    def call(self, arguments: JSONDict, ctx: Context | None, feats: Features, name: str | None = None) -> Any:
        # name: what the client called it (this name, or a parent's for it): what the original's refusals say
        mount = self.mount
        name = name or self.name
        if ctx is not None and mount.child._intercepting is not None and (chain := mount.chain("tools/call")):
            params = {"name": self.inner.name, "arguments": arguments}
            pending: Any = mount.run(chain, "tools/call", params, ctx, served=name)
        else:
            pending = self.inner.call(arguments, mount.context(ctx), feats, name)
        prefix = mount.prefix
        if prefix is None:
            return pending
        if isinstance(pending, dict):
            return _prefixed_result(pending, prefix)
        return _prefixed_later(pending, prefix)

    def argument_problems(self, arguments: JSONDict) -> list[ArgumentProblem]:
        return self.inner.argument_problems(arguments)

    def needed_scopes(self, arguments: Any) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.scopes, *self.inner.needed_scopes(arguments))))


def _contents(result: JSONDict) -> list[JSONDict]:
    """The ``contents`` of a ``resources/read`` result the mounted server's chain returned."""
    contents = result.get("contents")
    if not isinstance(contents, list):
        raise TypeError("a resources/read result without a contents list came out of the mounted server's chain")
    return contents


def _renamed(contents: list[JSONDict], old: str, new: str) -> list[JSONDict]:
    """``contents`` whose ``uri`` is the mounted server's name for the resource, given the parent's."""
    return [{**c, "uri": new} if c.get("uri") == old else c for c in contents]


class MountedResource(Resource):
    """A static resource of a mounted server, under its prefixed URI."""

    inner: Resource
    mount: Mount

    def __init__(self, inner: Resource, uri: str, mount: Mount) -> None:
        _wrap(self, inner, mount)
        self.uri = uri

    async def read(self, ctx: Context | None) -> list[JSONDict]:
        mount = self.mount
        if ctx is not None and mount.child._intercepting is not None and (chain := mount.chain("resources/read")):
            contents = _contents(await mount.run(chain, "resources/read", {"uri": self.inner.uri}, ctx))
        else:
            contents = await self.inner.read(mount.context(ctx))
        return _renamed(contents, self.inner.uri, self.uri)


class MountedTemplate(ResourceTemplate):
    """A resource template of a mounted server, under its prefixed URI template."""

    inner: ResourceTemplate
    mount: Mount

    def __init__(self, inner: ResourceTemplate, uri_template: str, mount: Mount) -> None:
        _wrap(self, inner, mount)
        self.template: UriTemplate = UriTemplate(uri_template)
        self.uri_template = uri_template

    def accepts(self, variables: dict[str, str]) -> bool:
        return self.inner.accepts(variables)

    async def read(self, uri: str, variables: dict[str, str], ctx: Context | None) -> list[JSONDict]:
        inner_uri = unprefixed_uri(self.mount.prefix, uri)
        if inner_uri is None:  # (the template matched, so the prefix is there; kept for safety)
            inner_uri = uri
        mount = self.mount
        if ctx is not None and mount.child._intercepting is not None and (chain := mount.chain("resources/read")):
            contents = _contents(await mount.run(chain, "resources/read", {"uri": inner_uri}, ctx, self.inner))
        else:
            contents = await self.inner.read(inner_uri, variables, mount.context(ctx))
        return _renamed(contents, inner_uri, uri)


class MountedPrompt(Prompt):
    """A prompt of a mounted server, under its prefixed name."""

    inner: Prompt
    mount: Mount

    def __init__(self, inner: Prompt, name: str, mount: Mount, completions: dict[str, Any]) -> None:
        _wrap(self, inner, mount)
        self.name = name
        self.completions = completions

    def definition(self, feats: Features) -> JSONDict:
        cached = self._defs.get(feats.version)
        if cached is None:
            cached = self._defs[feats.version] = {**self.inner.definition(feats), "name": self.name}
        return cached

    async def render(self, arguments: dict[str, Any], ctx: Context | None, feats: Features) -> JSONDict:
        mount = self.mount
        if ctx is not None and mount.child._intercepting is not None and (chain := mount.chain("prompts/get")):
            result = await mount.run(chain, "prompts/get", {"name": self.inner.name, "arguments": arguments}, ctx)
        else:
            result = await self.inner.render(arguments, mount.context(ctx), feats)
        messages = result.get("messages")
        if mount.prefix is not None and isinstance(messages, list):
            result["messages"] = [
                {**m, "content": prefixed_content(m["content"], mount.prefix)}
                if isinstance(m, dict) and isinstance(m.get("content"), dict)
                else m
                for m in messages
            ]
        return result


def mounted_completion(item: Any, params: JSONDict, sctx: ServerRequestContext) -> Awaitable[JSONDict] | None:
    """``completion/complete`` for ``item``, the parent's prompt or template that ``params`` names: for one of a
    mounted server with interceptors of its own, the request through them as that server would serve it alone (its
    own names in ``ref``, its own handler innermost), inside the parent's chain; None for any other (the parent
    runs the completer itself)."""
    if isinstance(item, MountedPrompt):
        ref: JSONDict = {"type": "ref/prompt", "name": item.inner.name}
    elif isinstance(item, MountedTemplate):
        ref = {"type": "ref/resource", "uri": item.inner.uri_template}
    else:
        return None
    mount: Mount = item.mount
    if mount.child._intercepting is None or not (chain := mount.chain("completion/complete")):
        return None
    inner = {key: value for key, value in params.items() if key != "_meta"}
    inner["ref"] = ref
    return mount.run(chain, "completion/complete", inner, Context(mount.child, sctx))


# ---------------------------------------------------------------------------------------------- mounting


def _wrapped(mount: Mount, kind: str) -> dict[str, Listed]:
    """The parent's entries for what ``mount.child`` shows now in list ``kind``: key -> wrapper."""
    child = mount.child
    registry: dict[str, Any] = getattr(child, _REGISTRY[kind])
    visibility = child._visibility
    out: dict[str, Listed] = {}
    items = list(registry.items())
    listed: Mapping[str, Any] = child._registries[kind]
    if listed is not registry:  # (tool search: what it lists first, in its order, as the parent lists it)
        shown = dict.fromkeys(listed)
        items = [(key, registry[key]) for key in shown] + [(k, v) for k, v in items if k not in shown]
    for key, item in items:
        if visibility is not None and not visibility.shown(kind, key, item):
            continue  # hidden in the mounted server: not mounted
        if kind == "tools":
            name = prefixed_name(mount.prefix, key)
            out[name] = MountedTool(item, name, mount, listed is not registry and key not in listed)
        elif kind == "prompts":
            name = prefixed_name(mount.prefix, key)
            completions = dict(item.completions)
            for (ref, target, argument), completer in child._completers.items():
                if ref == "ref/prompt" and target == key:
                    completions[argument] = completer
            out[name] = MountedPrompt(item, name, mount, completions)
        elif kind == "resources":
            uri = prefixed_uri(mount.prefix, key)
            out[uri] = MountedResource(item, uri, mount)
        else:
            uri = prefixed_uri(mount.prefix, key)
            template = MountedTemplate(item, uri, mount)
            for (ref, target, argument), completer in child._completers.items():
                if ref == "ref/resource" and target == key:
                    template.completions = {**template.completions, argument: completer}
            out[uri] = template
    return out


def _ancestors(app: Any) -> set[int]:
    seen: set[int] = set()
    todo = [app]
    while todo:
        a = todo.pop()
        if id(a) in seen:
            continue
        seen.add(id(a))
        todo.extend(parent for parent, _ in a._mounted_in)
    return seen


def attach(
    parent: Composable, child: Composable, prefix: str | None, *, live: bool, tags: Iterable[str] | None = None
) -> Mount:
    """Mount (``live=True``) or import ``child`` into ``parent`` under ``prefix`` (see the module docstring)."""
    if not isinstance(child, Mounting):
        raise TypeError(f"only an MCPKit app can be mounted or imported, not {type(child).__name__}")
    if child._not_mountable is not None:
        raise TypeError(child._not_mountable)
    if prefix is not None:
        check_prefix(prefix)
    if child is parent or id(child) in _ancestors(parent):
        raise ValueError(f"cannot mount {child.name!r} into itself or into a server mounted in it")
    if live and prefix in parent._mounts:
        raise ValueError(f"a server is already mounted with prefix {prefix!r}; unmount it first")
    chain = child._intercepting  # (tool search's routing is none of the user's: the importer routes the calls)
    if not live and chain is not None and any(fn is not child._routing for fn, *_ in chain.entries):
        logger.warning(
            "%r has interceptors or middleware of its own: importing copies its components only, so they do not "
            "run for the requests %r serves of them; mount it instead (its chain then runs inside %r's), or "
            "install them on %r",
            child.name,
            parent.name,
            parent.name,
            parent.name,
        )
    mount = Mount(child, prefix, live, frozenset(tags or ()))
    wanted = {kind: _wrapped(mount, kind) for kind in _REGISTRY}
    clashes = sorted(key for kind, items in wanted.items() for key in items if key in getattr(parent, _REGISTRY[kind]))
    if clashes:
        raise ValueError(
            f"mounting {child.name!r} with prefix {prefix!r} would replace the parent's "
            f"{', '.join(map(repr, clashes))}: choose another prefix"
        )
    for kind, items in wanted.items():
        getattr(parent, _REGISTRY[kind]).update(items)
        mount.owned[kind] = set(items)
    completing = (MountedPrompt, MountedTemplate)
    if any(isinstance(t, completing) and t.completions for items in wanted.values() for t in items.values()):
        parent._enable_completion()
    _enable_tasks(parent, wanted["tools"].values())
    if child._routing is not None:  # it serves a caller tool: the parent routes its calls (tool_search.py)
        parent._route_calls()
    if live:
        parent._mounts[prefix] = mount
        child._mounted_in.append((parent, mount))
        parent._lifespan.add_child(child)
    parent._serve_lists(kind for kind, items in wanted.items() if items or live)
    if live:
        parent._refresh_skills()  # (its skills, served as skills under the prefix)
    for kind in ("tools", "resources", "prompts"):
        parent._changed(kind)
    return mount


def detach(parent: Composable, prefix: str | None) -> None:
    """Undo :func:`attach` of a live mount: its components leave the parent (clients get ``list_changed``)."""
    mount = parent._mounts.pop(prefix)
    mount.child._mounted_in[:] = [(p, m) for p, m in mount.child._mounted_in if m is not mount]
    if not any(p is parent for p, _ in mount.child._mounted_in):  # (mounted under another prefix: it still runs)
        parent._lifespan.remove_child(mount.child)
    for kind, keys in mount.owned.items():
        registry = getattr(parent, _REGISTRY[kind])
        for key in keys:
            registry.pop(key, None)
        keys.clear()
    parent._refresh_skills()
    for kind in ("tools", "resources", "prompts"):
        parent._changed(kind)


def refresh(parent: Composable, mount: Mount, kind: str) -> None:
    """The mounted server's list ``kind`` ("tools", "resources", "prompts") changed: bring the parent's entries in
    step (the caller then tells the parent's clients)."""
    kinds = ("resources", "resource_templates") if kind == "resources" else (kind,)
    for k in kinds:
        registry: dict[str, Any] = getattr(parent, _REGISTRY[k])
        for key in mount.owned[k]:
            if registry.get(key) is not None and getattr(registry[key], "mount", None) is mount:
                del registry[key]
        fresh = _wrapped(mount, k)
        kept: set[str] = set()
        for key, item in fresh.items():
            if key in registry:
                logger.warning(
                    "%s %r of mounted server %r collides with the parent's; left out", k, key, mount.child.name
                )
                continue
            registry[key] = item
            kept.add(key)
        mount.owned[k] = kept
        if k == "tools":
            _enable_tasks(parent, (registry[key] for key in kept))
            if mount.child._routing is not None:  # (tool search added once mounted: the parent routes its calls)
                parent._route_calls()
        elif any(
            isinstance(registry[key], (MountedPrompt, MountedTemplate)) and registry[key].completions for key in kept
        ):
            parent._enable_completion()


def completions_changed(app: Composable, kind: str) -> None:
    """A completer was registered on ``app`` for one of its prompts (``kind`` "prompts") or templates
    ("resources"): the apps it is mounted into (and theirs, in turn) complete with it too."""
    for parent, mount in list(app._mounted_in):
        refresh(parent, mount, kind)
        completions_changed(parent, kind)


def _enable_tasks(parent: Composable, tools: Iterable[Listed]) -> None:
    """A mounted tool that may run as a task needs the parent's task support, as a tool registered there does."""
    if parent.tasks is None and any(isinstance(t, Tool) and t.task_support is not None for t in tools):
        parent.enable_tasks()


class Mounting:
    """The composition API of :class:`~mcpkit.server.app.MCPKit` (a base class of it)."""

    #: why an app of this class cannot be mounted or imported (None: it can); a subclass whose components are not
    #: in its registries (they are served by handlers of its own) says so here
    _not_mountable: ClassVar[str | None] = None

    _lifespan: Any
    _lazy_lifespan: Any
    _background: set[asyncio.Task[None]]
    if TYPE_CHECKING:
        _list_tools: Any
        _call_tool: Any
        _list_resources: Any
        _list_templates: Any
        _read_resource: Any
        _list_prompts: Any
        _get_prompt: Any

        def has_handler(self, method: str) -> bool: ...

        def set_handler(self, method: str, fn: Any) -> None: ...

    def mount(self, server: Any, prefix: str | None = None, *, tags: Iterable[str] | None = None) -> None:
        """Serve ``server``'s (an ``MCPKit``) tools, resources, templates and prompts from this app, live: what
        ``server`` adds or removes later shows at once (clients get ``list_changed``). Names become
        ``<prefix>_<name>``, URIs ``scheme://<prefix>/...``; ``tags`` are added to every mounted component.
        ``server``'s lifespan runs inside this app's; its functions get a ``Context`` over the calling request
        (progress, logging, sampling, elicitation reach the caller). A name this app already has is a
        ``ValueError``. See :mod:`mcpkit.server.compose`."""
        attach(self, server, prefix, live=True, tags=tags)  # type: ignore[arg-type]
        if self._lifespan.users > 0:  # mounted while serving: its lifespan starts now
            task = asyncio.get_running_loop().create_task(self._lifespan.enter_child(server))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        elif self._lifespan.configured:
            self._lazy_lifespan = self._lifespan

    def _serve_lists(self, kinds: Iterable[str]) -> None:
        """Answer the methods of ``kinds`` (tools, resources, resource_templates, prompts) from now on."""
        for kind in set(kinds):
            if kind == "tools" and not self.has_handler("tools/call"):
                self.set_handler("tools/list", self._list_tools)
                self.set_handler("tools/call", self._call_tool)
            elif kind in ("resources", "resource_templates") and not self.has_handler("resources/read"):
                self.set_handler("resources/list", self._list_resources)
                self.set_handler("resources/templates/list", self._list_templates)
                self.set_handler("resources/read", self._read_resource)
            elif kind == "prompts" and not self.has_handler("prompts/get"):
                self.set_handler("prompts/list", self._list_prompts)
                self.set_handler("prompts/get", self._get_prompt)

    def unmount(self, prefix: str | None = None) -> None:
        """Remove the server mounted with ``prefix`` (KeyError if none); clients get ``list_changed``."""
        detach(self, prefix)  # type: ignore[arg-type]

    def import_server(self, server: Any, prefix: str | None = None, *, tags: Iterable[str] | None = None) -> None:
        """Copy ``server``'s current tools, resources, templates and prompts into this app under ``prefix`` (as
        :meth:`mount` names them); later changes to ``server`` do not show, and its lifespan is not run (its
        functions get a ``Context`` whose ``app`` is this app)."""
        attach(self, server, prefix, live=False, tags=tags)  # type: ignore[arg-type]


__all__ = [
    "Composable",
    "Mounting",
    "Mount",
    "MountedPrompt",
    "MountedResource",
    "MountedTemplate",
    "MountedTool",
    "attach",
    "check_prefix",
    "completions_changed",
    "mounted_completion",
    "detach",
    "prefixed_content",
    "prefixed_name",
    "prefixed_uri",
    "refresh",
    "unprefixed_uri",
]
