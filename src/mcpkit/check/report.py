"""Findings, the per-requirement verdicts of a run, and the report in the forms people and CI read.

A :class:`Report` collects findings (pass, fail, warn, skip, each with the evidence that decided it) per requirement
ID. Its verdict for an ID is the worst finding (fail > warn > pass > skip). :meth:`Report.as_dict` is the stable
JSON document (``schema: mcpkit-check-report/1``, described by ``report-schema.json``); :func:`render` gives it as
text, JSON, Markdown or JUnit XML.

Everything a report quotes may come from the peer (evidence cites what the server or client sent, its name and
version are in the info), so each form escapes it for its own reader: the text through the CLI's one terminal
sanitizer (:func:`mcpkit.client.safe.visible`: control characters, ANSI/OSC sequences and bidi overrides made visible),
JSON through :func:`~mcpkit.client.safe.json_visible` (the same JSON value, safe on a terminal), Markdown with its own
metacharacters, HTML and line breaks neutralised, and JUnit by XML escaping (after the characters XML 1.0 cannot
carry at all are made visible).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from ..client import safe
from ..client.safe import json_visible
from .catalog import TRANSPORT_NAMES, Requirement, level, order, requirements, why_not_judged

PASS, FAIL, WARN, SKIP = "pass", "fail", "warn", "skip"
_RANK = {FAIL: 3, WARN: 2, PASS: 1, SKIP: 0}
SCHEMA = "mcpkit-check-report/1"
FAIL_ON: dict[str, tuple[str, ...]] = {
    "must": ("MUST",),
    "should": ("MUST", "SHOULD"),
    "may": ("MUST", "SHOULD", "MAY"),
}


def printable(text: str) -> str:
    """``text`` with any lone surrogate (a JSON ``"\\ud800"`` escape decodes to one) written as ``\\ud800``: every
    report form can then be encoded as UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def requirement_texts() -> dict[str, tuple[str, str, str]]:
    """ID -> (level, section, text) of every known requirement."""
    return {r.id: (r.level, r.section, r.text) for r in requirements().values()}


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
class Verdict:
    """All findings for one requirement ID, aggregated: fail > warn > pass > skip."""

    req: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def status(self) -> str:
        return max((f.status for f in self.findings), key=lambda s: _RANK[s], default=SKIP)

    @property
    def evidence(self) -> str:
        """The evidence of the findings that decided the verdict (at most three)."""
        status = self.status
        chosen = [f for f in self.findings if f.status == status]
        return " | ".join(dict.fromkeys(f"{f.check + ': ' if f.check else ''}{f.evidence}" for f in chosen[:3]))


@dataclass
class NotJudged:
    """A requirement the run gave no finding, with why."""

    req: Requirement
    category: str
    reason: str


