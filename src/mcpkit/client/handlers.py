"""What the client does with what the server asks of it or tells it: the typed objects its handlers receive
(:class:`SamplingParams`, :class:`ElicitationParams`, :class:`LogMessage`) and the protocols those handlers follow
(:class:`SamplingHandler`, :class:`ElicitationHandler`, :class:`LoggingHandler`; :class:`InputTracer`, which
watches the answers to 2026-07-28 input requests), the answers of the sampling and
elicitation handlers checked and shaped for the wire, and :class:`Watch`, the stream of list changes and resource
updates that ``Client.watch`` yields (re-exported by :mod:`mcpkit.client.client`).

A handler gets the params dict as the server sent it, with typed, snake_case attributes read from it when it
arrived (``params.max_tokens``, ``params.requested_schema``; pydantic models inside), so a handler written against
the wire form (``params["requestedSchema"]``, JSON encoding, ``isinstance(params, dict)``) keeps working.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, Literal, Protocol, Self, TypeAlias

from pydantic import BaseModel, ValidationError

from .._options import check_choice
from ..protocol.errors import InternalError, InvalidParams
from ..protocol.jsonrpc import JSONDict
from ..protocol.types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    Icon,
    Implementation,
    LoggingMessageParams,
    MCPModel,
    ModelPreferences,
    SamplingMessage,
    Tool,
)
from ..protocol.versions import LOG_LEVELS, Features, LogLevel, is_modern, is_supported
from .changes import MAX_WAITING_CHANGE_BYTES, ChangeQueue
from .forms import without_nulls
from .results import (
    ElicitationContentError,
    SchemaError,
    apply_schema_defaults,
    first_error,
    schema_validator,
)
from .subscription import Subscription

logger: logging.Logger = logging.getLogger("mcpkit.client")


class WireParams(dict[str, Any]):
    """The params of a server's request or notification as the server sent them (this *is* that dict: ``[key]``,
    ``get``, iteration, JSON encoding all work as before), with typed attributes read from it once, when it
    arrived (``-32602`` when they do not fit the type). ``.model`` is the validated pydantic model."""

    _model_type: ClassVar[type[MCPModel]] = MCPModel
    __slots__ = ("_model",)

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        try:
            self._model = self._model_type.model_validate(params)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "params"
            raise InvalidParams(f"invalid {type(self).__name__}: {where}: {first['msg']}") from None

    @classmethod
    def from_wire(cls, params: Mapping[str, Any]) -> Self:
        """Read the params the server sent (-32602 when they do not fit the type)."""
        return cls(params)

    @property
    def wire(self) -> JSONDict:
        """The params as the server sent them (camelCase keys): the object itself, as a plain dict."""
        return dict(self)


class SamplingParams(WireParams):
    """What a sampling handler receives (``sampling/createMessage`` params): ``messages``, ``max_tokens``,
    ``system_prompt``, ``temperature``, ... as typed attributes; ``text`` is the last message's text."""

    _model_type = CreateMessageRequestParams
    _model: CreateMessageRequestParams

    @property
    def messages(self) -> list[SamplingMessage]:
        """The conversation to continue (``SamplingMessage`` models)."""
        return self._model.messages

    @property
    def max_tokens(self) -> int:
        """The most tokens the server wants in the answer."""
        return self._model.max_tokens

    @property
    def system_prompt(self) -> str | None:
        """The system prompt the server asks for, if any."""
        return self._model.system_prompt

    @property
    def temperature(self) -> float | None:
        """The sampling temperature the server asks for, if any."""
        return self._model.temperature

    @property
    def stop_sequences(self) -> list[str] | None:
        """Sequences that end the answer, if any."""
        return self._model.stop_sequences

    @property
    def model_preferences(self) -> ModelPreferences | None:
        """The server's model hints and priorities, if any."""
        return self._model.model_preferences

    @property
    def include_context(self) -> str | None:
        """``none``, ``thisServer`` or ``allServers`` (the last two deprecated), if given."""
        return self._model.include_context

    @property
    def tools(self) -> list[Tool] | None:
        """Tools the model may call (2025-11-25 on, when the client declared ``sampling.tools``)."""
        return self._model.tools

    @property
    def tool_choice(self) -> JSONDict | None:
        """How the model may use :attr:`tools`, if given."""
        return self._model.tool_choice

    @property
    def metadata(self) -> JSONDict | None:
        """Provider-specific metadata the server passes on, if any."""
        return self._model.metadata

    @property
    def text(self) -> str:
        """The text of the last message (the question, in the common one-message case)."""
        messages = self._model.messages
        return messages[-1].text if messages else ""


