"""Contender: mcpkit's high-level app, written against its planned public API:

    app = MCPKit("bench"); @app.tool ...; app.run()  /  app.run(transport="http", host=..., port=...)

Until that API exists this script fails at import and the run reports mcpkit as n/a with the error.
For HTTP it prefers an ASGI app (served by the shared uvicorn configuration, like every other contender)
and falls back to `app.run(transport="http", ...)`."""

from __future__ import annotations

from typing import Any

from _serve import main

from mcpkit import MCPKit

app = MCPKit("bench")


@app.tool
def echo(text: str) -> str:
    return text


@app.tool
def add(a: int, b: int) -> int:
    return a + b


def make_asgi(stateless: bool) -> Any | None:
    # TODO(bench): settle on one name once mcpkit's HTTP app accessor lands; these are the usual ones.
    for name in ("http_app", "asgi_app", "streamable_http_app", "asgi"):
        factory = getattr(app, name, None)
        if not callable(factory):
            continue
        if not stateless:
            return factory()
        for kwargs in ({"stateless": True}, {"stateless_http": True}):
            try:
                return factory(**kwargs)
            except TypeError:
                continue
    return None


def run_http(port: int, stateless: bool) -> None:
    kwargs: dict[str, Any] = {"transport": "http", "host": "127.0.0.1", "port": port}
    if stateless:
        kwargs["stateless"] = True
    app.run(**kwargs)


if __name__ == "__main__":
    main(app.run, make_asgi, run_http)
