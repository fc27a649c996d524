"""The lane: a POST that mcpkit's app answers at once is answered in the served protocol itself.

uvicorn serves every request through an ASGI cycle: a ``RequestResponseCycle`` with an ``asyncio.Event``, a task
that runs the app, the app's ``receive`` and two ``send`` calls whose headers are checked one by one. For a request
whose answer is made without waiting (a plain ``def`` tool run inline, a built-in with nothing to wait for) that
machinery costs about as much as the answer itself. :func:`lane_protocol` subclasses the guarded httptools
protocol of :func:`~mcpkit.transports.http.build_server` (:mod:`.limits`): once the body of a POST to the Streamable
HTTP route is whole, the protocol asks the app (:meth:`.MCPApp.at_once`, which routes as the ASGI call does and
runs the endpoint's one route, :meth:`.StreamableHTTPEndpoint.route`) and, when the answer is made at once,
writes it straight to the transport in the bytes ``send`` would have written (and the access log's line, when
uvicorn's access log is on). Such a request gets no ``RequestResponseCycle`` of uvicorn's making either: its head
is taken as uvicorn takes it (the scope, with the path of the route itself: no URL to parse) and its cycle is a
``Held`` one, holding what uvicorn's callbacks read and set until the answer (the body, its end, ``keep_alive``,
a lost connection), made whole by uvicorn's own ``__init__`` only if the request goes the ASGI way. The response
is completed as uvicorn completes it: the pipeline, the guard's timeouts and ``server_state`` follow as they do
after any response. One difference for every response of a connection served by this protocol, on the lane or
not: uvicorn arms a keep-alive timer per response (a ``TimerHandle`` made, pushed on the loop's heap and cancelled
by the next request: ~16k instructions of a ~189k-instruction call, measured with ``bench/uvicorn_inproc.py``);
here the connection guard closes a connection that idles ``timeout_keep_alive`` seconds on its one timer per
server (``ConnectionGuard.keep_alive``), up to half a second later than uvicorn's timer would.

The ASGI way, with the body in hand, serves everything else:

* decided before the app is asked (the head): uvicorn wrapping the app (its proxy-headers middleware, with
  ``forwarded_allow_ips``: the scope is the middleware's to rewrite), TLS (the read callback is the socket's, below
  asyncio's TLS protocol, which the hand-over could not pause), a method other than POST, another path (or
  any query, or ``root_path``), HTTP/1.0 or ``Connection: close``, ``Expect: 100-continue``, an upgrade, a
  request pipelined behind one still being served, ``limit_concurrency`` reached (its 503);
* decided on the way: a body that grows past uvicorn's flow-control mark (64 KiB) before it is whole (the app
  reads the rest, the lane holds no more than that);
* decided by the app, nothing done: a POST its endpoint screens (an ``Origin``, headers not seen before, a body
  over the limit), another route;
* decided by the app, once it has started: an answer not made at once (an SSE stream, an ``async`` tool, a session
  to read from a store): the rest runs in a task on the cycle (``run_asgi``, as uvicorn would run the app: the
  same logging and 500 on an exception), in the request's context;
* an exception raised by the app: the same, so it is logged and answered as uvicorn answers it.

Each request runs in its own copy of the connection's context, as a task would (a fresh one when uvicorn's
``reset_contextvars`` is set): what a tool sets in a ``ContextVar`` stays in its request. There is no current
task in a protocol callback: a ``def`` tool the sync policy runs inline is called through
:func:`mcpkit._runtime.reader_calls`, so that if it runs long and the loop is handed over, the connection's reading
pauses meanwhile (the stand-in must not run this callback again).

The lane adds no table, queue or timer: a connection holds at most one request's cycle before it is answered
(uvicorn's ``cycle``, a ``Held`` one), with at most 64 KiB of its body (beyond, the ASGI way: the endpoint's
``max_body``, 413), for at most the guard's ``body_timeout``.
"""

from __future__ import annotations

import asyncio
import contextvars
import urllib.parse
from typing import TYPE_CHECKING, Any

from ..._runtime import reader_calls
from ...engine import Outgoing
from .streamable import json_head

if TYPE_CHECKING:
    from .app import MCPApp
    from .limits import ConnectionGuard

#: header names of uvicorn's default headers (``server_state.default_headers``) that would change how an answer is
#: framed or whether the connection stays open: with one of them the answers go the ASGI way
_FRAMING = frozenset((b"content-length", b"transfer-encoding", b"connection"))


