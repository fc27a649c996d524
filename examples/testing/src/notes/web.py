"""The notes server inside a web app (Starlette): the MCP endpoint at /api/mcp next to the app's own routes."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from mcpkit.transports.http import create_app

from .server import create_app as create_notes


def create_web_app() -> Starlette:
    """The web app: ``/health`` and the MCP endpoint mounted under ``/api``."""
    mcp_app = create_app(create_notes())

    async def health(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await mcp_app.aclose()  # Starlette does not run a mounted app's lifespan: end MCP sessions here

    return Starlette(routes=[Route("/health", health), Mount("/api", app=mcp_app)], lifespan=lifespan)
