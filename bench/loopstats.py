"""What a Streamable HTTP call costs a server besides its bytecodes: event-loop turns, tasks and callbacks, garbage
collections, context switches, the CPU of the server, of its helper processes and of the client, per call.

    python bench/loopstats.py floor=floor_asgi.py mcpkit=mcpkit_def.py
    python bench/loopstats.py --era legacy --concurrency 1 floor=floor_asgi.py mcpkit=/tmp/old/src:mcpkit_def.py
    python bench/loopstats.py --counts floor=floor_asgi.py mcpkit=mcpkit_def.py

Each contender is ``name=[PYTHONPATH:]script`` (a script of ``bench/servers``, as for ``bench/ab.py``). Each server
runs under a small wrapper (``--child``) that counts, from inside the process, the garbage collections (and the time
spent in them) and reads its own CPU time and context switches; with ``--counts`` it also counts the event loop's
turns, the ready events it got, the callbacks it ran and the tasks created, by wrapping asyncio's Python methods
(which slows the server: CPU figures of a ``--counts`` run are not comparable with others). In an mcpkit server it
also counts the inline calls of plain ``def`` tools that the sync policy times exactly or measures as suspect (after
an inline call ran long, by the OS preempting it on a busy machine or otherwise): those calls make system calls the
usual inline call does not (``mcpkit.server.sync_exec``); and the calls it sent to a worker thread and the loop's
hand-overs to a stand-in thread. The load (``echo``, the handshake era with ``--era legacy``, else 2026-07-28,
``--concurrency`` calls in flight, ``--calls`` calls) follows a warm-up; the figures are the differences between
two snapshots around it, divided by the calls. Every load is bounded in calls and seconds. Not a figure to publish:
a tool to tell *why* two servers differ (a server that yields to the loop more often, makes a task per request,
collects garbage or sleeps more per call shows it here).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import os
import re
import resource
import runpy
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import driver, serving  # noqa: E402
from harness.contenders import command  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------ the server side (--child)


def _count_policy(counts: collections.Counter[str]) -> None:
    """Count the inline calls of plain ``def`` functions that mcpkit's sync policy times exactly (the thread's usage
    counters read around the call, after a call ran long) or measures as suspect (the scheduler's run-queue time
    too): each costs system calls the usual inline call does not make; and the calls run on a worker thread and the
    loop's hand-overs to a stand-in thread (tens of microseconds each)."""
    try:
        import mcpkit._runtime.handoff as handoff
        import mcpkit.server.sync_exec as sync_exec
    except ImportError:  # not an mcpkit server
        return
    thread_usage, run_delay = handoff.thread_usage, sync_exec.run_delay

    def counted_usage() -> Any:
        counts["exactly_timed"] += 1
        return thread_usage()

    def counted_delay() -> float | None:
        counts["sched_reads"] += 1
        return run_delay()

    on_thread = sync_exec.SyncPolicy.on_thread
    hand_over = handoff.LoopHandoff._hand_over

    def counted_on_thread(self: Any, args: Any, kwargs: Any) -> Any:
        counts["on_thread"] += 1
        return on_thread(self, args, kwargs)

    def counted_hand_over(self: Any, job: int) -> None:
        counts["hand_overs"] += 1
        hand_over(self, job)

    handoff.thread_usage = counted_usage
    sync_exec.run_delay = counted_delay
    sync_exec.SyncPolicy.on_thread = counted_on_thread  # type: ignore[method-assign]
    handoff.LoopHandoff._hand_over = counted_hand_over  # type: ignore[method-assign]


