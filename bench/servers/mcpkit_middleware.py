"""Contender: ``mcpkit_server.py``'s app with the request logging and timing middleware installed, its records
formatted and written (to /dev/null: what a production log handler costs, without the disk):

    app.add_middleware(RequestLogging(), Timing())

``BENCH_MIDDLEWARE`` picks what is installed: ``logging,timing`` (default), ``logging``, ``timing``, ``noop`` (a
middleware that passes every call on), ``quiet`` (logging installed but its logger disabled, plus timing),
``telemetry`` (OpenTelemetry spans recorded by the SDK, exported nowhere). For ``bench/ab.py`` against
``mcpkit_server.py``: the cost of the middleware per call."""

from __future__ import annotations

import logging
import os

from _serve import main
from mcpkit_server import app, make_asgi, run_http, serve_http

from mcpkit.server.middleware import RequestLogging, Timing

chosen = set(os.environ.get("BENCH_MIDDLEWARE", "logging,timing").split(","))
middleware: list[object] = []
if "logging" in chosen or "quiet" in chosen:
    handler = logging.StreamHandler(open(os.devnull, "w"))  # noqa: SIM115  (for the life of the process)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    requests = logging.getLogger("mcpkit.requests")
    requests.addHandler(handler)
    requests.propagate = False
    requests.setLevel(logging.WARNING if "quiet" in chosen else logging.INFO)
    middleware.append(RequestLogging())
if "timing" in chosen or "quiet" in chosen:
    middleware.append(Timing())
if "noop" in chosen:
    from mcpkit.server.middleware import Middleware

    class _Noop(Middleware):
        async def on_request(self, call: object, call_next: object) -> object:
            return await call_next(call)  # type: ignore[operator]

    middleware.append(_Noop())
if "telemetry" in chosen:
    from opentelemetry.sdk.trace import TracerProvider

    from mcpkit.telemetry import Telemetry

    middleware.append(Telemetry(tracer_provider=TracerProvider()))  # (recorded spans, no exporter)
app.add_middleware(*middleware)

if __name__ == "__main__":
    main(app.run, make_asgi, run_http, serve_http=serve_http)
