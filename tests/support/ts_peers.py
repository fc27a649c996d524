"""The official TypeScript SDK's clients, driven from the tests: ``tests/support/interop/ts_client.mjs`` (SDK 1.x)
and ``ts_client_v2.mjs`` (2.x) run one script of steps against a server and print what they got as JSON.

    out = await run_ts_client(node_bin, "ts_client_v2.mjs", ["--stdio", command], {"steps": [...]})

(``node_bin`` is the session fixture of the pinned Node; the npm peers come from ``tests/node_modules``.)
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from support.paths import INTEROP, TESTS

#: Seconds a client script may run (a server it starts included) before the test fails.
TIMEOUT = 90.0


async def run_ts_client(
    node: Path, client: str, target: list[str], script: Any, *extra: str, timeout: float = TIMEOUT
) -> dict[str, Any]:
    """Run the client ``client`` (a file name in ``tests/support/interop``) on ``target`` (its transport options:
    ``["--stdio", command]``, ``["--http", url]``, ``["--sse", url]``) with ``script`` (a list of steps, or
    ``{"options": ..., "steps": ...}``), ``extra`` options before them; what it printed, as JSON. It must end
    with status 0 within ``timeout`` seconds (the test fails with the end of its output otherwise)."""
    proc = await asyncio.create_subprocess_exec(
        str(node),
        str(INTEROP / client),
        *extra,
        *target,
        "--script",
        json.dumps(script),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(TESTS),
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, (out.decode()[-3000:], err.decode()[-2000:])
    result: dict[str, Any] = json.loads(out)
    return result
