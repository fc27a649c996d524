#!/usr/bin/env python3
"""Long fuzz runs of the server: ``python scripts/fuzz.py --minutes N [--seed S]``.

Runs tests/e2e/test_fuzz_server.py with budgets scaled to N minutes (CI runs the same file with a short budget):
hypothesis examples per revision over the memory transport, and seconds of hostile frames per real stdio and
HTTP server process. A failure prints the seed (``MCPKIT_FUZZ_SEED``) and hypothesis' minimal failing frame.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Measured on the 2-core machine: ~8 memory examples per second per revision, and 4 process runs.
EXAMPLES_PER_MINUTE = 400


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, required=True, help="total budget, split over all fuzz tests")
    parser.add_argument("--seed", type=int, default=None, help="seed of the process runs (default: from the clock)")
    args = parser.parse_args()
    if args.minutes <= 0:
        parser.error("--minutes must be positive")
    # Half the budget to the 5 memory sessions, half to the 4 process runs.
    examples = max(50, int(args.minutes * EXAMPLES_PER_MINUTE / 2 / 5 * 5))
    process_seconds = max(4.0, args.minutes * 60 / 2 / 4)
    env = dict(os.environ)
    env["MCPKIT_FUZZ_EXAMPLES"] = str(examples)
    env["MCPKIT_FUZZ_PROCESS_SECONDS"] = str(process_seconds)
    if args.seed is not None:
        env["MCPKIT_FUZZ_SEED"] = str(args.seed)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "timeout=0",
        "tests/e2e/test_fuzz_server.py",
    ]
    print(f"fuzz: {examples} examples per revision, {process_seconds:.0f} s per process run", flush=True)
    start = time.monotonic()
    rc = subprocess.call(cmd, cwd=ROOT, env=env)
    print(f"fuzz: finished in {time.monotonic() - start:.0f} s, exit {rc}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