class ElicitationParams(WireParams):
    """What an elicitation handler receives (``elicitation/create`` params): ``message``, ``mode`` ("form" or
    "url"), ``requested_schema`` (form mode: a flat JSON Schema), ``url`` and ``elicitation_id`` (URL mode)."""

    _model_type = ElicitRequestParams
    _model: ElicitRequestParams

    @property
    def message(self) -> str:
        """What the server asks the user."""
        return self._model.message

    @property
    def mode(self) -> Literal["form", "url"]:
        """``"form"`` (the default when the server gave none) or ``"url"``."""
        return self._model.mode or "form"

    @property
    def requested_schema(self) -> JSONDict | None:
        """Form mode: the flat JSON Schema of the answer."""
        return self._model.requested_schema

    @property
    def url(self) -> str | None:
        """URL mode: where to send the user."""
        return self._model.url

    @property
    def elicitation_id(self) -> str | None:
        """URL mode (2025-11-25): the id its completion notification names."""
        return self._model.elicitation_id

    @property
    def is_url(self) -> bool:
        """True for a URL-mode elicitation (send the user to :attr:`url`; the answer is only their consent)."""
        return self._model.mode == "url"


class LogMessage(WireParams):
    """What a logging handler receives (``notifications/message`` params): ``level``, ``logger`` (the server's
    logger name, if any) and ``data`` (any JSON value)."""

    _model_type = LoggingMessageParams
    _model: LoggingMessageParams

    @property
    def level(self) -> LogLevel:
        """The message's level (``debug`` ... ``emergency``)."""
        return self._model.level

    @property
    def logger(self) -> str | None:
        """The name of the server's logger, if it gave one."""
        return self._model.logger

    @property
    def data(self) -> Any:
        """The message (any JSON value)."""
        return self._model.data


class ServerInfo(WireParams):
    """The server's ``Implementation`` (``serverInfo``): ``name``, ``version`` and, from 2025-06-18,
    ``title``, ``description``, ``website_url``, ``icons``; the dict as the server sent it, too."""

    _model_type = Implementation
    _model: Implementation

    @property
    def name(self) -> str:
        """The server's programmatic name."""
        return self._model.name

    @property
    def version(self) -> str:
        """The server's version."""
        return self._model.version

    @property
    def title(self) -> str | None:
        """A display name, if the server gave one."""
        return self._model.title

    @property
    def description(self) -> str | None:
        """What the server is, if it said."""
        return self._model.description

    @property
    def website_url(self) -> str | None:
        """The server's website, if it gave one."""
        return self._model.website_url

    @property
    def icons(self) -> list[Icon] | None:
        """The server's icons, if any."""
        return self._model.icons


#: What a sampling handler may return: a ``CreateMessageResult`` (or its dict), or a string (an assistant text).
SamplingAnswer: TypeAlias = CreateMessageResult | JSONDict | str
#: What an elicitation handler may return: an ``ElicitResult`` (or a dict with ``action``), a dict of content
#: (accepted), a pydantic model or dataclass instance of the content (accepted), or ``None`` (declined).
ElicitationAnswer: TypeAlias = ElicitResult | JSONDict | BaseModel | None


