"""A client session's keepalive: a ``ping`` every ``interval`` seconds; one left unanswered (or refused) closes the
connection, so the calls that follow fail at once instead of waiting out their timeouts."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from ..engine import Connection, Peer
from ..protocol.errors import ConnectionClosed, MCPError, RequestTimeout

logger: logging.Logger = logging.getLogger("mcpkit.client")


async def keep_alive(
    peer: Peer, conn: Connection, interval: float, timeout: float, failed: Callable[[str], None]
) -> None:
    """Ping ``peer``'s server every ``interval`` seconds until a ping is not answered within ``timeout`` (or is
    refused); then tell ``failed`` why and close the peer and its connection."""
    while True:
        await asyncio.sleep(interval)
        try:
            await peer.request("ping", None, timeout=timeout)
        except (RequestTimeout, ConnectionClosed, MCPError) as exc:
            reason = f"keepalive ping failed: {exc}"
            failed(reason)
            logger.warning("closing the connection: %s", reason)
            await peer.close(reason)
            with contextlib.suppress(Exception):
                await conn.close()
            return
