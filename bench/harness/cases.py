"""The cases, grouped by the server process they can share, and the interleaved, bounded runner.

A group starts one server for one contender and runs the selected cases of that group against it. Within
a repetition every group visits the contenders in order, the next repetition in reverse (A B C, C B A, ...),
so slow drift of the machine spreads over everyone. Every step has a wall-time bound; a contender that fails
to start or answers wrongly gets n/a with its error and the run goes on."""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

import orjson

from . import driver, procs
from .contenders import CLIENT_CONTENDERS, CLIENTS, SERVER_CONTENDERS, SERVERS, Contender, command

START_TIMEOUT = 30.0
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Budget:
    reps: int
    seq_calls: int
    seq_s: float
    c32_calls: int
    c32_s: float
    big_calls: int
    big_s: float
    cold_spawns: int
    http_seq_calls: int
    http_seq_s: float
    http_c32_calls: int
    http_c32_s: float
    sessions: int
    client_calls: int
    client_s: float
    prime: bool
    run_deadline_s: float
    growth_reps: int = 3  # the growth cases (list walks) run in the first growth_reps repetitions only
    growth_scale: float = 1.0  # registry sizes are multiplied by this (the quick run shrinks them)
    growth_s: float = 120.0  # wall-time bound of one server's start + walks
    # growth curves of issue 16 (payload size, idle sessions, requests in flight)
    payload_reps: int = 3  # repetitions of the payload curves (the first payload_reps of the run)
    payload_calls: int = 2_000  # per point (one payload size, one contender)
    payload_s: float = 0.5
    idle_reps: int = 1  # opening 10,000 sessions per contender is the slow part
    idle_scale: float = 1.0  # idle session counts are multiplied by this (the quick run shrinks them)
    idle_open_s: float = 120.0  # wall-time bound for opening the idle sessions of one server
    idle_s: float = 1.5  # sequential calls at each idle-session count
    inflight_reps: int = 1
    inflight_scale: float = 1.0  # in-flight counts are multiplied by this (the quick run shrinks them)
    inflight_s: float = 3.0  # closed-loop load at each in-flight count


FULL = Budget(
    reps=5,
    seq_calls=200_000,
    seq_s=1.5,
    c32_calls=400_000,
    c32_s=1.5,
    big_calls=2_000,
    big_s=1.5,
    cold_spawns=2,
    http_seq_calls=100_000,
    http_seq_s=1.5,
    http_c32_calls=200_000,
    http_c32_s=2.0,
    sessions=300,
    client_calls=100_000,
    client_s=1.5,
    prime=True,
    run_deadline_s=20 * 60,  # a bound, not the expected time (~15 min on a quiet machine, growth curves included)
)
QUICK = Budget(
    reps=1,
    seq_calls=300,
    seq_s=0.3,
    c32_calls=600,
    c32_s=0.3,
    big_calls=10,
    big_s=0.3,
    cold_spawns=1,
    http_seq_calls=200,
    http_seq_s=0.3,
    http_c32_calls=400,
    http_c32_s=0.3,
    sessions=20,
    client_calls=300,
    client_s=0.3,
    prime=False,
    run_deadline_s=170,
    growth_reps=1,
    growth_scale=0.01,
    growth_s=30.0,
    payload_reps=1,
    payload_calls=5,
    payload_s=0.2,
    idle_reps=1,
    idle_scale=0.01,
    idle_open_s=30.0,
    idle_s=0.3,
    inflight_reps=1,
    inflight_scale=1 / 32,
    inflight_s=0.5,
)


@dataclass(frozen=True)
class Case:
    id: str
    group: str
    title: str
    unit: str
    better: str  # "higher" | "lower"
    # Smallest value the method can tell from zero; in the ratio, values below it count as it
    # (otherwise a near-zero floor turns noise into ratios of hundreds).
    resolution: float = 0.0


