"""The official conformance suite's authorization scenarios against mcpkit's OAuth client and authorization server.

The client program is ``examples/conformance_client.py`` (its ``auth/*`` scenarios connect with
:class:`mcpkit.auth.OAuthClient`, configured from the scenario's context, a headless browser playing the user).
These tests run the harness (tests/node_modules, pinned in tests/package.json) over those scenarios, the extension
flows included (client credentials with ``private_key_jwt``, enterprise-managed authorization, workload identity,
DPoP with and without nonces), and over the ``authorization`` scenarios that test an authorization server (against
:class:`mcpkit.auth.AuthorizationServer` on uvicorn). ``tests/conformance/run.py`` runs every scenario at every
revision; this file keeps the requirement-carrying runs in the test suite. A check counts as failed when its
status is FAILURE or, for client scenarios, WARNING (the harness's client rule); scenarios marked allowClientError
by the harness expect the client to refuse, so a non-zero exit is fine there.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from support.paths import TESTS

HERE = TESTS
ROOT = HERE.parent
NODE = HERE / "node_modules" / ".bin" / "node"
HARNESS = HERE / "node_modules" / "conformance-0.2" / "dist" / "index.js"
HARNESS_OLD = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
CLIENT = ROOT / "examples" / "conformance_client.py"


# ------------------------------------------------------------------------------------------ the pytest side
def _checks(out_dir: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for f in sorted(out_dir.rglob("checks.json")):
        found.extend(json.loads(f.read_text(encoding="utf-8")))
    return found


needs_harness = pytest.mark.skipif(
    not (NODE.exists() and HARNESS.exists()), reason="npm peers missing: run scripts/test.sh (cd tests && npm ci)"
)

# (scenario, spec version) pairs; allowClientError scenarios expect the client to refuse
CLIENT_LEGS: list[tuple[str, str | None]] = [
    ("auth/metadata-default", "2025-11-25"),
    ("auth/metadata-var1", "2025-11-25"),
    ("auth/metadata-var2", "2025-11-25"),
    ("auth/metadata-var3", "2025-11-25"),
    ("auth/basic-cimd", "2025-11-25"),
    ("auth/scope-from-www-authenticate", "2025-11-25"),
    ("auth/scope-from-scopes-supported", "2025-11-25"),
    ("auth/scope-omitted-when-undefined", "2025-11-25"),
    ("auth/scope-step-up", "2025-11-25"),
    ("auth/scope-retry-limit", "2025-11-25"),
    ("auth/token-endpoint-auth-basic", "2025-06-18"),
    ("auth/token-endpoint-auth-post", "2025-06-18"),
    ("auth/token-endpoint-auth-none", "2025-06-18"),
    ("auth/pre-registration", "2025-11-25"),
    ("auth/2025-03-26-oauth-metadata-backcompat", "2025-03-26"),
    ("auth/2025-03-26-oauth-endpoint-fallback", "2025-03-26"),
    ("auth/metadata-default", "2026-07-28"),
    ("auth/scope-step-up", "2026-07-28"),
    ("auth/resource-mismatch", "2026-07-28"),
    ("auth/offline-access-scope", "2026-07-28"),
    ("auth/offline-access-not-supported", "2026-07-28"),
    ("auth/authorization-server-migration", "2026-07-28"),
    ("auth/iss-supported", "2026-07-28"),
    ("auth/iss-not-advertised", "2026-07-28"),
    ("auth/iss-supported-missing", "2026-07-28"),
    ("auth/iss-wrong-issuer", "2026-07-28"),
    ("auth/iss-unexpected", "2026-07-28"),
    ("auth/iss-normalized", "2026-07-28"),
    ("auth/metadata-issuer-mismatch", "2026-07-28"),
]

# the 0.1.16 harness (no --spec-version, no MCP_CONFORMANCE_PROTOCOL_VERSION): its whole auth set
OLD_SCENARIOS = [
    "metadata-default",
    "metadata-var1",
    "metadata-var2",
    "metadata-var3",
    "basic-cimd",
    "scope-from-www-authenticate",
    "scope-from-scopes-supported",
    "scope-omitted-when-undefined",
    "scope-step-up",
    "scope-retry-limit",
    "token-endpoint-auth-basic",
    "token-endpoint-auth-post",
    "token-endpoint-auth-none",
    "pre-registration",
    "2025-03-26-oauth-metadata-backcompat",
    "2025-03-26-oauth-endpoint-fallback",
    "resource-mismatch",
    "offline-access-scope",
    "offline-access-not-supported",
    "client-credentials-basic",
    "client-credentials-jwt",
    "cross-app-access-complete-flow",
]
# extensions: no --spec-version (the harness skips an extension scenario given one)
for extension in (
    "auth/client-credentials-basic",
    "auth/client-credentials-jwt",
    "auth/enterprise-managed-authorization",
    "auth/wif-jwt-bearer",
    "auth/dpop",
    "auth/dpop-nonce",
):
    CLIENT_LEGS.append((extension, None))
LEGS = [(str(HARNESS), s, v) for s, v in CLIENT_LEGS] + [(str(HARNESS_OLD), "auth/" + s, None) for s in OLD_SCENARIOS]
LEG_IDS = [f"0.2:{s}@{v}" for s, v in CLIENT_LEGS] + [f"0.1.16:auth/{s}" for s in OLD_SCENARIOS]

REQS = {
    "auth/2025-03-26-oauth-metadata-backcompat": ("M032", "M033", "M034"),
    "auth/2025-03-26-oauth-endpoint-fallback": ("M034", "M035"),
    "auth/metadata-default": ("M032", "M033", "M036", "S012"),
    "auth/token-endpoint-auth-none": ("M031", "S010"),
}


@needs_harness
@pytest.mark.timeout(150)
@pytest.mark.parametrize(("harness", "scenario", "spec"), LEGS, ids=LEG_IDS)
def test_auth_client_scenario(harness: str, scenario: str, spec: str | None, request: pytest.FixtureRequest) -> None:
    if not Path(harness).exists():
        pytest.skip(f"harness missing: {harness}")
    for rid in REQS.get(scenario, ()):
        request.node.add_marker(pytest.mark.req(rid))
    with tempfile.TemporaryDirectory(prefix="mcpkit-authconf-") as tmp:
        out = Path(tmp)
        command = f"{sys.executable} {CLIENT}"
        assert command.count(" ") == 1, "the harness splits --command on spaces"
        proc = subprocess.run(
            [
                str(NODE),
                harness,
                "client",
                "--command",
                command,
                "--scenario",
                scenario,
                *(["--spec-version", spec] if spec else []),
                "-o",
                str(out),
                "--timeout",
                "60000",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=140,
        )
        checks = _checks(out)
    text = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)
    assert checks, f"no checks written:\n{text[-3000:]}"
    assert any(c.get("status") == "SUCCESS" for c in checks), text[-3000:]
    bad = [c for c in checks if c.get("status") in ("FAILURE", "WARNING")]
    assert not bad, json.dumps(bad, indent=1)[:3000] + "\n" + text[-2000:]
    refusal_expected = "CLIENT EXITED WITH ERROR" in text and any(
        s in scenario for s in ("iss-", "mismatch", "retry-limit")
    )
    assert proc.returncode == 0 or refusal_expected, text[-3000:]


async def _play_browser(proc: asyncio.subprocess.Process, prefix: str) -> bytes:
    """Read the harness output; when it prints the authorization URL, open it like a browser would (our AS
    auto-approves and redirects to the harness's callback server)."""
    import httpx

    assert proc.stdout is not None
    lines: list[bytes] = []
    url: str | None = None
    listening = False  # the harness prints the URL before its callback server is up: wait for both
    async with httpx.AsyncClient(follow_redirects=True, timeout=10) as browser:
        async for line in proc.stdout:
            lines.append(line)
            text = line.decode(errors="replace").strip()
            if text.startswith(prefix):
                url = text
            elif text.startswith("Callback server started"):
                listening = True
            if url and listening:
                await browser.get(url)
                url, listening = None, False
    await proc.wait()
    return b"".join(lines)


@needs_harness
@pytest.mark.timeout(150)
@pytest.mark.req("M031", "S011")
async def test_authorization_server_scenarios(free_port: Any) -> None:
    """Both scenarios in one run: authorization-code-grant reads the metadata the first one fetched."""
    import socket

    from mcpkit.auth import AuthorizationServer
    from support.asgi import serve_asgi

    callback_port = free_port()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    resource = "http://127.0.0.1:9/mcp"
    authz = AuthorizationServer(base, auto_approve=True, resources=[resource])
    client = await authz.register_client(
        redirect_uris=[f"http://127.0.0.1:{callback_port}/callback"], token_endpoint_auth_method="none"
    )
    async with serve_asgi(authz, sock=sock):
        with tempfile.TemporaryDirectory(prefix="mcpkit-asconf-") as tmp:
            proc = await asyncio.create_subprocess_exec(
                str(NODE),
                str(HARNESS),
                "authorization",
                "--url",
                base,
                "--client-id",
                client.client_id,
                "--resource",
                resource,
                "--port",
                str(callback_port),
                "-o",
                tmp,
                cwd=ROOT,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            output = await asyncio.wait_for(_play_browser(proc, base + "/authorize?"), 140)
            checks = _checks(Path(tmp))
    text = re.sub(r"\x1b\[[0-9;]*m", "", output.decode(errors="replace"))
    ids = {c.get("id") for c in checks if c.get("status") == "SUCCESS"}
    assert {"authorization-server-metadata", "authorization-code-grant"} <= ids, text[-3000:]
    bad = [c for c in checks if c.get("status") == "FAILURE"]
    assert not bad, json.dumps(bad, indent=1)[:3000]
