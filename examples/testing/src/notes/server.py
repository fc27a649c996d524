"""A notes server: search, add and read notes; one tool asks the client's model for a summary (sampling), one asks
the user to confirm a deletion (elicitation), one lists where notes may be exported (the client's roots).

    python -m notes.server                 # over stdio
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mcpkit import Context, MCPKit, ResourceNotFound, ToolError


@dataclass
class Note:
    title: str
    body: str


@dataclass
class Confirm:
    delete: bool


def create_app() -> MCPKit:
    """A fresh server with its one welcome note."""
    app = MCPKit("notes", version="1.0.0", instructions="Search notes before adding one.")
    notes: dict[str, Note] = {"welcome": Note("Welcome", "Notes are plain text. Search them, add one, read one.")}

    def find(note_id: str) -> Note:
        if note_id not in notes:
            raise ToolError(f"no note {note_id!r}: search for it first")
        return notes[note_id]

    @app.tool(annotations={"readOnlyHint": True})
    def search(query: str) -> list[str]:
        """The ids of the notes whose title or body contains the query (any case).

        Args:
            query: the words to look for.
        """
        wanted = query.lower()
        return sorted(i for i, n in notes.items() if wanted in n.title.lower() or wanted in n.body.lower())

    @app.tool
    def add_note(title: str, body: str) -> str:
        """Add a note; returns its id.

        Args:
            title: a short title.
            body: the text of the note.
        """
        if not title.strip():
            raise ToolError("a note needs a title")
        base = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "note"
        note_id, n = base, 1
        while note_id in notes:
            n += 1
            note_id = f"{base}-{n}"
        notes[note_id] = Note(title, body)
        return note_id

    @app.tool
    async def summarize(note_id: str, ctx: Context) -> str:
        """One sentence about a note, written by the client's model."""
        note = find(note_id)
        answer = await ctx.sample(f"Summarize in one sentence:\n{note.body}", max_tokens=60)
        return answer.text.strip()

    @app.tool
    async def delete_note(note_id: str, ctx: Context) -> str:
        """Delete a note, once the user confirms."""
        note = find(note_id)
        answer = await ctx.elicit(f"Delete the note {note.title!r}?", Confirm)
        if answer.action == "accept" and answer.data.delete:
            del notes[note_id]
            return f"deleted {note_id}"
        return f"kept {note_id}"

    @app.tool
    async def export_targets(ctx: Context) -> list[str]:
        """Where notes may be exported: the client's roots."""
        return [root.uri for root in await ctx.list_roots()]

    @app.resource("notes://{note_id}", mime_type="text/plain")
    def read_note(note_id: str) -> str:
        """A note's text."""
        if note_id not in notes:
            raise ResourceNotFound(f"notes://{note_id}")
        return notes[note_id].body

    @app.prompt
    def review(note_id: str) -> str:
        """Ask for a review of a note."""
        return f"Review this note and suggest a better title:\n\n{find(note_id).body}"

    return app


app = create_app()


if __name__ == "__main__":
    app.run()
