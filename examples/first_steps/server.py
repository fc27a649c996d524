"""A first MCP server: a tool that returns a model, a resource template, a prompt, and a tool that reports progress.

Run it over stdio (what a desktop host or ``client.py`` next to this file does)::

    python examples/first_steps/server.py

or try it from the command line: ``mcpkit call examples/first_steps/server.py find_book isbn=9780261102217``.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from pydantic import BaseModel, Field

from mcpkit import Context, MCPKit, ToolError

app = MCPKit("bookshop", "1.0.0", instructions="Look up books, read their summaries, ask for reviews.")


class Book(BaseModel):
    """A book of the shop."""

    isbn: str
    title: str
    author: str
    year: int = Field(ge=0)
    pages: int = Field(gt=0)


BOOKS = {
    book.isbn: book
    for book in (
        Book(isbn="9780261102217", title="The Hobbit", author="J. R. R. Tolkien", year=1937, pages=310),
        Book(isbn="9780141439518", title="Pride and Prejudice", author="Jane Austen", year=1813, pages=432),
    )
}


def _book(isbn: str) -> Book:
    book = BOOKS.get(isbn)
    if book is None:
        raise ToolError(f"no book with ISBN {isbn}: try one of {', '.join(sorted(BOOKS))}")
    return book


@app.tool
def find_book(isbn: str) -> Book:
    """Look a book up by its ISBN.

    Args:
        isbn: the book's 13-digit ISBN.
    """
    return _book(isbn)


@app.tool
async def read_book(isbn: str, ctx: Context) -> str:
    """Read a book from cover to cover, reporting progress chapter by chapter.

    Args:
        isbn: the book's 13-digit ISBN.
    """
    book = _book(isbn)
    chapters = 5
    for chapter in range(1, chapters + 1):
        await ctx.report_progress(chapter, chapters, f"chapter {chapter} of {book.title}")
        await asyncio.sleep(0.01)
    await ctx.info(f"finished {book.title}")
    return f"read {book.pages} pages of {book.title}"


@app.resource("books://{isbn}/summary", mime_type="text/plain")
def summary(isbn: str) -> str:
    """A short summary of a book."""
    book = _book(isbn)
    return f"{book.title} by {book.author} ({book.year}), {book.pages} pages."


@app.prompt
def review(isbn: str, tone: Literal["friendly", "critical"] = "friendly") -> str:
    """Ask for a review of a book.

    Args:
        isbn: the book to review.
        tone: how the review should sound.
    """
    book = _book(isbn)
    return f"Write a {tone} review of {book.title} by {book.author}, in three sentences."


if __name__ == "__main__":
    app.run()
