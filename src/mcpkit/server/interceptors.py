"""Interceptors: an ordered chain of ``async fn(call, call_next)`` around the requests a server runs.

``server.add_interceptor(fn, methods=None)`` installs one; the chain runs for every request the dispatcher runs,
on every transport, in both eras, for each item of a batch, and for plain ``def`` tools that run inline alike
(these still run inline, under their sync policy, inside the chain). It runs after the checks that refuse a
request before it is dispatched (the revision's ``_meta``, the authorization decision, ``requestState``), around
the handler: the first interceptor added is the outermost. ``call`` says what is being run (:class:`Call`, or its
typed form for a method family: :class:`ToolCall`, :class:`ResourceRead`, :class:`PromptGet`, :class:`ListCall`)
with the request's :class:`~mcpkit.server.request_context.ServerRequestContext`; ``await call_next(call)`` runs
the rest of the chain and the handler and returns the handler's result.

What an interceptor sees and returns is the result **before** it is shaped for the request's protocol revision
(a dict: a handler's pydantic model is dumped first; an ``InputRequired`` raised by a tool is already the
``input_required`` result): the same for every revision, so a response cache can keep one entry for all clients
and read the result's own ``ttlMs`` / ``cacheScope``; the dispatcher then shapes whatever the chain returns
(``resultType``, the server's ``_meta``, downgraded content for older revisions). Raising an
:class:`~mcpkit.protocol.errors.MCPError` answers the request with that error; any other exception is an internal
error (logged). To change the request, pass ``call.replace(params=...)`` to ``call_next``.

With ``notifications=True`` an interceptor also wraps the client's notifications that reach the server
(``notifications/initialized``, ``notifications/cancelled``, ``notifications/roots/list_changed``, ...): their
``call`` is a :class:`NotificationCall` and ``call_next`` returns None; what one raises is logged (a notification
gets no answer).

An empty chain costs one attribute test per request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Final

from ..protocol.versions import HANDSHAKE_ONLY, MODERN_ONLY, SERVER_CAPABILITY_FOR

if TYPE_CHECKING:
    from ..hosting import HostedSession
    from ..protocol.jsonrpc import JSONDict
    from ..protocol.versions import Features
    from .request_context import ServerRequestContext

REQUEST: Final = "request"
NOTIFICATION: Final = "notification"

#: The method families that have a typed call (see :func:`call_for`).
TOOL_METHODS: Final = frozenset(("tools/call",))
RESOURCE_READ_METHODS: Final = frozenset(("resources/read",))
PROMPT_METHODS: Final = frozenset(("prompts/get",))
LIST_METHODS: Final = frozenset(("tools/list", "resources/list", "resources/templates/list", "prompts/list"))

#: every method of MCP a server receives (every revision, and the extensions mcpkit serves): a name in ``methods``
#: close to one of these that is none of them is a typo (:meth:`Interceptors.add` refuses it)
MCP_METHODS: Final = frozenset(
    (
        *SERVER_CAPABILITY_FOR,
        *HANDSHAKE_ONLY,
        *MODERN_ONLY,
        *("tasks/get", "tasks/cancel", "tasks/list", "tasks/result", "tasks/update"),
        *("skills/list", "skills/get", "resources/directory/read"),
        *("notifications/initialized", "notifications/cancelled", "notifications/progress"),
        "notifications/roots/list_changed",
    )
)


class Call:
    """One request as an interceptor sees it: its ``method``, its ``params`` and its request ``context``.

    Attributes:
        method: the JSON-RPC method.
        params: the request's params (``{}`` when it had none); treat it as read-only, and pass changed params on
            with :meth:`replace`.
        context: the request's :class:`~mcpkit.server.request_context.ServerRequestContext` (session, features,
            principal, client capabilities and info, request id, progress and logging).
    """

    __slots__ = ("context", "method", "params")

    kind: str = REQUEST
    """"request" (or "notification" for a :class:`NotificationCall`)."""

    def __init__(self, method: str, params: JSONDict, context: ServerRequestContext) -> None:
        self.method: str = method
        self.params: JSONDict = params
        self.context: ServerRequestContext = context

    def replace(self, *, params: JSONDict) -> Call:
        """The same call with other params (what ``call_next`` then runs the handler with)."""
        return type(self)(self.method, params, self.context)

    @property
    def request_id(self) -> str | int | None:
        """The request's JSON-RPC id."""
        return self.context.request_id

    @property
    def session(self) -> HostedSession | None:
        """The handshake-era session the request came on (None for a stateless 2026-07-28 request over HTTP)."""
        return self.context.session

    @property
    def features(self) -> Features:
        """What the request's protocol revision allows (``features.version``, ``features.modern``)."""
        return self.context.features

    @property
    def protocol_version(self) -> str:
        """The request's protocol revision."""
        return self.context.features.version

    @property
    def principal(self) -> str | None:
        """Who the installed authorization says the caller is (None without one)."""
        return self.context.principal

    @property
    def client_capabilities(self) -> JSONDict:
        """The capabilities the client declared."""
        return self.context.client_capabilities

    @property
    def client_info(self) -> JSONDict | None:
        """The client's ``Implementation`` info, if it sent one."""
        return self.context.client_info

    def __repr__(self) -> str:
        return f"{type(self).__name__}(method={self.method!r}, id={self.request_id!r})"


