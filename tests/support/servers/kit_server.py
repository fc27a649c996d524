"""The server the testing kit's own tests use (tests/testing/test_kit.py): a tool of each kind a user tests (a plain
one, one that samples, one that elicits, one that reads the client's roots), a resource, a template and a prompt.

    python -m mcpkit.testing._serve tests/support/servers/kit_server.py:app    # what the kit runs for stdio
"""

from __future__ import annotations

from dataclasses import dataclass

from mcpkit import Context, MCPKit

app = MCPKit("kit-demo", version="1.0.0")


@app.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@app.tool
async def capital(country: str, ctx: Context) -> str:
    """The capital of a country, as the client's model says."""
    answer = await ctx.sample(f"What is the capital of {country}? One word.", max_tokens=10)
    return answer.text


@dataclass
class Signup:
    name: str
    newsletter: bool = False


@app.tool
async def signup(ctx: Context) -> str:
    """Ask the user for their name."""
    result = await ctx.elicit("Who are you?", Signup)
    if result.action == "accept":
        return f"welcome {result.data.name}" + (" (newsletter)" if result.data.newsletter else "")
    return result.action


@app.tool
async def workspace(ctx: Context) -> list[str]:
    """The client's roots."""
    return [root.uri for root in await ctx.list_roots()]


@app.resource("kit://readme", mime_type="text/plain")
def readme() -> str:
    """What this server is."""
    return "a server for the testing kit's tests"


@app.resource("kit://items/{item_id}")
def item(item_id: str) -> str:
    """One item."""
    return f"item {item_id}"


@app.prompt
def review(code: str) -> str:
    """Review some code."""
    return f"Review this code:\n{code}"


if __name__ == "__main__":
    app.run()
