"""The options of a client connection (``mcpkit.client.connection``) as they combine: a message tap together with
telemetry (whose own tap shares the connection's)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from mcpkit import Client, MCPKit
from mcpkit.engine.tap import QueuedTap, TapEvent
from mcpkit.telemetry import Telemetry


async def observe(event: TapEvent) -> None:
    pass


class Observer:
    async def __call__(self, event: TapEvent) -> None:
        pass


def app() -> MCPKit:
    server = MCPKit("t")
    server.tool(lambda text: text, name="echo")
    return server


@pytest.mark.parametrize("tap", [observe, Observer()], ids=["async def", "async __call__"])
@pytest.mark.parametrize("traced", [False, True], ids=["alone", "with telemetry"])
async def test_an_async_tap_is_refused_with_or_without_telemetry(tap: Any, traced: bool) -> None:
    # (with telemetry, the client joined the two taps in a plain function before any check saw the user's: an async
    # tap was called without anyone awaiting it, silently never run)
    telemetry = Telemetry(tracer_provider=TracerProvider()) if traced else None
    with pytest.raises(TypeError, match="QueuedTap"):
        Client(app(), tap=tap, telemetry=telemetry)


async def test_a_queued_tap_and_telemetry_both_see_the_connection() -> None:
    seen: list[TapEvent] = []

    async def keep(event: TapEvent) -> None:
        seen.append(event)

    queued = QueuedTap(keep)
    async with Client(app(), tap=queued, telemetry=Telemetry(tracer_provider=TracerProvider())) as client:
        await client.call_tool("echo", {"text": "x"})
        await queued.drain()
    assert any(e.method == "tools/call" and e.direction == "out" for e in seen)
    queued.close()
