"""How the client commands of the ``mcpkit`` CLI sign in (``mcpkit.cli.connecting``): ``--auth`` with a registered
client, run as a real subprocess against a real protected server and authorization server."""

from __future__ import annotations

import asyncio
import json
import sys

from support.oauth import foreign_issuer


async def test_a_client_secret_goes_to_a_foreign_authorization_server_only_when_issuer_names_it() -> None:
    """``mcpkit check URL --auth --client-id --client-secret``: the authorization server runs on another origin than
    the MCP server, so the secret is not sent there unless ``--issuer`` names it; with it the check gets a token."""
    async with foreign_issuer() as (as_url, as_log, rs_base, machine):
        base = ["check", rs_base + "/mcp", "--auth", "--client-id", machine.client_id, "--json", "--timeout", "10"]

        async def run(*extra: str) -> tuple[int, str, str]:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "mcpkit.cli.main",
                *base,
                *extra,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={"MCPKIT_CHECK_CLIENT_SECRET": machine.client_secret or "", "PATH": "", "NO_COLOR": "1"},
            )
            out, err = await asyncio.wait_for(proc.communicate(), 120)
            assert proc.returncode is not None
            return proc.returncode, out.decode(), err.decode()

        _, out, err = await run()
        assert "issuer=" in out + err, (out, err)
        assert "/token" not in [p for _, p, _ in as_log.requests]
        _, out, err = await run("--issuer", as_url)
        report = json.loads(out)
        assert "issuer=" not in out and "aborted" not in json.dumps(report.get("info", {})), (report, err)
        token_requests = [h for _, p, h in as_log.requests if p == "/token"]
        assert token_requests and all(h.get("authorization", "").startswith("Basic ") for h in token_requests)
