"""A/B of servers by server CPU per call: for changes too small for the full suite's single-run rates.

    python bench/ab.py floor=floor_asgi.py base=/path/to/old/src:mcpkit_server.py new=mcpkit_server.py mcp=mcp_high.py
    python bench/ab.py --transport stdio --concurrency 1 floor=floor_stdio.py new=mcpkit_server.py

``--transport stdio`` drives each server over its stdin/stdout instead (sequential with ``--concurrency 1``,
the default there, or N calls in flight), handshake era or ``--era modern``.

Each contender is ``name=[PYTHONPATH:]script`` (a script of ``bench/servers``, a ``.mjs`` one run by Node.js;
``PYTHONPATH`` puts another mcpkit first, e.g. ``git archive <rev> src | tar -x -C /tmp/old`` then ``/tmp/old/src``).
All servers start side by side under the suite's uvicorn configuration (httptools, as the ``http`` extra gives
users; ``BENCH_HTTP_PARSER=h11`` pins h11); the closed-loop load (the 2026-07-28 era with 32 in flight by default, or
the handshake era with ``--era legacy``) goes to each in turn, in alternating order, ``--reps`` times. Reported per
contender: the median server CPU per call (utime + stime from ``/proc``, which the machine's load barely moves),
every rep's figure, and the median rate; then the system part of the CPU and how often the OS preempted the
server's main thread per call. Run it inside the bench environment (``.bench-venv/bin/python``; ``python
bench/run.py`` creates it). Every load is bounded in calls and seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import driver, serving  # noqa: E402
from harness.contenders import command  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _usage(pid: int) -> tuple[int, int, int]:
    """The server's user and system CPU ticks so far, and how many times the OS has preempted its main thread (the
    event loop's: a server preempted more often per call also refills its caches more often)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        status = f.read()
    at = status.index("nonvoluntary_ctxt_switches:") + 27
    return int(fields[11]), int(fields[12]), int(status[at : status.index("\n", at)])


async def _load(port: int, era: str, seconds: float, max_calls: int, concurrency: int = 32) -> driver.LoadResult:
    mm = driver.HttpMcp("127.0.0.1", port, era=era)
    conns = [mm.conn() for _ in range(concurrency)]
    try:
        if era != "modern":
            await mm.initialize(conns[0])

        async def echo(w: int) -> None:
            await mm.call_tool(conns[w], "echo", {"text": "hello"})

        return await driver.run_load(echo, concurrency=concurrency, max_calls=max_calls, max_seconds=seconds)
    finally:
        for c in conns:
            await c.close()


def _contender(spec: str) -> tuple[str, str, dict[str, str]]:
    """``name=[PYTHONPATH:]script`` -> (name, script, the environment to start it with)."""
    name, _, rest = spec.partition("=")
    path, _, script = rest.rpartition(":")
    if not name or not script:
        raise SystemExit(f"bad contender {spec!r}: expected name=[PYTHONPATH:]script")
    env = dict(os.environ)
    if path:
        env["PYTHONPATH"] = path
    return name, script, env


async def _stdio_load(conn: driver.StdioConn, era: str, concurrency: int, seconds: float, max_calls: int) -> Any:
    params: dict[str, Any] = {"name": "echo", "arguments": {"text": "hello"}}
    if era == "modern":
        params = driver.modern_params(params)

    async def echo(_w: int) -> None:
        await conn.request("tools/call", params)

    return await driver.run_load(echo, concurrency=concurrency, max_calls=max_calls, max_seconds=seconds)