def lane_protocol(
    base: type[asyncio.Protocol], mcp: MCPApp, guard: ConnectionGuard, keep_alive: float
) -> type[asyncio.Protocol]:
    """A subclass of ``base`` (the httptools protocol that :func:`.limits.guarded_protocol` made, watched by
    ``guard``) that answers in the protocol what ``mcp`` answers at once (see the module docstring), and leaves
    ``guard`` to close connections idle for ``keep_alive`` seconds (uvicorn's ``timeout_keep_alive``). ``base``
    unchanged for any other protocol (h11 keeps the ASGI way and uvicorn's timer), or when ``mcp`` has no
    Streamable HTTP route."""
    try:
        from uvicorn.protocols.http.httptools_impl import (
            HEADER_RE,
            HEADER_VALUE_RE,
            STATUS_LINE,
            HttpToolsProtocol,
            RequestResponseCycle,
        )
        from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string
    except ImportError:  # (no httptools)
        return base
    ep = mcp.streamable
    paths = [path for path, route in mcp.routes.items() if route is ep]
    if ep is None or not paths or not issubclass(base, HttpToolsProtocol):
        return base
    path = paths[0].encode("ascii")
    # the scope's path of a request to exactly ``path``, as uvicorn's on_headers_complete makes it (no root_path)
    path_text = urllib.parse.unquote(paths[0]) if "%" in paths[0] else paths[0]
    send_answer = ep.send_answer
    # uvicorn's default headers as ``send`` writes them (they change once a second, ``date``): (list, its lines)
    defaults: list[Any] = [None, b""]

    def default_lines(given: list[tuple[bytes, bytes]]) -> bytes | None:
        """The lines of uvicorn's default headers; None when one would change the framing, or ``send`` would
        refuse it (then the answer goes the ASGI way, and ``send`` decides)."""
        lines = []
        for name, value in given:
            name = name.lower()
            if HEADER_RE.search(name) or HEADER_VALUE_RE.search(value) or name in _FRAMING:
                return None
            lines += [name, b": ", value, b"\r\n"]
        defaults[:] = [given, b"".join(lines)]
        return defaults[1]  # type: ignore[no-any-return]

    class Held(RequestResponseCycle):  # type: ignore[misc]
        """The cycle of a request that may take the lane, from its head until it is answered: what uvicorn's
        callbacks read and set of a cycle meanwhile (the body, ``more_body``, ``keep_alive``, ``disconnected``,
        ``response_complete``; its event, which nobody waits on yet), and no more. Made whole, as uvicorn makes a
        cycle at the head (``RequestResponseCycle.__init__``), when the request goes the ASGI way (:meth:`whole`)."""

        disconnected = False
        more_body = True
        response_started = False
        response_complete = False
        message_event: Any = _UNWATCHED

        def __init__(self, scope: Any, default_headers: list[tuple[bytes, bytes]]) -> None:
            self.scope = scope
            self.default_headers = default_headers
            self.body = bytearray()
            self.keep_alive = True  # (HTTP/1.1 without Connection: close, or no lane)

        def whole(self, proto: Lane, taken: bool) -> None:
            """Become the cycle uvicorn would have made at the head, with what came since (the body, unless the app
            has ``taken`` it as its first ``receive()`` would have; its end; a shutdown's ``keep_alive``; a lost
            connection)."""
            body, more_body, keep_alive, disconnected = self.body, self.more_body, self.keep_alive, self.disconnected
            RequestResponseCycle.__init__(
                self,
                scope=self.scope,
                transport=proto.transport,
                flow=proto.flow,
                logger=proto.logger,
                access_logger=proto.access_logger,
                access_log=proto.access_log,
                default_headers=self.default_headers,
                message_event=asyncio.Event(),
                expect_100_continue=False,
                keep_alive=keep_alive,
                on_response=proto.on_response_complete,
            )
            self.more_body, self.disconnected = more_body, disconnected
            if taken:
                proto.flow.resume_reading()
            else:
                self.body = body
            if disconnected or (not taken and (body or not more_body)):
                self.message_event.set()  # (what connection_lost, on_body and on_message_complete did)

    class Lane(base):  # type: ignore[valid-type,misc]
        # what uvicorn's httptools protocol sets, beyond the asyncio.Protocol
        transport: asyncio.Transport
        loop: asyncio.AbstractEventLoop
        parser: Any
        url: bytes
        scope: Any
        cycle: Any
        app: Any
        flow: Any
        config: Any
        server_state: Any
        connections: set[Any]
        tasks: set[asyncio.Task[None]]
        pipeline: Any  # (a deque of (cycle, app))
        limit_concurrency: int | None
        logger: Any
        access_log: bool
        access_logger: Any
        expect_100_continue: bool
        _lane = False  # this connection's requests may take the lane (the app unwrapped, no TLS, no root_path)
        _held: Any = None  # the Held cycle of the request that may take the lane, until its body is whole
        _fresh = False  # uvicorn's reset_contextvars: each request in a fresh context (else a copy)

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._fresh = bool(vars(self.config).get("reset_contextvars"))  # (uvicorn 0.54 on; False before)
            self._lane = (
                self.app is mcp  # (uvicorn's app unwrapped: no proxy-headers middleware rewrites the scope)
                and self.scheme == "http"  # (TLS: the reader is the socket's, under the TLS protocol: see above)
                and not self.root_path
            )

        def on_headers_complete(self) -> None:
            parser = self.parser
            limit = self.limit_concurrency
            cycle = self.cycle
            if (
                self.url != path
                or not self._lane
                or self.expect_100_continue
                or parser.get_method() != b"POST"
                or parser.get_http_version() != "1.1"
                or not parser.should_keep_alive()
                or parser.should_upgrade()
                or (cycle is not None and not cycle.response_complete)  # (pipelined behind one being served)
                or (limit is not None and (len(self.connections) >= limit or len(self.tasks) >= limit))  # (its 503)
            ):
                super().on_headers_complete()
                return
            # uvicorn's on_headers_complete for a POST to exactly ``path`` (no query), but no cycle yet
            scope = self.scope
            scope["method"] = "POST"
            scope["path"] = path_text
            scope["raw_path"] = path
            scope["query_string"] = b""
            self.cycle = self._held = Held(scope, self.server_state.default_headers)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)  # (the parser; the guard's bookkeeping sees the held request as served)
            cycle = self._held
            if cycle is None:
                return
            if not cycle.more_body:
                self._held = None
                self._answer(cycle)
            elif self.flow.read_paused:  # (uvicorn's flow control: a body past its high-water mark, 64 KiB)
                self._held = None
                self._asgi(cycle, self.app)  # the app reads the rest (or refuses it: 413)

        def connection_lost(self, exc: Exception | None) -> None:
            self._held = None  # (a body that never came whole)
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            """uvicorn's, without its keep-alive timer: the guard times the idle connection (``guard.keep_alive``),
            as the guarded protocol tells it after every response."""
            self.server_state.total_requests += 1
            if self.transport.is_closing():
                return
            self.flow.resume_reading()
            if self.pipeline:  # (uvicorn's: the request pipelined behind this one starts)
                cycle, app = self.pipeline.pop()
                self._start_asgi_task(cycle, app)
            elif self.cycle is None or self.cycle.response_complete:  # (as the guarded protocol tells it)
                guard.responded(self)

        def _answer(self, cycle: Held) -> None:
            """Ask the app; write its answer when it was made at once, else run the rest the ASGI way."""
            transport = self.transport
            if transport.is_closing():
                self._asgi(cycle, self.app)
                return
            context = contextvars.Context() if self._fresh else contextvars.copy_context()
            body = bytes(cycle.body)
            try:
                answer = reader_calls(transport, context.run, mcp.at_once, cycle.scope, body, cycle.receive, cycle.send)
            except Exception as exc:
                self._rest(cycle, _raising(exc), context, False)
                return
            if answer is None:
                self._asgi(cycle, self.app)  # (nothing done: the app from the start)
                return
            head = None
            if type(answer) is Outgoing and not self.flow.write_paused and not cycle.disconnected:
                given = cycle.default_headers
                head = defaults[1] if given is defaults[0] else default_lines(given)
            if head is None:
                self._rest(cycle, _sending(send_answer, answer), context, True)  # (the body is the app's now)
                return
            # send()'s two messages, in one write
            status, headers = json_head(answer)
            lines = [STATUS_LINE[status], head]
            for name, value in headers:
                lines += [name, b": ", value, b"\r\n"]
            if not cycle.keep_alive:  # (the server began to shut down meanwhile)
                lines.append(b"connection: close\r\n")
            lines += [b"\r\n", answer.data]
            cycle.response_started = True
            cycle.body = bytearray()  # (what the app's receive() would have done)
            if self.access_log:  # (send's line)
                self.access_logger.info(
                    '%s - "%s %s HTTP/%s" %d',
                    get_client_addr(cycle.scope),
                    "POST",
                    get_path_with_query_string(cycle.scope),
                    "1.1",
                    status,
                )
            transport.write(b"".join(lines))
            cycle.response_complete = True
            if not cycle.keep_alive:
                transport.close()
            self.on_response_complete()

        def _asgi(self, cycle: Held, app: Any) -> None:
            """The held request the ASGI way from the start, as uvicorn starts it (the app reads its body)."""
            cycle.whole(self, False)
            super()._start_asgi_task(cycle, app)

        def _rest(self, cycle: Held, asgi: Any, context: contextvars.Context, taken: bool) -> None:
            """Run ``asgi`` on ``cycle`` made whole (``taken``: the app has its body) in a task, as uvicorn runs the
            app, in the request's ``context``."""
            cycle.whole(self, taken)
            task = self.loop.create_task(cycle.run_asgi(asgi), context=context)
            task.add_done_callback(self.tasks.discard)
            self.tasks.add(task)

    Lane.__name__ = Lane.__qualname__ = f"Lane{base.__name__}"
    guard.keep_alive = keep_alive
    return Lane


class _Unwatched:
    """The event of a held cycle: uvicorn's callbacks set it as the body comes (and when the connection is lost);
    nothing waits on it until the cycle is made whole, with an event of its own."""

    __slots__ = ()

    def set(self) -> None:
        pass


_UNWATCHED = _Unwatched()


def _sending(send_answer: Any, answer: Any) -> Any:
    """An ASGI app that sends ``answer`` (made at once, or an awaitable of it) as the endpoint sends it."""

    async def rest(scope: Any, receive: Any, send: Any) -> None:
        await send_answer(answer, send)

    return rest


def _raising(exc: Exception) -> Any:
    """An ASGI app that raises ``exc`` (the app raised it in the lane: uvicorn logs and answers it)."""

    async def failed(scope: Any, receive: Any, send: Any) -> None:
        raise exc

    return failed


__all__ = ["lane_protocol"]
