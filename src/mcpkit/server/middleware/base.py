"""The middleware base class: typed hooks per method family on the server's interceptor chain.

    from mcpkit.server.middleware import Middleware

    class Audit(Middleware):
        async def on_call_tool(self, call, call_next):
            result = await call_next(call)
            audit_log.append((call.principal, call.name, result.get("isError", False)))
            return result

    app.add_middleware(Audit())

A :class:`Middleware` is an interceptor (``server.add_interceptor``): ``app.add_middleware(m)`` installs it for
exactly the methods it has hooks for, so a middleware that only watches ``tools/call`` costs nothing on the other
methods. :meth:`Middleware.on_request` wraps every request (a subclass that overrides it is installed for every
method); the typed hooks run inside it, :meth:`Middleware.on_notification` wraps the client's notifications. Each
hook gets the typed call of :mod:`mcpkit.server.interceptors` (``ToolCall.name``/``arguments``,
``ResourceRead.uri``, ``ListCall.cursor``, with ``principal``, ``session``, ``features`` and the request
``context``) and ``call_next``; it returns the result (before it is shaped for the request's revision: one form for
every revision) or raises an ``MCPError``. :meth:`Middleware.context` gives an ``MCPKit`` request's
:class:`~mcpkit.server.context.Context` (log to the client, report progress).
"""

from __future__ import annotations

import hashlib
import inspect
import re
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from ..interceptors import EVERY_NOTIFICATION, NOTIFICATION, Call, CallNext

if TYPE_CHECKING:
    from ..context import Context
    from ..interceptors import ListCall, NotificationCall, PromptGet, ResourceRead, ToolCall

JSONDict = dict[str, Any]

#: method -> the hook that handles it
HOOKS: dict[str, str] = {
    "tools/call": "on_call_tool",
    "resources/read": "on_read_resource",
    "prompts/get": "on_get_prompt",
    "tools/list": "on_list_tools",
    "resources/list": "on_list_resources",
    "resources/templates/list": "on_list_resource_templates",
    "prompts/list": "on_list_prompts",
    "completion/complete": "on_complete",
    "initialize": "on_initialize",
    "server/discover": "on_discover",
    "resources/subscribe": "on_subscribe",
    "resources/unsubscribe": "on_unsubscribe",
}


def _overridden(obj: Middleware, name: str) -> bool:
    return getattr(type(obj), name) is not getattr(Middleware, name)


def _words(name: str) -> frozenset[str]:
    return frozenset(word.removesuffix("s") for word in name.split("_"))


def _meant_hook(name: str, hooks: list[str]) -> str | None:
    """The hook ``name`` was meant to be: the same words in another order or number (``on_tool_call``), else a
    close spelling."""
    import difflib  # (only for a class that names a hook wrongly: never on the path of a correct one)

    same = [hook for hook in hooks if _words(hook) == _words(name)]
    close = same or difflib.get_close_matches(name, hooks, n=1, cutoff=0.75)
    return close[0] if close else None


def _misnamed_hooks(cls: type) -> str | None:
    """Why ``cls`` has a method that looks like a hook (an ``on_`` name taking a call and ``call_next``) under a
    name that is none, so that it would never run (None: it has none)."""
    hooks = sorted({*HOOKS.values(), "on_request", "on_notification"})
    for klass in cls.__mro__:
        if klass is Middleware:
            return None
        for name, value in vars(klass).items():
            if not name.startswith("on_") or name in hooks or not inspect.isfunction(value):
                continue
            params = list(inspect.signature(value).parameters.values())
            if len(params) != 3 or any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params):
                continue  # (not (self, call, call_next): a helper of its own)
            meant = _meant_hook(name, hooks)
            why = f"did you mean {meant}?" if meant else "every request is on_request, notifications on_notification"
            return (
                f"{cls.__name__}.{name} is no middleware hook, so it would never run: {why} (hooks: {', '.join(hooks)})"
            )
    return None