CASES: list[Case] = [
    Case("stdio_seq", "stdio", "stdio, sequential tools/call", "calls/s", "higher"),
    Case("stdio_c32", "stdio", "stdio, 32 in flight", "calls/s", "higher"),
    Case("stdio_100k", "stdio", "stdio, 100 KB echo, sequential", "calls/s", "higher"),
    Case("stdio_modern_seq", "stdio_modern", "stdio 2026-07-28 era, sequential", "calls/s", "higher"),
    Case("stdio_modern_c32", "stdio_modern", "stdio 2026-07-28 era, 32 in flight", "calls/s", "higher"),
    Case("stdio_peak_rss", "stdio", "stdio, server peak RSS after the stdio cases", "MB", "lower"),
    Case("cold_start", "cold", "cold start, spawn to initialize response", "ms", "lower"),
    Case("http_seq", "http", "Streamable HTTP stateful, sequential", "calls/s", "higher"),
    Case("http_c32", "http", "Streamable HTTP stateful, 32 concurrent", "calls/s", "higher"),
    Case("http_100k", "http", "Streamable HTTP stateful, 100 KB echo, sequential", "calls/s", "higher"),
    Case("http_modern", "http", "Streamable HTTP 2026-07-28 era, 32 concurrent", "calls/s", "higher"),
    Case("http_modern_seq", "http", "Streamable HTTP 2026-07-28 era, sequential", "calls/s", "higher"),
    Case("http_session_mem", "http", "memory per idle HTTP session", "KB/session", "lower", resolution=1.0),
    Case("http_stateless_seq", "http_stateless", "Streamable HTTP stateless, sequential", "calls/s", "higher"),
    Case("http_stateless", "http_stateless", "Streamable HTTP stateless, 32 concurrent", "calls/s", "higher"),
    # growth: one full list walk (every page, following nextCursor) over stdio, registry of the given size
    Case("list_tools_100", "growth", "tools/list full walk, 100 extra tools", "ms", "lower"),
    Case("list_tools_1k", "growth", "tools/list full walk, 1,000 extra tools", "ms", "lower"),
    Case("list_tools_10k", "growth", "tools/list full walk, 10,000 extra tools", "ms", "lower"),
    Case("list_res_100", "growth", "resources/list full walk, 100 resources", "ms", "lower"),
    Case("list_res_10k", "growth", "resources/list full walk, 10,000 resources", "ms", "lower"),
    Case("list_res_100k", "growth", "resources/list full walk, 100,000 resources", "ms", "lower"),
    Case("list_res_100k_rss", "growth", "server RSS after the 100,000-resource walks", "MB", "lower"),
    # growth curves (issue 16): payload size, idle sessions, requests in flight
    Case("echo_stdio_1k", "payload_stdio", "stdio, 1 KB echo, sequential", "ms/call", "lower"),
    Case("echo_stdio_10k", "payload_stdio", "stdio, 10 KB echo, sequential", "ms/call", "lower"),
    Case("echo_stdio_100k", "payload_stdio", "stdio, 100 KB echo, sequential", "ms/call", "lower"),
    Case("echo_stdio_1m", "payload_stdio", "stdio, 1 MB echo, sequential", "ms/call", "lower"),
    Case("echo_http_1k", "payload_http", "Streamable HTTP, 1 KB echo, sequential", "ms/call", "lower"),
    Case("echo_http_10k", "payload_http", "Streamable HTTP, 10 KB echo, sequential", "ms/call", "lower"),
    Case("echo_http_100k", "payload_http", "Streamable HTTP, 100 KB echo, sequential", "ms/call", "lower"),
    Case("echo_http_1m", "payload_http", "Streamable HTTP, 1 MB echo, sequential", "ms/call", "lower"),
    Case("idle_0", "idle", "Streamable HTTP sequential calls, no idle session", "calls/s", "higher"),
    Case("idle_1k", "idle", "Streamable HTTP sequential calls, 1,000 idle sessions", "calls/s", "higher"),
    Case("idle_10k", "idle", "Streamable HTTP sequential calls, 10,000 idle sessions", "calls/s", "higher"),
    Case("idle_mem", "idle", "memory per idle session, 10,000 sessions", "KB/session", "lower", resolution=1.0),
    Case("inflight_32", "inflight", "one HTTP session, 50 ms tool, 32 in flight", "calls/s", "higher"),
    Case("inflight_256", "inflight", "one HTTP session, 50 ms tool, 256 in flight", "calls/s", "higher"),
    Case("inflight_1k", "inflight", "one HTTP session, 50 ms tool, 1,024 in flight", "calls/s", "higher"),
    Case("client_seq", "clients", "client over stdio vs the stdio floor, sequential", "calls/s", "higher"),
    Case(
        "client_http_seq", "clients", "client over Streamable HTTP vs the ASGI floor, sequential", "calls/s", "higher"
    ),
]
CASE_BY_ID = {c.id: c for c in CASES}
GROUP_ORDER = [
    "stdio",
    "stdio_modern",
    "cold",
    "http",
    "http_stateless",
    "growth",
    "payload_stdio",
    "payload_http",
    "idle",
    "inflight",
    "clients",
]
# growth case id -> (list method, result key, environment variable, registry size)
GROWTH: dict[str, tuple[str, str, str, int]] = {
    "list_tools_100": ("tools/list", "tools", "BENCH_TOOLS", 100),
    "list_tools_1k": ("tools/list", "tools", "BENCH_TOOLS", 1_000),
    "list_tools_10k": ("tools/list", "tools", "BENCH_TOOLS", 10_000),
    "list_res_100": ("resources/list", "resources", "BENCH_RESOURCES", 100),
    "list_res_10k": ("resources/list", "resources", "BENCH_RESOURCES", 10_000),
    "list_res_100k": ("resources/list", "resources", "BENCH_RESOURCES", 100_000),
}
# growth case id -> the walk case whose server it is read from after its walks (the server's RSS, MB)
GROWTH_RSS: dict[str, str] = {"list_res_100k_rss": "list_res_100k"}
# The ones whose scripts take BENCH_TOOLS/BENCH_RESOURCES. Not mcpkit-def: a list walk does not run a tool, so it
# would measure mcpkit's registry a second time.
GROWTH_CONTENDERS = {"floor", "mcp", "fastmcp", "mcpkit", "ts-v2"}
# (contender, growth case) pairs not run, with the reason the report shows (each would take minutes to start).
GROWTH_SKIP = {
    ("fastmcp", "list_res_100k"): "not run: fastmcp 4.1.2 registers resources in quadratic time (every add scans "
    "the registry for version mixing: the first 1,000 take 0.24 s, the next 1,000 0.71 s), so a 100,000-resource "
    "server would take tens of minutes to start",
}
# (group, contender) -> at most this many repetitions: fastmcp needs ~30 s of CPU to register 10,000 tools (its
# registration is quadratic), and a list figure is already the best of several walks on one server.
CONTENDER_REPS: dict[tuple[str, str], int] = {("growth", "fastmcp"): 1}
# echo payload curves: case id -> characters echoed
PAYLOAD: dict[str, int] = {
    "echo_stdio_1k": 1_000,
    "echo_stdio_10k": 10_000,
    "echo_stdio_100k": 100_000,
    "echo_stdio_1m": 1_000_000,
    "echo_http_1k": 1_000,
    "echo_http_10k": 10_000,
    "echo_http_100k": 100_000,
    "echo_http_1m": 1_000_000,
}
# idle sessions: case id -> sessions open on the server while the measured one calls (it counts as one of them)
IDLE: dict[str, int] = {"idle_0": 0, "idle_1k": 1_000, "idle_10k": 10_000}
IDLE_MEM_AT = 10_000
IDLE_RSS_CAP_KB = 900 * 1024  # stop opening sessions past this server RSS (no process over ~1 GB)
IDLE_PER_ADDRESS = 100  # sessions per client address (127.0.0.2, .3, ...): mcpkit's max_sessions_per_client
SLOW_TOOL = "sleep50"  # the 50 ms async tool of servers/_growth.py, registered when BENCH_SLOW_TOOL=1
# requests in flight on one session: case id -> closed-loop workers (one keep-alive connection each)
INFLIGHT: dict[str, int] = {"inflight_32": 32, "inflight_256": 256, "inflight_1k": 1_024}
# group -> the contenders it runs (None: every server contender with the script the group needs)
GROUP_CONTENDERS: dict[str, set[str] | None] = {
    "growth": GROWTH_CONTENDERS,
    "idle": {"floor", "mcp", "fastmcp", "mcpkit", "ts-v2"},
    "inflight": {"floor", "mcp", "fastmcp", "mcpkit", "ts-v2"},
}

Metrics = dict[str, float]
Outcome = dict[str, "Metrics | str"]  # case id -> metrics, or the error that made it n/a


