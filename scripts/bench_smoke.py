"""CI smoke run of the benchmark suite: `bench/run.py --quick`, then insist that every case `bench/run.py --list`
names was run and that mcpkit's contenders produced a figure in every case they take part in (a run that silently
reports mcpkit as n/a, or drops a case, proves nothing); then that `--reps 2` runs a case twice.

No timing is asserted: the numbers of a smoke run on a shared machine mean nothing; `python bench/run.py` is the
real measurement (docs/benchmarks.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def listed_cases() -> list[str]:
    """The case ids `bench/run.py --list` prints (one per line, before the contender lines)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
        check=True,
    ).stdout
    ids = []
    for line in out.splitlines():
        if line.startswith(("servers:", "clients:")) or not line.strip():
            continue
        ids.append(line.split()[0])
    return ids


def quick_run(*extra: str) -> tuple[Path, dict[str, Any]] | None:
    """``bench/run.py --quick --no-docs`` with ``extra``: its results file and what it holds (None: it failed)."""
    before = set(RESULTS.glob("bench-*-quick.json")) if RESULTS.exists() else set()
    argv = [sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--no-docs", *extra]
    rc = subprocess.call(argv, cwd=ROOT)
    if rc != 0:
        print(f"bench smoke: {' '.join(argv[1:])} exited {rc}", file=sys.stderr)
        return None
    new = sorted(set(RESULTS.glob("bench-*-quick.json")) - before)
    if not new:
        print("bench smoke: no results file was written", file=sys.stderr)
        return None
    return new[-1], json.loads(new[-1].read_text())


def reps_problems() -> list[str]:
    """``--reps 2``: the run says 2 repetitions, and each contender of the case has two samples."""
    run = quick_run("--reps", "2", "--only", "stdio_seq", "--contenders", "floor,mcpkit-def")
    if run is None:
        return ["--reps 2: the run failed"]
    _, data = run
    problems = []
    if data["meta"]["budget"]["reps"] != 2:
        problems.append(f"--reps 2: the run says {data['meta']['budget']['reps']} repetitions")
    for name, result in data["cases"]["stdio_seq"]["contenders"].items():
        if len(result.get("samples", [])) != 2:
            problems.append(f"--reps 2: stdio_seq/{name} has {len(result.get('samples', []))} samples")
    return problems


def main() -> int:
    expected = listed_cases()
    run = quick_run()
    if run is None:
        return 1
    path, data = run
    problems = [f"{case_id}: missing from the results" for case_id in expected if case_id not in data["cases"]]
    if not expected:
        problems.append("bench/run.py --list named no case")
    seen = 0
    for case_id, case in data["cases"].items():
        for name, result in case.get("contenders", {}).items():
            if not name.startswith("mcpkit"):
                continue
            seen += 1
            if result.get("status") != "ok":
                problems.append(f"{case_id}/{name}: {result.get('status')} {result.get('errors')}")
    if not seen:
        problems.append("mcpkit took part in no case")
    problems += reps_problems()
    for p in problems:
        print("bench smoke:", p, file=sys.stderr)
    print(f"bench smoke: {seen} mcpkit figures, {len(problems)} problems ({path.name})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
