"""Instructions (or CPU) per ``tools/call`` of mcpkit's engine and server, inside one process, by the way each
transport calls the engine:

    python bench/core_inproc.py mcpkit_def --path stdio [--era modern] [--concurrency 1]
    python bench/core_inproc.py /path/to/old/src:mcpkit_def mcpkit_def --path feed --instructions
    python bench/core_inproc.py mcpkit_def --path answer --era legacy --trace

Each contender is ``[PYTHONPATH:]module``, a server of ``bench/servers`` with an ``app``; each runs in a fresh
process and calls ``echo`` there, ``--concurrency`` requests in flight, in the handshake era (initialized at
2025-06-18: ``--era legacy``) or the 2026-07-28 era. ``--path``:

- ``stdio``: the whole stdio server (:class:`~mcpkit.transports.stdio.StdioServerTransport`) on two pipes; the
  client's side is a bare loop on their other ends (a few lines of Python per call, the same for every contender).
- ``feed``: what stdio does without the pipes: each request's bytes to the session's ``Peer.feed``, the answers
  to an outbox that keeps them (the engine's runner, the server, the tool).
- ``answer``: what an HTTP POST to a handshake-era session does: ``Peer.answer`` on the parsed request.
- ``detached``: what a 2026-07-28 HTTP POST does: ``Server.modern_context`` on its ``_meta``, then
  ``Peer.detached`` and ``Peer.run_detached`` on the server's stateless peer.

The last three measure the engine and the server alone (no transport, no HTTP). ``--instructions`` runs each
contender's child twice under valgrind's callgrind (200 and 1,200 calls per run, ``PYTHONHASHSEED=0``) and prints
the difference per call: user-space instructions (a system call's kernel side is not counted), start-up and warm-up
excluded, independent of the machine's load. ``--trace`` prints, for one round of ``--concurrency`` calls after the
warm-up, the Python functions it ran with their bytecodes and calls per call (``sys.settrace`` with opcode events):
where the interpreter's work goes, function by function.
"""

from __future__ import annotations

import asyncio
import collections
import importlib
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import inproc  # noqa: E402

Round = Callable[[int], Awaitable[None]]


async def _child(module: str, path: str, era: str, calls: int, concurrency: int, trace: bool) -> float:
    sys.path[:0] = [str(HERE / "servers"), str(HERE)]
    app = importlib.import_module(module).app
    for tool in app.tools:
        # a call is judged long only past a second: under callgrind (about 50 times slower) on a loaded machine, a
        # call the OS preempted would look long and send the tool off the inline path, or have its next calls
        # timed exactly (system calls), in one run and not in the other
        tool.sync.configure(long_ms=1000)
    params: dict[str, Any] = {"name": "echo", "arguments": {"text": "hello"}}
    if era == "modern":
        from harness.driver import MODERN_META

        params["_meta"] = dict(MODERN_META)
    # one request per slot, each with its own id (a handshake-era session refuses an id in use); reused in turn
    wires = [
        orjson.dumps({"jsonrpc": "2.0", "id": 1000 + k, "method": "tools/call", "params": params})
        for k in range(concurrency)
    ]
    make = {"stdio": _over_stdio, "feed": _fed, "answer": _answered, "detached": _detached}[path]
    run, stop = await make(app, era, wires)
    await run(500)  # warm-up (and the sync tool's learning: 20 calls)
    cpu = 0.0
    if trace:
        await _trace_one(run, concurrency)
    else:
        cpu = float("inf")
        for _ in range(4):  # the best of four runs in this process
            c0 = time.process_time()
            await run(calls)
            cpu = min(cpu, (time.process_time() - c0) / calls * 1e6)
    await stop()
    return cpu


def _check(answer: bytes) -> None:
    # (find, not ``in``: ``in`` on bytes tries the operand as an integer first, and raises and clears a TypeError)
    if answer.find(b'"hello"') < 0 or answer.find(b'"isError":true') >= 0:
        raise SystemExit(f"unexpected answer {answer[:300]!r}")


class _Keep:
    """An outbox that keeps the answers and wakes the driver when the round's last one came."""

    def __init__(self) -> None:
        self.got: list[bytes] = []
        self.want = 0
        self.done = asyncio.Event()

    async def send(self, data: bytes, msg: Any = None) -> None:
        if msg is not None and msg.id is None:
            return  # (a notification: the list of tools changed while the app started)
        self.got.append(data)
        if len(self.got) >= self.want:
            self.done.set()


async def _session(app: Any, era: str, out: Any) -> Any:
    """A server session on ``out``, initialized in the handshake era."""
    from harness.driver import initialize_params

    from mcpkit.protocol import jsonrpc

    await app.startup()
    session = app.create_session(out)
    if era != "modern":
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": initialize_params("2025-06-18")}
        await session.peer.handle(jsonrpc.parse(orjson.dumps(init)), out)
        await session.peer.handle(jsonrpc.parse(b'{"jsonrpc":"2.0","method":"notifications/initialized"}'), out)
    return session


async def _fed(app: Any, era: str, wires: list[bytes]) -> tuple[Round, Callable[[], Awaitable[None]]]:
    out = _Keep()
    feed = (await _session(app, era, out)).peer.feed

    async def run(n: int) -> None:
        width = len(wires)
        for first in range(0, n, width):
            out.got.clear()
            out.done.clear()
            out.want = min(width, n - first)
            for wire in wires[: out.want]:
                if not feed(wire):
                    raise SystemExit("the peer did not take a request")
            await out.done.wait()
            for answer in out.got:
                _check(answer)

    return run, app.shutdown