class InputTracer(Protocol):
    """Watches the client's answers to the server's requests and to the input requests of 2026-07-28
    ``InputRequiredResult`` results, and the rounds of one request (:class:`mcpkit.telemetry.Telemetry`)."""

    def serve_input(
        self, method: str, params: JSONDict, key: str, version: str | None, channel: int
    ) -> contextlib.AbstractContextManager[None]:
        """A context manager around the handler of input request ``key`` (its ``method`` and ``params``) of the
        session whose peer is ``channel``."""
        ...

    def serve_request(
        self, channel: int, request_id: Any, version: str | None
    ) -> contextlib.AbstractContextManager[None]:
        """A context manager around the handler of the request ``request_id`` the server sent on ``channel`` (in the
        session's revision ``version``)."""
        ...

    def serve_member(
        self, channel: int, request_id: Any, method: str, params: JSONDict, version: str | None
    ) -> contextlib.AbstractContextManager[None]:
        """A context manager around the handler of the request ``request_id`` (``method``, ``params``) the server
        sent on ``channel`` inside a JSON-RPC batch (2025-03-26), which the tap does not show one by one."""
        ...

    def rounds(self, trail: Any = None) -> contextlib.AbstractContextManager[Any]:
        """A context manager around every round of one call, yielding its trail; ``trail``: that of a call made
        earlier, to continue it (a task handle's later requests)."""
        ...


class SamplingHandler(Protocol):
    """``Client(sampling_handler=...)``: ``def`` or ``async def handler(params: SamplingParams) -> answer``."""

    def __call__(self, params: SamplingParams, /) -> SamplingAnswer | Awaitable[SamplingAnswer]: ...


class ElicitationHandler(Protocol):
    """``Client(elicitation_handler=...)``: ``def`` or ``async def handler(params: ElicitationParams) -> answer``;
    content is checked against the requested schema (its defaults filled in) before it is sent."""

    def __call__(self, params: ElicitationParams, /) -> ElicitationAnswer | Awaitable[ElicitationAnswer]: ...


class LoggingHandler(Protocol):
    """``Client(logging_handler=...)``: ``def`` or ``async def handler(message: LogMessage)`` (``list.append``
    works); its return value is ignored."""

    def __call__(self, message: LogMessage, /) -> object: ...


#: Where the server's log messages go when the client has no logging handler (Python's ``logging``, at the
#: message's level; the message names the server's own logger, if it gave one).
server_logger: logging.Logger = logging.getLogger("mcpkit.client.server_log")
_PY_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


def python_log_level() -> str | None:
    """The lowest MCP log level :data:`server_logger` lets through (None when it lets none through)."""
    return next((name for name, level in _PY_LEVELS.items() if server_logger.isEnabledFor(level)), None)


def to_python_logging(params: JSONDict | None) -> None:
    """A server log message for a client without a logging handler: to :data:`server_logger` at its level."""
    params = params or {}
    level = _PY_LEVELS.get(str(params.get("level")), logging.INFO)
    if server_logger.isEnabledFor(level):
        name = params.get("logger")
        server_logger.log(level, "%s%s", f"{name}: " if isinstance(name, str) else "", params.get("data"))


#: How a client negotiates: "auto" (probe 2026-07-28, fall back to ``initialize``), "handshake" or "modern".
ClientMode: TypeAlias = Literal["auto", "handshake", "modern"]
CLIENT_MODES: tuple[str, ...] = ("auto", "handshake", "modern")


