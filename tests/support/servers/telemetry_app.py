"""An app instrumented with ``mcpkit.telemetry``, its spans kept in memory and read through the ``spans`` tool, so
a test sees the server's spans over stdio (a subprocess) as over HTTP (in-process: ``build()``).

    python telemetry_app.py [parent|link|ignore]
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcpkit import Context, MCPKit
from mcpkit.protocol.errors import InvalidParams, RequestTimeout
from mcpkit.telemetry import Telemetry


def describe(span: Any) -> dict[str, Any]:
    """A finished span as plain data."""
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace": format(span.context.trace_id, "032x"),
        "span": format(span.context.span_id, "016x"),
        "parent": format(span.parent.span_id, "016x") if span.parent is not None else None,
        "remote_parent": bool(span.parent is not None and span.parent.is_remote),
        "links": [format(link.context.trace_id, "032x") for link in span.links],
        "state": span.parent.trace_state.to_header() if span.parent is not None and span.parent.trace_state else "",
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
    }


def build(incoming: str = "parent") -> MCPKit:
    """The app, its spans recorded in memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = MCPKit("traced")
    app.add_middleware(Telemetry(tracer_provider=provider, incoming=incoming))
    tracer = provider.get_tracer("tools")

    @app.tool
    def add(a: int, b: int) -> int:
        with tracer.start_as_current_span("inside add"):  # (a span of the tool itself: a child of the request's)
            return a + b

    @app.tool
    async def ask(ctx: Context) -> str:
        reply = await ctx.sample("say hi")
        return f"model: {reply.content.text}"  # type: ignore[union-attr]

    @app.tool
    async def ask_briefly(ctx: Context) -> str:
        try:
            await ctx.sample("say hi", timeout=0.2)  # (the server gives up: notifications/cancelled to the client)
        except RequestTimeout:
            return "gave up"
        return "answered"

    @app.tool(task=True)
    async def ask_later(ctx: Context) -> str:
        await asyncio.sleep(0.05)  # (its first wait: a task from here on, its question the task's)
        reply = await ctx.sample("say hi")
        return f"later: {reply.content.text}"  # type: ignore[union-attr]

    @app.tool
    def refuse() -> str:
        raise InvalidParams("no")

    @app.tool
    def fail() -> str:
        raise ValueError("broken")

    @app.tool
    def spans() -> list[dict[str, Any]]:
        return [describe(s) for s in exporter.get_finished_spans()]

    @app.tool
    def forget() -> str:
        exporter.clear()
        return "cleared"

    return app


if __name__ == "__main__":
    build(sys.argv[1] if len(sys.argv) > 1 else "parent").run()
