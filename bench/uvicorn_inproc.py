"""CPU per Streamable HTTP call inside one process: uvicorn's own HTTP protocol and the ASGI app, without sockets.

    python bench/uvicorn_inproc.py floor_asgi mcpkit_server mcpkit_def [--era modern] [--rounds 3]
    python bench/uvicorn_inproc.py floor_asgi /path/to/old/src:mcpkit_server mcpkit_server

Each contender is ``[PYTHONPATH:]module`` (a server of ``bench/servers`` with ``make_asgi``/``make_app``, or
``served_config``: the uvicorn configuration its script serves with, mcpkit's ``build_server`` with its protocol
lane or floor_lane's). Each runs in a fresh process: uvicorn's protocol of the suite's parser (``HttpToolsProtocol``,
or ``H11Protocol`` with ``BENCH_HTTP_PARSER=h11``; the script's own subclass with ``served_config``) over in-memory
transports, 32
connections with a request in flight each, ``tools/call echo`` as in the suite's ``http_c32``/``http_modern``
cases. What it measures is the process's CPU time per call with the system calls taken out, which makes
differences of a microsecond visible that the socket-level A/B (``bench/ab.py``) cannot separate from
noise: the best of four runs in each of ``--rounds`` interleaved processes per contender. ``--profile
tottime`` prints a cProfile of one run. It complements ``bench/ab.py`` (the real server) and ``bench/run.py``
(the published figures); it is not a figure to publish.

``--instructions`` counts instead of timing: each contender's child runs twice under valgrind's callgrind (200 and
1,200 calls per run, ``PYTHONHASHSEED=0``), and the difference over the 4,000 extra calls is the instructions per
call, start-up and warm-up excluded. Independent of the machine's load (repeated runs agree within about 1%),
~1 minute per contender; needs ``valgrind`` (``apt-get install valgrind``).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import inproc  # noqa: E402


class _Transport(asyncio.Transport):
    """An in-memory transport: what uvicorn writes goes to ``on_write``."""

    def __init__(self, on_write: Any) -> None:
        super().__init__()
        self.on_write = on_write
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(name, default)

    def write(self, data: Any) -> None:
        self.on_write(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_reading(self) -> bool:
        return True

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


def _request(body: bytes, headers: list[tuple[str, str]]) -> bytes:
    lines = [b"POST /mcp HTTP/1.1", b"host: 127.0.0.1:8000", b"content-length: %d" % len(body)]
    lines += [k.encode() + b": " + v.encode() for k, v in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


async def _child(module: str, era: str, calls: int, concurrency: int, profile: str) -> float:
    sys.path[:0] = [str(HERE / "servers"), str(HERE)]
    import orjson
    from _serve import UVICORN_CONFIG
    from harness.driver import MODERN_META, MODERN_VERSION, initialize_params
    from uvicorn.config import Config
    from uvicorn.lifespan.on import LifespanOn
    from uvicorn.server import ServerState

    mod = importlib.import_module(module)
    if hasattr(mod, "served_config"):  # served as its script serves it (mcpkit's build_server, floor_lane)
        config = mod.served_config(False)
    else:
        app = mod.make_asgi(False) if hasattr(mod, "make_asgi") else mod.make_app(False)
        config = Config(app, port=8000, **UVICORN_CONFIG)
    config.load()
    Protocol = config.http_protocol_class
    state = ServerState()
    await LifespanOn(config).startup()
    loop = asyncio.get_running_loop()

    def connection(on_response: Any) -> Any:
        buf = bytearray()

        def on_write(data: bytes) -> None:
            buf.extend(data)
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(buf[:end]).lower()
            at = head.find(b"content-length: ")
            size = int(head[at + 16 :].split(b"\r\n", 1)[0])
            if len(buf) >= end + 4 + size:
                response = bytes(buf[: end + 4 + size])
                del buf[: end + 4 + size]
                on_response(response)

        proto = Protocol(config, state, {})
        proto.connection_made(_Transport(on_write))
        return proto

    headers = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")]
    params: dict[str, Any] = {"name": "echo", "arguments": {"text": "hello"}}
    extra: list[tuple[str, str]] = []
    if era == "modern":
        headers.append(("MCP-Protocol-Version", MODERN_VERSION))
        params["_meta"] = dict(MODERN_META)
        extra = [("Mcp-Method", "tools/call"), ("Mcp-Name", "echo")]
    else:
        got: list[bytes] = []
        first = connection(got.append)
        init = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize_params()})
        first.data_received(_request(init, headers))
        while not got:
            await asyncio.sleep(0.001)
        session = [
            ln.split(b":", 1)[1].strip().decode()
            for ln in got[0].split(b"\r\n")
            if ln.lower().startswith(b"mcp-session-id:")
        ]
        headers.append(("MCP-Protocol-Version", "2025-06-18"))
        if session:
            headers.append(("Mcp-Session-Id", session[0]))
        got.clear()
        first.data_received(_request(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers))
        while not got:
            await asyncio.sleep(0.001)
    # One request in flight per connection, each with its own id (the handshake era refuses an id that is in use
    # on the session; the modern era has no session, but the same ids keep the two alike).
    wires = [
        _request(
            orjson.dumps({"jsonrpc": "2.0", "id": 1000 + k, "method": "tools/call", "params": params}), headers + extra
        )
        for k in range(concurrency)
    ]
    remaining = [0]
    done = asyncio.Event()
    conns: list[Any] = []
    wrong: list[bytes] = []  # an unexpected answer ends the run (raised inside the app's send, uvicorn would log it)

    def make(k: int) -> None:
        def on_response(response: bytes) -> None:
            if b" 200 " not in response[:16] or b"hello" not in response:
                wrong.append(response)
                done.set()
                return
            remaining[0] -= 1
            if remaining[0] > 0:
                loop.call_soon(conns[k].data_received, wires[k])
            else:
                done.set()

        conns.append(connection(on_response))

    for k in range(concurrency):
        make(k)

    async def run(n: int) -> None:
        remaining[0] = n
        done.clear()
        for k, c in enumerate(conns):
            c.data_received(wires[k])
        await done.wait()
        if wrong:
            raise SystemExit(f"{module}: unexpected answer {wrong[0][:300]!r}")

    await run(3000)  # warm-up (and a sync tool's learning)
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
    cpu = float("inf")
    for _ in range(1 if profile else 4):  # the best of four runs in this process
        c0 = time.process_time()
        await run(calls)
        cpu = min(cpu, (time.process_time() - c0) / calls * 1e6)
    if profile:
        prof.disable()
        # PROFILE_FILTER=mcpkit keeps mcpkit's own functions; PROFILE_LINES: how many rows
        stats = pstats.Stats(prof).sort_stats(profile)
        stats.print_stats(os.environ.get("PROFILE_FILTER", ""), int(os.environ.get("PROFILE_LINES", "40")))
        if os.environ.get("PROFILE_CALLERS"):
            stats.print_callers(os.environ["PROFILE_CALLERS"])
    return cpu


def main() -> int:
    parser = inproc.new_parser(__doc__)
    inproc.add_load_options(parser)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", default="", help="cProfile sort key (one round, printed)")
    inproc.add_child_options(parser)
    args = parser.parse_args()
    if args.child:
        cpu = asyncio.run(_child(args.child, args.era, args.calls, args.concurrency, args.profile))
        print(f"{cpu:.3f}")
        return 0
    if not args.contenders:
        parser.error("name at least one contender")
    if args.instructions:
        return _instructions(args)
    best: dict[str, float] = {}
    for _ in range(1 if args.profile else args.rounds):
        for spec in args.contenders:
            module, env = inproc.contender(spec)
            argv = [sys.executable, __file__, "--child", module, "--era", args.era, "--calls", str(args.calls)]
            argv += ["--concurrency", str(args.concurrency)] + (["--profile", args.profile] if args.profile else [])
            lines = inproc.child_lines(spec, argv, env)
            if args.profile:
                print("\n".join(lines[:-1]))
            value = float(lines[-1])
            best[spec] = min(best.get(spec, value), value)
    for spec in args.contenders:
        where = f"uvicorn {_parser()} in process, {args.era}, {args.concurrency} in flight"
        print(f"{spec:40s} {best[spec]:7.1f} us CPU/call ({where})")
    return 0


def _parser() -> str:
    sys.path.insert(0, str(HERE / "servers"))
    from _serve import http_parser

    return http_parser()


def _instructions(args: argparse.Namespace) -> int:
    """Instructions per call of each contender (see the module docs): two callgrind runs each, side by side."""
    for spec in args.contenders:
        module, env = inproc.contender(spec, hash_seed=True)
        argv = [sys.executable, __file__, "--child", module, "--era", args.era]
        argv += ["--concurrency", str(args.concurrency)]
        where = f"uvicorn {_parser()} in process, {args.era}, {args.concurrency} in flight"
        inproc.print_instructions(spec, argv, env, where)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