def _cpu_ticks(pid: int) -> tuple[int, int] | None:
    """(user, system) CPU ticks of a process so far."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]), int(fields[12])  # utime, stime
    except (OSError, IndexError, ValueError):
        return None


async def _measured(pid: int, load: Callable[[], Awaitable[driver.LoadResult]], latency: bool) -> Metrics:
    """Run a load and report rate, latency and CPU per call of the server and of this driver."""
    t_server = _cpu_ticks(pid)
    t_self = time.process_time()
    res = await load()
    d_self = time.process_time() - t_self
    t_server2 = _cpu_ticks(pid)
    if res.calls == 0:
        raise driver.BenchError("no call completed in the time allowed")
    out: Metrics = {"value": res.rate, "calls": float(res.calls)}
    if latency:
        out["p50_ms"] = res.pct_ms(50)
        out["p99_ms"] = res.pct_ms(99)
    if t_server is not None and t_server2 is not None:
        per_call = 1e6 / CLK_TCK / res.calls
        out["server_cpu_us"] = (sum(t_server2) - sum(t_server)) * per_call
        out["server_sys_us"] = (t_server2[1] - t_server[1]) * per_call  # of which in the kernel (socket I/O)
    out["driver_cpu_us"] = d_self / res.calls * 1e6
    return out


async def _bounded(coro: Awaitable[Any], seconds: float, what: str) -> Any:
    try:
        return await asyncio.wait_for(coro, seconds)
    except TimeoutError as exc:
        raise driver.BenchError(f"{what}: no answer within {seconds:.0f}s") from exc


def _explain(exc: BaseException, child: procs.Child | None) -> str:
    msg = f"{type(exc).__name__}: {exc}" if not isinstance(exc, driver.BenchError) else str(exc)
    if child is not None:
        tail = child.stderr_tail()
        if tail and (child.exited() or "connection lost" in msg or "closed" in msg or "start" in msg):
            msg += f" [server stderr: {tail}]"
    return msg[:700]


async def _check_tools_stdio(conn: driver.StdioConn) -> None:
    driver.check_tool_result(
        await conn.request("tools/call", {"name": "echo", "arguments": {"text": "hello"}}), "hello"
    )
    res = await conn.request("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})
    driver.check_tool_result(res)
    if res["content"][0].get("text") != "5" and (res.get("structuredContent") or {}).get("result") != 5:
        raise driver.BenchError(f"add(2, 3) answered {str(res)[:200]}")


# --------------------------------------------------------------------------------------------- groups


class _StartFailed(Exception):
    """A server did not start or failed its first checks; the text explains (every case of the group gets it)."""


@contextlib.asynccontextmanager
async def _stdio_server(c: Contender) -> AsyncIterator[tuple[procs.Child, driver.StdioConn]]:
    """``c``'s stdio server, initialized and checked (echo, add); closed and stopped on the way out."""
    assert c.stdio_script is not None
    child = await procs.spawn(command(SERVERS / c.stdio_script), stdio=True)
    conn: driver.StdioConn | None = None
    try:
        assert child.proc.stdout is not None and child.proc.stdin is not None
        conn = driver.StdioConn(child.proc.stdout, child.proc.stdin)
        try:
            await _bounded(conn.handshake(), START_TIMEOUT, "initialize")
            await _bounded(_check_tools_stdio(conn), 10, "tools/call")
        except Exception as exc:
            raise _StartFailed(_explain(exc, child)) from exc
        yield child, conn
    finally:
        if conn is not None:
            await conn.close()
        await child.stop()


async def group_stdio(c: Contender, b: Budget, cases: set[str]) -> Outcome:
    out: Outcome = {}
    try:
        async with _stdio_server(c) as (child, k):

            async def echo(_: int) -> None:
                await k.request("tools/call", {"name": "echo", "arguments": {"text": "hello"}})

            await _bounded(driver.run_load(echo, concurrency=1, max_calls=200, max_seconds=2), 30, "warm-up")
            if "stdio_seq" in cases:
                out["stdio_seq"] = await _load_case(child, echo, 1, b.seq_calls, b.seq_s)
            if "stdio_c32" in cases:
                out["stdio_c32"] = await _load_case(child, echo, 32, b.c32_calls, b.c32_s)
            if "stdio_100k" in cases:
                big = "x" * 100_000
                big_args = {"name": "echo", "arguments": {"text": big}}

                async def echo_big(_: int) -> None:
                    driver.check_tool_result(await k.request("tools/call", big_args), big)

                out["stdio_100k"] = await _load_case(child, echo_big, 1, b.big_calls, b.big_s)
            if "stdio_peak_rss" in cases:
                hwm = procs.peak_rss_kb(child.pid)
                out["stdio_peak_rss"] = {"value": hwm / 1024} if hwm else "could not read /proc VmHWM"
            return out
    except _StartFailed as exc:
        return {cid: str(exc) for cid in cases}


async def group_stdio_modern(c: Contender, b: Budget, cases: set[str]) -> Outcome:
    """2026-07-28 era over stdio: no initialize; every request carries the ``_meta`` envelope."""
    assert c.stdio_script is not None
    child = await procs.spawn(command(SERVERS / c.stdio_script), stdio=True)
    out: Outcome = {}
    conn: driver.StdioConn | None = None
    try:
        assert child.proc.stdout is not None and child.proc.stdin is not None
        conn = driver.StdioConn(child.proc.stdout, child.proc.stdin)
        k = conn
        args = driver.modern_params({"name": "echo", "arguments": {"text": "hello"}})
        try:
            driver.check_tool_result(await _bounded(k.request("tools/call", args), START_TIMEOUT, "tools/call"))
        except Exception as exc:
            err = _explain(exc, child)
            return {cid: err for cid in cases}

        async def echo(_: int) -> None:
            await k.request("tools/call", args)

        await _bounded(driver.run_load(echo, concurrency=1, max_calls=200, max_seconds=2), 30, "warm-up")
        if "stdio_modern_seq" in cases:
            out["stdio_modern_seq"] = await _load_case(child, echo, 1, b.seq_calls, b.seq_s)
        if "stdio_modern_c32" in cases:
            out["stdio_modern_c32"] = await _load_case(child, echo, 32, b.c32_calls, b.c32_s)
        return out
    finally:
        if conn is not None:
            await conn.close()
        await child.stop()


async def _load_case(
    child: procs.Child, call: Callable[[int], Awaitable[None]], concurrency: int, max_calls: int, seconds: float
) -> Metrics | str:
    """One measured, bounded load run of ``call`` against ``child`` (latency recorded); the error text if it fails."""
    return await _try(
        child,
        lambda: _measured(
            child.pid,
            lambda: driver.run_load(call, concurrency=concurrency, max_calls=max_calls, max_seconds=seconds),
            True,
        ),
        seconds + 30,
    )


async def _try(child: procs.Child | None, fn: Callable[[], Awaitable[Metrics]], limit: float) -> Metrics | str:
    try:
        return dict(await _bounded(fn(), limit, "load"))
    except Exception as exc:
        return _explain(exc, child)


