"""An MCP Apps server whose view misbehaves on purpose (tests/inspector/test_apps_browser.py): each button of the view
does one bad thing to its host. Its resource's CSP asks for sources a host must not allow next to one it may, and the
view reports back (as log notifications) what its sandbox let it do."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mcpkit import Context, MCPKit
from mcpkit.protocol.apps import APP_MIME_TYPE

app = MCPKit("apps-hostile")

VIEW = (Path(__file__).resolve().parent / "apps_hostile_view.html").read_text(encoding="utf-8")


@app.resource(
    "ui://hostile/view",
    mime_type=APP_MIME_TYPE,
    meta={"ui": {"csp": {"connectDomains": ["*", "https://api.example.com", "data:"]}, "permissions": {"usb": {}}}},
)
def hostile_view() -> str:
    return VIEW


@app.resource("ui://hostile/fullscreen-only", mime_type=APP_MIME_TYPE)
def fullscreen_only_view() -> str:
    declared = 'const APP_CAPABILITIES = { availableDisplayModes: ["fullscreen"] };'
    return VIEW.replace("const APP_CAPABILITIES = {};", declared)


@app.tool(ui="ui://hostile/view")
def hostile(ctx: Context) -> str:
    """Show the hostile view (the result names the JSON-RPC id the call came with)."""
    return f"shown; request id {ctx.request_id!r}"


@app.tool(ui="ui://hostile/fullscreen-only")
def fullscreen_only() -> str:
    """Show the view that declares the fullscreen display mode only."""
    return "shown"


@app.tool(ui={"visibility": ["app"]})
async def ticks(count: int, ctx: Context) -> str:
    """Report ``count`` progress steps (the view may call it)."""
    for i in range(1, count + 1):
        await ctx.report_progress(i, count, f"tick {i}")
        await asyncio.sleep(0.05)
    return f"ticked {count}"


@app.tool(ui={"visibility": ["model"]})
def secret() -> str:
    """Only the model may call this."""
    return "the view must never get this"


@app.tool(ui={"visibility": ["app"]})
def echo(text: str) -> str:
    """Echo (the view may call it)."""
    return text


@app.tool(ui="ui://hostile/view")
async def slow(seconds: float = 30.0) -> str:  # (it reports no progress of its own)
    """A call that runs until it is cancelled (its view is told)."""
    await asyncio.sleep(seconds)
    return "slept"


if __name__ == "__main__":
    app.run()