def check_client_options(mode: str, log_level: str | None, protocol_version: str | None = None) -> str:
    """``mode``, ``log_level`` and ``protocol_version`` of a client, checked when it is built (``ValueError`` naming
    the closest, or the contradiction of a mode and a pinned revision of the other era); returns the era to speak
    (the pinned revision's, else ``mode``)."""
    check_choice("mode", mode, CLIENT_MODES)
    if log_level is not None:
        check_choice("log_level", log_level, LOG_LEVELS)
    if protocol_version is None:
        return mode
    if not is_supported(protocol_version):
        raise ValueError(f"unsupported protocol version {protocol_version!r}")
    era = "modern" if is_modern(protocol_version) else "handshake"
    if mode not in ("auto", era):
        raise ValueError(
            f"mode={mode!r} contradicts protocol_version={protocol_version!r}, a revision of the {era} era: "
            "drop one of them (a pinned revision chooses the era)"
        )
    return era


async def roots_list(source: Any) -> list[JSONDict]:
    """The client's roots as ``roots/list`` answers them: ``source`` is a list (URIs, ``Root`` models, dicts) or a
    function returning one (sync or async)."""
    items = await maybe_await(source()) if callable(source) else source
    return [{"uri": item} if isinstance(item, str) else as_dict(item) for item in items or []]


def wanted_log_level(log_level: str | None, has_handler: bool, python_level: str | None) -> str | None:
    """The log level a 2026-07-28 request asks for (that era sends log messages only to a request whose ``_meta``
    asks): ``log_level`` when set; with a logging handler, every level, as a handshake-era session gets by
    default; without one, the levels :data:`server_logger` lets through (``python_level``; none when it is off)."""
    if log_level is not None:
        return log_level
    return "debug" if has_handler else python_level


async def deliver_log(handler: LoggingHandler | None, params: JSONDict | None) -> bool:
    """A ``notifications/message``: to ``handler`` as a :class:`LogMessage` (True: delivered, or dropped when
    malformed, never a crash), else to Python's ``logging`` (False: other listeners may see it too)."""
    if handler is None:
        to_python_logging(params)
        return False
    try:
        message = LogMessage.from_wire(params or {})
    except InvalidParams as exc:
        logger.warning("dropped a log message from the server: %s", exc)
        return True
    await maybe_await(handler(message))
    return True


async def maybe_await(value: Any) -> Any:
    """A callback's value, awaited if it is awaitable (handlers may be sync or async)."""
    if inspect.isawaitable(value):
        return await value
    return value


def as_dict(value: Any) -> JSONDict:
    """A handler's answer as a JSON object: an MCP model dumped by alias, a dict as it is, anything else a TypeError."""
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_none=True, mode="json")
    if isinstance(value, dict):
        return value
    raise TypeError(f"handler returned {type(value).__name__}, expected a dict or an MCP model")


def validated_answer(model: Any, result: JSONDict, what: str) -> JSONDict:
    """Check a handler's answer; a bad one becomes an error the server can read (not a bare -32603)."""
    from pydantic import ValidationError

    try:
        dumped: JSONDict = model.model_validate(result).dump()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "result"
        msg = f"the client's {what} handler returned an invalid result: {where}: {first['msg']}"
        raise InternalError(msg) from None
    return dumped


def sampling_result(value: Any) -> Any:
    """Let a sampling handler return a plain string (an assistant text message)."""
    if isinstance(value, str):
        return {
            "role": "assistant",
            "content": {"type": "text", "text": value},
            "model": "unknown",
            "stopReason": "endTurn",
        }
    return value