class ToolCall(Call):
    """``tools/call``: the tool's :attr:`name` and :attr:`arguments`."""

    __slots__ = ()

    @property
    def name(self) -> str | None:
        """The tool's (or prompt's) name (None when the request has none: the handler refuses it)."""
        name = self.params.get("name")
        return name if type(name) is str else None

    @property
    def arguments(self) -> JSONDict:
        """The arguments (``{}`` when none were sent)."""
        args = self.params.get("arguments")
        return args if type(args) is dict else {}


class ResourceRead(Call):
    """``resources/read``: the resource's :attr:`uri`."""

    __slots__ = ()

    @property
    def uri(self) -> str | None:
        """The URI read (None when the request has none: the handler refuses it)."""
        uri = self.params.get("uri")
        return uri if type(uri) is str else None


class PromptGet(ToolCall):
    """``prompts/get``: the prompt's :attr:`name` and :attr:`arguments` (read as a :class:`ToolCall`'s)."""

    __slots__ = ()


class ListCall(Call):
    """One page of a list (``tools/list``, ``resources/list``, ``resources/templates/list``, ``prompts/list``)."""

    __slots__ = ()

    @property
    def cursor(self) -> str | None:
        """The page's cursor (None for the first page)."""
        cursor = self.params.get("cursor")
        return cursor if type(cursor) is str else None


class NotificationCall(Call):
    """A client notification that reaches the server (see ``notifications=True``); ``context`` is None, the
    session and what it negotiated are given directly."""

    __slots__ = ("_features", "_principal", "_session")

    kind = NOTIFICATION

    def __init__(
        self,
        method: str,
        params: JSONDict,
        session: HostedSession | None,
        features: Features | None,
        principal: str | None,
    ) -> None:
        self.method = method
        self.params = params
        self.context: None = None  # type: ignore[assignment]
        self._session = session
        self._features = features
        self._principal = principal

    def replace(self, *, params: JSONDict) -> NotificationCall:
        return NotificationCall(self.method, params, self._session, self._features, self._principal)

    @property
    def request_id(self) -> None:
        return None

    @property
    def session(self) -> HostedSession | None:
        return self._session

    @property
    def features(self) -> Features:
        """The session's features (a notification before ``initialize`` has none: then ``RuntimeError``)."""
        if self._features is None:
            raise RuntimeError(f"{self.method}: the session has not negotiated a protocol revision yet")
        return self._features

    @property
    def protocol_version(self) -> str:
        return self.features.version

    @property
    def principal(self) -> str | None:
        return self._principal

    @property
    def client_capabilities(self) -> JSONDict:
        return self._session.client_capabilities if self._session is not None else {}

    @property
    def client_info(self) -> JSONDict | None:
        return self._session.client_info if self._session is not None else None


CallNext = Callable[[Call], Awaitable[Any]]
"""The rest of the chain: ``await call_next(call)`` runs it and the handler, and returns the handler's result
(None for a notification)."""

