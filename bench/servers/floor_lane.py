"""Floor for Streamable HTTP, answered in the protocol: floor_asgi.py's app, whose POST /mcp answers (made at once,
by its ``post``) are written from inside uvicorn's httptools protocol: no ASGI cycle task, no ``receive``, no
``send``. It is what mcpkit's served protocol does for an answer made at once (``mcpkit.transports.http.lane``),
around the floor's logic, so that mcpkit can be read against both floors: the raw ASGI app (``floor``) and this one
(``floor-lane``). Everything else (another method or path, HTTP/1.0 or ``Connection: close``, ``Expect``, a request
pipelined behind another, a body past uvicorn's flow-control mark, the in-flight cases' slow tool) goes
floor_asgi's ASGI way. Served with the shared uvicorn configuration, its protocol class replaced by this one.
Usage: python floor_lane.py http PORT [stateless]   (plain ``python floor_lane.py`` runs the stdio floor)"""

from __future__ import annotations

from typing import Any

from _serve import config, main
from floor_asgi import _run_stdio, make_app

JSON_LINE = b"content-type: application/json\r\n"


def lane_protocol(post: Any) -> type[Any]:
    """uvicorn's httptools protocol answering with ``post(body, session id)`` in the protocol."""
    from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

    class FloorLane(HttpToolsProtocol):
        _take = False  # the head just parsed may be answered here
        _held: Any = None  # its cycle, until its body is whole

        def on_headers_complete(self) -> None:
            parser = self.parser
            self._take = (
                self.url == b"/mcp"
                and not self.expect_100_continue
                and parser.get_method() == b"POST"
                and parser.get_http_version() == "1.1"
                and parser.should_keep_alive()
            )
            super().on_headers_complete()
            self._take = False

        def _start_asgi_task(self, cycle: Any, app: Any) -> None:
            if self._take and app is self.app:  # (not a pipelined request, not limit_concurrency's 503)
                self._held = cycle
                return
            super()._start_asgi_task(cycle, app)

        def connection_lost(self, exc: Exception | None) -> None:
            self._held = None
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            cycle = self._held
            if cycle is None:
                return
            if cycle.more_body:
                if self.flow.read_paused:  # a large body: the app reads it
                    self._held = None
                    super()._start_asgi_task(cycle, self.app)
                return
            self._held = None
            sid = None
            for name, value in cycle.scope["headers"]:
                if name == b"mcp-session-id":
                    sid = value.decode("latin-1")
            answered = post(bytes(cycle.body), sid)
            if answered is None or self.transport.is_closing():
                super()._start_asgi_task(cycle, self.app)
                return
            status, body, extra = answered
            lines = [STATUS_LINE[status]]
            for name, value in [*self.server_state.default_headers, *extra]:
                lines += [name, b": ", value, b"\r\n"]
            if body:
                lines.append(JSON_LINE)
            lines += [b"content-length: ", str(len(body)).encode(), b"\r\n\r\n", body]
            self.transport.write(b"".join(lines))
            cycle.response_started = cycle.response_complete = True
            self.on_response_complete()

    return FloorLane


def served_config(stateless: bool, port: int = 0) -> Any:
    """The shared uvicorn configuration of floor_asgi's app, with this protocol (also bench/uvicorn_inproc.py's)."""
    app = make_app(stateless)
    return config(app, port, lane_protocol(app.post))


def serve_http(port: int, stateless: bool) -> None:
    import uvicorn

    uvicorn.Server(served_config(stateless, port)).run()


if __name__ == "__main__":
    main(_run_stdio, make_app, serve_http=serve_http)
