"""A server whose tool takes every shape of argument the inspector's forms generate: a nested object (a pydantic
model, through ``$ref``), an array of strings, an array of objects, an enum, a multi-select, defaults, an optional
value. ``order`` answers its arguments as JSON, so a test sees exactly what the form sent."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field

from mcpkit import MCPKit

app = MCPKit("forms")


class Address(BaseModel):
    street: str
    city: str = "Lisbon"
    floor: int | None = None


class Item(BaseModel):
    name: str
    quantity: int = Field(default=1, ge=1, le=99)


@app.tool
def order(
    customer: str,
    address: Address,
    items: list[Item],
    tags: list[str] = [],  # noqa: B006 (a schema default)
    size: Literal["small", "medium", "large"] = "medium",
    express: bool = False,
    toppings: list[Literal["cheese", "olives", "basil"]] = ["cheese"],  # noqa: B006
    note: str | None = None,
) -> str:
    """Place an order (answers its arguments as JSON).

    Args:
        customer: Who orders.
        address: Where to deliver.
        items: What to deliver.
        tags: Free labels.
        size: The size.
        express: Deliver fast.
        toppings: Any of the toppings.
        note: Anything else.
    """
    return json.dumps(
        {
            "customer": customer,
            "address": address.model_dump(),
            "items": [i.model_dump() for i in items],
            "tags": tags,
            "size": size,
            "express": express,
            "toppings": toppings,
            "note": note,
        },
        sort_keys=True,
    )


if __name__ == "__main__":
    app.run()
