"""A real load balancer (nginx and HAProxy from the configurations shipped in deploy/, round robin, no stickiness)
in front of three `mcpkit run examples/everything.py -t http --redis ...` workers on separate ports, as separate
hosts would be. Every request of a client may reach another worker, and the client sees one server:

* the TypeScript SDK client runs its checks through nginx in both eras (1.32: handshake, 2.4: 2026-07-28), 8/8
  each: sampling, elicitation and roots answered through another worker than the one that asked, list pages
  whose cursors were sealed elsewhere, notifications from changes made on other workers;
* mcpkit's client does the same through nginx and HAProxy;
* SSE resumption: a rolling restart of every worker (SIGTERM: drain, retry hint) under a TypeScript client's GET
  stream loses no notification and repeats none;
* the per-client quota takes X-Forwarded-For only from the balancer's address.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpkit import Client
from support.balancer import Balancer
from support.paths import INTEROP, SERVERS, TESTS
from support.redis_server import redis_url  # noqa: F401  (the session fixture)
from support.scale import ACCEPT_BOTH, Workers, open_session

pytestmark = pytest.mark.redis

OPTIONS = {
    "elicitation": {"action": "accept", "content": {"name": "Ada"}},
    "sampling": {"text": "forty-two"},
    "roots": [{"uri": "file:///interop", "name": "interop"}],
}
COMMON = [
    {"op": "listTools"},
    {"op": "callTool", "name": "add", "arguments": {"a": 2, "b": 3}},
    {"op": "callTool", "name": "slow", "arguments": {"steps": 3, "delay_ms": 20}, "progress": True},
    {"op": "callTool", "name": "sample", "arguments": {"prompt": "6 x 7?"}},
    {"op": "callTool", "name": "ask_name", "arguments": {}},
    {"op": "callTool", "name": "roots", "arguments": {}},
    {"op": "listResources", "all": True},
]
HANDSHAKE_STEPS = [
    *COMMON,
    {"op": "subscribe", "uri": "mcpkit://counter"},
    {"op": "callTool", "name": "touch", "arguments": {}},
    {"op": "waitNotification", "method": "notifications/resources/updated", "timeoutMs": 10000},
]
MODERN_STEPS = [
    *COMMON,
    {"op": "listen", "filter": {"resourceSubscriptions": ["mcpkit://counter"]}},
    {"op": "callTool", "name": "touch", "arguments": {}},
    {"op": "waitNotification", "method": "notifications/resources/updated", "timeoutMs": 10000},
    {"op": "closeListen"},
]


@pytest.fixture(scope="module")
def deployment(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Workers, Balancer]]:  # noqa: F811
    with (
        Workers(redis_url, 3, extra=["--forwarded-allow-ips", "127.0.0.1"]) as workers,
        Balancer("nginx", workers.ports, tmp_path_factory.mktemp("nginx")) as balancer,
    ):
        yield workers, balancer


async def run_ts_client(node: Path, script: str, url: str, steps: list[dict[str, Any]], *extra: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        str(node),
        str(INTEROP / script),
        *extra,
        "--http",
        url,
        "--script",
        json.dumps({"options": {**OPTIONS, "terminateSession": True}, "steps": steps}),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(TESTS),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, (out.decode()[-3000:], err.decode()[-2000:])
    result: dict[str, Any] = json.loads(out)
    return result


def ts_checks(out: dict[str, Any]) -> dict[str, bool]:
    """The eight checks of a TypeScript client's run through the balancer (each: passed or not)."""
    r = out["results"]
    text = [(x.get("content") or [{}])[0].get("text") if isinstance(x, dict) else None for x in r]
    progress = [n["params"]["progress"] for n in out["notifications"] if n["method"] == "notifications/progress"]
    asked = {q["method"] for q in out["requests"]}
    return {
        "tools listed": {"sample", "ask_name", "roots", "touch"} <= {t["name"] for t in r[0].get("tools", [])},
        "structured result": r[1].get("structuredContent") == {"result": 5},
        "progress": progress[-3:] == [1, 2, 3] and text[2] == "done after 3 steps",
        "sampling answered through another worker": text[3] == "forty-two" and "sampling/createMessage" in asked,
        "elicitation answered through another worker": text[4] == "Hello, Ada!" and "elicitation/create" in asked,
        "roots answered through another worker": text[5] is not None
        and json.loads(text[5]) == [{"uri": "file:///interop", "name": "interop"}],
        "list pages sealed on other workers": len(r[6].get("resources", [])) == 101,
        "notification of a change made on another worker": r[-2 if out["era"] == "modern" else -1].get("method")
        == "notifications/resources/updated",
    }


def _score(checks: dict[str, bool]) -> str:
    return f"{sum(checks.values())}/{len(checks)}"


