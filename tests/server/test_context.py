"""Context's requests to the client (``ctx.sample``, ``ctx.elicit``, ``ctx.list_roots``) against real clients over
stdio, in both eras."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from mcpkit import Client
from mcpkit.protocol.errors import MissingRequiredClientCapability

SERVER = textwrap.dedent(
    """
    from mcpkit import Context, MCPKit

    app = MCPKit("asks")

    @app.tool()
    async def summarize(text: str, ctx: Context) -> str:
        \"\"\"Summarize with the client's model.\"\"\"
        return str(await ctx.sample(f"Summarize: {text}", max_tokens=50))

    @app.tool()
    async def confirm(ctx: Context) -> str:
        \"\"\"Ask the user to confirm.\"\"\"
        answer = await ctx.elicit("Go on?", None)
        return answer.action

    @app.tool()
    async def where(ctx: Context) -> int:
        \"\"\"Count the client's roots.\"\"\"
        return len(await ctx.list_roots())

    @app.tool()
    async def polite(ctx: Context) -> str:
        \"\"\"Sample only when the client can.\"\"\"
        if "sampling" not in ctx.client_capabilities:
            return "no model here"
        return str(await ctx.sample("Hi", max_tokens=5))

    app.run()
    """
)


@pytest.fixture
def server(tmp_path: Path) -> list[str]:
    path = tmp_path / "asks.py"
    path.write_text(SERVER)
    return [sys.executable, str(path)]


@pytest.mark.parametrize("mode", ["handshake", "modern"])
@pytest.mark.parametrize(
    ("tool", "capability"), [("summarize", "sampling"), ("confirm", "elicitation"), ("where", "roots")]
)
async def test_a_tool_needing_a_capability_the_client_did_not_declare_is_answered_minus_32021_in_both_eras(
    server: list[str], mode: str, tool: str, capability: str
) -> None:
    """2026-07-28 (basic/index): a server MUST NOT rely on a capability the client did not declare, and MUST answer
    with MissingRequiredClientCapabilityError (-32021, ``data.requiredCapabilities``). The handshake revisions only
    say to use what was negotiated and name no answer, so the same server code gets the same error there: the
    request was not sent to the client, and the caller learns which capability to declare."""
    async with Client(server, mode=mode) as client:
        assert client.protocol_version == ("2026-07-28" if mode == "modern" else "2025-11-25")
        with pytest.raises(MissingRequiredClientCapability) as exc:
            await client.call_tool(tool, {"text": "x"} if tool == "summarize" else {})
        assert exc.value.code == -32021
        assert exc.value.data == {"requiredCapabilities": {capability: {}}}
        assert capability in exc.value.message
        # the session goes on
        assert (await client.call_tool("polite", {})).text == "no model here"
