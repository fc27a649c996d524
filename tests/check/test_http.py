"""``mcpkit check``'s Streamable HTTP rules against a deliberately broken server: a real subprocess on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from mcpkit.check import FAIL, run_checks
from support.paths import REPO

BROKEN = [sys.executable, str(REPO / "tests" / "support" / "servers" / "broken_server.py")]

pytestmark = pytest.mark.timeout(300)


@pytest.mark.req("A012")
async def test_a_replay_of_another_streams_messages_fails_the_must_not_and_the_exit_code() -> None:
    """Every handshake revision with resumption says the server MUST NOT replay messages that would have been
    delivered on a different stream. server-everything's event store replays every stream after the event id; the
    checker saw it, but said so only under A012 (a MAY): the run passed (exit 0). It now fails MX06, a MUST."""
    proc = await asyncio.create_subprocess_exec(
        *BROKEN, "--http", "--fault", "replay-other-stream", stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        port = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))["port"]
        report = await run_checks(f"http://127.0.0.1:{port}/mcp", timeout=10.0, modern=False)
    finally:
        proc.terminate()
        await proc.wait()
    assert report.status("MX06") == FAIL, report.render_text(verbose=True)
    evidence = report.requirements["MX06"].evidence
    assert "Last-Event-ID" in evidence and "another stream" in evidence, evidence
    assert "MX06" in report.failed_musts() and report.exit_code() == 1
