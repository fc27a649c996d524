"""Several worker PROCESSES, one store, one MCP endpoint, each test run over Redis (redis-server) and over PostgreSQL:
a change made through worker A reaches the clients held by worker B, in both eras, what one worker seals (list
cursors) another opens, and a handshake session made on one continues on the other (its GET stream resumed there).

Workers are launched two ways: ``python tests/support/store_server.py worker redis|postgres <url> <port> <name>``
(uvicorn + ``create_app`` given the backend's fan-out and event store, and its session store: the fan-out started by
the ASGI lifespan) and ``mcpkit run <file> --transport http`` (Redis: a server file that calls
``app.set_fanout(RedisFanout(...))``, started by the app's lifespan too, or else by the first session or listen
stream; PostgreSQL: ``--postgres <url>``, the stores built by ``create_app`` from the configuration).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from mcpkit.client.lowlevel import ClientSession
from mcpkit.stores.log import position_order
from mcpkit.transports.http import StreamableHTTPClientTransport
from support.mcp_http import ACCEPT_BOTH, initialize_body
from support.paths import TESTS
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)
from support.redis_server import _free_port, redis_url  # noqa: F401  (the session fixture)

WORKER = [sys.executable, str(TESTS / "support" / "store_server.py"), "worker"]


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            raise RuntimeError(f"worker exited with {proc.returncode}: {out[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"worker on port {port} did not start within {timeout} s")


# The same worker as a file `mcpkit run` serves. Redis: set_fanout in the module, started by the first session or
# listen (no ASGI wrapper, no event store: the CLI has no option for one). PostgreSQL: the stores built by
# create_app from `--postgres`.
RUN_SERVER = f"""
import os
import sys

sys.path.insert(0, {str(TESTS)!r})
from support.redis_server import worker_app

app = worker_app(os.environ["WORKER_NAME"])
if os.environ.get("REDIS_URL"):
    from mcpkit.stores.redis import RedisFanout

    app.set_fanout(RedisFanout(os.environ["REDIS_URL"], prefix="e2e:"))