async def test_the_balancer_sends_every_request_to_another_worker(deployment: tuple[Workers, Balancer]) -> None:
    _, balancer = deployment
    async with httpx.AsyncClient(timeout=10) as http:  # one keep-alive connection to nginx
        seen = [(await http.get(balancer.base + "/readyz")).json()["worker"] for _ in range(6)]
    assert len(set(seen)) == 3 and all(a != b for a, b in itertools.pairwise(seen)), seen


@pytest.mark.npm
@pytest.mark.req("S025", "M055")
async def test_typescript_sdk_client_through_the_balancer_handshake_era(
    node_bin: Path, deployment: tuple[Workers, Balancer]
) -> None:
    _, balancer = deployment
    out = await run_ts_client(node_bin, "ts_client.mjs", balancer.url, HANDSHAKE_STEPS)
    assert out["era"] == "legacy" and out["protocolVersion"] == "2025-11-25"
    checks = ts_checks(out)
    assert _score(checks) == "8/8", (checks, out["results"][-3:], out.get("errors"))


@pytest.mark.npm
async def test_typescript_sdk_client_through_the_balancer_modern_era(
    node_bin: Path, deployment: tuple[Workers, Balancer]
) -> None:
    _, balancer = deployment
    out = await run_ts_client(node_bin, "ts_client_v2.mjs", balancer.url, MODERN_STEPS, "--negotiation", "2026-07-28")
    assert out["era"] == "modern" and out["protocolVersion"] == "2026-07-28"
    checks = ts_checks(out)
    assert _score(checks) == "8/8", (checks, out["results"][-4:], out.get("errors"))


async def _mcpkit_checks(url: str, mode: str) -> dict[str, bool]:
    asked: list[str] = []

    def sampling(params: dict[str, Any]) -> dict[str, Any]:
        asked.append("sampling")
        return {"role": "assistant", "content": {"type": "text", "text": "forty-two"}, "model": "m"}

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append("elicitation")
        return {"action": "accept", "content": {"name": "Ada"}}

    progress: list[float] = []
    async with Client(
        url,
        mode=mode,
        sampling_handler=sampling,
        elicitation_handler=elicit,
        roots=[{"uri": "file:///interop", "name": "interop"}],
    ) as client:
        tools = {t.name for t in await client.list_tools()}
        added = await client.call_tool("add", {"a": 2, "b": 3})
        slow = await client.call_tool(
            "slow", {"steps": 3, "delay_ms": 20}, on_progress=lambda p, t, m: progress.append(p)
        )
        sampled = await client.call_tool("sample", {"prompt": "6 x 7?"})
        named = await client.call_tool("ask_name", {})
        roots = await client.call_tool("roots", {})
        resources = await client.list_resources()
        async with client.watch(resource_uris=["mcpkit://counter"]) as watch:
            await client.call_tool("touch", {})
            method, params = await watch.next(timeout=10)
    return {
        "tools listed": {"sample", "ask_name", "roots", "touch"} <= tools,
        "structured result": added.structured == {"result": 5},
        "progress": progress == [1, 2, 3] and slow.text == "done after 3 steps",
        "sampling answered through another worker": sampled.text == "forty-two" and "sampling" in asked,
        "elicitation answered through another worker": named.text == "Hello, Ada!" and "elicitation" in asked,
        "roots answered through another worker": json.loads(roots.text)
        == [{"uri": "file:///interop", "name": "interop"}],
        "list pages sealed on other workers": len(resources) == 101,
        "notification of a change made on another worker": (method, params.get("uri"))
        == ("notifications/resources/updated", "mcpkit://counter"),
    }


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_mcpkit_client_through_nginx(deployment: tuple[Workers, Balancer], mode: str) -> None:
    _, balancer = deployment
    checks = await _mcpkit_checks(balancer.url, mode)
    assert _score(checks) == "8/8", checks


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_mcpkit_client_through_haproxy(deployment: tuple[Workers, Balancer], tmp_path: Path, mode: str) -> None:
    workers, _ = deployment
    with Balancer("haproxy", workers.ports, tmp_path / "haproxy") as haproxy:
        checks = await _mcpkit_checks(haproxy.url, mode)
    assert _score(checks) == "8/8", checks