class Report:
    """The findings of one run of ``mcpkit check`` (``side="server"``) or ``mcpkit check-client`` (``"client"``)."""

    def __init__(self, target: str, transport: str, side: str = "server") -> None:
        self.target = target
        self.transport = transport
        self.side = side
        self.requirements: dict[str, Verdict] = {}
        self.info: dict[str, Any] = {}
        self.prefix = ""  # put before the evidence of the findings being added (e.g. "[2026-07-28] ")
        self.protected = False  # the target asked for authorization (the auth rules apply)
        self.started: float = time.time()
        self.finished: float | None = None

    def add(self, req: str, status: str, evidence: str, check: str = "") -> None:
        """Record a finding."""
        if status not in _RANK:
            raise ValueError(f"unknown status {status!r}")
        finding = Finding(req, status, printable(self.prefix + evidence), check)
        self.requirements.setdefault(req, Verdict(req)).findings.append(finding)

    def ok(self, req: str, evidence: str, check: str = "") -> None:
        self.add(req, PASS, evidence, check)

    def fail(self, req: str, evidence: str, check: str = "") -> None:
        self.add(req, FAIL, evidence, check)

    def warn(self, req: str, evidence: str, check: str = "") -> None:
        self.add(req, WARN, evidence, check)

    def skip(self, req: str, evidence: str, check: str = "") -> None:
        self.add(req, SKIP, evidence, check)

    def status(self, req: str) -> str:
        """The verdict for ``req`` (``skip`` when nothing was found)."""
        r = self.requirements.get(req)
        return r.status if r else SKIP

    def sorted(self) -> list[Verdict]:
        """The verdicts, listed requirements first (MUST, SHOULD, MAY), then the extra rules."""
        return [self.requirements[k] for k in sorted(self.requirements, key=order)]

    def failed(self, level_name: str) -> list[str]:
        """The IDs of level ``level_name`` (MUST, SHOULD, MAY) whose verdict is fail."""
        return [r.req for r in self.sorted() if level(r.req) == level_name and r.status == FAIL]

    def failed_musts(self) -> list[str]:
        """The IDs of the MUST requirements that failed."""
        return self.failed("MUST")

    def exit_code(self, fail_on: str = "must") -> int:
        """1 when a requirement of a level named by ``fail_on`` (``must``: MUST; ``should``: MUST or SHOULD;
        ``may``: any) failed; else 2 when the run was cut short (``info["aborted"]``: a server that asks for
        authorization without a token given, one that could not be reached); else 0."""
        if any(self.failed(name) for name in FAIL_ON[fail_on]):
            return 1
        return 2 if "aborted" in self.info else 0

    def counts(self) -> dict[str, dict[str, int]]:
        """Verdicts per level: ``{'MUST': {'pass': n, 'fail': n, 'warn': n, 'skip': n}, 'SHOULD': ..., 'MAY': ...}``."""
        out: dict[str, dict[str, int]] = {}
        for r in self.sorted():
            bucket = out.setdefault(level(r.req), {PASS: 0, FAIL: 0, WARN: 0, SKIP: 0})
            bucket[r.status] += 1
        return out

    def not_judged(self) -> list[NotJudged]:
        """Every known requirement without a finding, with the category and reason (see
        :func:`~.catalog.why_not_judged`)."""
        out = []
        for rid in sorted(requirements(), key=order):
            if rid in self.requirements:
                continue
            req = requirements()[rid]
            category, reason = why_not_judged(req, self.side, self.transport, self.protected)
            if "aborted" in self.info and category == "not-exercised":
                reason = str(self.info["aborted"])
            out.append(NotJudged(req, category, reason))
        return out

    def not_checkable(self) -> list[NotJudged]:
        """The obligations of this side that no black box can see (category ``not-observable``)."""
        return [n for n in self.not_judged() if n.category == "not-observable"]

    def finish(self) -> None:
        """Mark the end of the run (its duration goes in the report)."""
        self.finished = time.time()

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-able data, the ``mcpkit-check-report/1`` schema (what ``--format json`` prints)."""
        from .._version import __version__

        reqs = requirements()
        finished = self.finished or time.time()
        return {
            "schema": SCHEMA,
            "tool": {"name": "mcpkit", "version": __version__},
            "kind": self.side,
            "target": self.target,
            "transport": self.transport,
            "startedAt": datetime.fromtimestamp(self.started, UTC).isoformat().replace("+00:00", "Z"),
            "durationSeconds": round(finished - self.started, 3),
            "info": {
                str(k): v if isinstance(v, (int, float, bool)) or v is None else printable(str(v))
                for k, v in self.info.items()
            },
            "summary": self.counts(),
            "failed": {name: self.failed(name) for name in ("MUST", "SHOULD", "MAY")},
            "failedMust": self.failed_musts(),
            "requirements": [
                {
                    "id": r.req,
                    "level": level(r.req),
                    "section": reqs[r.req].section if r.req in reqs else "",
                    "requirement": reqs[r.req].text if r.req in reqs else "",
                    "party": reqs[r.req].party if r.req in reqs else self.side,
                    "status": r.status,
                    "evidence": r.evidence,
                    "findings": [f.as_dict() for f in r.findings],
                }
                for r in self.sorted()
            ],
            "notChecked": [
                {
                    "id": n.req.id,
                    "level": n.req.level,
                    "requirement": n.req.text,
                    "party": n.req.party,
                    "category": n.category,
                    "reason": n.reason,
                }
                for n in self.not_judged()
            ],
        }

    def render_text(self, verbose: bool = False) -> str:
        """The report as text (see :func:`render_text`)."""
        return render_text(self, verbose=verbose)


# ------------------------------------------------------------------------------------------------ forms

FORMATS = ("text", "json", "junit", "markdown")


def visible(value: Any, *, one_line: bool = False, limit: int | None = None) -> str:
    """:func:`mcpkit.client.safe.visible` of ``value`` with any lone surrogate written out first (encodable)."""
    return safe.visible(printable(str(value)), one_line=one_line, limit=limit)


def render(report: Report, fmt: str = "text", *, verbose: bool = False) -> str:
    """``report`` as ``text``, ``json``, ``junit`` or ``markdown``, every peer-provided string escaped for it."""
    if fmt == "text":
        return render_text(report, verbose=verbose)
    if fmt == "json":
        return json_visible(json.dumps(report.as_dict(), indent=2, ensure_ascii=False))
    if fmt == "junit":
        return render_junit(report)
    if fmt == "markdown":
        return render_markdown(report, verbose=verbose)
    raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")


def _what(report: Report) -> str:
    command = "mcpkit check-client" if report.side == "client" else "mcpkit check"
    return f"{command} {report.target} ({TRANSPORT_NAMES.get(report.transport, report.transport)})"


def _summary(report: Report) -> str:
    parts = []
    for kind, bucket in report.counts().items():
        parts.append(f"{kind}: {bucket[PASS]} pass, {bucket[FAIL]} fail, {bucket[WARN]} warn, {bucket[SKIP]} skip")
    return "; ".join(parts)


def render_text(report: Report, *, verbose: bool = False) -> str:
    """The report for a terminal; ``verbose`` shows every finding, not only the deciding ones."""
    reqs = requirements()
    party = "client" if report.side == "client" else "server"
    lines = [
        visible(_what(report), one_line=True),
        f"  judges the {party}'s MUST (M...), SHOULD (S...) and MAY (A...) requirements of the MCP specification "
        "(MX/SX: rules of the official specification beyond that list)",
    ]
    for key, value in report.info.items():
        lines.append(f"  {visible(key, one_line=True)}: {visible(value, one_line=True)}")
    lines.append("")
    for r in report.sorted():
        text = reqs[r.req].text if r.req in reqs else ""
        lines.append(f"{r.status.upper():4} {r.req}  {text}")
        if verbose:
            for f in r.findings:
                where = f"{f.check}: " if f.check else ""
                lines.append(f"       [{f.status}] {visible(where + f.evidence, one_line=True)}")
        else:
            lines.append(f"       {visible(r.evidence, one_line=True)}")
    lines.append("")
    lines.append("Summary: " + _summary(report))
    groups: dict[str, list[str]] = {}
    for n in report.not_judged():
        groups.setdefault(n.category, []).append(n.req.id)
    for category, title in (
        ("other-party", "Judged by the other command"),
        ("other-transport", "Other transport"),
        ("no-authorization", "No authorization asked"),
        ("not-exercised", "Not judged: the run was cut short" if "aborted" in report.info else "Not exercised"),
    ):
        if groups.get(category):
            lines.append(f"{title} ({len(groups[category])}): {', '.join(groups[category])}")
    unobservable = report.not_checkable()
    if unobservable:
        lines.append(f"Not checkable from outside ({len(unobservable)}):")
        for n in unobservable:
            lines.append(f"  {n.req.id}  {n.reason}")
    if "aborted" in report.info:
        lines.append(f"Aborted: {visible(report.info['aborted'], one_line=True)}")
    failed = report.failed_musts()
    should = report.failed("SHOULD")
    verdict = "FAIL (" + ", ".join(failed) + ")" if failed else ("INCOMPLETE" if "aborted" in report.info else "PASS")
    if not failed and should:
        verdict += f" (SHOULD failed: {', '.join(should)})"
    lines.append(f"RESULT: {verdict}")
    return "\n".join(lines)


def _md(value: object) -> str:
    """A peer string made inert in a Markdown table cell: visible controls, no HTML, no line break, no markup."""
    text = visible(value, one_line=True)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for ch in "\\`*_[]|#!~":
        text = text.replace(ch, "\\" + ch)
    return text


def render_markdown(report: Report, *, verbose: bool = False) -> str:
    """The report as GitHub-flavoured Markdown (a job summary, a PR comment)."""
    reqs = requirements()
    icon = {PASS: "pass", FAIL: "**FAIL**", WARN: "warn", SKIP: "skip"}
    failed = report.failed_musts()
    lines = [
        f"## {_md(_what(report))}",
        "",
        f"**Result: {'FAIL (' + ', '.join(failed) + ')' if failed else 'PASS'}** - {_md(_summary(report))}",
        "",
    ]
    if report.info:
        lines += ["| | |", "|---|---|"]
        lines += [f"| {_md(k)} | {_md(v)} |" for k, v in report.info.items()]
        lines.append("")
    lines += ["| ID | level | verdict | requirement | evidence |", "|---|---|---|---|---|"]
    for r in report.sorted():
        text = reqs[r.req].text if r.req in reqs else ""
        evidence = " / ".join(f"[{f.status}] {f.evidence}" for f in r.findings) if verbose else r.evidence
        lines.append(f"| {r.req} | {level(r.req)} | {icon[r.status]} | {_md(text)} | {_md(evidence)} |")
    rest = report.not_judged()
    if rest:
        lines += ["", "<details><summary>Not judged in this run</summary>", "", "| ID | why |", "|---|---|"]
        lines += [f"| {n.req.id} | {_md(n.reason)} |" for n in rest]
        lines += ["", "</details>"]
    return "\n".join(lines)


def _xml(value: object) -> str:
    """Peer text for an XML text node: characters XML 1.0 cannot carry made visible first, then escaped."""
    return escape(visible(value).translate(_NOT_XML))


_NOT_XML = {0xFFFE: "\\ufffe", 0xFFFF: "\\uffff"}  # (controls are made visible by visible(); surrogates never get here)


def render_junit(report: Report) -> str:
    """The report as JUnit XML: one test case per requirement judged (a fail is a failure, a skip is skipped, a
    warn passes with its evidence in ``system-out``), in one test suite named after the command and target."""
    reqs = requirements()
    verdicts = report.sorted()
    failures = sum(1 for r in verdicts if r.status == FAIL)
    skipped = sum(1 for r in verdicts if r.status == SKIP)
    finished = report.finished or report.started
    name = "mcpkit check-client" if report.side == "client" else "mcpkit check"
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuites name={quoteattr(name)} tests="{len(verdicts)}" failures="{failures}" '
        f'skipped="{skipped}" time="{finished - report.started:.3f}">',
        f'  <testsuite name={quoteattr(visible(_what(report), one_line=True))} tests="{len(verdicts)}" '
        f'failures="{failures}" errors="0" skipped="{skipped}">',
    ]
    for r in verdicts:
        text = reqs[r.req].text if r.req in reqs else r.req
        case = f'    <testcase classname="{level(r.req)}" name={quoteattr(f"{r.req} {text}")}'
        evidence = "\n".join(f"[{f.status}] {f.check + ': ' if f.check else ''}{f.evidence}" for f in r.findings)
        if r.status == FAIL:
            lines.append(case + ">")
            message = quoteattr(visible(r.evidence, one_line=True, limit=1000).translate(_NOT_XML))
            lines.append(f'      <failure message={message} type="{level(r.req)}">{_xml(evidence)}</failure>')
            lines.append("    </testcase>")
        elif r.status == SKIP:
            lines.append(case + ">")
            message = quoteattr(visible(r.evidence, one_line=True, limit=1000).translate(_NOT_XML))
            lines.append(f"      <skipped message={message}/>")
            lines.append("    </testcase>")
        else:
            lines.append(case + ">")
            lines.append(f"      <system-out>{_xml(evidence)}</system-out>")
            lines.append("    </testcase>")
    lines += ["  </testsuite>", "</testsuites>"]
    return "\n".join(lines)
