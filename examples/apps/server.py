"""MCP Apps with mcpkit: two tools whose results a host renders as interactive views, in both protocol eras.

- ``roll_dice`` links to ``ui://apps-demo/dice`` (views/dice.html, plain HTML that speaks the view protocol by
  hand); the view's "Roll again" button calls ``reroll``, a tool only the view may call (visibility ``app``).
- ``count`` links to ``ui://apps-demo/counter``, built with the official App SDK (sdk_view/, built into
  sdk_view/dist/counter.html by build_sdk_view.py); its "Add one" button calls the app-only ``increment``.

Run it in the inspector, which hosts the views::

    mcpkit inspect examples/apps/server.py

or serve it to any MCP Apps host: ``mcpkit run examples/apps/server.py`` (stdio) or ``-t http``.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from mcpkit import Context, MCPKit
from mcpkit.protocol.extensions import UI_EXTENSION

HERE = Path(__file__).resolve().parent

app = MCPKit("apps-demo", instructions="Roll dice and count clicks; a host that supports MCP Apps shows them.")

app.add_view(
    "ui://apps-demo/dice",
    file=HERE / "views" / "dice.html",
    title="Dice",
    description="A die the person can roll again",
    prefers_border=True,
)
app.add_view(
    "ui://apps-demo/counter",
    file=HERE / "sdk_view" / "dist" / "counter.html",
    title="Counter",
    description="A counter on the official App SDK",
)

_counts: dict[str, int] = {}


def _roll(sides: int) -> dict[str, Any]:
    if not 2 <= sides <= 1000:
        raise ValueError("sides must be between 2 and 1000")
    return {"sides": sides, "value": random.randint(1, sides)}


@app.tool(ui="ui://apps-demo/dice")
def roll_dice(sides: int = 6, ctx: Context | None = None) -> dict[str, Any]:
    """Roll a die with this many sides (a host with MCP Apps shows it, with a button to roll again)."""
    rolled = _roll(sides)
    if ctx is not None and not ctx.client_supports_extension(UI_EXTENSION):
        rolled["note"] = "no interactive view: this client does not host MCP Apps"
    return rolled


@app.tool(ui={"resourceUri": "ui://apps-demo/dice", "visibility": ["app"]})
def reroll(sides: int = 6) -> dict[str, Any]:
    """Roll the die again (called by the dice view's button, never offered to the model)."""
    return _roll(sides)


@app.tool(ui="ui://apps-demo/counter")
def count(name: str = "clicks") -> dict[str, Any]:
    """Show the counter called ``name``."""
    return {"name": name, "count": _counts.get(name, 0)}


@app.tool(ui={"visibility": ["app"]})
def increment(name: str = "clicks") -> dict[str, Any]:
    """Add one to the counter (called by the counter view's button, never offered to the model)."""
    _counts[name] = _counts.get(name, 0) + 1
    return {"name": name, "count": _counts[name]}


if __name__ == "__main__":
    app.run()
