"""Proxy, bridge and gateway: a server that forwards every request to other MCP servers.

    import mcpkit

    app = mcpkit.proxy("python legacy_server.py")             # any Client target: command, URL, mcp.json, server
    app.run("http", port=8000)                                 # a stdio server as a Streamable HTTP endpoint
    gateway = mcpkit.proxy({"fs": "npx server-fs /tmp", "web": "https://example.com/mcp"})   # prefixes

``mcpkit proxy TARGET -t http --port N [--auth-token T]`` serves one from the command line.

It bridges transports and protocol eras: each side negotiates its own revision, and what one era says with
server→client requests the other says with ``InputRequiredResult`` rounds. A client of the 2026-07-28 era talking
to a handshake-era server gets the server's sampling, elicitation and roots requests as input requests; the
upstream request waits meanwhile (its state stays in the proxy, named by the sealed ``requestState``, bounded in
number and time). Progress, log messages, cancellation, list changes and resource updates are forwarded.

How upstream connections are used:

- a handshake-era client session gets its own upstream session, opened at its first request and closed with
  it (its subscriptions, log messages and the upstream's requests stay with it; the upstream sees the client's
  capabilities);
- a 2026-07-28 request leases an upstream connection for its duration, so what the upstream sends meanwhile
  (progress, logs, requests) belongs to that request alone: one per set of client capabilities the requests
  declare (``pool_size=1``, the default: the server's state, such as a tool a call added, is the same for every
  request of those clients), or one of a bounded pool;
- one primary connection, opened when the proxy starts, learns the upstream's info and capabilities and relays
  its list changes (and resource updates) to ``subscriptions/listen`` streams; on a 2026-07-28 upstream it holds
  one listen stream naming the URIs the clients subscribed to (sessions' ``resources/subscribe`` and listen
  streams together, at most :data:`~mcpkit.proxy_upstream.MAX_WATCHED`);
- a connection whose upstream ended is noticed at once: the primary one, and a handshake-era client session's, are
  opened again in the background (a round of attempts backing off, then one every ``reconnect_max_delay``
  seconds at most until it is back), with what they held for the listeners; while the upstream is down,
  requests are refused at once with an error saying so;
- a gateway member that cannot be reached when the gateway starts is left out (one warning line) and connected
  in the background until it answers (at most one attempt every ``reconnect_max_delay`` seconds); then its
  lists are added and the clients told they changed. ``require_all=True`` refuses to start instead.

Security: the upstream is treated as any server a client meets (every client limit applies: message sizes,
list walks, input rounds, timeouts); the token a client presents to the proxy is never sent upstream (upstream
credentials are the proxy's own, given with ``headers=``/``auth=``); a URL target on a private, link-local or
reserved address is refused unless ``allow_private_network=True`` (loopback and public addresses are allowed);
one request in makes at most one request out (a gateway's list pages walk its members one page at a time).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

from .client.targets import TargetError
from .protocol.errors import InvalidParams, MCPError, UnknownName
from .protocol.extensions import SKILLS_EXTENSION, UI_EXTENSION, declared_settings
from .protocol.jsonrpc import JSONDict
from .proxy_listen import ClientWatches
from .proxy_local import OWN_KINDS, drop_shadowed, own_handler, own_kinds_of
from .proxy_rounds import MAX_SHARED, Exchange
from .proxy_search import UpstreamCatalog, declares_headers
from .proxy_shaping import LISTS, shape_result, upstream_params
from .proxy_skills import SKILLS_METHODS, gateway_settings, prefixed_skills_result, serves_skills
from .proxy_upstream import Upstream, one_line
from .server.builtins import LIST_CHANGED_FILTER
from .server.lowlevel import ServerRequestContext
from .server.pagination import Paginator
from .server.prefixes import check_prefix
from .server.tool_search import ToolSearch

logger: logging.Logger = logging.getLogger("mcpkit.proxy")

__all__ = ["ProxyServer", "proxy"]

_CAPABILITY = {
    "tools/list": "tools",
    "tools/call": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resources",
    "resources/read": "resources",
    "prompts/list": "prompts",
    "prompts/get": "prompts",
    "completion/complete": "completions",
}
#: The extensions a proxy relays, with the requests of each it forwards as they are: their server side is in what it
#: relays anyway (tools' ``_meta``, resources) and in those requests. A gateway merges its members' skill lists and
#: routes the other Skills requests by the prefix of the URI (:mod:`mcpkit.proxy_skills`).
_RELAYED_EXTENSIONS: dict[str, tuple[str, ...]] = {
    UI_EXTENSION: (),
    SKILLS_EXTENSION: ("skills/list", "skills/get", "resources/directory/read"),
}
_EXTENSION_METHODS = frozenset(m for methods in _RELAYED_EXTENSIONS.values() for m in methods)
#: characters of an upstream cursor the proxy's cursor carries (what an mcpkit server's own cursors may be), and of
#: the proxy's cursor with it inside (its base64 and seal); a longer one fails that list request
_MAX_UPSTREAM_CURSOR = 1024
_MAX_PROXY_CURSOR = 2048


def proxy(target: Any, *, name: str | None = None, **options: Any) -> ProxyServer:
    """A server forwarding to ``target`` (anything :class:`~mcpkit.client.client.Client` accepts), or to several:
    ``{"prefix": target, ...}`` makes a gateway whose names and URIs carry each member's prefix. ``options`` go to
    :class:`ProxyServer`."""
    if isinstance(target, Mapping) and not _is_config_entry(target):
        return ProxyServer(dict(target), name=name, **options)
    return ProxyServer({None: target}, name=name, **options)


def _is_config_entry(value: Mapping[str, Any]) -> bool:
    return any(k in value for k in ("command", "url", "mcpServers", "servers"))


def _check_prefixes(prefixes: list[str]) -> None:
    """A gateway's prefixes follow the mount rule (:func:`~mcpkit.server.compose.check_prefix`), and none starts
    with another one and "_": with "a" and "a_b", the name "a_b_x" would be a's "b_x" and a_b's "x" alike."""
    for prefix in prefixes:
        check_prefix(prefix)
    for prefix in prefixes:
        for other in prefixes:
            if other.startswith(f"{prefix}_"):
                raise ValueError(
                    f"gateway prefixes {prefix!r} and {other!r}: a name like {other + '_x'!r} would belong to both "
                    "members; choose prefixes of which none starts with another one and '_'"
                )


def _refused_name(name: str, exc: InvalidParams) -> UnknownName:
    """The upstream's -32602 to a ``tools/call`` or ``prompts/get`` of ``name``, relayed as it came (message and
    data), as an :class:`UnknownName`: the name is the caller's word, which the upstream did not take (telemetry
    names the span after the method alone). A refusal of the arguments of a name the upstream has is -32602 too: its
    span loses the name from its name only (``gen_ai.tool.name`` keeps it)."""
    refused = UnknownName(name, exc.message)
    refused.data = exc.data
    return refused


# ---------------------------------------------------------------------------------------------- the server


class ProxyServer(ClientWatches):
    """A server forwarding to one or several upstream servers (see the module docstring).

    Args:
        targets: ``{prefix: target}``; one target with prefix None is a plain proxy.
        name: the server's name (default: the upstream's, for a single target; else "mcpkit-gateway").
        allow_private_network: allow URL targets on private, link-local or reserved addresses.
        pool_size: upstream connections per handshake-era target that 2026-07-28 requests lease, one request at a
            time each (default 1 per set of client capabilities the requests declare: a handshake-era server
            keeps state per connection, such as a tool a call added, and a 2026-07-28 client must meet one
            server; more, in all, only for a server whose connections are interchangeable).
        lease_timeout: seconds a 2026-07-28 request waits for a pool connection (default 30).
        max_shared: 2026-07-28 requests one handshake-era upstream connection serves side by side where it
            shares (what the upstream asks can be told to be about one of them: Streamable HTTP, or clients that
            declared nothing it could ask); a request beyond waits for one of them to end (default
            :data:`~mcpkit.proxy_rounds.MAX_SHARED`, 32). A positive whole number.
        max_upstream_sessions: upstream sessions per target held for handshake-era client sessions (default 256).
        max_suspended: upstream requests of 2026-07-28 clients waiting on input at once (default 256).
        suspended_timeout: seconds such a request waits for its client's answer (default 300).
        reconnect_attempts: attempts to connect again to an upstream whose connection ended, in one round
            (default 10; the first at once); after the last, one every ``reconnect_max_delay`` seconds in the
            background until it is back, and a request starts a new round.
        reconnect_delay: seconds before the second attempt (default 0.5), doubling after each failed one...
        reconnect_max_delay: ...up to this many seconds (default 30).
        require_all: (a gateway) refuse to start unless every member is reached; by default a gateway starts
            with the members it reaches and connects the others in the background (trying until they answer,
            once every ``reconnect_max_delay`` seconds at most), adding their tools, resources and prompts then.
            A plain proxy always needs its target.
        client_options: options of every upstream :class:`~mcpkit.client.client.Client` (``headers``,
            ``auth``, ``timeout``, ``mode``, limits...).
        **options: passed to :class:`~mcpkit.server.app.MCPKit`.
    """

    _not_mountable = (
        "a proxy cannot be mounted or imported: its components live upstream, not in it. Put the servers behind "
        "one gateway instead: mcpkit.proxy({'local': app, 'remote': target})"
    )

    def __init__(
        self,
        targets: Mapping[str | None, Any],
        *,
        name: str | None = None,
        allow_private_network: bool = False,
        pool_size: int = 1,
        lease_timeout: float = 30.0,
        max_shared: int = MAX_SHARED,
        max_upstream_sessions: int = 256,
        max_suspended: int = 256,
        suspended_timeout: float = 300.0,
        reconnect_attempts: int = 10,
        reconnect_delay: float = 0.5,
        reconnect_max_delay: float = 30.0,
        client_options: Mapping[str, Any] | None = None,
        require_all: bool = False,
        **options: Any,
    ) -> None:
        if not targets:
            raise ValueError("a proxy needs at least one target")
        if None in targets and len(targets) > 1:
            raise ValueError("a gateway names every target with a prefix")
        _check_prefixes([p for p in targets if p is not None])
        if type(max_shared) is not int or max_shared < 1:
            raise ValueError(
                f"max_shared must be a positive whole number (requests side by side on one upstream connection), "
                f"not {max_shared!r}"
            )
        self._named = name is not None
        super().__init__(
            name or ("mcpkit-gateway" if len(targets) > 1 else "mcpkit-proxy"), lifespan=_lifespan, **options
        )
        self.allow_private_network = allow_private_network
        self.pool_size: int = max(1, pool_size)
        self.lease_timeout = lease_timeout
        self.max_shared: int = max_shared
        self.max_upstream_sessions = max_upstream_sessions
        self.max_suspended = max_suspended
        self.suspended_timeout = suspended_timeout
        self.require_all = require_all
        self.reconnect_attempts: int = max(1, reconnect_attempts)
        self.reconnect_delay: float = max(0.0, reconnect_delay)
        self.reconnect_max_delay: float = max(self.reconnect_delay, reconnect_max_delay)
        opts = dict(client_options or {})
        self.upstreams: list[Upstream] = [Upstream(self, prefix, target, opts) for prefix, target in targets.items()]
        self._cursors = Paginator(None, max_cursor=_MAX_PROXY_CURSOR)
        self._exchanges: dict[str, Exchange] = {}
        self._listening: dict[object, dict[Upstream, set[str]]] = {}  # listen streams' URIs on 2026-07-28 upstreams
        self._ids = itertools.count(1)
        self._shadowed: set[tuple[str, str]] = set()  # upstream names the proxy's own shadow, told of once each
        self._catalog = UpstreamCatalog(self)  # (the upstream's tools its tool search covers)
        for method in (*LISTS, "tools/call", "resources/read", "prompts/get", "completion/complete"):
            self.set_handler(method, self._handler(method))
        self.set_handler("resources/subscribe", self._subscribe)
        self.set_handler("resources/unsubscribe", self._subscribe)
        self.set_handler("subscriptions/listen", self._listen)
        self.notification_handler("notifications/roots/list_changed")(self._roots_changed)

    # ------------------------------------------------------------------ life

    async def _start(self) -> None:
        """Connect to every target. A gateway whose member cannot be reached (it did not start, or refused the
        connection) starts without it, unless ``require_all``: one warning line, and the member is connected in
        the background (:meth:`Upstream.join_later`). A target the proxy may not reach (the SSRF rule), one that
        does not exist (no such command, no such mcp.json entry) and a plain proxy's only target fail the start."""
        await asyncio.gather(*(u.check_target() for u in self.upstreams))
        results = await asyncio.gather(*(u.connect() for u in self.upstreams), return_exceptions=True)
        failed = [(u, r) for u, r in zip(self.upstreams, results, strict=True) if r is not None]
        strict = self.require_all or len(self.upstreams) == 1
        fatal = [r for _, r in failed if strict or not isinstance(r, Exception) or isinstance(r, TargetError)]
        if fatal:
            await self._stop()  # (the members that were reached: their processes)
            raise fatal[0]
        for upstream, error in failed:
            logger.warning(
                "gateway member %r (%s) cannot be reached: %s; serving the other members, connecting to it in the "
                "background",
                upstream.prefix,
                upstream.target.description,
                one_line(error),
            )
            upstream.join_later(one_line(error))
        missing = bool(failed)  # (what it brings is unknown: declared in advance, as capabilities cannot grow)
        if len(self.upstreams) == 1:
            upstream = self.upstreams[0]
            if upstream.info and not self._named:
                self.info: dict[str, Any] = {**upstream.info}
                self.name: str = str(upstream.info.get("name", self.name))
            self.instructions: str | None = self.instructions or upstream.instructions
        caps: set[str] = {"tools", "resources", "prompts", "completions"} if missing else own_kinds_of(self)
        for u in self.upstreams:
            caps.update(
                k for k in ("tools", "resources", "prompts", "completions") if isinstance(u.capabilities.get(k), dict)
            )
        for method, cap in _CAPABILITY.items():
            if cap not in caps:
                self.remove_handler(method)
        if (
            not missing
            and "resources" not in own_kinds_of(self)  # (its own resources can be subscribed to)
            and not any(
                isinstance((u.capabilities.get("resources") or {}), dict)
                and (u.capabilities.get("resources") or {}).get("subscribe")
                for u in self.upstreams
            )
        ):
            self.resource_subscriptions: bool = False
        self.logging_enabled: bool = missing or any("logging" in u.capabilities for u in self.upstreams)
        self._relay_extensions()
        self._caps_cache.clear()

    def _relay_extensions(self) -> None:
        """Declare what this proxy can carry of the extensions its upstreams declare (:data:`_RELAYED_EXTENSIONS`,
        with the first declaring upstream's settings) and forward their requests."""
        plain = self.upstreams[0].prefix is None
        for extension, methods in _RELAYED_EXTENSIONS.items():
            if plain or not methods:
                found = (declared_settings(u.capabilities, extension) for u in self.upstreams)
                settings = next((s for s in found if s is not None), None)
            else:  # (a gateway: its members' Skills, merged)
                settings = gateway_settings(u.capabilities for u in self.upstreams)
            if settings is None:
                self.extensions.pop(extension, None)
                for method in methods:
                    self.remove_handler(method)
                continue
            self.extensions.declare(extension, settings)
            for method in methods:
                self.set_handler(method, self._handler(method))

    async def _stop(self) -> None:
        for ex in list(self._exchanges.values()):
            ex.task.cancel()
        self._exchanges.clear()
        for u in self.upstreams:
            await u.aclose()

    def add_tool_search(self, *args: Any, **options: Any) -> ToolSearch:
        """:meth:`MCPKit.add_tool_search <mcpkit.server.app.MCPKit.add_tool_search>`, covering the upstream's tools
        too (:mod:`mcpkit.proxy_search`): searched and called through ``call_tool`` as the proxy's own, and left out
        of ``tools/list`` as they are (but those named in ``always_visible`` or declaring ``x-mcp-header``
        parameters)."""
        search = super().add_tool_search(*args, **options)
        search.extra = self._catalog
        return search

    async def notify_list_changed(self, kind: str) -> None:
        """Tell every client the ``kind`` list changed (the upstream's tools are searched again from now on)."""
        if kind == "tools":
            self._catalog.changed()
        await super().notify_list_changed(kind)

    def offer_listeners(
        self, method: str, params: JSONDict, *, kind: str | None = None, uri: str | None = None
    ) -> None:
        """Hand an upstream change to this proxy's ``subscriptions/listen`` streams that asked for it."""
        if kind == "tools":  # (the upstream's tools changed: searched again from now on)
            self._catalog.changed()
        key = LIST_CHANGED_FILTER.get(kind) if kind is not None else None
        for listener in list(self._listeners):
            if (key is not None and listener.filter.get(key)) or (uri is not None and uri in listener.uris):
                listener.offer(method, params)

    # ------------------------------------------------------------------ handlers

    def _handler(self, method: str) -> Callable[[ServerRequestContext, JSONDict], Awaitable[JSONDict]]:
        """The handler of ``method``: it knows its method, since a request the proxy makes of itself (a
        ``read_resource`` tool's ``resources/read``) runs inside the request that made it."""

        def handle(sctx: ServerRequestContext, params: JSONDict) -> Awaitable[JSONDict]:
            return self._handle(sctx, params, method)

        return handle

    async def _handle(self, sctx: ServerRequestContext, params: JSONDict, method: str) -> JSONDict:
        gateway = self.upstreams[0].prefix is not None
        if method in LISTS or (gateway and method == "skills/list"):
            return await self._list(sctx, method, params)
        own = own_handler(self, method, params)
        if own is not None:  # (one of the proxy's own components: its registries answer)
            search = self._tool_search
            if search is not None and method == "tools/call" and params.get("name") == search.search_name:
                await self._catalog.ensure(sctx)  # (the upstream's tools, walked again if they changed)
            answered = own(sctx, params)
            return await answered if inspect.isawaitable(answered) else answered  # type: ignore[no-any-return]
        out = upstream_params(params, sctx)
        if method in ("tools/call", "prompts/get"):
            name = params.get("name")
            if not isinstance(name, str):
                raise InvalidParams(f"{method}: name must be a string")
            upstream, out["name"] = self._route_name(name)
        elif method == "resources/read":
            uri = params.get("uri")
            if not isinstance(uri, str):
                raise InvalidParams("resources/read: uri must be a string")
            upstream, out["uri"] = self._route_uri(uri)
        elif method in _EXTENSION_METHODS:  # (a plain proxy's: forwarded as they are; a gateway's: by their URI)
            upstream = self.upstreams[0]
            if gateway:
                uri = params.get("uri")
                if not isinstance(uri, str):
                    raise InvalidParams(f"{method}: uri must be a string")
                upstream, out["uri"] = self._route_uri(uri)
                if not serves_skills(upstream.capabilities):
                    raise InvalidParams(f"No skill is served at {uri[:300]}", {"uri": uri[:300]})
        else:  # completion/complete
            ref = params.get("ref")
            if not isinstance(ref, dict):
                raise InvalidParams("completion/complete: ref must be an object")
            ref = dict(ref)
            if isinstance(ref.get("name"), str):
                upstream, ref["name"] = self._route_name(ref["name"])
            elif isinstance(ref.get("uri"), str):
                upstream, ref["uri"] = self._route_uri(ref["uri"])
            else:
                raise InvalidParams("completion/complete: ref needs a name or a uri")
            out["ref"] = ref
        try:
            result = await self._forward(sctx, upstream, method, out)
        except InvalidParams as exc:
            if method in ("tools/call", "prompts/get") and not isinstance(exc, UnknownName):
                raise _refused_name(params["name"], exc) from None
            raise
        shaped = shape_result(method, result, sctx.features, upstream.prefix)
        if gateway and upstream.prefix is not None and method in SKILLS_METHODS:
            shaped = prefixed_skills_result(method, shaped, upstream.prefix)
        return shaped

    async def _list(self, sctx: ServerRequestContext, method: str, params: JSONDict) -> JSONDict:
        skills = method == "skills/list"  # (a gateway's: its members that declare the extension)
        field = "skills" if skills else LISTS[method][0]
        cap = _CAPABILITY.get(method, "")
        cursor = params.get("cursor")
        own_kind = OWN_KINDS.get(method)
        own = own_kind is not None and len(self._registries[own_kind]) > 0
        # one page per request, of the proxy's own list (segment 0) or of one upstream's (segment i + 1: upstream i),
        # the segment and its cursor sealed in the proxy's: one format whether the proxy has a list of its own or
        # not, so a walk goes on when its own list appears or empties meanwhile
        kind = f"gateway:{method}"
        seg, inner = (0, "") if cursor is None else self._cursors.decode(kind, cursor)

        def serves(i: int) -> bool:
            u = self.upstreams[i]
            return serves_skills(u.capabilities) if skills else isinstance(u.capabilities.get(cap), dict)

        if seg == 0:
            if own and own_kind is not None:
                page = dict(self._own_page(sctx, own_kind, {**params, "cursor": inner} if inner else params))
                nxt = page.pop("nextCursor", None)
                if isinstance(nxt, str) and nxt:
                    page["nextCursor"] = self._cursors.encode(kind, 0, nxt)
                elif any(serves(i) for i in range(len(self.upstreams))):
                    page["nextCursor"] = self._cursors.encode(kind, 1, "")
                return page
            seg, inner = 1, ""
        while seg - 1 < len(self.upstreams):
            if serves(seg - 1):
                upstream = self.upstreams[seg - 1]
                break
            seg, inner = seg + 1, ""
        else:
            return {field: []}
        out = upstream_params({k: v for k, v in params.items() if k != "cursor"}, sctx)
        if inner:
            out["cursor"] = inner
        try:
            result = await self._forward(sctx, upstream, method, out)
        except MCPError as exc:  # one member failing leaves the others listed (a plain proxy's fails the page)
            if upstream.prefix is None:
                raise
            logger.warning("gateway member %r failed %s: %s", upstream.prefix, method, exc)
            result = {field: []}
        shaped = shape_result(method, result, sctx.features, upstream.prefix)
        if skills and upstream.prefix is not None:
            shaped = prefixed_skills_result(method, shaped, upstream.prefix)
        if own_kind is not None and isinstance(shaped.get(field), list):
            shaped[field] = drop_shadowed(self, own_kind, shaped[field], LISTS[method][1], self._shadowed)
            search = self._tool_search
            if search is not None and method == "tools/list":  # (found by search: listed as the app lists its own)
                shaped[field] = [t for t in shaped[field] if t.get("name") in search.pinned or declares_headers(t)]
        nxt = result.get("nextCursor")
        shaped.pop("nextCursor", None)
        if isinstance(nxt, str) and nxt:
            sealed = self._cursors.encode(kind, seg, nxt) if len(nxt) <= _MAX_UPSTREAM_CURSOR else ""
            if not sealed or len(sealed) > _MAX_PROXY_CURSOR:
                who = "the upstream" if upstream.prefix is None else f"gateway member {upstream.prefix!r}"
                raise MCPError(
                    f"{who} sent a cursor too long to carry (at most {_MAX_UPSTREAM_CURSOR} characters, "
                    f"{_MAX_PROXY_CURSOR} sealed)"
                )
            shaped["nextCursor"] = sealed
        elif any(serves(i) for i in range(seg, len(self.upstreams))):
            shaped["nextCursor"] = self._cursors.encode(kind, seg + 1, "")
        return shaped

    def _own_page(self, sctx: ServerRequestContext, kind: str, params: JSONDict) -> JSONDict:
        """A page of the proxy's own list ``kind`` (its registry's pages, with its own cursors)."""
        lists = {
            "tools": self._list_tools,
            "resources": self._list_resources,
            "resource_templates": self._list_templates,
            "prompts": self._list_prompts,
        }
        return lists[kind](sctx, params)

    def _serve_lists(self, kinds: Iterable[str]) -> None:
        """A component of the proxy's own, of a kind its upstreams do not serve, added: serve its methods (the
        proxy's own answer them, the rest goes upstream as ever). A resource of its own can be subscribed to: the
        sessions that begin from now on are told so (one begun earlier keeps what it was told)."""
        wanted = {"resource_templates": "resources"}
        caps = {wanted.get(kind, kind) for kind in kinds}
        if caps & {"prompts", "resources"}:
            caps.add("completions")
        added = False
        if "resources" in caps and not self.resource_subscriptions:
            self.resource_subscriptions = True
            added = True
        for method, cap in _CAPABILITY.items():
            if cap in caps and not self.has_handler(method):
                self.set_handler(method, self._handler(method))
                added = True
        if added:
            self._caps_cache.clear()


@contextlib.asynccontextmanager
async def _lifespan(app: Any) -> AsyncIterator[None]:
    proxy_server: ProxyServer = app
    await proxy_server._start()
    try:
        yield None
    finally:
        await proxy_server._stop()