async def _main_stdio(args: argparse.Namespace) -> int:
    servers: dict[str, tuple[asyncio.subprocess.Process, driver.StdioConn]] = {}
    concurrency = args.concurrency or 1
    try:
        for spec in args.contenders:
            name, script, env = _contender(spec)
            proc = await asyncio.create_subprocess_exec(
                *command(HERE / "servers" / script),
                cwd=HERE / "servers",
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=1 << 24,
            )
            assert proc.stdout is not None and proc.stdin is not None
            conn = driver.StdioConn(proc.stdout, proc.stdin)
            servers[name] = (proc, conn)
            if args.era != "modern":
                await asyncio.wait_for(conn.handshake(), 30)
            await _stdio_load(conn, args.era, concurrency, 1.0, args.max_calls)  # warm-up
        await _alternate(
            {n: (p.pid, c) for n, (p, c) in servers.items()},
            args.reps,
            lambda conn: _stdio_load(conn, args.era, concurrency, args.seconds, args.max_calls),
        )
    finally:
        for proc, conn in servers.values():
            await conn.close()
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    return 0


async def _alternate(servers: dict[str, tuple[int, Any]], reps: int, load: Callable[[Any], Awaitable[Any]]) -> None:
    """Load each server (name -> (pid, what ``load`` takes)) in turn, the order reversed every other repetition,
    and report the server CPU per call and the rate of each."""
    cpu: dict[str, list[float]] = {n: [] for n in servers}
    sys_: dict[str, list[float]] = {n: [] for n in servers}
    preempted: dict[str, list[float]] = {n: [] for n in servers}
    rate: dict[str, list[float]] = {n: [] for n in servers}
    order = list(servers)
    for rep in range(reps):
        for name in order if rep % 2 == 0 else order[::-1]:
            pid, target = servers[name]
            u0, s0, p0 = _usage(pid)
            res = await load(target)
            if res.calls == 0:
                raise SystemExit(f"{name}: no call completed")
            u1, s1, p1 = _usage(pid)
            per_call = 1e6 / CLK_TCK / res.calls
            cpu[name].append((u1 - u0 + s1 - s0) * per_call)
            sys_[name].append((s1 - s0) * per_call)
            preempted[name].append((p1 - p0) / res.calls)
            rate[name].append(res.rate)
    _report(order, cpu, sys_, preempted, rate)


def _report(
    order: list[str],
    cpu: dict[str, list[float]],
    sys_: dict[str, list[float]],
    preempted: dict[str, list[float]],
    rate: dict[str, list[float]],
) -> None:
    for name in order:
        reps = ", ".join(f"{x:.1f}" for x in cpu[name])
        print(
            f"{name:12s} server CPU/call {statistics.median(cpu[name]):7.1f} us  [{reps}]  "
            f"rate {statistics.median(rate[name]):8.0f} calls/s"
        )
        print(
            f"{'':12s} of which system {statistics.median(sys_[name]):5.1f} us; the loop's thread preempted "
            f"{statistics.median(preempted[name]):.3f} times per call"
        )


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("contenders", nargs="+", help="name=[PYTHONPATH:]script")
    parser.add_argument("--reps", type=int, default=6, help="loads per contender (default 6)")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one load (default 3)")
    parser.add_argument("--max-calls", type=int, default=100_000, help="calls per load at most")
    parser.add_argument("--era", choices=("modern", "legacy"), default="modern")
    parser.add_argument("--port", type=int, default=18800, help="first port (one per contender)")
    parser.add_argument("--transport", choices=("http", "stdio"), default="http")
    parser.add_argument("--concurrency", type=int, default=0, help="calls in flight (default: http 32, stdio 1)")
    args = parser.parse_args()
    if args.transport == "stdio":
        return await _main_stdio(args)

    servers: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
    try:
        for i, spec in enumerate(args.contenders):
            name, script, env = _contender(spec)
            port = args.port + i
            argv = [*command(HERE / "servers" / script), "http", str(port)]
            servers[name] = (serving.start(argv, cwd=HERE / "servers", env=env, quiet=False), port)
        for proc, port in servers.values():
            await serving.listening(port, proc)
            await _load(port, args.era, 1.0, args.max_calls, args.concurrency or 32)  # warm-up
        await _alternate(
            {n: (p.pid, port) for n, (p, port) in servers.items()},
            args.reps,
            lambda port: _load(port, args.era, args.seconds, args.max_calls, args.concurrency or 32),
        )
    finally:
        serving.stop(*(proc for proc, _ in servers.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