"""


def _launch(
    backend: str, style: str, url: str, port: int, name: str, tmp: Path, prefix: str
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "WORKER_NAME": name}
    env.pop("REDIS_URL", None)  # (the mcpkit-run server file starts a Redis fan-out when it is set)
    env.update({"REDIS_URL": url} if backend == "redis" else {"WORKER_PREFIX": prefix})
    if style == "uvicorn":
        cmd = [*WORKER, backend, url, str(port), name]
    else:
        server = tmp / "bus_server.py"
        server.write_text(RUN_SERVER, encoding="utf-8")
        cmd = [sys.executable, "-m", "mcpkit.cli.main", "run", str(server), "--transport", "http", "--port", str(port)]
        if backend == "postgres":
            cmd += ["--postgres", url, "--postgres-prefix", prefix]
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)


@contextlib.contextmanager
def workers_on(backend: str, style: str, url: str, tmp: Path) -> Iterator[dict[str, str]]:
    """Two worker processes on one store (``backend`` "redis" or "postgres", the latter's tables under a fresh
    prefix), launched in ``style`` ("uvicorn" or "mcpkit-run"): ``{"A": endpoint url, "B": endpoint url}``."""
    prefix = f"e2e{secrets.token_hex(3)}_"
    procs: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
    try:
        for name in ("A", "B"):
            port = _free_port()
            procs[name] = (_launch(backend, style, url, port, name, tmp, prefix), port)
        for proc, port in procs.values():
            _wait_port(port, proc, timeout=20 if backend == "redis" else 60)
        yield {name: f"http://127.0.0.1:{port}/mcp" for name, (_, port) in procs.items()}
    finally:
        for proc, _ in procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc, _ in procs.values():
            try:
                proc.wait(timeout=10 if backend == "redis" else 15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()


def _param(backend: str, style: str) -> Any:
    return pytest.param((backend, style), marks=getattr(pytest.mark, backend), id=f"{backend}-{style}")


@contextlib.contextmanager
def _workers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    backend, style = request.param
    url = request.getfixturevalue(f"{backend}_url")
    with workers_on(backend, style, url, tmp_path_factory.mktemp(f"workers-{backend}")) as urls:
        yield urls


# Module-scoped: every test opens its own sessions, so the two workers can serve them all (starting a worker
# pair costs about a second).
@pytest.fixture(scope="module", params=[_param(b, s) for b in ("redis", "postgres") for s in ("uvicorn", "mcpkit-run")])
def workers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with _workers(request, tmp_path_factory) as urls:
        yield urls


# Workers that also share the store's event store and session store: with Redis only the uvicorn script's (`mcpkit
# run` has no option for them), with PostgreSQL either (`--postgres` builds them).
@pytest.fixture(
    scope="module", params=[_param("redis", "uvicorn"), _param("postgres", "uvicorn"), _param("postgres", "mcpkit-run")]
)
def store_workers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with _workers(request, tmp_path_factory) as urls:
        yield urls


@contextlib.asynccontextmanager
async def _modern(url: str) -> AsyncIterator[ClientSession]:
    async with ClientSession(StreamableHTTPClientTransport(url), mode="modern") as cs:
        yield cs


def _text(result: object) -> str:
    content = getattr(result, "content", None) or []
    return str(getattr(content[0], "text", "")) if content else ""


@pytest.mark.req("S025", "M055")
async def test_a_change_on_worker_a_reaches_a_listen_stream_on_worker_b(workers: dict[str, str]) -> None:
    """A tool added and a resource touched on worker A reach a 2026-07-28 listen stream held by worker B, once
    each; a resource nobody on B subscribed to does not."""
    async with (
        _modern(workers["B"]) as cs_b,
        cs_b.listen(tools=True, resource_uris=["mcpkit://doc"]) as sub,
        _modern(workers["A"]) as cs_a,
    ):
        assert _text(await cs_a.call_tool("whoami", {})) == "A"
        assert _text(await cs_b.call_tool("whoami", {})) == "B"
        assert _text(await cs_a.call_tool("add_tool", {"tool_name": "t1"})) == "added t1 on A"
        method, _ = await sub.next(timeout=20)
        assert method == "notifications/tools/list_changed"
        assert _text(await cs_a.call_tool("touch", {"uri": "mcpkit://doc"})) == "touched mcpkit://doc on A"
        method, params = await sub.next(timeout=20)
        assert method == "notifications/resources/updated" and params["uri"] == "mcpkit://doc"
        await cs_a.call_tool("touch", {"uri": "mcpkit://other"})  # nobody on B subscribed to that one
        with pytest.raises(asyncio.TimeoutError):
            await sub.next(timeout=0.5)  # and nothing arrived twice


@pytest.mark.req("S025")
async def test_a_change_on_worker_a_reaches_a_handshake_get_stream_on_worker_b(workers: dict[str, str]) -> None:
    url_b = workers["B"]
    version = "2025-11-25"
    async with httpx.AsyncClient(timeout=10) as http:
        init = await http.post(url_b, json=initialize_body(version), headers={"accept": ACCEPT_BOTH})
        assert init.status_code == 200, init.text
        sid = init.headers["mcp-session-id"]
        headers = {"mcp-session-id": sid, "mcp-protocol-version": version}
        done = await http.post(
            url_b,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers={**headers, "accept": ACCEPT_BOTH},
        )
        assert done.status_code == 202
        async with http.stream("GET", url_b, headers={**headers, "accept": "text/event-stream"}) as stream:
            assert stream.status_code == 200  # the standalone stream of session `sid` is held by worker B
            async with _modern(workers["A"]) as cs_a:
                await cs_a.call_tool("add_tool", {"tool_name": "t2"})
            messages: list[object] = []

            async def read() -> None:
                async for line in stream.aiter_lines():
                    if line.startswith("data:") and line[5:].strip():
                        messages.append(orjson.loads(line[5:]))
                        return

            await asyncio.wait_for(read(), 10)
            assert messages == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]
        await http.delete(url_b, headers=headers)


async def test_a_list_cursor_sealed_by_worker_a_opens_on_worker_b(workers: dict[str, str]) -> None:
    async with _modern(workers["A"]) as cs_a, _modern(workers["B"]) as cs_b:
        first = await cs_a.list_tools()  # page_size=1: one tool and a cursor
        assert len(first.tools) == 1 and first.next_cursor
        second = await cs_b.list_tools(first.next_cursor)
        assert len(second.tools) == 1 and second.tools[0].name != first.tools[0].name


async def _events(lines: AsyncIterator[str], n: int) -> list[tuple[str | None, bytes]]:
    """The next ``n`` SSE events (id, data) (priming events included: their data is empty)."""
    out: list[tuple[str | None, bytes]] = []
    event_id: str | None = None
    data: list[str] = []
    async for line in lines:
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line == "" and (event_id is not None or data):
            out.append((event_id, "\n".join(data).encode()))
            event_id, data = None, []
            if len(out) == n:
                break
    return out


@pytest.mark.req("A011", "A012", "S025")
async def test_a_get_stream_on_worker_b_resumes_from_the_store_after_a_drop(store_workers: dict[str, str]) -> None:
    """Events for B's session are numbered and kept in the store; after the connection drops, the client resumes with
    Last-Event-ID and gets exactly what it missed, including a change made on A while it was away."""
    url_b = store_workers["B"]
    version = "2025-11-25"
    async with httpx.AsyncClient(timeout=10) as http, _modern(store_workers["A"]) as cs_a:
        init = await http.post(url_b, json=initialize_body(version), headers={"accept": ACCEPT_BOTH})
        sid = init.headers["mcp-session-id"]
        headers = {"mcp-session-id": sid, "mcp-protocol-version": version}
        await http.post(
            url_b,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers={**headers, "accept": ACCEPT_BOTH},
        )
        async with http.stream("GET", url_b, headers={**headers, "accept": "text/event-stream"}) as stream:
            lines = stream.aiter_lines()
            ((prime_id, prime),) = await asyncio.wait_for(_events(lines, 1), 10)
            assert prime == b"" and prime_id  # the priming event (2025-11-25)
            await cs_a.call_tool("add_tool", {"tool_name": "r1"})
            ((first_id, first),) = await asyncio.wait_for(_events(lines, 1), 10)
            assert orjson.loads(first)["method"] == "notifications/tools/list_changed"
        # the connection is gone; more changes happen meanwhile (on A, and on B itself)
        await cs_a.call_tool("touch", {"uri": "mcpkit://nobody"})  # not subscribed: nothing for this session
        await cs_a.call_tool("add_tool", {"tool_name": "r2"})
        async with _modern(url_b) as cs_b:
            await cs_b.call_tool("add_tool", {"tool_name": "r3"})
        await asyncio.sleep(0.3)  # let B's bus subscriber deliver (into the event store: no stream is open)
        resume = {**headers, "accept": "text/event-stream", "last-event-id": str(first_id)}
        async with http.stream("GET", url_b, headers=resume) as stream:
            assert stream.status_code == 200
            missed = await asyncio.wait_for(_events(stream.aiter_lines(), 2), 10)
        assert [orjson.loads(d)["method"] for _, d in missed] == ["notifications/tools/list_changed"] * 2
        ids = [str(first_id)] + [str(i) for i, _ in missed]
        # the GET stream of a session is the shared notification log filtered for it: ids are log positions
        assert len(set(ids)) == 3 and all(i.startswith("g") for i in ids)
        assert [position_order(i[1:]) for i in ids] == sorted(position_order(i[1:]) for i in ids)
        await http.delete(url_b, headers=headers)


# ---------------------------------------------------------------------------------------------- handshake sessions
# A handshake session created on worker A continues on worker B through the shared session store: requests,
# the GET stream, subscriptions and log level made through either worker, and a DELETE on one ends it on all.

VERSION = "2025-11-25"


async def _initialize(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    init = await http.post(url, json=initialize_body(VERSION), headers={"accept": ACCEPT_BOTH})
    assert init.status_code == 200, init.text
    headers = {"mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
    done = await http.post(
        url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers={**headers, "accept": ACCEPT_BOTH}
    )
    assert done.status_code == 202
    return headers


async def _rpc(
    http: httpx.AsyncClient, url: str, headers: dict[str, str], method: str, params: dict[str, object]
) -> httpx.Response:
    return await http.post(
        url,
        json={"jsonrpc": "2.0", "id": 7, "method": method, "params": params},
        headers={**headers, "accept": ACCEPT_BOTH},
    )


def _tool_text(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    body = response.text
    if body.startswith("{"):
        return str(orjson.loads(body)["result"]["content"][0]["text"])
    data = [line[5:].strip() for line in body.splitlines() if line.startswith("data:") and line[5:].strip()]
    return str(orjson.loads(data[-1])["result"]["content"][0]["text"])


async def _a_tool_added_seen(
    http: httpx.AsyncClient, headers: dict[str, str], stream_url: str, change_url: str, tool_name: str
) -> str | None:
    """Open the session's GET stream on ``stream_url`` and, once it is primed, add a tool through ``change_url``: the
    id of the event that tells the stream so (the stream is closed after it)."""
    async with http.stream("GET", stream_url, headers={**headers, "accept": "text/event-stream"}) as stream:
        assert stream.status_code == 200
        lines = stream.aiter_lines()
        ((_, prime),) = await asyncio.wait_for(_events(lines, 1), 20)
        assert prime == b""  # the priming event (2025-11-25)
        arguments = {"name": "add_tool", "arguments": {"tool_name": tool_name}}
        _tool_text(await _rpc(http, change_url, headers, "tools/call", arguments))
        ((event_id, data),) = await asyncio.wait_for(_events(lines, 1), 20)
        assert orjson.loads(data) == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        return event_id


@pytest.mark.req("S025")
async def test_a_handshake_session_created_on_a_continues_on_b(store_workers: dict[str, str]) -> None:
    a, b = store_workers["A"], store_workers["B"]
    async with httpx.AsyncClient(timeout=10) as http:
        headers = await _initialize(http, a)
        assert _tool_text(await _rpc(http, b, headers, "tools/call", {"name": "whoami"})) == "B"
        assert (await _rpc(http, b, headers, "logging/setLevel", {"level": "debug"})).status_code == 200
        await _a_tool_added_seen(http, headers, b, a, "h1")  # B holds the GET stream of a session A created
        assert _tool_text(await _rpc(http, a, headers, "tools/call", {"name": "whoami"})) == "A"
        await http.delete(a, headers=headers)


@pytest.mark.req("S025")
async def test_a_subscription_made_through_a_reaches_the_get_stream_on_b(store_workers: dict[str, str]) -> None:
    """A handshake session made on worker A subscribes there; the resource touched on A reaches the session's GET
    stream held by worker B."""
    a, b = store_workers["A"], store_workers["B"]
    async with httpx.AsyncClient(timeout=20) as http:
        headers = await _initialize(http, a)
        async with http.stream("GET", b, headers={**headers, "accept": "text/event-stream"}) as stream:
            assert stream.status_code == 200  # B holds the GET stream of a session A created
            lines = stream.aiter_lines()
            await asyncio.wait_for(_events(lines, 1), 20)  # priming
            assert (await _rpc(http, a, headers, "resources/subscribe", {"uri": "mcpkit://doc"})).status_code == 200
            _tool_text(
                await _rpc(http, a, headers, "tools/call", {"name": "touch", "arguments": {"uri": "mcpkit://doc"}})
            )
            ((_, data),) = await asyncio.wait_for(_events(lines, 1), 20)
            assert orjson.loads(data) == {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": "mcpkit://doc"},
            }
        await http.delete(a, headers=headers)


@pytest.mark.req("S025")
async def test_a_session_deleted_on_a_is_gone_on_b(store_workers: dict[str, str]) -> None:
    a, b = store_workers["A"], store_workers["B"]
    async with httpx.AsyncClient(timeout=10) as http:
        headers = await _initialize(http, a)
        _tool_text(await _rpc(http, b, headers, "tools/call", {"name": "whoami"}))  # B now holds a copy
        assert (await http.delete(a, headers=headers)).status_code == 200
        assert (await _rpc(http, b, headers, "tools/call", {"name": "whoami"})).status_code == 404


async def test_a_get_stream_moved_from_b_to_a_keeps_receiving(store_workers: dict[str, str]) -> None:
    a, b = store_workers["A"], store_workers["B"]
    async with httpx.AsyncClient(timeout=10) as http:
        headers = await _initialize(http, a)
        await _a_tool_added_seen(http, headers, b, a, "m1")
        await _a_tool_added_seen(http, headers, a, b, "m2")


@pytest.mark.req("A011", "A012")
async def test_the_standalone_stream_resumes_on_another_worker_with_what_it_missed(
    store_workers: dict[str, str],
) -> None:
    """Changes made on both workers while the client was away reach it on the other worker, with the ids they
    have in the store's notification log (its positions, in order)."""
    a, b = store_workers["A"], store_workers["B"]
    async with httpx.AsyncClient(timeout=20) as http:
        headers = await _initialize(http, a)
        first_id = await _a_tool_added_seen(http, headers, b, a, "pr1")
        # the connection is gone; changes happen meanwhile, on both workers
        _tool_text(await _rpc(http, b, headers, "tools/call", {"name": "add_tool", "arguments": {"tool_name": "pr2"}}))
        _tool_text(await _rpc(http, a, headers, "tools/call", {"name": "add_tool", "arguments": {"tool_name": "pr3"}}))
        resume = {**headers, "accept": "text/event-stream", "last-event-id": str(first_id)}
        async with http.stream("GET", a, headers=resume) as stream:  # reconnecting to the OTHER worker
            assert stream.status_code == 200
            missed = await asyncio.wait_for(_events(stream.aiter_lines(), 2), 20)
        assert [orjson.loads(d)["method"] for _, d in missed] == ["notifications/tools/list_changed"] * 2
        ids = [str(first_id)] + [str(i) for i, _ in missed]
        assert len(set(ids)) == 3 and all(i.startswith("g") for i in ids)  # log positions, in order
        assert [position_order(i[1:]) for i in ids] == sorted(position_order(i[1:]) for i in ids)
        await http.delete(a, headers=headers)