def _install_counters(counts: collections.Counter[str], structure: bool) -> None:
    started = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            counts[f"gc{info['generation']}"] += 1
            started[0] = time.perf_counter()
        else:
            counts["gc_us"] += int((time.perf_counter() - started[0]) * 1e6)

    gc.callbacks.append(on_gc)
    _count_policy(counts)
    if not structure:
        return
    import asyncio.base_events as base_events
    import asyncio.events as events
    import selectors

    run_once = base_events.BaseEventLoop._run_once  # type: ignore[attr-defined]
    run_handle = events.Handle._run
    create_task = base_events.BaseEventLoop.create_task
    select = selectors.EpollSelector.select

    def counted_run_once(self: Any) -> None:
        counts["loop_turns"] += 1
        run_once(self)

    def counted_run(self: Any) -> None:
        counts["callbacks"] += 1
        run_handle(self)

    def counted_create_task(self: Any, coro: Any, **kw: Any) -> Any:
        counts["tasks"] += 1
        return create_task(self, coro, **kw)

    def counted_select(self: Any, timeout: float | None = None) -> Any:
        ready = select(self, timeout)
        counts["ready_events"] += len(ready)
        return ready

    base_events.BaseEventLoop._run_once = counted_run_once  # type: ignore[attr-defined]
    events.Handle._run = counted_run  # type: ignore[method-assign]
    base_events.BaseEventLoop.create_task = counted_create_task  # type: ignore[method-assign]
    selectors.EpollSelector.select = counted_select  # type: ignore[method-assign]


def _snapshot(counts: collections.Counter[str]) -> dict[str, float]:
    snap: dict[str, float] = dict(counts)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    snap["user_us"] = usage.ru_utime * 1e6
    snap["sys_us"] = usage.ru_stime * 1e6
    with open("/proc/self/status", encoding="ascii") as f:
        status = f.read()
    for key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
        found = re.search(rf"^{key}:\s+(\d+)", status, re.M)
        snap[key] = int(found.group(1)) if found else 0
    return snap


def _child(out: str, structure: bool, script: str, argv: list[str]) -> None:
    counts: collections.Counter[str] = collections.Counter()
    _install_counters(counts, structure)

    def on_usr1(_sig: int, _frame: Any) -> None:
        with open(out, "a", encoding="ascii") as f:
            f.write(json.dumps(_snapshot(counts)) + "\n")

    signal.signal(signal.SIGUSR1, on_usr1)
    sys.argv = [script, *argv]
    sys.path.insert(0, str(Path(script).resolve().parent))
    runpy.run_path(script, run_name="__main__")


# ------------------------------------------------------------------ the client side


