"""``ctx.headers``: the headers of the HTTP request that carried the request being served (read-only,
case-insensitive), on every HTTP transport and in both eras; ``None`` over stdio and in process. Real uvicorn and a
real stdio subprocess."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from mcpkit import Client, Context, MCPKit

pytest.importorskip("uvicorn")

from mcpkit.transports.http import create_app
from support.asgi import serve_asgi

SERVER = textwrap.dedent(
    """
    import json
    from mcpkit import Context, MCPKit

    app = MCPKit("headers")

    @app.tool
    def seen(ctx: Context) -> str:
        '''What the tool sees of the HTTP request.'''
        headers = ctx.headers
        if headers is None:
            return json.dumps(None)
        return json.dumps(
            {
                "tenant": headers.get("X-Tenant"),
                "same": headers.get("x-tenant") == headers["X-TENANT"],
                "has": "x-tenant" in headers,
                "host": "host" in headers,
                "all": headers.get_all("x-tenant"),
            }
        )

    @app.tool
    def change(ctx: Context) -> str:
        '''Headers are read-only.'''
        headers = ctx.headers
        try:
            headers["x-tenant"] = "other"  # type: ignore[index]
        except TypeError:
            return "read-only"
        return "changed"

    if __name__ == "__main__":
        app.run()
    """
)


def _app(tmp_path: Path) -> MCPKit:
    path = tmp_path / "headers_server.py"
    path.write_text(SERVER)
    namespace: dict[str, object] = {"__name__": "headers_server"}
    exec(compile(SERVER, str(path), "exec"), namespace)
    app = namespace["app"]
    assert isinstance(app, MCPKit)
    return app


@pytest.mark.parametrize(
    ("path", "transport", "mode"),
    [
        ("/mcp", None, "modern"),
        ("/mcp", None, "handshake"),
        ("/sse", "sse", "handshake"),
        ("/ws", "ws", "handshake"),
        ("/ws", "ws", "modern"),
    ],
)
async def test_a_tool_reads_the_http_request_headers(
    tmp_path: Path, path: str, transport: str | None, mode: str
) -> None:
    app = _app(tmp_path)
    async with serve_asgi(create_app(app)) as port:
        scheme = "ws" if transport == "ws" else "http"
        url = f"{scheme}://127.0.0.1:{port}{path}"
        async with Client(url, transport=transport, mode=mode, headers={"X-Tenant": "acme"}) as client:  # type: ignore[arg-type]
            seen = json.loads((await client.call_tool("seen")).text)
            assert (await client.call_tool("change")).text == "read-only"
    assert seen == {"tenant": "acme", "same": True, "has": True, "host": True, "all": ["acme"]}


async def test_no_headers_over_stdio_or_in_process(tmp_path: Path) -> None:
    async with Client(_app(tmp_path)) as client:
        assert json.loads((await client.call_tool("seen")).text) is None
    script = tmp_path / "headers_server.py"
    script.write_text(SERVER)
    async with Client([sys.executable, str(script)]) as client:
        assert json.loads((await client.call_tool("seen")).text) is None


async def test_headers_of_one_request_are_not_seen_by_another(tmp_path: Path) -> None:
    app = _app(tmp_path)
    async with serve_asgi(create_app(app)) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with (
            Client(url, headers={"X-Tenant": "one"}) as first,
            Client(url, headers={"X-Tenant": "two"}) as second,
        ):
            for _ in range(3):
                assert json.loads((await first.call_tool("seen")).text)["tenant"] == "one"
                assert json.loads((await second.call_tool("seen")).text)["tenant"] == "two"


def test_context_is_a_documented_read_only_mapping() -> None:
    from mcpkit.hosting import RequestHeaders

    headers = RequestHeaders([(b"x-a", b"1"), (b"x-a", b"2"), (b"content-type", b"application/json")])
    assert headers["X-A"] == "1, 2" and headers.get_all("x-a") == ["1", "2"] and len(headers) == 2
    assert dict(headers) == {"x-a": "1, 2", "content-type": "application/json"}
    assert Context.headers.__doc__ and "None over stdio" in Context.headers.__doc__
    assert isinstance(MCPKit, type)
