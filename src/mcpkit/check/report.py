"""Findings and the per-requirement report of ``mcpkit check``."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

PASS, FAIL, WARN, SKIP = "pass", "fail", "warn", "skip"
_RANK = {FAIL: 3, WARN: 2, PASS: 1, SKIP: 0}

# The MCP requirement list (ID -> (type, section, text): MUST/SHOULD/MAY statements of the specification),
# bundled so the checker works outside the repo.
_MATRIX_FILE = Path(__file__).with_name("requirements.csv")


@lru_cache(maxsize=1)
def requirement_texts() -> dict[str, tuple[str, str, str]]:
    if not _MATRIX_FILE.exists():
        return {}
    with _MATRIX_FILE.open(newline="", encoding="utf-8") as fh:
        return {
            row["ID"].strip(): (row.get("Type", ""), row.get("Section", ""), row.get("Requirement", ""))
            for row in csv.DictReader(fh)
            if (row.get("ID") or "").strip()
        }


@dataclass
class Finding:
    """One observation about one requirement."""

    req: str
    status: str
    evidence: str
    check: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"status": self.status, "check": self.check, "evidence": self.evidence}


@dataclass
class Requirement:
    """All findings for one requirement ID, aggregated: fail > warn > pass > skip."""

    req: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def status(self) -> str:
        return max((f.status for f in self.findings), key=lambda s: _RANK[s], default=SKIP)

    @property
    def evidence(self) -> str:
        status = self.status
        chosen = [f for f in self.findings if f.status == status]
        return " | ".join(dict.fromkeys(f"{f.check + ': ' if f.check else ''}{f.evidence}" for f in chosen[:3]))


class Report:
    def __init__(self, target: str, transport: str) -> None:
        self.target = target
        self.transport = transport
        self.requirements: dict[str, Requirement] = {}
        self.info: dict[str, Any] = {}
        self.prefix = ""  # put before the evidence of the findings being added (e.g. "[2026-07-28] ")

    def add(self, req: str, status: str, evidence: str, check: str = "") -> None:
        assert status in _RANK, status
        finding = Finding(req, status, self.prefix + evidence, check)
        self.requirements.setdefault(req, Requirement(req)).findings.append(finding)

    def ok(self, req: str, evidence: str, check: str = "") -> None:
        self.add(req, PASS, evidence, check)

    def fail(self, req: str, evidence: str, check: str = "") -> None:
        self.add(req, FAIL, evidence, check)

    def warn(self, req: str, evidence: str, check: str = "") -> None:
        self.add(req, WARN, evidence, check)

    def skip(self, req: str, evidence: str, check: str = "") -> None:
        self.add(req, SKIP, evidence, check)

    def status(self, req: str) -> str:
        r = self.requirements.get(req)
        return r.status if r else SKIP

    def sorted(self) -> list[Requirement]:
        def order(rid: str) -> tuple[int, int, str]:
            prefix = {"M": 0, "S": 1, "A": 2}.get(rid[:1], 3)
            digits = "".join(ch for ch in rid[1:] if ch.isdigit())
            return (prefix, int(digits) if digits else 0, rid)

        return [self.requirements[k] for k in sorted(self.requirements, key=order)]

    def failed_musts(self) -> list[str]:
        """The IDs of the MUST requirements that failed (``mcpkit check`` exits 1 when there is any)."""
        return [r.req for r in self.sorted() if r.req.startswith("M") and r.status == FAIL]

    def counts(self) -> dict[str, dict[str, int]]:
        """Verdicts per level: ``{'MUST': {'pass': n, 'fail': n, 'warn': n, 'skip': n}, 'SHOULD': ..., 'MAY': ...}``."""
        out: dict[str, dict[str, int]] = {}
        for r in self.sorted():
            kind = {"M": "MUST", "S": "SHOULD", "A": "MAY"}.get(r.req[:1], "OTHER")
            bucket = out.setdefault(kind, {PASS: 0, FAIL: 0, WARN: 0, SKIP: 0})
            bucket[r.status] += 1
        return out

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-able data (what ``mcpkit check --json`` prints)."""
        texts = requirement_texts()
        checked = set(self.requirements)
        return {
            "target": self.target,
            "transport": self.transport,
            "info": self.info,
            "summary": self.counts(),
            "failedMust": self.failed_musts(),
            "requirements": [
                {
                    "id": r.req,
                    "type": texts.get(r.req, ("", "", ""))[0],
                    "requirement": texts.get(r.req, ("", "", ""))[2],
                    "status": r.status,
                    "evidence": r.evidence,
                    "findings": [f.as_dict() for f in r.findings],
                }
                for r in self.sorted()
            ],
            "notChecked": sorted(set(texts) - checked),
        }

    def render_text(self, verbose: bool = False) -> str:
        """The report as text (what ``mcpkit check`` prints); ``verbose`` shows every finding."""
        texts = requirement_texts()
        lines = [
            f"mcpkit check {self.target} ({self.transport})",
            "  checks the MCP specification's requirements a client can observe: MUST (M...), SHOULD (S...), "
            "MAY (A...)",
        ]
        for key, value in self.info.items():
            lines.append(f"  {key}: {value}")
        lines.append("")
        for r in self.sorted():
            text = texts.get(r.req, ("", "", ""))[2]
            lines.append(f"{r.status.upper():4} {r.req}  {text}")
            if verbose:
                for f in r.findings:
                    lines.append(f"       [{f.status}] {f.check + ': ' if f.check else ''}{f.evidence}")
            elif r.status != SKIP or verbose:
                lines.append(f"       {r.evidence}")
            else:
                lines.append(f"       {r.evidence}")
        lines.append("")
        parts = []
        for kind, bucket in self.counts().items():
            parts.append(f"{kind}: {bucket[PASS]} pass, {bucket[FAIL]} fail, {bucket[WARN]} warn, {bucket[SKIP]} skip")
        lines.append("Summary: " + "; ".join(parts))
        not_checked = sorted(set(texts) - set(self.requirements))
        if "aborted" in self.info:
            lines.append(f"Not checked ({len(not_checked)} IDs): {self.info['aborted']}")
        elif not_checked:
            lines.append(
                f"Not checked ({len(not_checked)}: client-side, other transport, or beyond a black box): "
                f"{', '.join(not_checked)}"
            )
        failed = self.failed_musts()
        lines.append(f"RESULT: {'FAIL (' + ', '.join(failed) + ')' if failed else 'PASS'}")
        return "\n".join(lines)
