"""The MCP endpoint mounted in the Starlette app (src/notes/web.py), served on 127.0.0.1 by the mcp_asgi fixture;
mcp_asgi_client connects to /api/mcp in each era."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from notes.web import create_web_app


@pytest.fixture
def mcp_asgi_app() -> Any:
    return create_web_app()


@pytest.mark.mcp(path="/api/mcp")
async def test_the_mounted_endpoint_serves_the_tools(mcp_asgi_client: Any) -> None:
    assert (await mcp_asgi_client.call_tool("search", {"query": "welcome"})).data == ["welcome"]


async def test_the_web_app_keeps_its_own_routes(mcp_asgi: Any) -> None:
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"{mcp_asgi.url}/health")).text == "ok"
