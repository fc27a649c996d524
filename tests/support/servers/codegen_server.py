"""A stdio MCPKit server whose tools have the schema shapes ``mcpkit codegen`` types: nested and recursive models
(``$defs`` with a cycle), enums, optional and nullable parameters, unions, maps, lists, and results that are a
model, a wrapped ``int``/``list``, or no structured output at all.

    python tests/support/servers/codegen_server.py
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from mcpkit import MCPKit

app = MCPKit("codegen-shapes", version="1.2.3")


class Seat(BaseModel):
    """A booked seat."""

    row: int
    letter: Literal["A", "B", "C"]
    note: str | None = None


class Node(BaseModel):
    """A tree of numbers."""

    value: int
    children: list[Node] = []


class Circle(BaseModel):
    kind: Literal["circle"] = "circle"
    radius: float


class Square(BaseModel):
    kind: Literal["square"] = "square"
    side: float


@app.tool
def book(row: int, letter: Literal["A", "B", "C"] = "A", note: str | None = None) -> Seat:
    """Book a seat in a row ("A" unless said otherwise)."""
    return Seat(row=row, letter=letter, note=note)


@app.tool
def tree_sum(tree: Node) -> int:
    """Sum every value of a tree."""
    return tree.value + sum(tree_sum(child) for child in tree.children)


@app.tool
def top_words(counts: dict[str, int], limit: int = Field(2, ge=1)) -> list[str]:
    """The most counted words, most first."""
    return sorted(counts, key=lambda word: -counts[word])[:limit]


@app.tool
def area(shape: Circle | Square) -> float:
    """The area of a circle or a square."""
    return 3.0 * shape.radius**2 if isinstance(shape, Circle) else shape.side**2


@app.tool(structured_output=False)
def shout(text: str, times: int = 1) -> str:
    """Say it louder (no structured output)."""
    return " ".join([text.upper()] * times)


if __name__ == "__main__":
    app.run()
