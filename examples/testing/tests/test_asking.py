"""Tools that ask the client: a model for a summary (sampling), the user to confirm (elicitation), the client's roots.
The answers are scripted with the mcp marker, so no model and no person is needed; each test still runs on every
transport and in both eras (in 2026-07-28 the server asks through an input_required result: the same answers)."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.mark.mcp(sampling=["Notes are plain text you can search."])
async def test_summarize_returns_the_models_sentence(mcp_client: Any, mcp_script: Any) -> None:
    result = await mcp_client.call_tool("summarize", {"note_id": "welcome"})
    assert result.data == "Notes are plain text you can search."
    (asked,) = mcp_script.sampling_requests
    assert asked.text.startswith("Summarize in one sentence:") and asked.max_tokens == 60


@pytest.mark.mcp(elicitation=[{"delete": True}])
async def test_delete_asks_first_and_deletes_when_confirmed(mcp_client: Any, mcp_script: Any) -> None:
    note_id = (await mcp_client.call_tool("add_note", {"title": "Scratch", "body": "temporary"})).data
    assert (await mcp_client.call_tool("delete_note", {"note_id": note_id})).data == f"deleted {note_id}"
    assert mcp_script.elicitation_requests[0].message == "Delete the note 'Scratch'?"
    assert note_id not in (await mcp_client.call_tool("search", {"query": "temporary"})).data


@pytest.mark.mcp(elicitation=["decline", {"delete": False}])
async def test_delete_keeps_the_note_when_the_user_says_no(mcp_client: Any) -> None:
    note_id = (await mcp_client.call_tool("add_note", {"title": "Keep me", "body": "important"})).data
    assert (await mcp_client.call_tool("delete_note", {"note_id": note_id})).data == f"kept {note_id}"
    assert (await mcp_client.call_tool("delete_note", {"note_id": note_id})).data == f"kept {note_id}"


@pytest.mark.mcp(roots=["file:///home/ada/exports", "file:///mnt/backup"])
async def test_export_targets_are_the_clients_roots(mcp_client: Any) -> None:
    result = await mcp_client.call_tool("export_targets")
    assert result.data == ["file:///home/ada/exports", "file:///mnt/backup"]