async def _answered(app: Any, era: str, wires: list[bytes]) -> tuple[Round, Callable[[], Awaitable[None]]]:
    from mcpkit.engine import Outgoing
    from mcpkit.protocol import jsonrpc

    out = _Keep()
    answer = (await _session(app, era, out)).peer.answer
    parse = jsonrpc.parse

    async def run(n: int) -> None:
        width = len(wires)
        for k in range(n):
            wire = wires[k % width]
            got = answer(parse(wire), out, wire)
            if type(got) is not Outgoing:  # (made at once, or what makes it)
                got = await got
            _check(got[0])

    return run, app.shutdown


async def _detached(app: Any, era: str, wires: list[bytes]) -> tuple[Round, Callable[[], Awaitable[None]]]:
    from mcpkit.engine import NULL_OUTBOX, Outgoing
    from mcpkit.protocol import jsonrpc

    if era != "modern":
        raise SystemExit("--path detached is the 2026-07-28 era's")
    await app.startup()
    peer = app.stateless_peer()
    parse = jsonrpc.parse

    async def run(n: int) -> None:
        width = len(wires)
        for k in range(n):
            wire = wires[k % width]
            m = parse(wire)
            ctx = peer.detached(m.id, m.method, m.params, NULL_OUTBOX, wire)
            ctx.validated_meta = app.modern_context(m.params["_meta"])
            got = peer.run_detached(ctx)
            if type(got) is not Outgoing:
                got = await got
            _check(got[0])

    return run, app.shutdown


async def _over_stdio(app: Any, era: str, wires: list[bytes]) -> tuple[Round, Callable[[], Awaitable[None]]]:
    from harness.driver import initialize_params

    from mcpkit.transports.stdio import StdioServerTransport

    loop = asyncio.get_running_loop()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    transport = StdioServerTransport(
        stdin=os.fdopen(in_r, "rb", buffering=0), stdout=os.fdopen(out_w, "wb", buffering=0), guard_stdout=False
    )
    await transport.start()
    serving = loop.create_task(app.serve(transport))
    lines: list[bytes] = []
    buf = bytearray()
    arrived = asyncio.Event()

    def on_readable() -> None:
        buf.extend(os.read(out_r, 1 << 16))
        end = buf.rfind(b"\n")
        if end >= 0:
            lines.extend(bytes(buf[:end]).split(b"\n"))
            del buf[: end + 1]
            arrived.set()

    loop.add_reader(out_r, on_readable)

    async def next_lines() -> None:
        while not lines:
            arrived.clear()
            await arrived.wait()

    if era != "modern":
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": initialize_params("2025-06-18")}
        os.write(in_w, orjson.dumps(init) + b"\n")
        await next_lines()
        lines.clear()
        os.write(in_w, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    width = len(wires)
    framed = [w + b"\n" for w in wires]

    async def run(n: int) -> None:
        """``n`` calls, ``width`` in flight: the answers of each read let as many requests go, in one write."""
        sent = min(n, width)
        os.write(in_w, b"".join(framed[:sent]))
        answered = 0
        while answered < n:
            await next_lines()
            got = len(lines)
            for line in lines:
                _check(line)
            lines.clear()
            answered += got
            more = min(got, n - sent)
            if more > 0:
                os.write(in_w, b"".join(framed[(sent + k) % width] for k in range(more)))
                sent += more

    async def stop() -> None:
        os.close(in_w)
        await asyncio.wait_for(serving, 10)
        loop.remove_reader(out_r)

    return run, stop


async def _trace_one(run: Any, calls: int) -> None:
    """Run one round of ``calls`` calls under ``sys.settrace`` and print each Python function it ran with its
    bytecodes and calls, per call (the trace function is the thread's: the server's tasks and the loop's callbacks
    are traced too)."""
    ops: collections.Counter[str] = collections.Counter()
    frames: collections.Counter[str] = collections.Counter()

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        code = frame.f_code
        name = f"{Path(code.co_filename).name}:{code.co_firstlineno} {code.co_qualname}"
        if event == "call":
            frame.f_trace_opcodes = True
            frames[name] += 1
        elif event == "opcode":
            ops[name] += 1
        return tracer

    sys.settrace(tracer)
    try:
        await run(calls)
    finally:
        sys.settrace(None)
    print(f"per call: {sum(ops.values()) / calls:.0f} bytecodes in {sum(frames.values()) / calls:.1f} Python calls")
    for name, n in ops.most_common():
        print(f"{n / calls:8.1f} {frames[name] / calls:5.2f}x {name}")


def main() -> int:
    parser = inproc.new_parser(__doc__)
    parser.add_argument("--path", choices=("stdio", "feed", "answer", "detached"), default="feed")
    inproc.add_load_options(parser)
    inproc.add_child_options(parser)
    parser.add_argument("--trace", action="store_true", help="the bytecodes of one call, by function")
    args = parser.parse_args()
    if args.child:
        cpu = asyncio.run(_child(args.child, args.path, args.era, args.calls, args.concurrency, args.trace))
        if not args.trace:
            print(f"{cpu:.3f}")
        return 0
    if not args.contenders:
        parser.error("name at least one contender")
    for spec in args.contenders:
        module, env = inproc.contender(spec, hash_seed=True)
        base = [sys.executable, __file__, "--child", module, "--path", args.path, "--era", args.era]
        base += ["--concurrency", str(args.concurrency)]
        where = f"{args.path} in process, {args.era}, {args.concurrency} in flight"
        if args.trace:
            subprocess.run([*base, "--trace"], env=env, check=True, timeout=600)
        elif args.instructions:
            inproc.print_instructions(spec, base, env, where)
        else:
            value = float(inproc.child_lines(spec, [*base, "--calls", str(args.calls)], env)[-1])
            print(f"{spec:40s} {value:7.1f} us CPU/call ({where})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
