"""The one uvicorn configuration every HTTP contender (and the ASGI floor) is served with, and the
command line every server script shares:

    python <server>.py                      stdio
    python <server>.py http PORT            Streamable HTTP at http://127.0.0.1:PORT/mcp (stateful)
    python <server>.py http PORT stateless  the same, stateless mode
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from importlib.util import find_spec
from typing import Any


def http_parser() -> str:
    """The HTTP parser every Python contender (and the ASGI floor) is served with: what users of mcpkit's ``http``
    extra get, uvicorn's choice when ``httptools`` is installed (the extra installs it), else h11.
    ``BENCH_HTTP_PARSER=h11`` (``bench/run.py --http-parser h11``) pins the pure-Python parser for all."""
    return os.environ.get("BENCH_HTTP_PARSER") or ("httptools" if find_spec("httptools") else "h11")


UVICORN_CONFIG: dict[str, Any] = {
    "host": "127.0.0.1",
    "log_level": "warning",
    "access_log": False,
    # the event loop of the ``http`` extra (it brings no uvloop, so uvicorn's "auto" is asyncio's)
    "loop": "asyncio",
    "http": http_parser(),
    "ws": "none",
    # as mcpkit serves (it trusts no X-Forwarded-* header unless forwarded_allow_ips is given): uvicorn's default
    # runs its proxy-headers middleware on every request from 127.0.0.1, ~9k instructions per call (4.6% of the
    # ASGI floor's, bench/uvicorn_inproc.py --instructions) that the floor would pay and mcpkit's serving not
    "proxy_headers": False,
    "lifespan": "on",
    "timeout_keep_alive": 120,
    "timeout_graceful_shutdown": 1,
}


def config(app: Any, port: int, protocol: type[Any] | None = None) -> Any:
    """The ``uvicorn.Config`` of the ASGI ``app`` on stock uvicorn with the shared configuration (``protocol``:
    uvicorn's HTTP protocol class to use instead of the one the shared ``http`` setting names)."""
    import uvicorn

    settings = dict(UVICORN_CONFIG)
    if protocol is not None:
        settings["http"] = protocol
    return uvicorn.Config(app, port=port, **settings)


def serve(app: Any, port: int, protocol: type[Any] | None = None) -> None:
    """Serve :func:`config`."""
    import uvicorn

    uvicorn.Server(config(app, port, protocol)).run()


#: the shared settings mcpkit's own serving takes (uvicorn's ``ws`` and ``lifespan`` are build_server's to set)
MCPKIT_SHARED = ("log_level", "access_log", "loop", "http", "timeout_keep_alive", "timeout_graceful_shutdown")


def serve_mcpkit(server: Any, port: int, stateless: bool) -> None:
    """Serve an mcpkit server as its users do (``Server.run(transport="http")``: ``mcpkit.transports.http.serve``,
    through ``build_server``: the connection guard and the protocol lane), with ``json_response=True`` and the
    shared settings (loop, parser, keep-alive, access log, log level, graceful timeout)."""
    from mcpkit.transports.http import serve as serve_http

    settings = {key: UVICORN_CONFIG[key] for key in MCPKIT_SHARED}
    serve_http(server, "http", "127.0.0.1", port, announce=False, stateless=stateless, json_response=True, **settings)


def mcpkit_config(server: Any, stateless: bool) -> Any:
    """The ``uvicorn.Config`` :func:`serve_mcpkit` serves with (``build_server``'s), for the in-process tools
    (``bench/uvicorn_inproc.py``)."""
    from mcpkit.transports.http import build_server

    settings = {key: UVICORN_CONFIG[key] for key in MCPKIT_SHARED}
    return build_server(server, "http", "127.0.0.1", 0, stateless=stateless, json_response=True, **settings).config


class MCPKitEntries:
    """The HTTP entry points of a contender script serving the mcpkit ``app`` (module attributes of the script:
    ``make_asgi = entries.make_asgi``, ...): its ASGI app (``create_app``, ``json_response=True``), served as
    ``app.run(transport="http")`` serves it (:func:`serve_mcpkit`), and that server's ``uvicorn.Config``
    (:func:`mcpkit_config`, for ``bench/uvicorn_inproc.py``)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def make_asgi(self, stateless: bool) -> Any | None:
        from mcpkit.transports.http import create_app

        return create_app(self.app, stateless=stateless, json_response=True)

    def serve_http(self, port: int, stateless: bool) -> None:
        serve_mcpkit(self.app, port, stateless)

    def served_config(self, stateless: bool) -> Any:
        return mcpkit_config(self.app, stateless)


def main(
    run_stdio: Callable[[], None],
    make_asgi: Callable[[bool], Any | None] | None = None,
    run_http: Callable[[int, bool], None] | None = None,
    *,
    serve_http: Callable[[int, bool], None] | None = None,
) -> None:
    """make_asgi(stateless) -> ASGI app served by serve(); when it is missing or returns None,
    run_http(port, stateless) is the fallback for a framework that can only serve itself. ``serve_http(port,
    stateless)``, when given, serves instead, with the shared settings (``serve_mcpkit``: what mcpkit's users get;
    floor_lane.py)."""
    args = sys.argv[1:]
    mode = args[0] if args else "stdio"
    if mode == "stdio":
        run_stdio()
        return
    if mode != "http" or len(args) < 2:
        raise SystemExit(f"usage: {sys.argv[0]} [stdio | http PORT [stateless]]")
    port = int(args[1])
    stateless = "stateless" in args[2:]
    if serve_http is not None:
        serve_http(port, stateless)
        return
    app = make_asgi(stateless) if make_asgi is not None else None
    if app is not None:
        serve(app, port)
    elif run_http is not None:
        print("bench: serving with the framework's own HTTP runner, not the shared uvicorn config", file=sys.stderr)
        run_http(port, stateless)
    else:
        raise SystemExit("this contender has no HTTP transport")
