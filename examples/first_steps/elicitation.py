"""Asking the user from a tool (elicitation), in both protocol eras: a yes/no question, a choice and a small form,
each answer typed as asked. The client side answers with a handler (a real host shows a form).

    python examples/first_steps/elicitation.py
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass

from mcpkit import Client, Context, ElicitationParams, MCPKit

app = MCPKit("library")


class Format(enum.Enum):
    """How the book is delivered."""

    PAPERBACK = "paperback"
    EBOOK = "ebook"


@dataclass
class Delivery:
    """Where a paperback goes."""

    name: str
    city: str
    gift_wrap: bool = False


@app.tool
async def borrow(title: str, ctx: Context) -> str:
    """Borrow a book, asking the user how and where.

    Args:
        title: the book's title.
    """
    sure = await ctx.elicit(f"Borrow {title!r} for three weeks?", bool)
    if sure.action != "accept" or not sure.data:
        return "nothing borrowed"
    fmt = await ctx.elicit("Which format?", Format)
    if fmt.action != "accept":
        return "nothing borrowed"
    if fmt.data is Format.EBOOK:
        return f"{title}: sent as an ebook"
    where = await ctx.elicit("Where should it go?", Delivery)
    if where.action != "accept":
        return "nothing borrowed"
    wrap = " (gift-wrapped)" if where.data.gift_wrap else ""
    return f"{title}: a paperback for {where.data.name} in {where.data.city}{wrap}"


def the_user(params: ElicitationParams) -> dict[str, object] | None:
    """Stands in for a person filling in the form the host shows."""
    print(f"  asked: {params.message}")
    fields = (params.requested_schema or {}).get("properties", {})
    if "city" in fields:
        return {"name": "Ada", "city": "Oslo", "gift_wrap": True}
    if fields.get("value", {}).get("type") == "boolean":
        return {"value": True}
    return {"value": Format.PAPERBACK.value}


async def main() -> None:
    for mode in ("handshake", "modern"):
        async with Client(app, mode=mode, elicitation_handler=the_user) as client:
            print(f"{mode} era ({client.protocol_version}):")
            result = await client.call_tool("borrow", {"title": "The Hobbit"})
            print(" ", result.data)
            assert result.data == "The Hobbit: a paperback for Ada in Oslo (gift-wrapped)"


if __name__ == "__main__":
    asyncio.run(main())
