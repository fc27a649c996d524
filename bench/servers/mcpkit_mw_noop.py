"""Contender: ``mcpkit_middleware.py`` with ``BENCH_MIDDLEWARE=noop`` (see there)."""

import os

os.environ["BENCH_MIDDLEWARE"] = "noop"

from _serve import main
from mcpkit_middleware import app, make_asgi, run_http, serve_http

if __name__ == "__main__":
    main(app.run, make_asgi, run_http, serve_http=serve_http)
