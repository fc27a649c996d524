"""Who is measured. A contender is a plug-in script under bench/servers/ (or bench/clients/) following the
command-line contract in servers/_serve.py (clients/_common.py); adding one is adding a script and a row."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
SERVERS = BENCH / "servers"
CLIENTS = BENCH / "clients"
#: the pinned npm peers (the test suite's): the TypeScript contenders import their packages from here
NODE_MODULES = Path(os.environ.get("BENCH_NODE_MODULES") or BENCH.parent / "tests" / "node_modules")


def node() -> str | None:
    """The Node.js of the pinned npm peers (``tests/node_modules/.bin/node``), else the one on PATH."""
    pinned = NODE_MODULES / ".bin" / "node"
    return str(pinned) if pinned.exists() else shutil.which("node")


def command(script: Path) -> list[str]:
    """The argv that runs a contender's script: a ``.mjs`` under Node.js, anything else under this Python."""
    if script.suffix == ".mjs":
        exe = node()
        if exe is None:
            raise FileNotFoundError("Node.js not found (tests/node_modules/.bin/node or node on PATH)")
        return [exe, str(script)]
    return [sys.executable, str(script)]


@dataclass(frozen=True)
class Contender:
    key: str
    label: str
    stdio_script: str | None
    http_script: str | None
    package: str | None  # distribution whose version the report shows (npm: "npm:<package>")
    floor: bool = False


SERVER_CONTENDERS: list[Contender] = [
    Contender("floor", "floor (raw asyncio / raw ASGI + orjson)", "floor_stdio.py", "floor_asgi.py", None, True),
    # the floor's logic answered inside uvicorn's protocol (no ASGI cycle): the floor of what mcpkit's lane does
    Contender("floor-lane", "floor answered in the protocol (no ASGI cycle)", None, "floor_lane.py", None),
    Contender("mcp", "mcp MCPServer", "mcp_high.py", "mcp_high.py", "mcp"),
    Contender("mcp-lowlevel", "mcp low-level Server", "mcp_lowlevel.py", "mcp_lowlevel.py", "mcp"),
    Contender("fastmcp", "fastmcp FastMCP", "fastmcp_server.py", "fastmcp_server.py", "fastmcp"),
    Contender("mcpkit", "mcpkit MCPKit", "mcpkit_server.py", "mcpkit_server.py", "mcpkit"),
    Contender("mcpkit-def", "mcpkit MCPKit, plain def tools", "mcpkit_def.py", "mcpkit_def.py", "mcpkit"),
    # the same app mounted as ASGI on stock uvicorn (Starlette/FastAPI users), without mcpkit's protocol lane
    Contender("mcpkit-asgi", "mcpkit MCPKit, plain def tools, ASGI on stock uvicorn", None, "mcpkit_asgi.py", "mcpkit"),
    Contender(
        "mcpkit-inline", "mcpkit MCPKit, def tools, thread=False", "mcpkit_inline.py", "mcpkit_inline.py", "mcpkit"
    ),
    Contender("mcpkit-lowlevel", "mcpkit low-level Server", "mcpkit_lowlevel.py", None, "mcpkit"),
    Contender(
        "ts-v2",
        "TypeScript SDK v2 McpServer",
        "ts_v2_server.mjs",
        "ts_v2_server.mjs",
        "npm:@modelcontextprotocol/server",
    ),
]

CLIENT_CONTENDERS: list[Contender] = [
    Contender("raw", "raw client (bench driver)", "raw_client.py", None, None, True),
    Contender("mcp", "mcp Client", "mcp_client.py", None, "mcp"),
    Contender("fastmcp", "fastmcp Client", "fastmcp_client.py", None, "fastmcp"),
    Contender("mcpkit", "mcpkit Client", "mcpkit_client.py", None, "mcpkit"),
    Contender("mcpkit-session", "mcpkit ClientSession (low-level)", "mcpkit_session.py", None, "mcpkit"),
]
