"""An MCP Apps server whose view misbehaves on purpose (tests/inspector/test_apps_browser.py): each button of the view
does one bad thing to its host. Its resource's CSP asks for sources a host must not allow next to one it may, and the
view reports back (as log notifications) what its sandbox let it do."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mcpkit import MCPKit
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


@app.tool(ui="ui://hostile/view")
def hostile() -> str:
    """Show the hostile view."""
    return "shown"


@app.tool(ui={"visibility": ["model"]})
def secret() -> str:
    """Only the model may call this."""
    return "the view must never get this"


@app.tool(ui={"visibility": ["app"]})
def echo(text: str) -> str:
    """Echo (the view may call it)."""
    return text


@app.tool(ui="ui://hostile/view")
async def slow(seconds: float = 30.0) -> str:
    """A call that runs until it is cancelled (its view is told)."""
    await asyncio.sleep(seconds)
    return "slept"


if __name__ == "__main__":
    app.run()
