"""How much of the difference between bench runs is noise: the spread of a contender's ratio to the floor over runs.

    python bench/spread.py                                  # every run in bench/results, mcpkit-def, HTTP cases
    python bench/spread.py --contender mcpkit --cases stdio_seq,stdio_c32 --target 0.8
    python bench/spread.py bench/results/bench-2026113*.json

A case's figure in one run is the contender's median rate over the floor's median rate (both of ``--reps``
repetitions, each on a fresh server). For each case this prints every run's ratio, their mean and standard
deviation over the runs, and what pure repetition noise would give: the spread of the same ratio when each of the
five (or ``--reps``) repetitions of both sides is drawn at random from all the runs' repetitions (each divided by
its run's floor median, so that the machine's drift between runs is taken out). When the runs spread no more than
that, a "good" and a "bad" run of the same code are the tails of one distribution, not two states of the server;
and ``--target`` gives the share of runs that would meet it, and the mean a run must have for 3 runs out of 3 to meet
it 9 times out of 10. It reads the JSON that ``bench/run.py`` writes; it starts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_CASES = "http_seq,http_c32,http_modern_seq,http_modern"


def _runs(paths: list[Path], case: str, contender: str) -> list[tuple[str, list[float], list[float]]]:
    """(run name, floor rates, contender rates) of each run that has both in ``case``."""
    out = []
    for path in paths:
        try:
            cases: dict[str, Any] = json.loads(path.read_text())["cases"]
        except (OSError, ValueError, KeyError):
            continue
        entry = cases.get(case) or {}
        floor = entry.get("contenders", {}).get(entry.get("floor", "floor"))
        other = entry.get("contenders", {}).get(contender)
        if not floor or not other or floor.get("status") != "ok" or other.get("status") != "ok":
            continue
        f = [float(s["value"]) for s in floor["samples"]]
        c = [float(s["value"]) for s in other["samples"]]
        if f and c:
            out.append((path.stem.removeprefix("bench-"), f, c))
    return out


def _model(runs: list[tuple[str, list[float], list[float]]], draws: int, seed: int) -> list[float]:
    """The ratio of medians when every repetition is an independent draw from the pooled, run-normalized ones."""
    floors: list[float] = []
    others: list[float] = []
    for _, f, c in runs:
        norm = statistics.median(f)
        floors += [x / norm for x in f]
        others += [x / norm for x in c]
    k = round(statistics.mean(len(f) for _, f, _ in runs))
    rng = random.Random(seed)
    sim = [
        statistics.median(rng.choices(others, k=k)) / statistics.median(rng.choices(floors, k=k)) for _ in range(draws)
    ]
    sim.sort()
    return sim


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="*", type=Path, help="bench JSON files (default: bench/results/bench-*.json)")
    parser.add_argument("--contender", default="mcpkit-def", help="contender key (default mcpkit-def)")
    parser.add_argument("--cases", default=DEFAULT_CASES, help=f"comma-separated case ids (default {DEFAULT_CASES})")
    parser.add_argument("--target", type=float, default=0.90, help="a ratio to meet (default 0.90)")
    parser.add_argument("--draws", type=int, default=20_000, help="draws of the noise model (default 20,000)")
    args = parser.parse_args()
    paths = sorted(args.results or (HERE / "results").glob("bench-*.json"))
    if not paths:
        print("no bench JSON found (run bench/run.py first, or name the files)", file=sys.stderr)
        return 1
    for case in args.cases.split(","):
        runs = _runs(paths, case, args.contender)
        if len(runs) < 2:
            print(f"{case}: {len(runs)} run(s) with both the floor and {args.contender}: nothing to compare")
            continue
        ratios = [statistics.median(c) / statistics.median(f) for _, f, c in runs]
        cv_f = statistics.mean(statistics.pstdev(f) / statistics.mean(f) for _, f, _ in runs)
        cv_c = statistics.mean(statistics.pstdev(c) / statistics.mean(c) for _, _, c in runs)
        sim = _model(runs, args.draws, seed=1)
        lo, hi = sim[len(sim) // 20], sim[len(sim) * 19 // 20]
        sd_model = statistics.pstdev(sim)
        mean = statistics.mean(ratios)
        meets = sum(r >= args.target for r in sim) / len(sim)
        # 3 runs out of 3 at least 9 times out of 10: each run at least 0.9 ** (1/3) ~ 0.965 of the time
        z = 1.81  # the normal quantile of 0.965
        print(f"{case} ({args.contender} / floor, rate, {len(runs)} runs)")
        print("  runs:  " + ", ".join(f"{r:.2f}" for r in ratios))
        print(
            f"  over the runs: mean {mean:.3f}, sd {statistics.pstdev(ratios):.3f},"
            f" {min(ratios):.2f}-{max(ratios):.2f};"
            f" a repetition's coefficient of variation: floor {cv_f:.1%}, {args.contender} {cv_c:.1%}"
        )
        print(
            f"  repetition noise alone: sd {sd_model:.3f}, 90% of runs within {lo:.2f}-{hi:.2f};"
            f" a run meets {args.target:.2f} {meets:.0%} of the time; 3 runs out of 3 meet it 9 times out of 10"
            f" from a mean of {args.target + z * sd_model:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
