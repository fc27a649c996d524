"""The low-level client session: one connection, both eras, typed calls for every method.

Era detection (``mode="auto"``): probe with ``server/discover``; a ``DiscoverResult`` or a modern error
(-32020/-32021/-32022) means the server is modern; anything else (another error, a timeout) means legacy, and the
session falls back to ``initialize``. The fallback never keys on one error code (spec, stdio transport page).

Server→client requests (handshake era) and ``InputRequiredResult`` rounds (modern era) are answered by the same
handlers: ``roots``, ``sampling_handler``, ``elicitation_handler``. A capability is declared only when its handler
is given, and calls the server did not declare are refused locally with :class:`CapabilityNotSupported`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from types import EllipsisType
from typing import TYPE_CHECKING, Any

from .._options import check_choice, named_options
from .._version import __version__
from ..engine import (
    DEFAULT_MAX_BATCH_SIZE,
    MODERN_BATCH_REFUSAL,
    ORIGIN,
    BaseConnection,
    Peer,
    RequestContext,
    Tap,
    hub_of,
)
from ..protocol import versions
from ..protocol.errors import (
    CapabilityNotSupported,
    ConnectionClosed,
    MCPError,
)
from ..protocol.extensions import Extensions, as_extensions, declared_settings
from ..protocol.jsonrpc import JSONDict
from ..protocol.types import (
    CallToolResult,
    CompleteResult,
    DiscoverResult,
    GetPromptResult,
    InitializeResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    ReadResourceResult,
)
from ..protocol.versions import (
    LOG_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SUBSCRIPTION_ID,
    TASKS_EXTENSION,
    Features,
    LogLevel,
)
from ..transports.base import DEFAULT_MAX_MESSAGE_SIZE
from . import handlers as h  # the handlers' types, their params, log delivery
from .answering import RequestAnswering
from .answering import RootsProvider as RootsProvider
from .changes import MAX_WAITING_CHANGE_BYTES, ChangeQueue
from .handlers import maybe_await
from .keepalive import keep_alive
from .negotiation import negotiate
from .notes import HandlerQueue
from .results import checked
from .rounds import input_rounds
from .subscription import Subscription as Subscription
from .subscription import listen_filter, open_subscription
from .tasks import ClientTasks, ProgressCallback, SeenProgress

if TYPE_CHECKING:
    from ..tasks import TaskEngine
    from ..transports.base import Connection

logger: logging.Logger = logging.getLogger("mcpkit.client")

NotificationCallback = Callable[[str, JSONDict | None], Any]

DEFAULT_MAX_INPUT_REQUESTS = 32  # input requests in one InputRequiredResult (ClientSession(max_input_requests=...))


class ClientSession(RequestAnswering):
    """One MCP client connection over any :class:`~mcpkit.transports.base.Connection`.

    Use as an async context manager: entering starts the reader and negotiates the era and version.

    Args:
        conn: the transport connection.
        mode: "auto" (probe ``server/discover``, fall back to ``initialize``), "handshake" or "modern".
        protocol_version: pin a revision (implies its era); default: the latest of the chosen era.
        client_info: our ``Implementation`` info.
        roots: a list of roots (URIs or objects) or a callable returning one; declares the ``roots`` capability.
        sampling_handler: answers ``sampling/createMessage``; declares ``sampling``.
        sampling_tools: the sampling handler accepts ``tools``/``toolChoice`` (declares ``sampling.tools``).
        elicitation_handler: answers ``elicitation/create``; declares ``elicitation`` (form, and URL when
            ``elicitation_url`` is true).
        logging_handler: receives each log message as a :class:`LogMessage`, in both eras; without one, they go to
            Python's ``logging`` (``mcpkit.client.server_log``; see :func:`~.handlers.wanted_log_level`).
        notification_handler: receives every other notification ``(method, params)``.
        timeout: default per-request timeout in seconds.
        discover_timeout: how long the ``server/discover`` probe may take before falling back.
        max_input_rounds: bound on ``InputRequiredResult`` retries for one call.
        max_input_requests: bound on the input requests one ``InputRequiredResult`` may list (the call fails
            beyond it); they are answered concurrently, each holding one of the ``max_concurrency`` slots.
        max_input_reply_size: bound in bytes on the encoded answers to one round's input requests (the call
            fails beyond it).
        max_concurrency: bound on server→client requests (and input-round answers) handled at once, batch items
            included; beyond it the client stops reading until one ends.
        max_batch_size: longest JSON-RPC batch accepted from the server (handshake era; -32600 beyond it).
        keepalive: seconds between health-check pings (handshake era; None disables). When a ping goes
            unanswered for ``keepalive_timeout`` seconds, the connection is closed and calls fail fast.
        extensions: the extensions this client supports, ``{id: settings}`` (an
            :class:`~mcpkit.protocol.extensions.Extensions` is used as it is, so declarations made on it later
            apply too): declared under ``capabilities.extensions`` in both eras.
        tasks: take part in tasks (default True; see :mod:`mcpkit.client.tasks`); ``task_engine`` runs the server's
            requests as tasks (2025-11-25; in memory by default).
        tap: ``fn(event)``, shown every JSON-RPC message of the connection, both ways (:mod:`mcpkit.engine.tap`).
    """

    @named_options
    def __init__(
        self,
        conn: Connection,
        *,
        mode: h.ClientMode = "auto",
        protocol_version: str | None = None,
        client_info: JSONDict | None = None,
        roots: RootsProvider | None = None,
        sampling_handler: h.SamplingHandler | None = None,
        sampling_tools: bool = False,
        elicitation_handler: h.ElicitationHandler | None = None,
        elicitation_url: bool = True,
        logging_handler: h.LoggingHandler | None = None,
        notification_handler: NotificationCallback | None = None,
        log_level: LogLevel | None = None,
        timeout: float | None = 60.0,
        discover_timeout: float = 5.0,
        max_input_rounds: int = 8,
        max_input_requests: int = DEFAULT_MAX_INPUT_REQUESTS,
        max_input_reply_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        max_concurrency: int = 256,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        experimental: JSONDict | None = None,
        keepalive: float | None = None,
        keepalive_timeout: float = 10.0,
        relay_answers: bool = False,
        extensions: Extensions | Mapping[str, JSONDict | None] | None = None,
        tasks: bool = True,
        task_engine: TaskEngine | None = None,
        tap: Tap | None = None,
    ) -> None:
        mode = h.check_client_options(mode, log_level, protocol_version)  # type: ignore[assignment]
        self.conn = conn
        self.mode = mode
        self.pinned_version = protocol_version
        self.client_info: JSONDict = client_info or {"name": "mcpkit", "version": __version__}
        self._roots = roots
        self.sampling_handler = sampling_handler
        self.sampling_tools = sampling_tools
        self.elicitation_handler = elicitation_handler
        self.elicitation_url = elicitation_url
        self.logging_handler = logging_handler
        self.notification_handler = notification_handler
        self.log_level = log_level
        self.discover_timeout = discover_timeout
        self.max_input_rounds = max_input_rounds
        self.max_input_requests = max_input_requests
        self.max_input_reply_size = max_input_reply_size
        self.experimental = experimental
        self.extensions: Extensions = as_extensions(extensions)
        self.extensions.on_change = self._forget_meta
        if tasks and TASKS_EXTENSION not in self.extensions:  # (2026-07-28 only: 2025-11-25 has capabilities.tasks)
            self.extensions.declare(TASKS_EXTENSION, {}, versions=versions.MODERN_VERSIONS)
        self.relay_answers = relay_answers  # answers to the server's requests sent as the handlers gave them
        self.seen: Callable[[str, JSONDict | None], None] | None = None  # told of every notification (a cache)
        #: spans around its answers to 2026-07-28 input requests (``Client(telemetry=...)`` sets it; None: none)
        self.input_tracer: h.InputTracer | None = None
        self.peer: Peer = Peer(
            conn,
            request_handler=self._on_request,
            notification_handler=self._on_notification,
            batch_policy=self._batch_policy,
            request_policy=h.request_policy(lambda: self.features),
            default_timeout=timeout,
            max_concurrency=max_concurrency,
            max_batch_size=max_batch_size,
            name="client",
            tap=hub_of(tap),
        )
        self.peer.batch_refusal = MODERN_BATCH_REFUSAL  # (the policy refuses batches only in 2026-07-28)
        self.protocol_version: str | None = None
        self.features: Features | None = None
        self.server_capabilities: JSONDict = {}
        self.server_info: JSONDict | None = None
        self.instructions: str | None = None
        self.server_versions: list[str] = []
        self._reader: asyncio.Task[None] | None = None
        self.keepalive = keepalive
        self.keepalive_timeout = keepalive_timeout
        self._keepalive_task: asyncio.Task[None] | None = None
        self.closed_reason: str | None = None
        #: called with the reason once the connection has ended (the server closed it, or it was closed here)
        self.on_end: Callable[[str], None] | None = None
        self._meta_cache: tuple[tuple[str, str | None, bool], JSONDict] | None = None
        self._python_log_level: str | None = None
        self._listen_queues: dict[str | int, ChangeQueue] = {}
        self.tasks = tasks
        self._tasks = ClientTasks(task_engine)
        self._notes = HandlerQueue(self._deliver)  # the logging and notification handlers' task (see .notes)
        self.peer.unclaimed_progress = self._tasks.progress  # (2025-11-25 tasks keep their request's token)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> ClientSession:
        if isinstance(self.conn, BaseConnection):  # (its optional capabilities, declared)
            self.conn.set_fast_path(self.peer.feed, None)  # answers complete their requests as the bytes arrive
            self.conn.set_request_failure(self.peer.fail_request)
        self._reader = asyncio.get_running_loop().create_task(self.peer.run(self.conn.receive, drain_timeout=1.0))
        self._reader.add_done_callback(self._reader_ended)
        try:
            await self.connect()
        except BaseException:
            await self.aclose()
            raise
        if self.keepalive and self.features is not None and self.features.ping:
            self._keepalive_task = asyncio.get_running_loop().create_task(
                keep_alive(self.peer, self.conn, self.keepalive, self.keepalive_timeout, self._keepalive_failed)
            )
        return self

    @property
    def ended(self) -> str | None:
        """Why the connection ended (the server closed it or exited, a keepalive failed, or it was closed here);
        None while it is open."""
        return self.closed_reason or self.peer._stopped

    def _keepalive_failed(self, reason: str) -> None:
        self.closed_reason = reason

    def _reader_ended(self, _: object) -> None:
        if self.on_end is not None:
            self.on_end(self.ended or "the connection was closed")

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._keepalive_task is not None:
            self._keepalive_task.cancel()
        self._notes.close()
        await self._tasks.aclose()
        await self.peer.close("client closed")
        with contextlib.suppress(Exception):
            await self.conn.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader

    @property
    def modern(self) -> bool:
        return self.features is not None and self.features.modern

    def capabilities(self, feats: Features | None = None) -> JSONDict:
        """The client capabilities we declare (only what has a handler)."""
        caps: JSONDict = {}
        modern = feats.modern if feats is not None else self.mode == "modern"
        if self._roots is not None:
            caps["roots"] = {} if modern else {"listChanged": True}
        if self.sampling_handler is not None:
            sampling: JSONDict = {}
            if self.sampling_tools and (feats is None or feats.sampling_tools):
                sampling["tools"] = {}
            caps["sampling"] = sampling
        if self.elicitation_handler is not None and (feats is None or feats.elicitation):
            elicitation: JSONDict = {}
            if feats is None or feats.url_elicitation:
                elicitation["form"] = {}
                if self.elicitation_url:
                    elicitation["url"] = {}
            caps["elicitation"] = elicitation
        if self.experimental:
            caps["experimental"] = self.experimental
        declared = self.extensions.for_version(feats.version if feats is not None else self._requested_version())
        if declared is not None:
            caps["extensions"] = declared
        if self.tasks and feats is not None and feats.tasks and ("sampling" in caps or "elicitation" in caps):
            caps["tasks"] = ClientTasks.capability(caps)  # 2025-11-25: the server's requests we run as tasks
        return caps

    def _requested_version(self) -> str:
        if self.pinned_version is not None:
            return self.pinned_version
        return versions.LATEST if self.mode != "handshake" else versions.LATEST_HANDSHAKE

    def _forget_meta(self) -> None:
        self._meta_cache = None  # (the per-request _meta carries the capabilities: made again)

    def server_extension(self, extension_id: str) -> JSONDict | None:
        """The settings the server declared for the extension ``extension_id``, or None when it did not."""
        return declared_settings(self.server_capabilities, extension_id)

    async def connect(self) -> None:
        """Negotiate the era and the protocol version (and tell the transport, which may need it for headers)."""
        self._python_log_level = h.python_log_level()  # read once: the meta of every modern request is cached
        await negotiate(self)
        if isinstance(self.conn, BaseConnection) and self.protocol_version is not None:
            self.conn.set_protocol_version(self.protocol_version)
            # (bounded by the connect's own timeout too; waits again for a GET sent once more after initialized)
            await self.conn.wait_ready()

    async def _discover(self, version: str, timeout: float | None) -> JSONDict:
        return await self.peer.request("server/discover", {"_meta": self._modern_meta(version)}, timeout=timeout)

    async def _use_modern(self, result: JSONDict, version: str) -> None:
        self.protocol_version = version
        self.features = versions.features(version)
        d = checked(DiscoverResult, result, "server/discover")
        self.server_capabilities = d.capabilities
        self.server_versions = d.supported_versions
        self.instructions = d.instructions
        meta = result.get("_meta") or {}
        info = meta.get(versions.META_SERVER_INFO)
        self.server_info = info if isinstance(info, dict) else None

    async def _initialize(self) -> None:
        requested = self.pinned_version or versions.LATEST_HANDSHAKE
        feats = versions.features(requested)
        params = {
            "protocolVersion": requested,
            "capabilities": self.capabilities(feats),
            "clientInfo": self.client_info,
        }
        raw = await self.peer.request("initialize", params)
        result = checked(InitializeResult, raw, "initialize")
        if result.protocol_version not in versions.HANDSHAKE_VERSIONS:
            # We cannot speak what the server answered: disconnect (spec SHOULD).
            await self.aclose()
            raise MCPError(
                f"server answered protocol version {result.protocol_version!r}, which this client does not support"
            )
        self.protocol_version = result.protocol_version
        self.features = versions.features(result.protocol_version)
        self.server_capabilities = result.capabilities
        self.server_info = result.server_info.dump()
        self.instructions = result.instructions
        if isinstance(self.conn, BaseConnection):
            # Streamable HTTP: the standalone GET opens, and is answered, before the server learns the session is
            # ready: a server may send its own request then, on that stream only (see BaseConnection.wait_ready)
            self.conn.set_protocol_version(result.protocol_version)
            await self.conn.wait_ready()
        await self.peer.notify("notifications/initialized")

    def _modern_meta(self, version: str) -> JSONDict:
        """The per-request ``_meta`` of the modern era (cached: it changes only with the log level or roots)."""
        level = h.wanted_log_level(self.log_level, self.logging_handler is not None, self._python_log_level)
        key = (version, level, self._roots is None)
        cached = self._meta_cache
        if cached is not None and cached[0] == key:
            return dict(cached[1])
        meta: JSONDict = {
            META_PROTOCOL_VERSION: version,
            META_CLIENT_CAPABILITIES: self.capabilities(versions.features(version)),
            META_CLIENT_INFO: self.client_info,
        }
        if level is not None:
            meta[META_LOG_LEVEL] = level
        self._meta_cache = (key, meta)
        return dict(meta)

    # ------------------------------------------------------------------ requests

    def _check_capability(self, method: str) -> None:
        if self.features is not None:
            missing = versions.undeclared_capability(method, self.server_capabilities, self.features)
            if missing is not None:
                raise CapabilityNotSupported(missing)

    async def request(
        self,
        method: str,
        params: JSONDict | None = None,
        *,
        timeout: float | EllipsisType | None = ...,
        on_progress: ProgressCallback | None = None,
        reset_timeout_on_progress: bool = False,
        answer_input: bool = True,
        raw_task: bool = False,
    ) -> JSONDict:
        """Send any request in the negotiated era; returns the raw result (``InputRequiredResult`` answered; a
        2026-07-28 task followed to its end and its result returned, unless ``raw_task``: then the task itself).

        ``timeout`` is a deadline (for a task, on the whole wait: it is cancelled when the deadline passes); with
        ``reset_timeout_on_progress`` each progress notification restarts it, up to the peer's ``max_timeout`` in
        all. ``answer_input=False``: one round only, an ``InputRequiredResult`` is returned as it is (``params`` may
        then carry ``inputResponses`` and ``requestState`` of a later round: a proxy relays them)."""
        if self._notes.from_handler():  # (a handler calling back: the reader must not wait on the handlers)
            with self._notes.calling_back():
                return await self._request(
                    method, params, timeout, on_progress, reset_timeout_on_progress, answer_input, raw_task
                )
        return await self._request(
            method, params, timeout, on_progress, reset_timeout_on_progress, answer_input, raw_task
        )

    async def _request(
        self,
        method: str,
        params: JSONDict | None,
        timeout: float | EllipsisType | None,
        on_progress: ProgressCallback | None,
        reset: bool,
        answer_input: bool,
        raw_task: bool,
    ) -> JSONDict:
        if self.features is None:
            raise ConnectionClosed("not connected")
        self._check_capability(method)
        if not self.features.modern:
            return await self._round(method, params, timeout, on_progress, reset)
        base = dict(params) if params else {}
        user_meta = base.get("_meta")
        meta = self._modern_meta(self.features.version)
        if isinstance(user_meta, dict):
            meta = {**user_meta, **meta}
        base["_meta"] = meta
        seen = SeenProgress(on_progress) if on_progress is not None and method == "tools/call" else None
        if self.input_tracer is not None:
            with self.input_tracer.rounds():  # (every round's span in the first one's trace)
                return await input_rounds(self, method, base, timeout, on_progress, reset, answer_input, raw_task, seen)
        return await input_rounds(self, method, base, timeout, on_progress, reset, answer_input, raw_task, seen)

    async def _round(
        self, method: str, params: JSONDict | None, timeout: Any, on_progress: ProgressCallback | None, reset: bool
    ) -> JSONDict:
        """One request's answer (or error) once the handlers have seen the notifications that came before it."""
        notes = self._notes
        try:
            answer = await self.peer.request(
                method, params, timeout=timeout, on_progress=on_progress, reset_timeout_on_progress=reset
            )
        except MCPError:  # (a cancellation goes at once)
            if notes.received != notes.handled:
                await notes.catch_up()
            raise
        if notes.received != notes.handled:
            await notes.catch_up()
        return answer

    def _batch_policy(self) -> bool:  # batches from the server: handshake era only (bounded by max_batch_size)
        return self.features is None or not self.features.modern

    async def _on_request(self, rc: RequestContext) -> JSONDict:
        conn = self.conn
        if isinstance(conn, BaseConnection) and conn.relates_requests:  # which request of ours it is about, if any
            token = ORIGIN.set(conn.related(rc.id))
            try:
                return await self._answer_request(rc)
            finally:
                ORIGIN.reset(token)
        return await self._answer_request(rc)

    async def _answer_request(self, rc: RequestContext) -> JSONDict:
        method = rc.method
        if method == "ping":
            return {}
        params = rc.params or {}
        if self.tasks and self._tasks.takes(method, params, self.features, self.capabilities):
            return await self._tasks.answer(method, params, self._serve_client_request)
        tracer = self.input_tracer
        if tracer is not None:  # (its span current: the handler's spans are in the server's trace)
            channel, version = self.peer.channel, self.features.version if self.features else None
            with (
                tracer.serve_request(channel, rc.id, version)
                if rc.sink is None  # (a batch's member: the tap showed the batch, not the request)
                else tracer.serve_member(channel, rc.id, method, params, version)
            ):
                return await self._serve_client_request(method, params)
        return await self._serve_client_request(method, params)

    async def _on_notification(self, method: str, params: JSONDict | None) -> None:
        if self.seen is not None:
            self.seen(method, params)
        if params is not None:
            meta = params.get("_meta")
            sid = meta.get(META_SUBSCRIPTION_ID) if isinstance(meta, dict) else None
            if type(sid) is str or type(sid) is int:  # (a listen's request id; nothing else names a stream of ours)
                queue = self._listen_queues.get(sid)
                if queue is not None:
                    queue.offer(method, params)  # (equal changes coalesce; an overflow ends the stream, loudly)
                    return
        if self.logging_handler is None and self.notification_handler is None:
            await self._deliver(method, params)  # (to Python's logging: no code of the user's runs)
            return
        conn = self.conn  # (which request of ours it is about, if the transport can tell: its stream)
        if isinstance(conn, BaseConnection) and conn.relates_requests:
            await self._notes.put(method, params, conn.related_message())
            return
        await self._notes.put(method, params)

    async def _deliver(self, method: str, params: JSONDict | None) -> None:
        if method == "notifications/message" and await h.deliver_log(self.logging_handler, params):
            return
        if self.notification_handler is not None:
            await maybe_await(self.notification_handler(method, params))

    # ------------------------------------------------------------------ typed calls

    async def ping(self, *, timeout: float | None = 10.0) -> None:
        """Ping the server (handshake era; in 2026-07-28, where ping was removed, ``server/discover``)."""
        if self.features is not None and self.features.modern:
            await self.request("server/discover", {}, timeout=timeout)
            return
        notes = self._notes
        if notes.from_handler():
            with notes.calling_back():
                await self.peer.request("ping", None, timeout=timeout)
            return
        await self.peer.request("ping", None, timeout=timeout)
        if notes.received != notes.handled:
            await notes.catch_up()

    async def discover(self) -> DiscoverResult:
        """``server/discover`` again: what it answers (capabilities, revisions, instructions) is what this session
        knows of the server from now on (a server may declare an extension while serving)."""
        if self.features is None or not self.features.modern:
            raise CapabilityNotSupported("server/discover exists only in protocol 2026-07-28")
        d = checked(DiscoverResult, await self.request("server/discover", {}), "server/discover")
        self.server_capabilities = d.capabilities
        self.server_versions = d.supported_versions
        self.instructions = d.instructions
        return d

    async def list_tools(self, cursor: str | None = None) -> ListToolsResult:
        return checked(ListToolsResult, await self.request("tools/list", _cursor(cursor)), "tools/list")

    async def call_tool(
        self,
        name: str,
        arguments: JSONDict | None = None,
        *,
        timeout: float | EllipsisType | None = ...,
        on_progress: ProgressCallback | None = None,
        meta: JSONDict | None = None,
        reset_timeout_on_progress: bool = False,
    ) -> CallToolResult:
        params: JSONDict = {"name": name, "arguments": arguments or {}}
        if meta:
            params["_meta"] = meta
        raw = await self.request(
            "tools/call",
            params,
            timeout=timeout,
            on_progress=on_progress,
            reset_timeout_on_progress=reset_timeout_on_progress,
        )
        return checked(CallToolResult, raw, "tools/call")

    async def list_resources(self, cursor: str | None = None) -> ListResourcesResult:
        raw = await self.request("resources/list", _cursor(cursor))
        return checked(ListResourcesResult, raw, "resources/list")

    async def list_resource_templates(self, cursor: str | None = None) -> ListResourceTemplatesResult:
        raw = await self.request("resources/templates/list", _cursor(cursor))
        return checked(ListResourceTemplatesResult, raw, "resources/templates/list")

    async def read_resource(self, uri: str) -> ReadResourceResult:
        return checked(ReadResourceResult, await self.request("resources/read", {"uri": uri}), "resources/read")

    async def subscribe_resource(self, uri: str) -> None:
        await self.request("resources/subscribe", {"uri": uri})

    async def unsubscribe_resource(self, uri: str) -> None:
        await self.request("resources/unsubscribe", {"uri": uri})

    async def list_prompts(self, cursor: str | None = None) -> ListPromptsResult:
        return checked(ListPromptsResult, await self.request("prompts/list", _cursor(cursor)), "prompts/list")

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> GetPromptResult:
        params: JSONDict = {"name": name}
        if arguments:
            params["arguments"] = arguments
        return checked(GetPromptResult, await self.request("prompts/get", params), "prompts/get")

    async def complete(
        self, ref: JSONDict, argument_name: str, value: str, context_arguments: dict[str, str] | None = None
    ) -> CompleteResult:
        params: JSONDict = {"ref": ref, "argument": {"name": argument_name, "value": value}}
        if context_arguments and self.features is not None and self.features.completion_context:
            params["context"] = {"arguments": context_arguments}
        return checked(CompleteResult, await self.request("completion/complete", params), "completion/complete")

    async def set_logging_level(self, level: LogLevel) -> None:
        """``logging/setLevel`` (handshake era). In 2026-07-28 the level rides on every request's ``_meta``."""
        check_choice("level", level, LOG_LEVELS)
        if self.features is not None and self.features.modern:
            self.log_level = level
            return
        await self.request("logging/setLevel", {"level": level})

    async def send_roots_list_changed(self) -> None:
        """Tell the server our roots changed (handshake era; 2026-07-28 has no such notification)."""
        if self.features is None or self.features.modern or self._roots is None:
            return
        await self.peer.notify("notifications/roots/list_changed")

    def set_roots(self, roots: RootsProvider) -> Awaitable[None]:
        """Replace the roots and notify the server (``notifications/roots/list_changed``).

        Only possible when roots were declared at connect time: a capability cannot be added mid-session, and
        ``list_changed`` may only be sent for a declared ``roots.listChanged`` (M075)."""
        if self._roots is None and self.features is not None:
            raise CapabilityNotSupported("roots were not declared when connecting; pass roots= to declare them")
        self._roots = roots
        return self.send_roots_list_changed()

    @contextlib.asynccontextmanager
    async def listen(
        self,
        *,
        tools: bool = False,
        prompts: bool = False,
        resources: bool = False,
        resource_uris: Sequence[str] = (),
        maxsize: int = 1024,
        maxbytes: int = MAX_WAITING_CHANGE_BYTES,
    ) -> AsyncIterator[Subscription]:
        """``subscriptions/listen`` (2026-07-28): yields a :class:`Subscription` to iterate notifications.

        At most ``maxsize`` notifications, and ``maxbytes`` of them (each its parameters as JSON), wait unread: see
        :class:`~mcpkit.client.changes.ChangeQueue`."""
        if self.features is None or not self.features.modern:
            raise CapabilityNotSupported("subscriptions/listen exists only in protocol 2026-07-28")
        filt = listen_filter(tools=tools, prompts=prompts, resources=resources, resource_uris=resource_uris)
        params = {"notifications": filt, "_meta": self._modern_meta(self.features.version)}
        async with open_subscription(self.peer, self._listen_queues, params, maxsize, maxbytes) as sub:
            yield sub


def _cursor(cursor: str | None) -> JSONDict | None:
    return {"cursor": cursor} if cursor is not None else None
