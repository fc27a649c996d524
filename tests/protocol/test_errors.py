"""Errors a peer sends: the exception a caller sees says what the peer said, in bounded words."""

from __future__ import annotations

import pytest

import mcpkit
from mcpkit import Client, MCPKit
from mcpkit.protocol.errors import MCPError

pytestmark = pytest.mark.timeout(60)

LONG = "the upstream failed: " + "x" * 200_000


def _failing_server() -> MCPKit:
    server = MCPKit("failing")

    @server.resource("mem://fail")
    def fail() -> str:
        raise MCPError(LONG, {"why": "long"}, code=-32000)

    return server


async def test_a_long_error_message_from_the_server_is_bounded_in_the_exception_text_and_kept_whole_on_it() -> None:
    """A server answered -32000 with a 200 KB message: it became a 200 KB exception text (in every traceback and
    log line that shows it). The text now stops after 1,000 characters and says how many more there were; the
    message, code and data stay whole on the exception (``message``, ``to_error()``)."""
    async with Client(_failing_server(), mode="handshake") as client:
        with pytest.raises(MCPError) as caught:
            await client.read_resource("mem://fail")
    exc = caught.value
    text = str(exc)
    assert len(text) < 1100 and text.startswith("the upstream failed: xxx")
    assert text.endswith(f"... ({len(LONG) - 1000:,} more characters)")
    assert exc.message == LONG and exc.code == -32000
    assert exc.to_error() == {"code": -32000, "message": LONG, "data": {"why": "long"}}


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_a_proxy_relays_a_long_error_message_of_its_upstream_whole(mode: str) -> None:
    """The bound is on the exception's text only: a proxy relays its upstream's error object verbatim."""
    async with Client(mcpkit.proxy(_failing_server()), mode=mode) as client:
        with pytest.raises(MCPError) as caught:
            await client.read_resource("mem://fail")
    assert caught.value.to_error() == {"code": -32000, "message": LONG, "data": {"why": "long"}}
