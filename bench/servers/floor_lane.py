"""Floor for Streamable HTTP answered in the protocol: the raw floor of mcpkit's lane.

mcpkit's own serving (``mcpkit.transports.http.lane``, the ``mcpkit-*`` HTTP contenders) answers a POST whose
answer is made at once inside a subclass of uvicorn's httptools protocol. This script does the same protocol work
around floor_asgi.py's logic (its ``post``: parse the body with orjson, pick the canned answer of ``_floor_core``,
serialise it; the same JSON-RPC bodies and headers as the other floors) and nothing more, so that mcpkit's lane
can be read against the least a lane can do. Its own code: it imports nothing of mcpkit.

Per request, against stock uvicorn serving floor_asgi.py (``floor``), it skips what mcpkit's lane skips:

* uvicorn's ``RequestResponseCycle`` (eleven arguments and an ``asyncio.Event``): a head that may be answered here
  gets a :class:`Pending`, which holds what uvicorn's parser callbacks read and set until the body is whole (the
  body, its end, ``keep_alive``, ``disconnected``, ``response_complete``) and has an event nobody waits on;
* ``httptools.parse_url``: such a URL is exactly ``/mcp``, so the scope's path is set, not parsed;
* the ASGI task, ``receive()`` and the two ``send()`` calls with their header checks: one ``transport.write`` of
  the status line, uvicorn's default headers (their lines made once per list: uvicorn makes a new list once a
  second, for ``date``), the answer's own headers and its body;
* uvicorn's keep-alive timer per response (a ``TimerHandle`` made with ``call_later`` after each response, pushed
  on the loop's heap, cancelled by the next request's bytes): a connection that goes idle is noted in one dict
  per server, in the order connections went idle, and one timer per server closes those idle for
  ``timeout_keep_alive`` seconds (mcpkit's connection guard does the same with its ``idle`` table).

It keeps what mcpkit's lane keeps: uvicorn's parser and its callbacks, the scope dict (mcpkit hands it to tools),
flow control, ``total_requests``, the pipeline, a shutdown's ``connection: close``, the access log's line when
uvicorn's access log is on. Everything else goes floor_asgi's ASGI way, as on mcpkit's lane: TLS or a
``root_path`` (decided per connection), another method or path (or any query), HTTP/1.0 or ``Connection: close``,
``Expect``, an upgrade, a request pipelined behind one still being served, ``limit_concurrency`` reached, a body
past uvicorn's flow-control mark (64 KiB) before it is whole, and the in-flight cases' slow tool (an answer not
made at once). uvicorn's proxy-headers middleware is off in the shared configuration, as mcpkit turns it off unless
``forwarded_allow_ips`` is given (all it would rewrite is the client's address and scheme, which no floor's answer
reads).

What it does not do that mcpkit's serving does: MCP itself (validation, dispatch, the session store, tools), the
context of its own each request runs in (the floor runs no user code), and the connection guard's head, body and
send timeouts and its connection limit (a few dict operations per request). The difference between an ``mcpkit-*``
HTTP contender and ``floor-lane`` is that work; the difference between ``floor-lane`` and ``floor`` is what uvicorn's
ASGI serving costs.

Served with the shared uvicorn configuration (``_serve.UVICORN_CONFIG``), its protocol class replaced by this one.
Usage: python floor_lane.py http PORT [stateless]   (plain ``python floor_lane.py`` runs the stdio floor)"""

from __future__ import annotations

import asyncio
from typing import Any

from _serve import UVICORN_CONFIG, config, main
from floor_asgi import _run_stdio, make_app

PATH = b"/mcp"
JSON_LINE = b"content-type: application/json\r\n"


class _NoOneWaits:
    """The event of a :class:`Pending`: uvicorn's callbacks set it; nobody waits on it."""

    __slots__ = ()

    def set(self) -> None:
        pass


NO_ONE_WAITS = _NoOneWaits()


class Pending:
    """A request that may be answered in the protocol, from its head until its answer: what uvicorn's callbacks
    (``on_body``, ``on_message_complete``, ``connection_lost``, ``shutdown``, the next head) use of a cycle."""

    __slots__ = ("body", "disconnected", "keep_alive", "more_body", "response_complete", "scope")
    message_event = NO_ONE_WAITS

    def __init__(self, scope: Any) -> None:
        self.scope = scope
        self.body = b""
        self.more_body = True
        self.keep_alive = True
        self.disconnected = False
        self.response_complete = False


