#!/usr/bin/env python3
"""Build docs/compliance.md from the requirement matrix and the last pytest run.

Inputs: tests/requirements.csv (ID,Type,Section,Requirement,Tested,Notes) and .compliance/results.json
(written by the recorder in tests/conftest.py: test node id -> requirement IDs + outcome).

A requirement's status: "pass" when at least one test naming it passed and none failed; "fail" when any
test naming it failed or errored; "skipped" when its tests were all skipped; "no test" when no test names it.

    python scripts/compliance.py [--fail-on-missing-must] [--deferred FILE]

--fail-on-missing-must exits 1 when a MUST requirement (M...) has no passing test, unless it is listed in the
deferred file (tests/deferred-requirements.txt: one "ID  reason" per line; a reason is required). Deferred IDs are
shown as such in docs/compliance.md; a deferred ID that has a passing test is reported so the entry can go.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "tests" / "requirements.csv"
RESULTS = ROOT / ".compliance" / "results.json"
OUTPUT = ROOT / "docs" / "compliance.md"
DEFERRED = ROOT / "tests" / "deferred-requirements.txt"

FAILED = {"failed", "error", "xpassed"}


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def load_requirements(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        rows = [row for row in csv.DictReader(fh) if (row.get("ID") or "").strip()]
    return rows


def load_results(path: Path) -> tuple[dict[str, dict[str, object]], str]:
    if not path.exists():
        return {}, "missing: run scripts/test.sh"
    data = json.loads(path.read_text(encoding="utf-8"))
    return data.get("tests", {}), f"pytest run of {data.get('generated_at', '?')}"


def load_deferred(path: Path, known: set[str]) -> dict[str, str]:
    """``ID  reason`` per line ('#' starts a comment). Every entry needs a reason and a known requirement ID."""
    if not path.exists():
        return {}
    deferred: dict[str, str] = {}
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        rid, _, reason = line.partition(" ")
        if rid not in known:
            raise SystemExit(f"{path}:{n}: unknown requirement ID {rid!r}")
        if not reason.strip():
            raise SystemExit(f"{path}:{n}: {rid} needs a reason")
        deferred[rid] = reason.strip()
    return deferred


def status_of(outcomes: list[str]) -> str:
    if not outcomes:
        return "no test"
    if any(o in FAILED for o in outcomes):
        return "fail"
    if any(o == "passed" for o in outcomes):
        return "pass"
    return "skipped"


def build(
    requirements: list[dict[str, str]],
    tests: dict[str, dict[str, object]],
    source: str,
    deferred: dict[str, str] | None = None,
) -> tuple[str, dict[str, str]]:
    deferred = deferred or {}
    by_req: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for nodeid, entry in tests.items():
        reqs = entry.get("reqs") or []
        assert isinstance(reqs, list)
        for rid in reqs:
            by_req[str(rid)].append((nodeid, str(entry.get("outcome", "unknown"))))
    known = {r["ID"].strip() for r in requirements}
    statuses: dict[str, str] = {}
    lines: list[str] = []
    for row in requirements:
        rid = row["ID"].strip()
        proofs = sorted(by_req.get(rid, []))
        status = status_of([o for _, o in proofs])
        statuses[rid] = status
        shown = "<br>".join(f"`{_cell(n)}` ({o})" for n, o in proofs[:8])
        if len(proofs) > 8:
            shown += f"<br>... and {len(proofs) - 8} more"
        icon = {"pass": "pass", "fail": "**FAIL**", "skipped": "skipped", "no test": "no test"}[status]
        if rid in deferred and status != "pass":
            icon += f" (deferred: {_cell(deferred[rid])})"
        lines.append(
            f"| {rid} | {_cell(row.get('Type', ''))} | {_cell(row.get('Section', ''))} | "
            f"{_cell(row.get('Requirement', ''))} | {shown or '-'} | {icon} |"
        )

    def count(prefix: str, status: str | None = None) -> int:
        return sum(
            1 for rid, s in statuses.items() if rid.startswith(prefix) and (status is None or s == status)
        )

    summary = []
    for prefix, label in (("M", "MUST"), ("S", "SHOULD"), ("A", "MAY")):
        summary.append(
            f"{label}: {count(prefix, 'pass')}/{count(prefix)} pass, {count(prefix, 'fail')} fail, "
            f"{count(prefix, 'skipped')} skipped, {count(prefix, 'no test')} no test"
        )
    gaps = [rid for rid, s in statuses.items() if s == "no test"]
    unknown = sorted(set(by_req) - known)
    out = [
        "# Compliance matrix",
        "",
        "Generated by `python scripts/compliance.py` from `tests/requirements.csv` and "
        f"`.compliance/results.json` ({source}). Do not edit by hand; `bash scripts/test.sh` regenerates it.",
        "",
        'A test proves a requirement by naming it: `@pytest.mark.req("M023")`.',
        "",
        "**Summary** - " + "; ".join(summary) + f". Tests recorded: {len(tests)}.",
        "",
        "| ID | Type | Section | Requirement | Tests | Status |",
        "| --- | --- | --- | --- | --- | --- |",
        *lines,
        "",
        "## Gaps",
        "",
    ]
    if gaps:
        out.append(f"{len(gaps)} requirement(s) have no test:")
        out.append("")
        for rid in gaps:
            row = next(r for r in requirements if r["ID"].strip() == rid)
            note = f" - deferred: {_cell(deferred[rid])}" if rid in deferred else ""
            out.append(f"- {rid} ({_cell(row.get('Section', ''))}): {_cell(row.get('Requirement', ''))}{note}")
    else:
        out.append("None: every requirement is named by at least one test.")
    failing = [rid for rid, s in statuses.items() if s == "fail"]
    if failing:
        out += ["", "## Failing", "", ", ".join(failing)]
    if unknown:
        out += ["", "## Unknown IDs used by tests", "", ", ".join(unknown)]
    return "\n".join(out) + "\n", statuses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--fail-on-missing-must",
        action="store_true",
        help="exit 1 when a MUST requirement has no passing test",
    )
    parser.add_argument(
        "--deferred", type=Path, default=DEFERRED, help="requirement IDs deferred on purpose, each with a reason"
    )
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    requirements = load_requirements(REQUIREMENTS)
    tests, source = load_results(args.results)
    deferred = load_deferred(args.deferred, {r["ID"].strip() for r in requirements})
    text, statuses = build(requirements, tests, source, deferred)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    summary_line = next(line for line in text.splitlines() if line.startswith("**Summary**"))
    print(
        f"wrote {args.output.relative_to(ROOT) if args.output.is_relative_to(ROOT) else args.output}: "
        f"{summary_line.removeprefix('**Summary** - ')}"
    )
    for rid in sorted(deferred):
        if statuses.get(rid) == "pass":
            print(f"deferred requirement {rid} has a passing test now: remove it from {args.deferred.name}")
    if args.fail_on_missing_must:
        missing = [rid for rid, s in statuses.items() if rid.startswith("M") and s != "pass" and rid not in deferred]
        waived = [rid for rid, s in statuses.items() if rid.startswith("M") and s != "pass" and rid in deferred]
        if waived:
            print(f"MUST requirements deferred ({len(waived)}, reasons in {args.deferred.name}): {', '.join(waived)}")
        if missing:
            print(
                f"MUST requirements without a passing test ({len(missing)}): {', '.join(missing)}",
                file=sys.stderr,
            )
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
