"""The notes tools, through the mcp_client fixture: each test runs on every transport and in both protocol eras
(test_search[stdio-2026-07-28], ...), against the server named by mcp_server in pyproject.toml."""

from __future__ import annotations

from typing import Any


async def test_search_finds_the_welcome_note(mcp_client: Any) -> None:
    result = await mcp_client.call_tool("search", {"query": "PLAIN text"})
    assert result.data == ["welcome"]


async def test_a_new_note_can_be_found_and_read(mcp_client: Any) -> None:
    note_id = (await mcp_client.call_tool("add_note", {"title": "Ship it", "body": "Release on Friday."})).data
    assert note_id.startswith("ship-it")
    assert note_id in (await mcp_client.call_tool("search", {"query": "friday"})).data
    assert await mcp_client.read_text(f"notes://{note_id}") == "Release on Friday."


async def test_a_note_without_a_title_is_refused(mcp_client: Any) -> None:
    result = await mcp_client.call_tool("add_note", {"title": " ", "body": "x"})
    assert result.is_error and "needs a title" in result.text


async def test_wrong_arguments_are_a_tool_error_not_a_crash(mcp_client: Any) -> None:
    result = await mcp_client.call_tool("search", {"query": 42})
    assert result.is_error
    assert (await mcp_client.call_tool("search", {"query": "welcome"})).data == ["welcome"]


async def test_the_review_prompt_quotes_the_note(mcp_client: Any) -> None:
    prompt = await mcp_client.get_prompt("review", {"note_id": "welcome"})
    assert "Notes are plain text" in prompt.messages[0].content.text


async def test_the_client_negotiated_the_era_it_was_given(mcp_client: Any, mcp_era: str) -> None:
    assert mcp_client.protocol_version == mcp_era
    assert mcp_client.server_info.name == "notes"


async def test_the_wire_shows_one_call_per_question(mcp_client: Any, mcp_traffic: Any) -> None:
    await mcp_client.call_tool("search", {"query": "notes"})
    mcp_traffic.assert_sent("tools/call", {"name": "search", "arguments": {"query": "notes"}})
    assert mcp_traffic.methods("out").count("tools/call") == 1
    mcp_traffic.assert_no_errors()