def lane_protocol(post: Any, keep_alive: float) -> type[Any]:
    """uvicorn's httptools protocol answering with ``post(body, session id)`` in the protocol (see the module
    docstring); connections idle ``keep_alive`` seconds are closed by one timer per server."""
    from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol, RequestResponseCycle

    idle: dict[Any, float] = {}  # connection -> loop time it went idle; oldest first
    timer: list[asyncio.TimerHandle | None] = [None]
    defaults: list[Any] = [None, b""]  # uvicorn's default headers: the list, its lines

    def sweep() -> None:
        timer[0] = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() - keep_alive
        while idle:
            proto, since = next(iter(idle.items()))
            if since > deadline:
                timer[0] = loop.call_at(since + keep_alive, sweep)
                return
            del idle[proto]
            if not proto.transport.is_closing():
                proto.transport.close()

    class FloorLane(HttpToolsProtocol):
        _pending: Pending | None = None  # the request to answer here once its body is whole
        _lane = False  # this connection's requests may be answered here (no TLS, no root_path)

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._lane = self.scheme == "http" and not self.root_path

        def on_headers_complete(self) -> None:
            parser = self.parser
            cycle = self.cycle
            limit = self.limit_concurrency
            if (
                self.url != PATH
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
            scope = self.scope
            scope["method"] = "POST"
            scope["path"] = "/mcp"
            scope["raw_path"] = PATH
            scope["query_string"] = b""
            self.cycle = self._pending = Pending(scope)

        def data_received(self, data: bytes) -> None:
            if idle:
                idle.pop(self, None)
            super().data_received(data)
            pending = self._pending
            if pending is None:
                return
            if not pending.more_body:
                self._pending = None
                self._answer(pending)
            elif self.flow.read_paused:  # a large body: the app reads the rest
                self._pending = None
                self._asgi(pending)

        def connection_lost(self, exc: Exception | None) -> None:
            self._pending = None
            idle.pop(self, None)
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            """uvicorn's, with the connection noted idle instead of a keep-alive timer of its own."""
            self.server_state.total_requests += 1
            if self.transport.is_closing():
                return
            self.flow.resume_reading()
            if self.pipeline:
                cycle, app = self.pipeline.pop()
                self._start_asgi_task(cycle, app)
                return
            now = idle[self] = self.loop.time()
            if timer[0] is None:
                timer[0] = self.loop.call_at(now + keep_alive, sweep)

        def _answer(self, pending: Pending) -> None:
            transport = self.transport
            if transport.is_closing():
                self._asgi(pending)
                return
            sid = None
            for name, value in pending.scope["headers"]:
                if name == b"mcp-session-id":
                    sid = value.decode("latin-1")
            answered = post(pending.body, sid)
            if answered is None:  # the in-flight cases' slow tool
                self._asgi(pending)
                return
            status, body, extra = answered
            given = self.server_state.default_headers
            if given is not defaults[0]:
                defaults[:] = [given, b"".join(b"%s: %s\r\n" % pair for pair in given)]
            lines = [STATUS_LINE[status], defaults[1]]
            for name, value in extra:
                lines += [name, b": ", value, b"\r\n"]
            if body:
                lines.append(JSON_LINE)
            lines += [b"content-length: ", b"%d" % len(body), b"\r\n"]
            if not pending.keep_alive:  # (the server began to shut down meanwhile)
                lines.append(b"connection: close\r\n")
            lines += [b"\r\n", body]
            if self.access_log:
                self.access_logger.info('%s:%d - "POST /mcp HTTP/1.1" %d', *(self.client or ("-", 0)), status)
            transport.write(b"".join(lines))
            pending.response_complete = True
            if not pending.keep_alive:
                transport.close()
            self.on_response_complete()

        def _asgi(self, pending: Pending) -> None:
            """The request the ASGI way, in the cycle uvicorn would have made at its head (floor_asgi's app)."""
            cycle = self.cycle = RequestResponseCycle(
                scope=pending.scope,
                transport=self.transport,
                flow=self.flow,
                logger=self.logger,
                access_logger=self.access_logger,
                access_log=self.access_log,
                default_headers=self.server_state.default_headers,
                message_event=asyncio.Event(),
                expect_100_continue=False,
                keep_alive=pending.keep_alive,
                on_response=self.on_response_complete,
            )
            cycle.body = bytearray(pending.body)
            cycle.more_body = pending.more_body
            cycle.disconnected = pending.disconnected
            cycle.message_event.set()  # (a body, or its end, is there)
            self._start_asgi_task(cycle, self.app)

    return FloorLane


def served_config(stateless: bool, port: int = 0) -> Any:
    """The shared uvicorn configuration of floor_asgi's app, with this protocol (also bench/uvicorn_inproc.py's)."""
    app = make_app(stateless)
    return config(app, port, lane_protocol(app.post, UVICORN_CONFIG["timeout_keep_alive"]))


def serve_http(port: int, stateless: bool) -> None:
    import uvicorn

    uvicorn.Server(served_config(stateless, port)).run()


if __name__ == "__main__":
    main(_run_stdio, make_app, serve_http=serve_http)