@pytest.mark.npm
@pytest.mark.req("A012")
async def test_a_rolling_restart_under_a_typescript_clients_get_stream_loses_and_repeats_nothing(
    node_bin: Path,
    redis_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Every worker is restarted in turn (SIGTERM: it ends its GET streams with a retry hint, then stops) while the
    TypeScript client (1.32) holds a GET stream through nginx and changes keep coming from another client: the SDK
    resumes its stream on the workers that remain, with Last-Event-ID, and gets every notification once."""
    touches = 6
    steps = [
        {"op": "subscribe", "uri": "mcpkit://counter"},
        {"op": "sleep", "ms": 1500},  # the test restarts the workers and touches meanwhile
        {"op": "waitNotification", "method": "notifications/resources/updated", "timeoutMs": 30000},
        *[{"op": "waitNotification", "method": "notifications/resources/updated", "timeoutMs": 30000}] * (touches - 1),
        {"op": "sleep", "ms": 1000},  # (a duplicate would arrive meanwhile)
    ]
    with (
        Workers(redis_url, 3) as workers,
        Balancer("nginx", workers.ports, tmp_path / "nginx") as balancer,
    ):
        client = asyncio.create_task(run_ts_client(node_bin, "ts_client.mjs", balancer.url, steps))
        await asyncio.sleep(2.5)  # the client subscribed and holds its GET stream on one of the workers
        async with Client(balancer.url, mode="modern") as other:
            for index in range(3):
                await other.call_tool("touch", {})
                await asyncio.to_thread(workers.restart, index)  # SIGTERM: drain (retry hint), stop; then start again
                await other.call_tool("touch", {})
            for _ in range(touches - 6):
                await other.call_tool("touch", {})
        out = await client
    updates = [n for n in out["notifications"] if n["method"] == "notifications/resources/updated"]
    assert len(updates) == touches, (len(updates), out.get("errors"))


async def test_the_per_client_quota_trusts_forwarded_addresses_only_from_the_balancer(
    redis_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """One worker behind nginx, one session per client (--max-sessions-per-client 1), held busy by a GET stream:
    a second session of the same client is refused (429), another client's is not. Through nginx the client is
    the address nginx saw (what it puts in X-Forwarded-For), whatever the client itself claimed there; directly,
    the worker ignores X-Forwarded-For (the peer is not the balancer, 127.0.0.1)."""
    extra = ["--forwarded-allow-ips", "127.0.0.1", "--max-sessions-per-client", "1"]
    with Workers(redis_url, 1, extra=extra) as workers, Balancer("nginx", workers.ports, tmp_path / "nginx") as lb:

        def client(address: str, spoof: str) -> httpx.AsyncClient:
            transport = httpx.AsyncHTTPTransport(local_address=address)
            return httpx.AsyncClient(transport=transport, timeout=10, headers={"x-forwarded-for": spoof})

        async def second_session(http: httpx.AsyncClient, url: str) -> int:
            init = await http.post(url, json=_initialize(), headers={"accept": ACCEPT_BOTH})
            return init.status_code

        async def hold_one(http: httpx.AsyncClient, url: str) -> tuple[Any, Any]:
            headers = await open_session(http, url)
            cm = http.stream("GET", url, headers={**headers, "accept": "text/event-stream"})
            stream = await cm.__aenter__()
            assert stream.status_code == 200
            return cm, stream

        async with client("127.0.0.3", "1.1.1.1") as c3, client("127.0.0.4", "2.2.2.2") as c4:
            held = await hold_one(c3, lb.url)  # client 127.0.0.3 (through nginx): its one session, busy
            try:
                assert await second_session(c3, lb.url) == 429  # its claim (1.1.1.1) changed nothing
                c3.headers["x-forwarded-for"] = "9.9.9.9"
                assert await second_session(c3, lb.url) == 429  # nor does another claim
                assert await second_session(c4, lb.url) == 200  # another client (127.0.0.4) is another client
                direct = workers.urls[0]
                held_direct = await hold_one(c4, direct)  # directly: the worker sees 127.0.0.4, no claim trusted
                try:
                    c4.headers["x-forwarded-for"] = "127.0.0.9"
                    assert await second_session(c4, direct) == 429
                finally:
                    await held_direct[0].__aexit__(None, None, None)
            finally:
                await held[0].__aexit__(None, None, None)


def _initialize() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "q", "version": "0"}},
    }


# ---------------------------------------------------------------------------------------------- what deploy/ ships

DEPLOY = TESTS.parent / "deploy"


@pytest.mark.parametrize("kind", ["nginx", "haproxy"])
async def test_an_oauth_protected_server_is_discovered_and_signed_into_through_the_balancer(
    kind: str, tmp_path: Path
) -> None:
    """deployment.md's OAuth note behind the shipped configs: a client that reaches /mcp through the balancer gets
    the 401, then finds the protected resource metadata, the authorization server's metadata and its endpoints
    (here the same origin) through the same balancer."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(SERVERS / "everything_protected.py"), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        port = json.loads(await asyncio.wait_for(proc.stdout.readline(), 30))["port"]
        with Balancer(kind, [port], tmp_path / kind) as balancer:
            async with httpx.AsyncClient(timeout=10) as http:
                init = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
                r = await http.post(balancer.url, json=init, headers={"accept": ACCEPT_BOTH})
                assert r.status_code == 401 and "resource_metadata=" in r.headers["www-authenticate"]
                for path in (
                    "/.well-known/oauth-protected-resource/mcp",
                    "/.well-known/oauth-protected-resource",
                    "/.well-known/oauth-authorization-server",
                    "/jwks",
                ):
                    r = await http.get(balancer.base + path)
                    assert r.status_code == 200, (path, r.status_code, r.text[:200])
                r = await http.post(balancer.base + "/register", json={"redirect_uris": ["http://127.0.0.1/cb"]})
                assert r.status_code == 201, r.text[:200]
                r = await http.post(balancer.base + "/token", data={"grant_type": "authorization_code"})
                assert r.status_code in (400, 401) and r.json()["error"], r.text[:200]  # the AS's, not the balancer's
    finally:
        proc.kill()
        await proc.wait()


def test_the_compose_nginx_config_has_the_tested_locations() -> None:
    def server_block(text: str) -> list[str]:
        block = text[text.index("\nserver {") :]
        return [
            line.strip()
            for line in block.splitlines()
            if line.strip() and not line.strip().startswith("#") and not line.strip().startswith("server_name")
        ]

    tested = (DEPLOY / "nginx" / "mcpkit.conf").read_text(encoding="utf-8")
    compose = (DEPLOY / "nginx" / "compose.conf").read_text(encoding="utf-8")
    assert server_block(compose) == server_block(tested)


def test_the_manifests_parse_and_use_only_settings_mcpkit_knows() -> None:
    import re

    import yaml

    from mcpkit.stores.config import ENV

    known = {*ENV.values(), "MCPKIT_WORKERS", "MCPKIT_FORWARDED_ALLOW_IPS"}
    for path in [DEPLOY / "docker-compose.yml", *sorted((DEPLOY / "kubernetes").glob("*.yaml"))]:
        text = path.read_text(encoding="utf-8")
        docs = [d for d in yaml.safe_load_all(text) if d]
        assert docs, path
        assert set(re.findall(r"MCPKIT_[A-Z_]+", text)) <= known, path
    deployment = next(
        d
        for d in yaml.safe_load_all((DEPLOY / "kubernetes" / "mcpkit.yaml").read_text())
        if d and d["kind"] == "Deployment"
    )
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"


async def test_a_legacy_sse_session_works_through_round_robin(deployment: tuple[Workers, Balancer]) -> None:
    """2024-11-05 HTTP+SSE through nginx: the stream stays on one worker, the POSTs (requests, and the answer to
    a sampling request) reach the others and are forwarded to it."""
    _, balancer = deployment
    asked: list[str] = []

    def sampling(params: dict[str, Any]) -> dict[str, Any]:
        asked.append("sampling")
        return {"role": "assistant", "content": {"type": "text", "text": "forty-two"}, "model": "m"}

    async with Client(balancer.base + "/sse", transport="sse", sampling_handler=sampling) as client:
        for i in range(6):  # six POSTs: round robin sends them to all three workers
            assert (await client.call_tool("add", {"a": i, "b": 1})).structured == {"result": i + 1}
        assert (await client.call_tool("sample", {"prompt": "6 x 7?"})).text == "forty-two"
        assert len(await client.list_resources()) == 101
    assert asked == ["sampling"]


@pytest.mark.req("A012")
async def test_a_rolling_restart_under_mcpkits_client_loses_and_repeats_nothing(
    redis_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The same rolling restart under mcpkit's own client (handshake era: its GET stream resumes with
    Last-Event-ID through HAProxy, which takes a draining worker out on its /readyz)."""
    with (
        Workers(redis_url, 3) as workers,
        Balancer("haproxy", workers.ports, tmp_path / "haproxy") as balancer,
    ):
        async with Client(balancer.url, mode="handshake") as watcher, Client(balancer.url, mode="modern") as other:
            async with watcher.watch(resource_uris=["mcpkit://counter"]) as watch:
                await asyncio.sleep(1.0)  # (the GET stream opens in the background after the handshake)
                got: list[str] = []
                for index in range(3):
                    await other.call_tool("touch", {})
                    await asyncio.to_thread(workers.restart, index)
                    await other.call_tool("touch", {})
                for _ in range(6):
                    method, _ = await watch.next(timeout=30)
                    got.append(method)
                with pytest.raises(asyncio.TimeoutError):
                    await watch.next(timeout=1.0)  # and none twice
            assert (await watcher.call_tool("add", {"a": 1, "b": 2})).structured == {"result": 3}
    assert got == ["notifications/resources/updated"] * 6