def elicitation_result(value: Any, params: ElicitationParams | JSONDict) -> JSONDict:
    """Normalize what an elicitation handler returned and finish it: schema defaults applied, content validated.

    Accepted returns: an ``ElicitResult`` (model or dict with ``action``), a dict of content (means accept),
    ``None`` (means decline).
    """
    from pydantic import BaseModel

    if value is None:
        return {"action": "decline"}
    if isinstance(value, BaseModel):
        value = value.model_dump(by_alias=True, exclude_none=True, mode="json")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if not isinstance(value, dict):
        raise TypeError(f"elicitation handler returned {type(value).__name__}; expected a dict, ElicitResult or None")
    result: JSONDict = dict(value) if "action" in value else {"action": "accept", "content": dict(value)}
    mode = params.get("mode", "form")
    if result["action"] != "accept":
        result.pop("content", None)
        return result
    if mode == "url":
        result.pop("content", None)  # URL mode: the answer is only the user's consent
        return result
    schema = params.get("requestedSchema")
    given = result.get("content")
    content = apply_schema_defaults(
        schema if isinstance(schema, dict) else None, without_nulls(given, schema) if isinstance(given, dict) else None
    )
    if isinstance(schema, dict):
        full = {"type": "object", **schema}
        try:
            e = first_error(schema_validator(full), content)
        except SchemaError as exc:
            raise ElicitationContentError(f"the server's requestedSchema is {exc}") from None
        if e is not None:
            where = ".".join(str(p) for p in e.instance_path) or "content"
            raise ElicitationContentError(
                f"elicitation content does not match the requested schema at {where}: {e.message}"
            )
    for key, value in (content or {}).items():  # (a value the schema left open must still be one ElicitResult holds)
        if isinstance(value, dict) or (isinstance(value, list) and not all(isinstance(v, str) for v in value)):
            what = "list of other than strings" if isinstance(value, list) else "object"
            raise ElicitationContentError(
                f"elicitation content at {key}: a {what} is not a value an elicitation answer may hold (a string, "
                "number, boolean or list of strings)"
            )
    result["content"] = content
    return result


#: the list_changed notification of each list a client can watch
LIST_CHANGED = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
}


class Watch:
    """Server change notifications, the same way in both eras (see :meth:`Client.watch`).

    ``async for method, params in watch`` or ``await watch.next(timeout)``; ``method`` is one of
    ``notifications/{tools,prompts,resources}/list_changed`` or ``notifications/resources/updated``. Changes wait
    unread in a queue of ``maxsize`` changes and ``maxbytes`` bytes: equal ones coalesce (a list's change, an update
    of one URI: each arrives once), and when distinct ones overflow it the watch ends with
    :class:`~mcpkit.client.changes.WatchFellBehind` once what it holds is read, rather than lose some.
    """

    def __init__(
        self,
        maxsize: int,
        methods: frozenset[str],
        uris: frozenset[str],
        subscription: Subscription | None = None,
        maxbytes: int = MAX_WAITING_CHANGE_BYTES,
    ) -> None:
        self._changes = ChangeQueue(maxsize, maxbytes=maxbytes)
        self.methods = methods
        self.uris = uris
        self.subscription = subscription

    def fail(self, exc: BaseException) -> None:
        """The connection ended: once the changes already received are read, the watch raises ``exc``."""
        self._changes.end(exc)

    def offer(self, method: str, params: JSONDict | None) -> None:
        if method in self.methods or (
            method == "notifications/resources/updated" and isinstance(params, dict) and params.get("uri") in self.uris
        ):
            self._changes.offer(method, params or {})

    async def next(self, timeout: float | None = None) -> tuple[str, JSONDict]:
        """The next change ``(method, params)``; ``timeout`` in seconds (``TimeoutError`` when it passes)."""
        if self.subscription is not None:
            return await self.subscription.next(timeout)
        return await self._changes.get(timeout)

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> tuple[str, JSONDict]:
        return await self.next()


def request_policy(features: Callable[[], Features | None]) -> Callable[[str], bool]:
    """The client's policy for the server's requests (``Peer(request_policy=)``): run in the handshake era; in
    2026-07-28, which has none (the server asks through ``input_required``, and a client MUST NOT post
    responses), dropped unanswered, with one warning per session. ``features``: the session's negotiated ones."""
    warned = False

    def policy(method: str) -> bool:
        nonlocal warned
        feats = features()
        if feats is None or not feats.modern:
            return True
        if not warned:
            warned = True
            logger.warning(
                "the server sent a %s request in 2026-07-28, which has no server->client requests: not answered"
                " (further ones are dropped silently)",
                method,
            )
        return False

    return policy
