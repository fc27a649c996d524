"""CI smoke run of the benchmark suite: `bench/run.py --quick`, then insist that mcpkit's contenders produced a
figure in every case they take part in (a run that silently reports mcpkit as n/a proves nothing).

No timing is asserted: the numbers of a smoke run on a shared machine mean nothing; `python bench/run.py` is the
real measurement (docs/benchmarks.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def main() -> int:
    before = set(RESULTS.glob("bench-*-quick.json")) if RESULTS.exists() else set()
    rc = subprocess.call([sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--no-docs"], cwd=ROOT)
    if rc != 0:
        print(f"bench smoke: bench/run.py --quick exited {rc}", file=sys.stderr)
        return 1
    new = sorted(set(RESULTS.glob("bench-*-quick.json")) - before)
    if not new:
        print("bench smoke: no results file was written", file=sys.stderr)
        return 1
    data = json.loads(new[-1].read_text())
    problems = []
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
    for p in problems:
        print("bench smoke:", p, file=sys.stderr)
    print(f"bench smoke: {seen} mcpkit figures, {len(problems)} problems ({new[-1].name})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
