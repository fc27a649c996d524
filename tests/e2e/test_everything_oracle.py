"""One full everything.py session per protocol revision, every message on the wire checked against the official
schema of that revision (tests/support/oracle.py, through the client's message tap)."""

from __future__ import annotations

import asyncio

import pytest

from mcpkit.protocol.errors import MCPError
from support.everything import connect
from support.wire_recorder import WireRecorder

REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")


@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.req("M066", "M067", "M068", "M069", "M049", "M050", "M051", "M052", "M053", "M054", "M059", "M060")
@pytest.mark.req("M061", "M062", "M063", "M075", "M077", "M078", "M089", "S022")
async def test_full_session_is_schema_valid(revision: str) -> None:
    wire = WireRecorder()
    modern = revision == "2026-07-28"
    async with connect(version=revision, traffic=wire) as (cs, _, rec):
        assert cs.protocol_version == revision
        await cs.set_logging_level("debug")
        # every list, walked to the end
        for lister in (cs.list_tools, cs.list_prompts, cs.list_resource_templates):
            result = await lister()
            assert not result.next_cursor
        cursor = None
        for _ in range(20):
            page = await cs.list_resources(cursor)
            cursor = page.next_cursor
            if not cursor:
                break
        assert not cursor
        # every tool
        await cs.call_tool("echo", {"text": "hi"})
        add = await cs.call_tool("add", {"a": 1, "b": 2})
        assert add.structured_content == {"result": 3}
        await cs.call_tool("slow", {"steps": 2, "delay_ms": 1}, on_progress=lambda *a: None)
        await cs.call_tool("sample", {"prompt": "hello"})
        asked = await cs.call_tool("ask_name", {})
        assert asked.is_error is (revision < "2025-06-18")  # elicitation exists from 2025-06-18
        await cs.call_tool("roots", {})
        await cs.call_tool("log", {"level": "warning", "message": "careful"})
        await cs.call_tool("fail", {})
        await cs.call_tool("image", {})
        await cs.call_tool("add", {"a": "x"})  # argument validation failure: isError result
        with pytest.raises(MCPError):
            await cs.call_tool("missing", {})
        # resources
        for uri in ("mcpkit://static/1", "mcpkit://static/2", "mcpkit://items/5", "mcpkit://counter"):
            await cs.read_resource(uri)
        with pytest.raises(MCPError):
            await cs.read_resource("mcpkit://nope")
        with pytest.raises(MCPError):
            await cs.list_resources("forged")
        # prompts and completion
        await cs.get_prompt("simple")
        await cs.get_prompt("greet", {"name": "Ada", "style": "funny"})
        await cs.get_prompt("with_resource", {"n": "4"})
        await cs.get_prompt("with_image")
        await cs.complete({"type": "ref/prompt", "name": "greet"}, "style", "f")
        await cs.complete({"type": "ref/resource", "uri": "mcpkit://items/{id}"}, "id", "1", {"x": "y"})
        # subscriptions and list changes
        if modern:
            async with cs.listen(tools=True, resource_uris=["mcpkit://counter"]) as sub:
                await cs.call_tool("touch", {})
                await sub.next(timeout=5)
                await cs.call_tool("add_tool", {"name": "extra"})
                await sub.next(timeout=5)
        else:
            await cs.subscribe_resource("mcpkit://counter")
            await cs.call_tool("touch", {})
            await rec.wait_for("notifications/resources/updated")
            await cs.call_tool("add_tool", {"name": "extra"})
            await rec.wait_for("notifications/tools/list_changed")
            await cs.unsubscribe_resource("mcpkit://counter")
        assert rec.logs
        await asyncio.sleep(0.01)
    checked = wire.validate(revision)
    assert checked > 60, checked
    print(revision, checked)