async def group_cold(c: Contender, b: Budget, cases: set[str]) -> Outcome:
    assert c.stdio_script is not None
    samples: list[float] = []
    for _ in range(b.cold_spawns):
        t0 = time.perf_counter()
        child = await procs.spawn(command(SERVERS / c.stdio_script), stdio=True)
        conn: driver.StdioConn | None = None
        try:
            assert child.proc.stdout is not None and child.proc.stdin is not None
            conn = driver.StdioConn(child.proc.stdout, child.proc.stdin)
            await _bounded(conn.request("initialize", driver.initialize_params()), START_TIMEOUT, "initialize")
            samples.append((time.perf_counter() - t0) * 1000)
        except Exception as exc:
            return {"cold_start": _explain(exc, child)}
        finally:
            if conn is not None:
                await conn.close()
            await child.stop()
    return {"cold_start": {"value": statistics.median(samples), "min_ms": min(samples)}}


async def _start_http(c: Contender, stateless: bool) -> tuple[procs.Child, int]:
    assert c.http_script is not None
    port = procs.free_port()
    argv = [*command(SERVERS / c.http_script), "http", str(port)] + (["stateless"] if stateless else [])
    child = await procs.spawn(argv, stdio=False)
    await _wait_listening(child, port)
    return child, port


async def _wait_listening(child: procs.Child, port: int) -> None:
    """Until the server accepts a connection on ``port``; stops it and raises if it exits or takes too long."""
    deadline = time.perf_counter() + START_TIMEOUT
    while True:
        if child.exited():
            tail = child.stderr_tail()
            await child.stop()
            why = f" [server stderr: {tail}]" if tail else ""
            raise driver.BenchError(f"server exited with {child.proc.returncode} before listening{why}")
        try:
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
            return
        except OSError:
            if time.perf_counter() > deadline:
                tail = child.stderr_tail()
                await child.stop()
                why = f" [server stderr: {tail}]" if tail else ""
                raise driver.BenchError(f"server not listening after {START_TIMEOUT:.0f}s{why}") from None
            await asyncio.sleep(0.05)


async def _http_check(m: driver.HttpMcp, conn: driver.HttpConn) -> None:
    driver.check_tool_result(await m.call_tool(conn, "echo", {"text": "hello"}), "hello")
    res = await m.call_tool(conn, "add", {"a": 2, "b": 3})
    driver.check_tool_result(res)
    if res["content"][0].get("text") != "5" and (res.get("structuredContent") or {}).get("result") != 5:
        raise driver.BenchError(f"add(2, 3) answered {str(res)[:200]}")


async def group_http(c: Contender, b: Budget, cases: set[str]) -> Outcome:
    child: procs.Child | None = None
    out: Outcome = {}
    try:
        try:
            child, port = await _start_http(c, stateless=False)
            m = driver.HttpMcp("127.0.0.1", port)
            conn = m.conn()
            await _bounded(m.initialize(conn), START_TIMEOUT, "initialize")
            await _bounded(_http_check(m, conn), 10, "tools/call")
        except Exception as exc:
            err = _explain(exc, child)
            return {cid: err for cid in cases}
        pid = child.pid
        conns = [conn] + [m.conn() for _ in range(31)]

        async def echo(w: int) -> None:
            await m.call_tool(conns[w], "echo", {"text": "hello"})

        await _bounded(driver.run_load(echo, concurrency=32, max_calls=320, max_seconds=3), 30, "warm-up")
        if "http_seq" in cases:
            out["http_seq"] = await _load_case(child, echo, 1, b.http_seq_calls, b.http_seq_s)
        if "http_c32" in cases:
            out["http_c32"] = await _load_case(child, echo, 32, b.http_c32_calls, b.http_c32_s)
        if "http_100k" in cases:
            big = "x" * 100_000

            async def echo_big(_: int) -> None:
                driver.check_tool_result(await m.call_tool(conns[0], "echo", {"text": big}), big)

            out["http_100k"] = await _load_case(child, echo_big, 1, b.big_calls, b.big_s)
        for hc in conns:
            await hc.close()
        if "http_modern" in cases:
            out["http_modern"] = await _try(child, lambda: _modern(pid, port, b), b.http_c32_s + 40)
        if "http_modern_seq" in cases:
            out["http_modern_seq"] = await _try(child, lambda: _modern(pid, port, b, 1), b.http_seq_s + 40)
        if "http_session_mem" in cases:
            out["http_session_mem"] = await _try(child, lambda: _session_mem(pid, port, b), 120)
        return out
    finally:
        if child is not None:
            await child.stop()


async def _modern(pid: int, port: int, b: Budget, concurrency: int = 32) -> Metrics:
    mm = driver.HttpMcp("127.0.0.1", port, era="modern")
    conns = [mm.conn() for _ in range(concurrency)]
    calls, seconds = (b.http_c32_calls, b.http_c32_s) if concurrency > 1 else (b.http_seq_calls, b.http_seq_s)
    try:
        await _http_check(mm, conns[0])  # no handshake: the first request already carries _meta

        async def echo(w: int) -> None:
            await mm.call_tool(conns[w], "echo", {"text": "hello"})

        await driver.run_load(echo, concurrency=concurrency, max_calls=320, max_seconds=3)
        return await _measured(
            pid,
            lambda: driver.run_load(echo, concurrency=concurrency, max_calls=calls, max_seconds=seconds),
            True,
        )
    finally:
        for hc in conns:
            await hc.close()


async def _session_mem(pid: int, port: int, b: Budget) -> Metrics:
    """Open N handshake-era sessions (initialize + initialized), leave them idle, divide the RSS growth."""
    conn = driver.HttpConn("127.0.0.1", port)
    try:
        # Settle: one session first so lazily built state is not charged to the N.
        await driver.HttpMcp("127.0.0.1", port).initialize(conn)
        await asyncio.sleep(0.3)
        before = procs.rss_kb(pid)
        # From client addresses 127.0.0.2, .3, ... (IDLE_PER_ADDRESS each): one client opening hundreds of
        # sessions meets a per-client quota (mcpkit's max_sessions_per_client evicts its oldest idle ones).
        opened = await _open_idle(port, 0, b.sessions, pid, 100)
        await asyncio.sleep(0.5)
        after = procs.rss_kb(pid)
        # The sessions must be real: the first and the last one still serve a call.
        for m in (opened[0], opened[-1]):
            driver.check_tool_result(await m.call_tool(conn, "echo", {"text": "still here"}), "still here")
        if before is None or after is None:
            raise driver.BenchError("could not read server RSS")
        return {"value": max(0.0, (after - before) / b.sessions), "sessions": float(b.sessions)}
    finally:
        await conn.close()