def _helpers_cpu_ns(pid: int) -> int:
    """Run time of the server's child processes (mcpkit's loop watch, for one), from the scheduler's own count."""
    total = 0
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return 0
    for child in children:
        try:
            total += int(Path(f"/proc/{child}/schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            pass
    return total


async def _load(port: int, era: str, calls: int, concurrency: int, seconds: float) -> driver.LoadResult:
    mm = driver.HttpMcp("127.0.0.1", port, era=era)
    conns = [mm.conn() for _ in range(concurrency)]
    try:
        if era != "modern":
            await mm.initialize(conns[0])

        async def echo(w: int) -> None:
            await mm.call_tool(conns[w], "echo", {"text": "hello"})

        return await driver.run_load(echo, concurrency=concurrency, max_calls=calls, max_seconds=seconds)
    finally:
        for c in conns:
            await c.close()


async def _snap(proc: subprocess.Popen[bytes], out: Path, have: int) -> dict[str, float]:
    proc.send_signal(signal.SIGUSR1)
    for _ in range(200):
        lines = out.read_text().splitlines() if out.exists() else []
        if len(lines) > have:
            snap: dict[str, float] = json.loads(lines[have])
            snap["helpers_us"] = _helpers_cpu_ns(proc.pid) / 1e3
            return snap
        await asyncio.sleep(0.05)
    raise SystemExit("the server wrote no snapshot within 10 s")


async def _measure(name: str, spec: str, port: int, args: argparse.Namespace) -> dict[str, float]:
    path, _, script = spec.rpartition(":")
    env = dict(os.environ)
    if path:
        env["PYTHONPATH"] = path
    out = Path(f"/tmp/loopstats-{os.getpid()}-{port}.jsonl")
    out.unlink(missing_ok=True)
    argv = [*command(Path(__file__)), "--child", str(out), "--structure" if args.counts else "--no-structure"]
    argv += [str(HERE / "servers" / script), "http", str(port)]
    proc = serving.start(argv, cwd=HERE / "servers", env=env, quiet=False)
    try:
        await serving.listening(port, proc, timeout=60.0)
        await _load(port, args.era, min(2000, args.calls), args.concurrency, args.seconds)  # warm-up
        before = await _snap(proc, out, 0)
        u0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        res = await _load(port, args.era, args.calls, args.concurrency, args.seconds)
        wall = time.perf_counter() - t0
        u1 = resource.getrusage(resource.RUSAGE_SELF)
        after = await _snap(proc, out, 1)
    finally:
        serving.stop(proc)
        out.unlink(missing_ok=True)
    if res.calls == 0:
        raise SystemExit(f"{name}: no call completed")
    row = {k: (after.get(k, 0) - before.get(k, 0)) / res.calls for k in after}
    row["client_us"] = ((u1.ru_utime - u0.ru_utime) + (u1.ru_stime - u0.ru_stime)) * 1e6 / res.calls
    row["rate"] = res.calls / wall
    row["server_busy"] = (row["user_us"] + row["sys_us"]) * row["rate"] / 1e6
    return row


def _report(name: str, row: dict[str, float], structure: bool) -> None:
    cpu = row["user_us"] + row["sys_us"]
    print(
        f"{name:10s} server CPU/call {cpu:6.1f} us (user {row['user_us']:5.1f}, sys {row['sys_us']:5.1f}), "
        f"busy {row['server_busy']:.2f}; helpers {row['helpers_us']:5.2f} us; client {row['client_us']:5.1f} us; "
        f"rate {row['rate']:6.0f}/s"
    )
    per_k = {g: row.get(f"gc{g}", 0) * 1000 for g in range(3)}
    print(
        f"{'':10s} per 1,000 calls: gen0/1/2 collections {per_k[0]:.2f}/{per_k[1]:.2f}/{per_k[2]:.2f}, "
        f"in gc {row.get('gc_us', 0):.3f} us/call; context switches per call: voluntary "
        f"{row['voluntary_ctxt_switches']:.3f}, involuntary {row['nonvoluntary_ctxt_switches']:.3f}"
    )
    if any(k in row for k in ("exactly_timed", "sched_reads", "on_thread", "hand_overs")):
        print(
            f"{'':10s} mcpkit's sync policy, per call: usage readings {row.get('exactly_timed', 0):.3f} "
            f"(inline calls timed exactly), run-queue readings {row.get('sched_reads', 0):.3f} (2 per suspect call), "
            f"worker-thread calls {row.get('on_thread', 0):.4f}, loop hand-overs {row.get('hand_overs', 0):.4f}"
        )
    if structure:
        turns, events = row.get("loop_turns", 0), row.get("ready_events", 0)
        callbacks, tasks = row.get("callbacks", 0), row.get("tasks", 0)
        print(
            f"{'':10s} per call: loop turns {turns:.3f}, ready events {events:.3f}, callbacks {callbacks:.3f}, "
            f"tasks {tasks:.3f}"
        )


async def _main(args: argparse.Namespace) -> int:
    for i, spec in enumerate(args.contenders):
        name, _, rest = spec.partition("=")
        if not name or not rest:
            raise SystemExit(f"bad contender {spec!r}: expected name=[PYTHONPATH:]script")
        _report(name, await _measure(name, rest, args.port + i, args), args.counts)
    return 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3] == "--structure", sys.argv[4], sys.argv[5:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("contenders", nargs="+", help="name=[PYTHONPATH:]script")
    parser.add_argument("--era", choices=("modern", "legacy"), default="modern")
    parser.add_argument("--concurrency", type=int, default=32, help="calls in flight (default 32)")
    parser.add_argument("--calls", type=int, default=8000, help="calls measured (default 8,000)")
    parser.add_argument("--seconds", type=float, default=60.0, help="one load's bound in seconds (default 60)")
    parser.add_argument("--counts", action="store_true", help="count loop turns, callbacks and tasks too (slower)")
    parser.add_argument("--port", type=int, default=18900, help="first port (one per contender)")
    return asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
