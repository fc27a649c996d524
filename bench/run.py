#!/usr/bin/env python3
"""mcpkit benchmark: one command, every case, one run.

    python bench/run.py                 full run (~15 minutes), rewrites docs/benchmarks.md + the .svg charts
    python bench/run.py --quick         smoke run (seconds), JSON only
    python bench/run.py --only stdio_seq,http_c32
    python bench/run.py --only stdio_c32,http_c32 --reps 9     (narrower medians on a noisy machine)
    python bench/run.py --only list_res_10k,list_res_100k --contenders floor,mcp,mcpkit --docs
                                        (a partial run's own section in docs/benchmarks.md)
    python bench/run.py --only inflight_32,inflight_256,inflight_1k --docs
                                        (one growth curve: its table and docs/benchmarks-growth-*.svg)

The first run creates .bench-venv at the repository root and installs the peers into it (mcp, fastmcp)
plus mcpkit itself (editable, with its http extra), then re-executes itself inside it. Results go to
bench/results/<utc-stamp>[-quick].json. See docs/benchmarks.md for what each case measures."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
VENV = ROOT / ".bench-venv"
PEERS = ["mcp==2.3.0", "fastmcp==4.1.2"]  # fastmcp 4.1.6 does not resolve on this index
BASE = ["orjson", "uvicorn"]  # what the floors need even if mcpkit cannot be installed
MAX_REPS = 25  # --reps bound: 25 full repetitions take about 75 minutes


def _stamp_value() -> str:
    h = hashlib.sha256(" ".join(PEERS + BASE).encode())
    pyproject = ROOT / "pyproject.toml"
    if pyproject.exists():
        h.update(pyproject.read_bytes())
    return h.hexdigest()


def _pip(py: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=1200,
    )


def ensure_venv(script: str | None = None) -> None:
    """Create .bench-venv if missing, (re)install when the pins or mcpkit's pyproject changed, then
    re-execute `script` (default: this file) inside it with the same arguments."""
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    py = VENV / "bin" / "python"
    stamp = VENV / ".bench-stamp"
    if not py.exists():
        print(f"bench: creating {VENV.relative_to(ROOT)}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, timeout=300)
    want = _stamp_value()
    if not stamp.exists() or stamp.read_text() != want:
        print("bench: installing peers and mcpkit into .bench-venv (once)", file=sys.stderr)
        done = _pip(py, *PEERS, *BASE, "-e", f"{ROOT}[http]")
        if done.returncode != 0:
            # mcpkit itself may be mid-rewrite: keep the peers, let mcpkit show as n/a.
            print(
                "bench: installing mcpkit failed; its contenders will be n/a:\n"
                + "\n".join(done.stderr.strip().splitlines()[-5:]),
                file=sys.stderr,
            )
            peers = _pip(py, *PEERS, *BASE)
            if peers.returncode != 0:
                sys.exit("bench: cannot install the peers:\n" + peers.stderr[-2000:])
        else:
            stamp.write_text(want)
    os.execv(str(py), [str(py), str(Path(script or __file__).resolve()), *sys.argv[1:]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 repetition, tiny counts")
    parser.add_argument("--only", default="", help="comma-separated case ids (default: all)")
    parser.add_argument("--contenders", default="", help="comma-separated server contender keys (default: all)")
    parser.add_argument(
        "--docs",
        dest="docs",
        action="store_true",
        default=None,
        help="rewrite docs/benchmarks.md and .svg (default: only on a full run of every case); with --only or "
        "--contenders, update just this case set's section of docs/benchmarks.md",
    )
    parser.add_argument("--no-docs", dest="docs", action="store_false")
    parser.add_argument("--list", action="store_true", help="list cases and contenders, then exit")
    parser.add_argument(
        "--http-parser",
        choices=("httptools", "h11"),
        default=None,
        help="uvicorn's HTTP parser for every Python contender and the ASGI floor (default: httptools, what "
        "mcpkit's http extra installs; h11 when it is missing)",
    )
    parser.add_argument(
        "--reps",
        type=int,
        default=None,
        help="repetitions of each case, 1 to 25 (default: 5, or 1 with --quick): more narrow the medians on a "
        "noisy machine, and the run's time bound grows with them",
    )
    args = parser.parse_args()
    if args.reps is not None and not 1 <= args.reps <= MAX_REPS:
        parser.error(f"--reps must be between 1 and {MAX_REPS}, not {args.reps}")
    if args.http_parser:
        os.environ["BENCH_HTTP_PARSER"] = args.http_parser  # (inherited by every server process)

    ensure_venv()
    sys.path.insert(0, str(BENCH))
    from harness import procs
    from harness.cases import CASES, FULL, QUICK
    from harness.contenders import CLIENT_CONTENDERS, SERVER_CONTENDERS
    from harness.session import run_session

    if args.list:
        for c in CASES:
            print(f"{c.id:<18} {c.group:<15} {c.title} ({c.unit}, {c.better} is better)")
        print("servers:", ", ".join(c.key for c in SERVER_CONTENDERS))
        print("clients:", ", ".join(c.key for c in CLIENT_CONTENDERS))
        return 0
    procs.install_signal_handlers()
    known = {c.id for c in CASES}
    selected = [s.strip() for s in args.only.split(",") if s.strip()] or [c.id for c in CASES]
    unknown = [s for s in selected if s not in known]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; known: {sorted(known)}")
    keys = [s.strip() for s in args.contenders.split(",") if s.strip()] or None
    write_docs = args.docs if args.docs is not None else (not args.quick and not args.only and not keys)
    budget = QUICK if args.quick else FULL
    if args.reps is not None:
        # the run's bound scales with its repetitions (the curves keep their own, fewer, repetitions)
        deadline = budget.run_deadline_s * max(1.0, args.reps / budget.reps)
        budget = dataclasses.replace(budget, reps=args.reps, run_deadline_s=deadline)
    return run_session(
        name="bench",
        selected=selected,
        budget=budget,
        quick=args.quick,
        server_keys=keys,
        write_docs=write_docs,
    )


if __name__ == "__main__":
    sys.exit(main())