async def group_http_stateless(c: Contender, b: Budget, cases: set[str]) -> Outcome:
    """The server in stateless mode, handshake-era calls: one at a time (http_stateless_seq), then 32 in flight
    (http_stateless); the same budgets as the stateful http_seq and http_c32."""
    child: procs.Child | None = None
    out: Outcome = {}
    try:
        try:
            child, port = await _start_http(c, stateless=True)
            m = driver.HttpMcp("127.0.0.1", port)
            conns = [m.conn() for _ in range(32)]
            await _bounded(m.initialize(conns[0]), START_TIMEOUT, "initialize")
            await _bounded(_http_check(m, conns[0]), 10, "tools/call")
        except Exception as exc:
            err = _explain(exc, child)
            return {cid: err for cid in cases}

        async def echo(w: int) -> None:
            await m.call_tool(conns[w], "echo", {"text": "hello"})

        await _bounded(driver.run_load(echo, concurrency=32, max_calls=320, max_seconds=3), 30, "warm-up")
        if "http_stateless_seq" in cases:
            out["http_stateless_seq"] = await _load_case(child, echo, 1, b.http_seq_calls, b.http_seq_s)
        if "http_stateless" in cases:
            out["http_stateless"] = await _load_case(child, echo, 32, b.http_c32_calls, b.http_c32_s)
        for hc in conns:
            await hc.close()
        return out
    finally:
        if child is not None:
            await child.stop()


async def _walk(conn: driver.StdioConn, method: str, key: str) -> int:
    """Every page of a list, following nextCursor; the number of items."""
    items = 0
    params: dict[str, Any] = {}
    for _ in range(1_000_000):  # bounded: at most a million pages
        result = await conn.request(method, params)
        items += len(result.get(key) or ())
        cursor = result.get("nextCursor")
        if not cursor:
            return items
        params = {"cursor": cursor}
    raise driver.BenchError(f"{method}: more than a million pages")


WALK_S = 1.0  # (see _growth_one)
WALK_MAX = 40


async def _growth_one(c: Contender, b: Budget, cid: str) -> Metrics:
    method, key, env, size = GROWTH[cid]
    n = max(1, int(size * b.growth_scale))
    assert c.stdio_script is not None
    child = await procs.spawn(command(SERVERS / c.stdio_script), stdio=True, env={env: str(n)})
    conn: driver.StdioConn | None = None
    try:
        assert child.proc.stdout is not None and child.proc.stdin is not None
        conn = driver.StdioConn(child.proc.stdout, child.proc.stdin)
        try:
            await conn.handshake()
        except Exception as exc:
            raise driver.BenchError(_explain(exc, child)) from None
        expect = n + (2 if key == "tools" else 0)  # echo and add are tools too
        walks: list[float] = []
        # The first walk builds what a server caches; the figure is the best of the next ones: at least four, more
        # while they add up to less than WALK_S (at most WALK_MAX in all), so a short walk and a ten times longer
        # one both get several chances at a moment the shared machine leaves them alone (with four each, the
        # longer walk was the likelier to be interrupted every time, which read as superlinear growth)
        spent = 0.0
        while len(walks) < 5 or (spent < WALK_S and len(walks) < WALK_MAX):
            t0 = time.perf_counter()
            got = await _walk(conn, method, key)
            took = time.perf_counter() - t0
            walks.append(took * 1000)
            spent += took if len(walks) > 1 else 0.0
            if got != expect:
                raise driver.BenchError(f"{method}: the walk returned {got} items, not {expect}")
        await asyncio.sleep(0.2)  # (a collector running after the last answer)
        rss = procs.rss_kb(child.pid)
        out: Metrics = {"value": min(walks[1:]), "first_walk_ms": walks[0], "items": float(expect)}
        if rss is not None:
            out["rss_mb"] = rss / 1024
        return out
    finally:
        if conn is not None:
            await conn.close()
        await child.stop()


async def group_growth(c: Contender, b: Budget, cases: set[str]) -> Outcome:
    """One server per case (its registry sized by the environment), three full walks of the list over stdio."""
    out: Outcome = {}
    walks = {cid for cid in cases if cid in GROWTH} | {GROWTH_RSS[cid] for cid in cases if cid in GROWTH_RSS}
    for cid in sorted(walks, key=lambda x: (GROWTH[x][0], GROWTH[x][3])):
        if (c.key, cid) in GROWTH_SKIP:
            res: Metrics | str = GROWTH_SKIP[(c.key, cid)]
        else:
            res = await _try(None, lambda cid=cid: _growth_one(c, b, cid), b.growth_s)  # type: ignore[misc]
        if cid in cases:
            out[cid] = res
        for rss_case, walk in GROWTH_RSS.items():
            if walk == cid and rss_case in cases:
                if isinstance(res, str) or "rss_mb" not in res:
                    out[rss_case] = res if isinstance(res, str) else "could not read the server's RSS"
                else:
                    out[rss_case] = {"value": res["rss_mb"]}
    return out


# ------------------------------------------------------------------------------- growth curves (issue 16)


def _ms_per_call(m: Metrics | str) -> Metrics | str:
    """A sequential load's figure as milliseconds per call (the payload curves: cost grows with the size)."""
    if isinstance(m, str):
        return m
    rate = m["value"]
    return {**m, "value": 1000.0 / rate, "calls_per_s": rate}


async def group_payload_stdio(c: Contender, b: Budget, cases: set[str]) -> Outcome:
    """One stdio server; sequential echo of each payload size (smallest first), every reply checked."""
    out: Outcome = {}
    try:
        async with _stdio_server(c) as (child, k):
            for cid in sorted(cases, key=PAYLOAD.__getitem__):
                text = "x" * PAYLOAD[cid]
                args = {"name": "echo", "arguments": {"text": text}}

                async def echo(_: int, args: dict[str, Any] = args, text: str = text) -> None:
                    driver.check_tool_result(await k.request("tools/call", args), text)

                await _try(child, lambda echo=echo: _warm(echo), 30)  # type: ignore[misc]
                out[cid] = _ms_per_call(await _load_case(child, echo, 1, b.payload_calls, b.payload_s))
            return out
    except _StartFailed as exc:
        return {cid: str(exc) for cid in cases}


async def _warm(call: Callable[[int], Awaitable[None]]) -> Metrics:
    await driver.run_load(call, concurrency=1, max_calls=20, max_seconds=0.3)
    return {}


