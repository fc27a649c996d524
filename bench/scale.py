#!/usr/bin/env python3
"""Scale-out benchmark (not a test): what Redis costs a worker, what a second worker brings, and how many hosts one
Redis would serve.

    python bench/scale.py                   ~3 minutes: every measure, --reps 3
    python bench/scale.py --reps 5 --seconds 8

Measured, against `mcpkit run examples/everything.py -t http` (the `echo` tool; 32 calls in flight on 32
keep-alive connections; the load generator is bench/harness/driver.py, on the same machine):

1. **Cost of the Redis stores on one worker**: the worker's CPU per call (utime + stime from /proc, which the
   machine's load barely moves) and its rate, in-memory against ``--redis`` (a local redis-server), in both eras;
   Redis's own CPU per call and the Redis commands per call (``INFO commandstats`` before and after).
2. **Aggregate throughput with 1 and 2 workers** (``--workers N --redis``; the kernel spreads the connections).
3. **A paper estimate**: the Redis commands per call measured above, Redis's throughput for those commands
   (measured here with ``redis-benchmark``, and the figure Redis publishes), and the calls a host makes.

Each measure alternates the configurations ``--reps`` times and reports medians. Results: printed, and
bench/results/scale-<utc-stamp>.json. Needs redis-server and redis-benchmark on PATH. Run it when the machine is
quiet: the client and the servers share its cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from harness import driver, serving  # noqa: E402

EVERYTHING = ROOT / "examples" / "everything.py"
CLK_TCK = os.sysconf("SC_CLK_TCK")
#: Redis's published throughput without pipelining, 50 clients: the Redis repository's own doc/Benchmarks gives
#: "about 110000 SETs per second, about 81000 GETs per second" on a 2.5 GHz Xeon X3320 (one core, Linux, loopback).
#: An old machine: a conservative figure for one Redis core today.
PUBLISHED_OPS = 81_000


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(x) for x in out.stdout.split()]


class Redis:
    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("bench/scale.py needs redis-server on PATH")
        self.port = _free_port()
        argv = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.proc = serving.start(argv, quiet=True)
        serving.wait_listening(self.port, self.proc)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def cli(self, *args: str) -> str:
        return subprocess.run(
            ["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True, check=True
        ).stdout

    def commandstats(self) -> dict[str, int]:
        stats: dict[str, int] = {}
        for line in self.cli("INFO", "commandstats").splitlines():
            m = re.match(r"cmdstat_([^:]+):calls=(\d+)", line)
            if m:
                stats[m.group(1)] = int(m.group(2))
        return stats

    def stop(self) -> None:
        serving.stop(self.proc, grace=0)


class Server:
    """`mcpkit run examples/everything.py -t http` (workers > 1: --workers N), optionally on Redis."""

    def __init__(self, redis_url: str | None, workers: int = 1) -> None:
        self.port = _free_port()
        env = {**os.environ, "MCPKIT_REDIS_PREFIX": f"b{secrets.token_hex(3)}:"}
        for name in ("MCPKIT_REDIS_URL", "MCPKIT_STATE_KEYS", "MCPKIT_STATE_KEYS_FILE", "MCPKIT_WORKERS"):
            env.pop(name, None)
        cmd = [sys.executable, "-m", "mcpkit.cli.main", "run", str(EVERYTHING), "-t", "http", "--port", str(self.port)]
        if redis_url:
            cmd += ["--redis", redis_url]
            env["MCPKIT_STATE_KEYS"] = "b" * 40
        if workers > 1:
            cmd += ["--workers", str(workers)]
        self.proc = serving.start(cmd, env=env, quiet=True)
        serving.wait_listening(self.port, self.proc)
        time.sleep(1.0 if workers > 1 else 0.3)  # (every worker up)

    def pids(self) -> list[int]:
        return [self.proc.pid, *_children(self.proc.pid)]

    def stop(self) -> None:
        serving.stop(self.proc, grace=20)


async def _load(port: int, era: str, seconds: float, concurrency: int) -> driver.LoadResult:
    mm = driver.HttpMcp("127.0.0.1", port, era=era)
    conns = [mm.conn() for _ in range(concurrency)]
    try:
        if era != "modern":
            await mm.initialize(conns[0])

        async def echo(w: int) -> None:
            result = await mm.call_tool(conns[w], "echo", {"text": "hello"})
            driver.check_tool_result(result, "hello")

        return await driver.run_load(echo, concurrency=concurrency, max_calls=10**9, max_seconds=seconds)
    finally:
        for c in conns:
            await c.close()


def measure(
    server: Server, redis: Redis | None, era: str, seconds: float, concurrency: int
) -> dict[str, float | dict[str, float]]:
    asyncio.run(_load(server.port, era, 1.0, concurrency))  # warm up (sessions, caches, learned inline tools)
    pids = server.pids()
    each = {pid: _cpu_ticks([pid]) for pid in pids}
    before = _cpu_ticks(pids)
    redis_before = _cpu_ticks([redis.proc.pid]) if redis else 0
    stats_before = redis.commandstats() if redis else {}
    result = asyncio.run(_load(server.port, era, seconds, concurrency))
    cpu = (_cpu_ticks(pids) - before) / CLK_TCK
    out: dict[str, Any] = {
        "cpu_s_per_process": sorted(round((_cpu_ticks([p]) - t) / CLK_TCK, 2) for p, t in each.items()),
        "calls": result.calls,
        "rate": result.rate,
        "cpu_us_per_call": cpu / max(result.calls, 1) * 1e6,
        "p50_ms": result.pct_ms(50),
        "p99_ms": result.pct_ms(99),
    }
    if redis is not None:
        stats_after = redis.commandstats()
        out["redis_cpu_us_per_call"] = (_cpu_ticks([redis.proc.pid]) - redis_before) / CLK_TCK / result.calls * 1e6
        ops = {k: (stats_after.get(k, 0) - stats_before.get(k, 0)) / result.calls for k in stats_after}
        out["redis_ops_per_call"] = {k: round(v, 3) for k, v in ops.items() if v >= 0.001 and k != "info"}
    return out


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


def redis_benchmark(redis: Redis) -> dict[str, float]:
    """Requests/s of the commands a call makes, measured here (50 clients, no pipelining)."""
    binary = shutil.which("redis-benchmark")
    if binary is None:
        return {}
    out: dict[str, float] = {}
    for name, command in {
        "GETEX": ["GETEX", "k:__rand_int__", "PX", "60000"],
        "SET": ["SET", "k:__rand_int__", "v", "PX", "60000"],
        "XADD": ["XADD", "log", "MAXLEN", "~", "10000", "*", "e", "list_changed"],
    }.items():
        done = subprocess.run(
            [binary, "-p", str(redis.port), "-q", "-n", "200000", "-c", "50", "-r", "100000", *command],
            capture_output=True,
            text=True,
            timeout=120,
        )
        m = re.search(r"([\d.]+) requests per second", done.stdout)
        if m:
            out[name] = float(m.group(1))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    redis = Redis()
    report: dict[str, Any] = {"reps": args.reps, "seconds": args.seconds, "concurrency": args.concurrency}
    try:
        # 1. one worker: in memory against Redis, both eras (alternating)
        for era in ("legacy", "modern"):
            runs: dict[str, list[dict[str, Any]]] = {"memory": [], "redis": []}
            for _ in range(args.reps):
                for name in ("memory", "redis"):
                    server = Server(redis.url if name == "redis" else None)
                    try:
                        runs[name].append(
                            measure(server, redis if name == "redis" else None, era, args.seconds, args.concurrency)
                        )
                    finally:
                        server.stop()
            report[f"one_worker_{era}"] = runs
        # 2. aggregate throughput, 1 and 2 workers on Redis (modern era: stateless, and handshake era)
        for era in ("modern", "legacy"):
            runs = {"1": [], "2": []}
            for _ in range(args.reps):
                for workers in (1, 2):
                    server = Server(redis.url, workers)
                    try:
                        runs[str(workers)].append(measure(server, redis, era, args.seconds, args.concurrency * 2))
                    finally:
                        server.stop()
            report[f"workers_{era}"] = runs
        report["redis_benchmark"] = redis_benchmark(redis)
    finally:
        redis.stop()
    _print(report)
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = results / f"scale-{stamp}.json"
    path.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"\nresults: {path.relative_to(ROOT)}")


def _print(report: dict[str, Any]) -> None:
    print(f"\n== 1. one worker, in memory vs Redis ({report['concurrency']} in flight, medians of {report['reps']})")
    head = f"{'era':8} {'stores':7} {'calls/s':>8} {'CPU us/call':>12} {'p50 ms':>7} {'Redis CPU us/call':>18}"
    print(head + "  Redis ops/call")
    per_call: dict[str, float] = {}
    for era in ("legacy", "modern"):
        runs = report[f"one_worker_{era}"]
        for name in ("memory", "redis"):
            rs = runs[name]
            redis_cpu = f"{_median(rs, 'redis_cpu_us_per_call'):18.1f}" if name == "redis" else f"{'':18}"
            ops = rs[-1].get("redis_ops_per_call", {}) if name == "redis" else {}
            if name == "redis":
                per_call[era] = sum(ops.values())
            print(
                f"{era:8} {name:7} {_median(rs, 'rate'):8.0f} {_median(rs, 'cpu_us_per_call'):12.1f} "
                f"{_median(rs, 'p50_ms'):7.2f} {redis_cpu}  {ops or ''}"
            )
        cost = _median(runs["redis"], "cpu_us_per_call") / _median(runs["memory"], "cpu_us_per_call")
        print(f"{'':8} Redis / memory, worker CPU per call: {cost:.2f}x")
    print("\n== 2. aggregate throughput on Redis, 1 and 2 workers (`--workers N`; the client shares the 2 cores)")
    for era in ("modern", "legacy"):
        runs = report[f"workers_{era}"]
        one, two = _median(runs["1"], "rate"), _median(runs["2"], "rate")
        cpu1, cpu2 = _median(runs["1"], "cpu_us_per_call"), _median(runs["2"], "cpu_us_per_call")
        print(
            f"{era:8} 1 worker {one:8.0f} calls/s ({cpu1:.0f} us CPU/call)   "
            f"2 workers {two:8.0f} calls/s ({cpu2:.0f} us CPU/call)   ({two / one:.2f}x); "
            f"CPU seconds per process, 2 workers: {runs['2'][-1]['cpu_s_per_process']}"
        )
    bench = report.get("redis_benchmark", {})
    print(f"\n== 3. paper estimate (redis-benchmark here, 50 clients, no pipelining: {bench})")
    for era in ("legacy", "modern"):
        ops = per_call.get(era, 0.0)
        if not ops:
            print(f"{era:8} 0 Redis commands per call: requests never touch Redis (notifications do: 1 XADD each)")
            continue
        per_core = 1e6 / _median(report[f"one_worker_{era}"]["redis"], "cpu_us_per_call")  # calls/s, one core
        print(f"{era:8} {ops:.2f} Redis commands per call (GETEX); one worker core serves {per_core:,.0f} calls/s")
        redis_cpu = _median(report[f"one_worker_{era}"]["redis"], "redis_cpu_us_per_call")
        capacities = (
            (f"its CPU per call measured here, {redis_cpu:.0f} us", 1e6 / redis_cpu * ops if redis_cpu else 0.0),
            ("redis-benchmark GETEX here", bench.get("GETEX", 0.0)),
            ("Redis's published GET figure", float(PUBLISHED_OPS)),
        )
        for source, ops_per_s in capacities:
            if not ops_per_s:
                continue
            calls = ops_per_s * 0.5 / ops  # Redis kept at half its capacity
            print(
                f"{'':8} one Redis ({source}: {ops_per_s:,.0f} commands/s; kept at 50%) serves {calls:,.0f} calls/s"
                f" = {calls / per_core:,.1f} worker cores; a 3-primary cluster about 3x (sessions spread by slot)"
            )


if __name__ == "__main__":
    main()
