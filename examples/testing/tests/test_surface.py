"""The server's public surface (tools with their schemas, resources, prompts) as recorded in tests/__snapshots__:
a change to it fails here until it is meant and recorded again with `pytest --mcp-update-snapshots`."""

from __future__ import annotations

from typing import Any


async def test_the_surface_is_the_recorded_one(mcp_client: Any, mcp_snapshot: Any) -> None:
    surface = await mcp_snapshot.check(mcp_client)
    assert [tool["name"] for tool in surface["tools"]] == [
        "add_note",
        "delete_note",
        "export_targets",
        "search",
        "summarize",
    ]