Interceptor = Callable[[Any, CallNext], Awaitable[Any]]
"""``async def fn(call, call_next)``: returns the result (usually ``await call_next(call)``, or a result of its
own), or raises an ``MCPError`` to answer with that error."""

_TYPED: dict[str, type[Call]] = {
    **dict.fromkeys(TOOL_METHODS, ToolCall),
    **dict.fromkeys(RESOURCE_READ_METHODS, ResourceRead),
    **dict.fromkeys(PROMPT_METHODS, PromptGet),
    **dict.fromkeys(LIST_METHODS, ListCall),
}


#: In an interceptor's ``methods`` (with ``notifications=True``): every notification the client sends, whatever its
#: method (what :meth:`Middleware.on_notification <mcpkit.server.middleware.Middleware.on_notification>` is installed
#: for beside the requests its typed hooks name).
EVERY_NOTIFICATION = "notifications/*"


def call_for(method: str, params: JSONDict, context: ServerRequestContext) -> Call:
    """The typed call of ``method`` (:class:`ToolCall` for ``tools/call``, ...; :class:`Call` for the others)."""
    return _TYPED.get(method, Call)(method, params, context)


class Interceptors:
    """A server's interceptors, in the order they were added (what ``Server.add_interceptor`` keeps)."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: tuple[tuple[Interceptor, frozenset[str] | None, bool], ...] = ()

    def add(
        self,
        fn: Interceptor,
        methods: Iterable[str] | str | None = None,
        notifications: bool = False,
        outermost: bool = False,
        served: Callable[[str], bool] = lambda name: False,
    ) -> Callable[[], None]:
        """Add ``fn`` innermost (``outermost=True``: before every other); returns the function that removes it.
        ``served``: is a method one of the server's own? (A name in ``methods`` that is neither that nor one of MCP's
        but is close to one of MCP's is refused: a typo, and the interceptor would never run.)"""
        if isinstance(methods, str):
            methods = (methods,)
        if methods is not None:
            methods = tuple(methods)
            for name in methods:
                if name not in MCP_METHODS and name != EVERY_NOTIFICATION and not served(name):
                    _refuse_typo(name)
        entry = (fn, frozenset(methods) if methods is not None else None, notifications)
        self.entries = (entry, *self.entries) if outermost else (*self.entries, entry)

        def remove() -> None:
            self.entries = tuple(e for e in self.entries if e is not entry)

        return remove

    def chain(self, method: str, notification: bool = False) -> tuple[Interceptor, ...]:
        """The interceptors for ``method``, outermost first (empty: none applies)."""
        if notification:
            return tuple(
                fn
                for fn, methods, notes in self.entries
                if notes and (methods is None or method in methods or EVERY_NOTIFICATION in methods)
            )
        return tuple(fn for fn, methods, _ in self.entries if methods is None or method in methods)


def _refuse_typo(name: str) -> None:
    import difflib  # (only for a name that is no method of MCP: never on the path of a correct call)

    close = difflib.get_close_matches(name, sorted(MCP_METHODS), n=1, cutoff=0.8)
    if close:
        raise ValueError(
            f"interceptor methods: {name!r} is no method of MCP, so the interceptor would never run for it; "
            f"did you mean {close[0]!r}?"
        )


def run_chain(chain: tuple[Interceptor, ...], call: Call, innermost: CallNext) -> Awaitable[Any]:
    """``chain[0](call, next)``, each ``next`` running the following interceptor, the last one ``innermost``."""
    step = innermost
    for fn in reversed(chain):
        step = _link(fn, step)
    return step(call)


def _link(fn: Interceptor, after: CallNext) -> CallNext:
    def next_call(call: Call) -> Awaitable[Any]:
        return fn(call, after)

    return next_call


__all__ = [
    "EVERY_NOTIFICATION",
    "LIST_METHODS",
    "MCP_METHODS",
    "NOTIFICATION",
    "PROMPT_METHODS",
    "REQUEST",
    "RESOURCE_READ_METHODS",
    "TOOL_METHODS",
    "Call",
    "CallNext",
    "Interceptor",
    "Interceptors",
    "ListCall",
    "NotificationCall",
    "PromptGet",
    "ResourceRead",
    "ToolCall",
    "call_for",
    "run_chain",
]
