"""Every message our client and server emit in a full session is valid against the official wire types of the
negotiated revision (tests/support/oracle.py), for all five revisions."""

from __future__ import annotations

import asyncio

import pytest

from mcpkit.protocol import versions
from support.core import handlers, open_session
from support.wire_recorder import WireRecorder


@pytest.mark.req("M001", "M002", "M005", "M006", "M007", "M008", "M009", "M010", "M042", "M040")
@pytest.mark.parametrize("revision", versions.ALL_VERSIONS)
async def test_full_session_is_schema_valid(revision: str) -> None:
    rec = WireRecorder()
    feats = versions.features(revision)
    async with open_session("memory", traffic=rec, protocol_version=revision, log_level="debug", **handlers()) as cs:
        assert cs.protocol_version == revision
        await cs.list_tools()
        await cs.call_tool("echo", {"text": "hi"})
        await cs.call_tool("slow", {"steps": 2, "delay_ms": 1}, on_progress=lambda *a: None)
        await cs.read_resource("test://hello")
        await cs.list_resources()
        if not feats.modern:
            await cs.ping()
            await cs.set_logging_level("debug")
        if feats.elicitation:
            r = await cs.call_tool("ask")
            assert r.content[0].text.startswith("accept:Ada")  # type: ignore[union-attr]
        call = asyncio.create_task(cs.call_tool("slow", {"steps": 50, "delay_ms": 10}))
        await asyncio.sleep(0.05)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    checked = rec.validate(revision)
    assert checked >= 12