class Middleware:
    """Override the hooks you need; every hook's default passes the call on unchanged."""

    #: The label of the middleware in logs.
    name: ClassVar[str] = ""

    def __init__(self) -> None:
        if (misnamed := _misnamed_hooks(type(self))) is not None:
            raise TypeError(misnamed)
        hooks = {method: getattr(self, hook) for method, hook in HOOKS.items() if _overridden(self, hook)}
        self._hooks: dict[str, Callable[[Any, CallNext], Any]] = hooks
        self._wraps_all = _overridden(self, "on_request")
        self.notifications: bool = _overridden(self, "on_notification")

    @property
    def methods(self) -> frozenset[str] | None:
        """The requests it is installed for (None: every method, because :meth:`on_request` is overridden)."""
        return None if self._wraps_all else frozenset(self._hooks)

    def install(self, server: Any) -> Callable[[], None]:
        """Add it to ``server``'s interceptors for :attr:`methods` (what ``server.add_middleware`` does); returns
        the function that removes it."""
        if "_hooks" not in vars(self):
            raise TypeError(f"{type(self).__name__}.__init__ must call super().__init__() (it finds the hooks)")
        # a middleware with only on_request is installed as that method itself (one call frame less per request)
        fn = self.on_request if self._wraps_all and not self._hooks and not self.notifications else self
        methods = self.methods
        if methods is not None and self.notifications:
            methods = methods | {EVERY_NOTIFICATION}  # on_notification: every notification, beside its requests
        remove: Callable[[], None] = server.add_interceptor(fn, methods=methods, notifications=self.notifications)
        return remove

    async def __call__(self, call: Call, call_next: CallNext) -> Any:
        if call.kind == NOTIFICATION:
            return await self.on_notification(call, call_next)  # type: ignore[arg-type]
        hook = self._hooks.get(call.method)
        if not self._wraps_all:
            return await (hook(call, call_next) if hook is not None else call_next(call))
        if hook is None:
            return await self.on_request(call, call_next)

        def typed(inner: Call) -> Any:
            return hook(inner, call_next)

        return await self.on_request(call, typed)

    async def on_request(self, call: Call, call_next: CallNext) -> Any:
        """Around every request (the typed hooks run inside it)."""
        return await call_next(call)

    async def on_notification(self, call: NotificationCall, call_next: CallNext) -> Any:
        """Around every notification the client sends."""
        return await call_next(call)

    async def on_call_tool(self, call: ToolCall, call_next: CallNext) -> Any:
        """``tools/call``."""
        return await call_next(call)

    async def on_read_resource(self, call: ResourceRead, call_next: CallNext) -> Any:
        """``resources/read``."""
        return await call_next(call)

    async def on_get_prompt(self, call: PromptGet, call_next: CallNext) -> Any:
        """``prompts/get``."""
        return await call_next(call)

    async def on_list_tools(self, call: ListCall, call_next: CallNext) -> Any:
        """``tools/list`` (one page)."""
        return await call_next(call)

    async def on_list_resources(self, call: ListCall, call_next: CallNext) -> Any:
        """``resources/list`` (one page)."""
        return await call_next(call)

    async def on_list_resource_templates(self, call: ListCall, call_next: CallNext) -> Any:
        """``resources/templates/list`` (one page)."""
        return await call_next(call)

    async def on_list_prompts(self, call: ListCall, call_next: CallNext) -> Any:
        """``prompts/list`` (one page)."""
        return await call_next(call)

    async def on_complete(self, call: Call, call_next: CallNext) -> Any:
        """``completion/complete``."""
        return await call_next(call)

    async def on_initialize(self, call: Call, call_next: CallNext) -> Any:
        """``initialize`` (handshake era)."""
        return await call_next(call)

    async def on_discover(self, call: Call, call_next: CallNext) -> Any:
        """``server/discover`` (2026-07-28)."""
        return await call_next(call)

    async def on_subscribe(self, call: Call, call_next: CallNext) -> Any:
        """``resources/subscribe``."""
        return await call_next(call)

    async def on_unsubscribe(self, call: Call, call_next: CallNext) -> Any:
        """``resources/unsubscribe``."""
        return await call_next(call)

    @staticmethod
    def context(call: Call) -> Context:
        """The :class:`~mcpkit.server.context.Context` of an ``MCPKit`` request (``ctx.info(...)``, progress)."""
        from ..context import Context

        return Context(call.context.server, call.context)  # type: ignore[arg-type]


def target_of(call: Call) -> str | None:
    """What a request is about: the tool's or prompt's name, the resource's URI (None for the others), as
    :func:`shown` makes it fit for a log (the client chose it)."""
    params = call.params
    if call.method in ("tools/call", "prompts/get"):
        name = params.get("name")
        return shown(name) if type(name) is str else None
    if call.method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
        uri = params.get("uri")
        return shown(uri) if type(uri) is str else None
    return None


SHOWN_LIMIT = 200
"""Characters of a client-chosen name or URI a log record keeps."""
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def shown(text: str, limit: int = SHOWN_LIMIT) -> str:
    """``text`` (a name or URI a client chose) fit for a log: control characters (line breaks) escaped, so that
    it cannot forge a line of its own, and cut to ``limit`` characters (then ``...``), so that it cannot flood."""
    cut = text[:limit]
    if _CONTROL.search(cut) is not None:
        cut = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), cut)
    if len(cut) > limit or len(text) > limit:
        cut = cut[:limit] + "..."
    return cut


_SESSION_KEY = "mcpkit.middleware.session"


def session_label(call: Call) -> str | None:
    """A stable label of the request's handshake-era session, made for it in this process (None without one); it
    is not the HTTP session id, which is never logged."""
    session = call.session
    if session is None:
        return None
    label = session.state.get(_SESSION_KEY)
    if label is None:
        label = session.state[_SESSION_KEY] = secrets.token_hex(6)
    return str(label)


def principal_label(principal: str) -> str:
    """A short digest of a principal, for keys that should not hold it as it is."""
    return hashlib.sha256(principal.encode()).hexdigest()[:24]


__all__ = ["HOOKS", "SHOWN_LIMIT", "Middleware", "principal_label", "session_label", "shown", "target_of"]
