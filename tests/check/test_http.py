"""``mcpkit check``'s Streamable HTTP rules against a deliberately broken server: a real subprocess on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import sys
import time

import pytest

from mcpkit.check import FAIL, PASS, run_checks
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


async def test_a_server_that_never_ends_its_sse_streams_does_not_hold_the_check() -> None:
    """A server that answers each request on an SSE stream and then keeps the stream open (a comment every half
    second, so no read times out) held ``mcpkit check --timeout 2`` for over ten minutes without a report: every
    HTTP-level check read its POST's answer to the end. Now an answered stream is read a second longer, and none
    past the wire's timeout; the run ends with its verdicts."""
    from support.asgi import serve_asgi
    from support.servers.open_streams import app

    t0 = time.monotonic()
    async with serve_asgi(app) as port:
        async with asyncio.timeout(240):
            report = await run_checks(f"http://127.0.0.1:{port}/mcp", timeout=2.0, modern=False)
    assert report.status("M042") == PASS and report.status("M079") == PASS, report.render_text(verbose=True)
    assert report.status("S002") == PASS, report.render_text(verbose=True)
    assert time.monotonic() - t0 < 200
    # and keeping them open is judged: after the response the server SHOULD close the stream (SX13)
    assert report.status("SX13") == FAIL, report.render_text(verbose=True)
    evidence = report.requirements["SX13"].evidence
    assert "left open" in evidence and "still open 1.0s after its response" in evidence, evidence


async def test_a_server_that_closes_each_sse_stream_after_its_response_passes_sx13() -> None:
    """mcpkit's own server answers a request with progress on an SSE stream and ends it with the response: every
    stream the run saw is judged closed (no false SX13 from a stream the checker was still reading)."""
    from mcpkit import Context, MCPKit
    from support.mcp_http import running

    app = MCPKit("closes-streams")

    @app.tool
    async def count(ctx: Context, n: int = 2) -> str:
        """Report progress n times, then answer."""
        for i in range(n):
            await ctx.report_progress(i + 1, n)
        return "done"

    async with running(app) as (base, _):
        report = await run_checks(base + "/mcp", timeout=10.0, modern=False)
    assert report.status("SX13") == PASS, report.render_text(verbose=True)
    assert "every SSE stream was closed after its response" in report.requirements["SX13"].evidence


async def test_a_token_the_runs_oauth_client_cannot_get_ends_the_run_at_once_saying_why() -> None:
    """The run's OAuth client refuses to send a client secret to an authorization server on another origin than the
    MCP server unless ``issuer`` names it (OAuthFlowError). The POST it stopped was never sent, yet the checker
    waited for its answer: twice the timeout for initialize, the timeout again for server/discover, then reported
    that the server never answered initialize (M042). Now the wait ends at once, and the run is aborted with the
    client's reason: nothing reached the server, so nothing of it is judged."""
    from mcpkit.auth import OAuthClient
    from support.oauth import foreign_issuer

    async with foreign_issuer() as (_, as_log, rs_base, machine):
        auth = OAuthClient(
            rs_base + "/mcp",
            grant_type="client_credentials",
            client_id=machine.client_id,
            client_secret=machine.client_secret,
        )
        t0 = time.monotonic()
        report = await run_checks(rs_base + "/mcp", timeout=10.0, auth=auth)
        took = time.monotonic() - t0
    aborted = str(report.info.get("aborted"))
    assert "no authorization (OAuthFlowError" in aborted and "issuer=" in aborted, report.render_text(verbose=True)
    assert report.status("M042") != FAIL, report.render_text(verbose=True)
    assert report.exit_code() == 2 and "/token" not in [p for _, p, _ in as_log.requests]
    assert took < 10.0, took  # (it took 30 s: 20 s for initialize, 10 s for server/discover)
