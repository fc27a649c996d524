"""mcpkit's MCP Apps server (examples/apps/server.py, over stdio) as the official clients see it: the TypeScript
client (``@modelcontextprotocol/client`` 2.x, both eras) and the Python client (``mcp`` 2.3.0, both eras) list the
app tools with ``_meta.ui`` intact and read the views; and the committed SDK view is what its build script makes
from the pinned ``@modelcontextprotocol/ext-apps`` package."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.paths import REPO
from support.ts_peers import run_ts_client

SERVER = REPO / "examples" / "apps" / "server.py"
APP_MIME = "text/html;profile=mcp-app"
EXPECTED_UI = {
    "roll_dice": {"resourceUri": "ui://apps-demo/dice"},
    "reroll": {"resourceUri": "ui://apps-demo/dice", "visibility": ["app"]},
    "count": {"resourceUri": "ui://apps-demo/counter"},
    "increment": {"visibility": ["app"]},
}

pytestmark = pytest.mark.npm


async def run_ts_v2(node: Path, steps: list[dict[str, Any]], negotiation: str) -> dict[str, Any]:
    script = {
        "options": {"capabilities": {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": [APP_MIME]}}}},
        "steps": steps,
    }
    command = shlex.join([sys.executable, str(SERVER)])
    return await run_ts_client(node, "ts_client_v2.mjs", ["--stdio", command], script, "--negotiation", negotiation)


@pytest.mark.parametrize("negotiation", ["legacy", "2026-07-28"])
async def test_the_typescript_client_lists_app_tools_with_their_ui_meta_and_reads_the_views(
    node_bin: Path, negotiation: str
) -> None:
    steps = [
        {"op": "listTools"},
        {"op": "readResource", "uri": "ui://apps-demo/dice"},
        {"op": "readResource", "uri": "ui://apps-demo/counter"},
        {"op": "callTool", "name": "roll_dice", "arguments": {"sides": 12}},
    ]
    out = await run_ts_v2(node_bin, steps, negotiation)
    assert out["protocolVersion"] == ("2025-11-25" if negotiation == "legacy" else "2026-07-28")
    assert out["capabilities"]["extensions"] == {"io.modelcontextprotocol/ui": {}}
    tools = {t["name"]: t for t in out["results"][0]["tools"]}
    assert {name: tools[name]["_meta"]["ui"] for name in EXPECTED_UI} == EXPECTED_UI
    assert tools["roll_dice"]["_meta"]["ui/resourceUri"] == "ui://apps-demo/dice"
    for result, marker in ((out["results"][1], "Roll again"), (out["results"][2], "ExtApps")):
        (content,) = result["contents"]
        assert content["mimeType"] == APP_MIME and content["text"].lower().startswith("<!doctype html>")
        assert marker in content["text"]
    assert out["results"][1]["contents"][0]["_meta"] == {"ui": {"prefersBorder": True}}
    rolled = out["results"][3]["structuredContent"]
    assert rolled["sides"] == 12 and 1 <= rolled["value"] <= 12 and "note" not in rolled  # (it declared the extension)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_official_python_client_lists_app_tools_with_their_ui_meta_and_reads_the_views(mode: str) -> None:
    from mcp import Client, StdioServerParameters

    server = StdioServerParameters(command=sys.executable, args=[str(SERVER)], cwd=str(REPO))
    async with Client(server, mode=mode) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert {name: (tools[name].meta or {}).get("ui") for name in EXPECTED_UI} == EXPECTED_UI
        dice = await c.read_resource("ui://apps-demo/dice")
        (content,) = dice.contents
        assert content.mime_type == APP_MIME and "Roll again" in content.text  # type: ignore[union-attr]
        assert (content.meta or {}) == {"ui": {"prefersBorder": True}}
        counter = await c.read_resource("ui://apps-demo/counter")
        assert counter.contents[0].mime_type == APP_MIME


def test_the_committed_sdk_view_is_what_its_build_script_makes_from_the_pinned_package() -> None:
    run = subprocess.run(
        [sys.executable, str(REPO / "examples" / "apps" / "build_sdk_view.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    pinned = json.loads((REPO / "tests" / "package.json").read_text())["dependencies"]["@modelcontextprotocol/ext-apps"]
    built = (REPO / "examples" / "apps" / "sdk_view" / "dist" / "counter.html").read_text()
    assert f"@modelcontextprotocol/ext-apps {pinned} " in built.splitlines()[1]
