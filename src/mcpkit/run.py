"""Running a server on a transport: the one place that chooses a transport by name.

``Server.run()`` and ``MCPKit.run()`` delegate here. This module and the transports hold a server only through the
protocols of :mod:`mcpkit.hosting`, so the arrows run server -> run -> transports -> hosting -> engine -> protocol
and none comes back up: no import circle.

    from mcpkit.run import run
    run(server)                       # stdio
    run(server, "http", port=8000)    # Streamable HTTP (needs mcpkit[http]); also "sse", "ws"
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .hosting import HostedServer

__all__ = ["run", "run_stdio_async"]


async def run_stdio_async(server: HostedServer, **transport_options: Any) -> None:
    """Serve ``server`` on stdin/stdout until the input ends, then shut it down (``close_listeners``: the tasks
    still running get their drain time); ``transport_options`` go to
    :class:`~mcpkit.transports.stdio.StdioServerTransport`."""
    from .transports.stdio import StdioServerTransport

    transport = StdioServerTransport(**transport_options)
    await transport.start()
    try:
        await server.serve(transport)
    finally:
        await server.close_listeners()


def run(server: HostedServer, transport: str = "stdio", **options: Any) -> None:
    """Run ``server`` (blocking). ``transport``: "stdio" (default), or "http", "sse", "ws" (needs mcpkit[http];
    without it the program exits with one line naming ``pip install 'mcpkit[http]'``); ``options`` go to the
    transport (``host``, ``port``, ...)."""
    if transport == "stdio":
        asyncio.run(run_stdio_async(server, **options))
        return
    from ._extras import MissingExtra, require

    try:
        require("uvicorn", f"serving over {transport!r}")
        from .transports.http import serve  # type: ignore[attr-defined,import-not-found,unused-ignore]

        serve(server, transport, **options)
    except MissingExtra as exc:
        raise SystemExit(f"mcpkit: {exc}") from None
