#!/usr/bin/env python3
"""Issue 2: request round trips per second over stdio for a trivial handler, against a raw asyncio + orjson
echo loop measured in the same run. Sequential and 32 in flight.

    python bench/stdio_roundtrip.py [--quick]

The servers are the low-level ones (`mcp` low-level Server, mcpkit's low-level Server, each with a
trivial `tools/call` handler) and `floor_stdio.py` (the raw loop); the driver and the interleaved runner
are the same as bench/run.py's. Results go to bench/results/stdio_roundtrip-<stamp>.json."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from run import ensure_venv  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=0, help="repetitions (default: 5, quick: 1)")
    args = parser.parse_args()
    ensure_venv(__file__)
    from dataclasses import replace

    from harness import procs
    from harness.cases import FULL, QUICK
    from harness.session import run_session

    procs.install_signal_handlers()
    budget = QUICK if args.quick else replace(FULL, reps=5, seq_s=2.0, c32_s=2.0)
    if args.reps:
        budget = replace(budget, reps=args.reps)
    return run_session(
        name="stdio_roundtrip",
        selected=["stdio_seq", "stdio_c32"],
        budget=budget,
        quick=args.quick,
        server_keys=["floor", "mcp-lowlevel", "mcpkit-lowlevel"],
        write_docs=False,
    )


if __name__ == "__main__":
    sys.exit(main())