async def group_payload_http(c: Contender, b: Budget, cases: set[str]) -> Outcome:
    """One stateful Streamable HTTP server; sequential echo of each payload size over one session."""
    child: procs.Child | None = None
    out: Outcome = {}
    conn: driver.HttpConn | None = None
    try:
        try:
            child, port = await _start_http(c, stateless=False)
            m = driver.HttpMcp("127.0.0.1", port)
            conn = m.conn()
            await _bounded(m.initialize(conn), START_TIMEOUT, "initialize")
            await _bounded(_http_check(m, conn), 10, "tools/call")
        except Exception as exc:
            err = _explain(exc, child)
            return {cid: err for cid in cases}
        hc = conn
        for cid in sorted(cases, key=PAYLOAD.__getitem__):
            text = "x" * PAYLOAD[cid]

            async def echo(_: int, text: str = text) -> None:
                driver.check_tool_result(await m.call_tool(hc, "echo", {"text": text}), text)

            await _try(child, lambda echo=echo: _warm(echo), 30)  # type: ignore[misc]
            out[cid] = _ms_per_call(await _load_case(child, echo, 1, b.payload_calls, b.payload_s))
        return out
    finally:
        if conn is not None:
            await conn.close()
        if child is not None:
            await child.stop()


async def _open_idle(port: int, first: int, count: int, pid: int, seconds: float) -> list[driver.HttpMcp]:
    """Open sessions number first .. first+count-1 (initialize + initialized) and leave them idle. Session i comes
    from client address 127.0.0.(2 + i // IDLE_PER_ADDRESS), so no client exceeds a per-client session quota;
    eight addresses at a time. Bounded in time and by the server's RSS."""
    opened: dict[int, driver.HttpMcp] = {}
    deadline = time.perf_counter() + seconds
    blocks: dict[int, list[int]] = {}
    for i in range(first, first + count):
        blocks.setdefault(i // IDLE_PER_ADDRESS, []).append(i)
    if len(blocks) > 250:
        raise driver.BenchError(f"{first + count} idle sessions need more than 250 client addresses")
    pending = sorted(blocks)

    async def opener() -> None:
        while pending:
            block = pending.pop(0)
            conn = driver.HttpConn("127.0.0.1", port, local_host=f"127.0.0.{2 + block}")
            try:
                for i in blocks[block]:
                    if time.perf_counter() > deadline:
                        raise driver.BenchError(f"opened {len(opened)} of {count} idle sessions in {seconds:.0f}s")
                    m = driver.HttpMcp("127.0.0.1", port)
                    await m.initialize(conn)
                    if m.session_id is None:
                        raise driver.BenchError("server issued no Mcp-Session-Id in stateful mode")
                    opened[i] = m
                rss = procs.rss_kb(pid) or 0
                if rss > IDLE_RSS_CAP_KB:
                    raise driver.BenchError(
                        f"server RSS {rss // 1024} MB after {first + len(opened)} sessions: stopped opening"
                    )
            finally:
                await conn.close()

    try:
        async with asyncio.TaskGroup() as tg:  # the first failure cancels the other openers
            for _ in range(8):
                tg.create_task(opener())
    except* Exception as group:
        raise group.exceptions[0] from None
    return [opened[i] for i in sorted(opened)]


async def group_idle(c: Contender, b: Budget, cases: set[str]) -> Outcome:
    """One stateful HTTP server; a measured session calls echo sequentially with 0, then 1,000, then 10,000
    sessions open (the measured one counts: 999 and 9,999 idle ones, so the table of a server capped at 10,000
    sessions is exactly full); memory per session from the RSS growth over the idle ones."""
    child: procs.Child | None = None
    out: Outcome = {}
    try:
        try:
            child, port = await _start_http(c, stateless=False)
            m = driver.HttpMcp("127.0.0.1", port)
            conn = m.conn()
            await _bounded(m.initialize(conn), START_TIMEOUT, "initialize")
            await _bounded(_http_check(m, conn), 10, "tools/call")
        except Exception as exc:
            err = _explain(exc, child)
            return {cid: err for cid in cases}
        pid = child.pid
        hc = conn

        async def echo(_: int) -> None:
            await m.call_tool(hc, "echo", {"text": "hello"})

        await _bounded(driver.run_load(echo, concurrency=1, max_calls=500, max_seconds=1), 30, "warm-up")
        await asyncio.sleep(0.3)
        rss0 = procs.rss_kb(pid)
        sizes = sorted({IDLE[cid] for cid in cases if cid in IDLE} | ({IDLE_MEM_AT} if "idle_mem" in cases else set()))
        idle: list[driver.HttpMcp] = []
        failed: str | None = None
        for size in sizes:
            want = max(0, int(size * b.idle_scale) - 1)  # the measured session is one of them
            cids = [cid for cid in cases if IDLE.get(cid) == size]
            if failed is None and want > len(idle):
                try:
                    idle += await _bounded(
                        _open_idle(port, len(idle), want - len(idle), pid, b.idle_open_s),
                        b.idle_open_s + 30,
                        "opening idle sessions",
                    )
                except Exception as exc:
                    failed = _explain(exc, child)
            for cid in cids:
                if failed is not None:
                    out[cid] = failed
                    continue
                # Settle after the burst of handshakes, warm up again, then the median of three short loads:
                # one sample per repetition, so one disturbed second of a shared machine must not be the figure.
                await asyncio.sleep(0.5)
                await _try(child, lambda: _warm(echo), 30)
                runs = [await _load_case(child, echo, 1, b.http_seq_calls, b.idle_s / 3) for _ in range(3)]
                oks = [r for r in runs if not isinstance(r, str)]
                if len(oks) < len(runs):
                    out[cid] = next(r for r in runs if isinstance(r, str))
                    continue
                res = {k: statistics.median([r[k] for r in oks if k in r]) for k in oks[0]}
                res["sessions"] = float(len(idle) + 1)
                out[cid] = res
        if "idle_mem" in cases:
            await asyncio.sleep(0.5)
            rss1 = procs.rss_kb(pid)
            if failed is not None:
                out["idle_mem"] = failed
            elif not idle or rss0 is None or rss1 is None:
                out["idle_mem"] = "no idle session opened, or could not read the server's RSS"
            else:
                # The sessions must be real: the first and the last idle one still serve a call.
                try:
                    for s in (idle[0], idle[-1]):
                        probe = driver.HttpConn("127.0.0.1", port)
                        try:
                            res = await _bounded(s.call_tool(probe, "echo", {"text": "still here"}), 10, "idle probe")
                            driver.check_tool_result(res, "still here")
                        finally:
                            await probe.close()
                    out["idle_mem"] = {
                        "value": max(0.0, (rss1 - rss0) / len(idle)),
                        "sessions": float(len(idle)),
                        "rss_mb": rss1 / 1024,
                    }
                except Exception as exc:
                    out["idle_mem"] = "an idle session no longer answers: " + _explain(exc, child)
        await hc.close()
        return out
    finally:
        if child is not None:
            await child.stop()


async def _inflight_one(child: procs.Child, port: int, workers: int, seconds: float) -> Metrics:
    """bench/inflight.py's method inside the run: one handshake-era session, ``workers`` closed-loop clients with
    one keep-alive connection each calling the 50 ms tool; a 429 or 503 answer is counted and the client waits
    what Retry-After says (1 s when absent, never past the end of the load) before it sends again."""
    pid = child.pid
    m = driver.HttpMcp("127.0.0.1", port)
    conns = [m.conn() for _ in range(workers)]
    try:
        await m.initialize(conns[0])
        res = await m.call_tool(conns[0], SLOW_TOOL, {})
        driver.check_tool_result(res, "ok")
        for hc in conns:
            await hc.open()
        headers = m._base_headers
        done = refused = 0
        latencies: list[int] = []
        max_calls = int(seconds * 40_000)
        stop = time.perf_counter() + seconds
        peak = procs.rss_kb(pid) or 0

        async def worker(w: int) -> None:
            nonlocal done, refused
            hc = conns[w]
            while time.perf_counter() < stop and done + refused < max_calls:
                rid = m._take_id()
                body = orjson.dumps(
                    {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": SLOW_TOOL}}
                )
                s = time.perf_counter_ns()
                resp = await hc.post(m.path, body, headers)
                if resp.status == 200:
                    done += 1
                    latencies.append(time.perf_counter_ns() - s)
                elif resp.status in (429, 503):
                    refused += 1
                    try:
                        wait = float(resp.headers.get("retry-after", "1"))
                    except ValueError:
                        wait = 1.0
                    await asyncio.sleep(max(0.0, min(wait, stop - time.perf_counter())))
                else:
                    raise driver.BenchError(f"{SLOW_TOOL}: HTTP {resp.status} {resp.body[:200]!r}")

        async def sampler() -> None:
            nonlocal peak
            while time.perf_counter() < stop:
                peak = max(peak, procs.rss_kb(pid) or 0)
                await asyncio.sleep(0.1)

        cpu0 = _cpu_ticks(pid)
        t0 = time.perf_counter()
        sampling = asyncio.create_task(sampler())
        try:
            await asyncio.gather(*(worker(w) for w in range(workers)))
        finally:
            sampling.cancel()
        elapsed = time.perf_counter() - t0
        cpu1 = _cpu_ticks(pid)
        if done == 0:
            raise driver.BenchError(f"no call answered in {seconds:.0f}s ({refused} refused)")
        lat = driver.LoadResult(done, elapsed, latencies)
        out: Metrics = {
            "value": done / elapsed,
            "calls": float(done),
            "refused": float(refused),
            "p50_ms": lat.pct_ms(50),
            "p99_ms": lat.pct_ms(99),
            "peak_rss_mb": peak / 1024,
        }
        if cpu0 is not None and cpu1 is not None:
            out["server_cpu_us"] = (sum(cpu1) - sum(cpu0)) * 1e6 / CLK_TCK / done
        return out
    finally:
        for hc in conns:
            await hc.close()


async def group_inflight(c: Contender, b: Budget, cases: set[str]) -> Outcome:
    """One stateful HTTP server with the 50 ms tool (BENCH_SLOW_TOOL=1); each in-flight count on a new session,
    smallest first."""
    assert c.http_script is not None
    child: procs.Child | None = None
    out: Outcome = {}
    try:
        try:
            port = procs.free_port()
            argv = [*command(SERVERS / c.http_script), "http", str(port)]
            child = await procs.spawn(argv, stdio=False, env={"BENCH_SLOW_TOOL": "1"})
            await _wait_listening(child, port)
        except Exception as exc:
            err = _explain(exc, child)
            return {cid: err for cid in cases}
        for cid in sorted(cases, key=INFLIGHT.__getitem__):
            n = max(1, int(INFLIGHT[cid] * b.inflight_scale))
            out[cid] = await _try(child, lambda n=n: _inflight_one(child, port, n, b.inflight_s), b.inflight_s + 60)  # type: ignore[misc]
        return out
    finally:
        if child is not None:
            await child.stop()


async def _client_run(c: Contender, b: Budget, target: list[str], case_id: str) -> Outcome:
    """Run one client script against ``target`` (a server argv, or a URL) and read its one-line result."""
    assert c.stdio_script is not None
    argv = [*command(CLIENTS / c.stdio_script), str(b.client_calls), str(b.client_s), *target]
    child = await procs.spawn(argv, stdio=True)
    try:
        assert child.proc.stdout is not None
        try:
            line = await _bounded(child.proc.stdout.readline(), START_TIMEOUT + b.client_s + 20, "client")
            await _bounded(child.proc.wait(), 20, "client exit")
            if not line:
                raise driver.BenchError(f"client printed no result (exit {child.proc.returncode})")
            data = orjson.loads(line)
        except Exception as exc:
            msg = _explain(exc, None)
            tail = child.stderr_tail()
            return {case_id: f"{msg} [client stderr: {tail}]" if tail else msg}
        if not data.get("calls"):
            return {case_id: "client completed no call"}
        return {
            case_id: {
                "value": data["calls"] / data["seconds"],
                "p50_ms": data["p50_ms"],
                "p99_ms": data["p99_ms"],
                "connect_ms": data["connect_s"] * 1000,
            }
        }
    finally:
        await child.stop()


async def group_clients(c: Contender, b: Budget, cases: set[str]) -> Outcome:
    out: Outcome = {}
    if "client_seq" in cases:
        out.update(await _client_run(c, b, command(SERVERS / "floor_stdio.py"), "client_seq"))
    if "client_http_seq" in cases:
        floor = next(s for s in SERVER_CONTENDERS if s.key == "floor")
        server: procs.Child | None = None
        try:
            server, port = await _start_http(floor, stateless=False)
            out.update(await _client_run(c, b, [f"http://127.0.0.1:{port}/mcp"], "client_http_seq"))
        except Exception as exc:
            out["client_http_seq"] = _explain(exc, server)
        finally:
            if server is not None:
                await server.stop()
    return out


GROUPS: dict[str, tuple[Callable[[Contender, Budget, set[str]], Awaitable[Outcome]], str]] = {
    # group -> (runner, which script of the contender it needs)
    "stdio": (group_stdio, "stdio"),
    "stdio_modern": (group_stdio_modern, "stdio"),
    "cold": (group_cold, "stdio"),
    "http": (group_http, "http"),
    "http_stateless": (group_http_stateless, "http"),
    "growth": (group_growth, "stdio"),
    "payload_stdio": (group_payload_stdio, "stdio"),
    "payload_http": (group_payload_http, "http"),
    "idle": (group_idle, "http"),
    "inflight": (group_inflight, "http"),
    "clients": (group_clients, "stdio"),
}


def _group_limit(group: str, b: Budget) -> float:
    base = START_TIMEOUT + 30
    return {
        "stdio": base + b.seq_s + b.c32_s + b.big_s + 100,
        "stdio_modern": base + b.seq_s + b.c32_s + 70,
        "cold": b.cold_spawns * (START_TIMEOUT + 10) + 10,
        "http": base + 2 * b.http_seq_s + 2 * b.http_c32_s + 240,
        "http_stateless": base + b.http_seq_s + b.http_c32_s + 70,
        "growth": 6 * b.growth_s + 10,
        "payload_stdio": base + 4 * (b.payload_s + 60),
        "payload_http": base + 4 * (b.payload_s + 60),
        "idle": base + 2 * (b.idle_open_s + 30) + 3 * (b.idle_s + 30) + 60,
        "inflight": base + 3 * (b.inflight_s + 60),
        "clients": base + b.client_s + 40,
    }[group]


def _group_reps(group: str, b: Budget) -> int:
    """How many repetitions (the first ones of the run) a group takes part in."""
    return {
        "growth": b.growth_reps,
        "payload_stdio": b.payload_reps,
        "payload_http": b.payload_reps,
        "idle": b.idle_reps,
        "inflight": b.inflight_reps,
    }.get(group, b.reps)


# --------------------------------------------------------------------------------------------- runner


async def prime(contenders: list[Contender], log: Callable[[str], None]) -> None:
    """Start each server once and throw the figure away: bytecode caches and the page cache get warm
    for everyone alike before anything is measured."""
    for c in contenders:
        if c.stdio_script is None:
            continue
        try:
            await asyncio.wait_for(group_cold(c, QUICK, {"cold_start"}), START_TIMEOUT + 15)
        except Exception as exc:
            log(f"  prime {c.key}: {exc}")


async def run_cases(
    selected: list[str],
    budget: Budget,
    log: Callable[[str], None],
    server_keys: list[str] | None = None,
) -> dict[str, Any]:
    servers = [c for c in SERVER_CONTENDERS if server_keys is None or c.key in server_keys]
    by_group: dict[str, set[str]] = {}
    for cid in selected:
        by_group.setdefault(CASE_BY_ID[cid].group, set()).add(cid)
    samples: dict[str, dict[str, list[Metrics]]] = {cid: {} for cid in selected}
    errors: dict[str, dict[str, list[str]]] = {cid: {} for cid in selected}
    dead: dict[tuple[str, str], str] = {}
    t_start = time.perf_counter()
    skipped_reps = 0
    if budget.prime:
        log("priming (one throw-away start of every server)")
        await prime(servers, log)
    for rep in range(budget.reps):
        if time.perf_counter() - t_start > budget.run_deadline_s:
            skipped_reps = budget.reps - rep
            log(f"run deadline reached: skipping {skipped_reps} repetition(s)")
            break
        for group in GROUP_ORDER:
            if group not in by_group:
                continue
            runner, needs = GROUPS[group]
            if rep >= _group_reps(group, budget):
                continue
            pool = CLIENT_CONTENDERS if group == "clients" else servers
            pool = [c for c in pool if (c.stdio_script if needs == "stdio" else c.http_script)]
            only = GROUP_CONTENDERS.get(group)
            if only is not None:
                pool = [c for c in pool if c.key in only]
            order = pool if rep % 2 == 0 else list(reversed(pool))
            order = [c for c in order if rep < CONTENDER_REPS.get((group, c.key), budget.reps)]
            for c in order:
                cases = by_group[group]
                t0 = time.perf_counter()
                if (group, c.key) in dead:
                    outcome: Outcome = {cid: dead[(group, c.key)] for cid in cases}
                else:
                    try:
                        outcome = await asyncio.wait_for(runner(c, budget, cases), _group_limit(group, budget))
                    except Exception as exc:
                        outcome = {cid: f"{type(exc).__name__}: {exc}"[:500] for cid in cases}
                    if outcome and all(isinstance(v, str) for v in outcome.values()):
                        dead[(group, c.key)] = next(iter(outcome.values()))  # type: ignore[assignment]
                for cid, res in outcome.items():
                    if isinstance(res, str):
                        errors[cid].setdefault(c.key, []).append(res)
                    else:
                        samples[cid].setdefault(c.key, []).append(res)
                shown = ", ".join(
                    f"{cid}=" + ("n/a" if isinstance(v, str) else f"{v['value']:.4g}")
                    for cid, v in sorted(outcome.items())
                )
                log(f"rep {rep + 1}/{budget.reps} {group:<14} {c.key:<16} {time.perf_counter() - t0:5.1f}s  {shown}")
    return summarise(selected, samples, errors, servers, skipped_reps)


def summarise(
    selected: list[str],
    samples: dict[str, dict[str, list[Metrics]]],
    errors: dict[str, dict[str, list[str]]],
    servers: list[Contender],
    skipped_reps: int,
) -> dict[str, Any]:
    out: dict[str, Any] = {"cases": {}, "skipped_reps": skipped_reps}
    for cid in selected:
        case = CASE_BY_ID[cid]
        pool = CLIENT_CONTENDERS if case.group == "clients" else servers
        floor_key = next((c.key for c in pool if c.floor), None)  # (None: the floor was not selected)
        needs = GROUPS[case.group][1]
        rows: dict[str, Any] = {}
        for c in pool:
            if not (c.stdio_script if needs == "stdio" else c.http_script):
                continue
            only = GROUP_CONTENDERS.get(case.group)
            if only is not None and c.key not in only:
                continue
            ss = samples[cid].get(c.key, [])
            errs = errors[cid].get(c.key, [])
            if not ss:
                rows[c.key] = {"status": "n/a", "error": errs[0] if errs else "not run", "samples": []}
                continue
            keys = sorted({k for s in ss for k in s})
            med = {k: statistics.median([s[k] for s in ss if k in s]) for k in keys}
            rows[c.key] = {"status": "ok", "median": med, "samples": ss, "errors": errs}
        apply_ratios(case.better, case.resolution, floor_key, rows)
        out["cases"][cid] = {**asdict(case), "floor": floor_key, "contenders": rows}
    return out


def apply_ratios(better: str, resolution: float, floor_key: str | None, rows: dict[str, Any]) -> None:
    """cost_vs_floor: floor rate / rate for throughput, value / floor value for time and memory."""
    floor = rows.get(floor_key) if floor_key is not None else None
    fv = floor["median"]["value"] if floor and floor["status"] == "ok" else None
    if fv is None:
        return
    denom = max(fv, resolution)
    for row in rows.values():
        if row["status"] != "ok":
            continue
        v = row["median"]["value"]
        if better == "higher":
            row["cost_vs_floor"] = fv / v if v > 0 else None
        else:
            row["cost_vs_floor"] = max(v, resolution) / denom if denom > 0 else None
