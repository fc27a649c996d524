"""Telemetry on a proxy (``mcpkit.proxy`` with :class:`~mcpkit.telemetry.Telemetry`): its spans are named as a
server's are, names the upstream has nothing for included."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import mcpkit
from mcpkit import Client, MCPKit
from mcpkit.protocol.errors import InvalidParams, MCPError
from mcpkit.telemetry import Telemetry
from support.toolkit import ERAS


def upstream() -> MCPKit:
    app = MCPKit("upstream")
    app.tool(lambda: "x", name="real")
    app.prompt(lambda: "hello", name="greet")
    return app


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("gateway", [False, True], ids=["proxy", "gateway"])
async def test_names_the_upstream_refuses_do_not_become_the_proxys_span_names(mode: str, gateway: bool) -> None:
    # A caller controls the names it sends; a proxy learns whether its upstream has them only from the answer. Each
    # name the upstream refused became a span name of the proxy's, so a caller could make as many as it liked.
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    proxy = mcpkit.proxy({"up": upstream()} if gateway else upstream())
    proxy.add_middleware(Telemetry(tracer_provider=provider))
    head = "up_" if gateway else ""
    async with Client(proxy, mode=mode) as client:
        for i in range(10):
            with pytest.raises(InvalidParams) as refused:
                await client.session.call_tool(f"{head}made-up-{i}", {})
            assert f"made-up-{i}" in refused.value.message  # (the upstream's own error, relayed as it was)
            with pytest.raises(MCPError):
                await client.session.get_prompt(f"{head}made-up-{i}", {})
        assert (await client.session.call_tool(f"{head}real", {})).content
        await client.session.get_prompt(f"{head}greet", {})
    served = [s for s in exporter.get_finished_spans() if s.kind.name == "SERVER"]
    names = {s.name for s in served if s.name.startswith(("tools/", "prompts/"))}
    assert names == {"tools/call", "prompts/get", f"tools/call {head}real", f"prompts/get {head}greet"}
    made_up = [s for s in served if str((s.attributes or {}).get("gen_ai.tool.name", "")).startswith(head + "made")]
    assert len(made_up) == 10 and all(s.attributes and s.attributes["error.type"] == "-32602" for s in made_up)
