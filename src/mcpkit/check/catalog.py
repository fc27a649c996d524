"""Every requirement the checkers know: its text, who it binds, where it applies, and why a black box cannot see it.

The requirement list is the MCP specification's MUST (``M…``), SHOULD (``S…``) and MAY (``A…``) statements as they ship
in ``requirements.csv`` (145 IDs), plus rules of the official specification that list does not name
(``requirements-extra.csv``: ``MX…``/``SX…``, each with the revision and page it comes from).

For each ID the table :data:`SCOPES` says which party the rule binds (``server``, ``client`` or ``both``: ``mcpkit
check`` judges servers, ``mcpkit check-client`` clients) and where it applies (``any`` transport, ``stdio`` only,
Streamable ``http`` only, or ``auth``: an HTTP server that requires authorization). :data:`UNOBSERVABLE` gives, for
the rules no black box can see on one side, the reason: those are the only IDs a report lists as "not checkable".
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_HERE = Path(__file__).parent
LEVELS = {"M": "MUST", "S": "SHOULD", "A": "MAY"}


@dataclass(frozen=True)
class Requirement:
    """One requirement: ID, level (MUST/SHOULD/MAY), section, text, and the party and transport it applies to."""

    id: str
    level: str
    section: str
    text: str
    party: str  # server | client | both
    scope: str  # any | stdio | http | auth
    source: str = ""  # for the extra rules: the revision and page of the official specification

    def binds(self, side: str) -> bool:
        """Whether the rule binds ``side`` (``server`` or ``client``)."""
        return self.party in (side, "both")


# ID -> (party, scope). Everything not listed is (server, any).
SCOPES: dict[str, tuple[str, str]] = {
    **{i: ("both", "any") for i in ("M001", "M002", "M003", "M004", "M005", "M006", "M007", "M008", "M009", "M010")},
    "M011": ("both", "any"),
    "M012": ("client", "stdio"),
    "M013": ("server", "stdio"),
    "M014": ("both", "stdio"),
    "M015": ("both", "stdio"),
    "M016": ("server", "stdio"),
    "M017": ("client", "stdio"),
    "M018": ("server", "http"),
    "M019": ("client", "http"),
    "M020": ("client", "http"),
    "M021": ("client", "http"),
    "M022": ("server", "http"),
    "M023": ("server", "http"),
    "M024": ("client", "http"),
    **{i: ("server", "http") for i in ("M025", "M026", "M027", "M028")},
    "M029": ("client", "http"),
    "M030": ("server", "auth"),
    "M031": ("server", "auth"),
    **{i: ("client", "auth") for i in ("M032", "M033", "M034", "M035", "M036")},
    "M037": ("both", "auth"),
    "M038": ("server", "auth"),
    **{i: ("client", "any") for i in ("M039", "M040", "M041", "M043", "M044")},
    "M047": ("both", "any"),
    **{i: ("client", "any") for i in ("M071", "M072", "M073", "M074", "M075", "M076", "M077", "M078")},
    "M079": ("both", "any"),
    "M080": ("both", "any"),
    "M081": ("both", "any"),
    "M082": ("client", "any"),
    "M083": ("both", "any"),
    "S001": ("client", "stdio"),
    **{i: ("server", "http") for i in ("S002", "S003", "S004", "S005", "S006")},
    "S007": ("client", "http"),
    "S008": ("server", "auth"),
    "S009": ("server", "stdio"),
    "S010": ("server", "auth"),
    "S011": ("server", "auth"),
    "S012": ("client", "auth"),
    "S013": ("client", "any"),
    "S015": ("client", "any"),
    "S017": ("client", "any"),
    **{i: ("both", "any") for i in ("S018", "S019", "S020", "S021", "S026", "S028")},
    **{i: ("both", "any") for i in ("A001", "A002", "A003", "A022", "A023")},
    "A004": ("server", "stdio"),
    "A005": ("server", "http"),
    "A006": ("client", "http"),
    "A007": ("server", "http"),
    "A008": ("server", "http"),
    "A009": ("client", "http"),
    "A010": ("client", "http"),
    **{i: ("server", "http") for i in ("A011", "A012", "A013", "A014", "A015")},
    "A016": ("server", "auth"),
    "A021": ("client", "any"),
    **{i: ("server", "http") for i in ("MX01", "MX02", "MX03", "MX04", "MX05", "MX06")},
    **{i: ("both", "any") for i in ("S027", "SX12")},
    "SX13": ("server", "http"),
    **{i: ("client", "http") for i in ("MX10", "MX11", "SX11", "MX12", "MX14")},
    **{i: ("client", "any") for i in ("MX13", "MX15", "MX16", "MX17", "MX18", "MX19")},
}

_NO_CHANGE = "a checker cannot make the server change it; judged only when a change happens during the run"
_FAST = (
    "judged in the cancel scenario when the client declares sampling, elicitation or roots and takes longer than "
    "0.5s to answer the server's request for it (one answered at once leaves nothing to cancel)"
)
_OWN_REQUESTS = "a server cancels only its own requests to the client, which a checker cannot make it send and abandon"

#: side -> ID -> why a black box on that side cannot see the rule (when the run gave it no finding).
UNOBSERVABLE: dict[str, dict[str, str]] = {
    "server": {
        "M055": "a checker cannot make a resource change; judged when a subscribed resource changes during the run",
        "S023": "the resource list: " + _NO_CHANGE,
        "S024": "the prompt list: " + _NO_CHANGE,
        "S025": "the tool list: " + _NO_CHANGE,
        "M080": _OWN_REQUESTS,
        "M081": _OWN_REQUESTS,
        "A023": _OWN_REQUESTS,
        "S028": "ignoring a late answer needs the server to cancel a request of its own first (see M080)",
        "M083": "the server's requests carry progress tokens only when it asks the client for progress, which a "
        "checker cannot cause; judged when it does",
        "S019": "the timeout of the server's own requests is its configuration, usually longer than a check waits",
        "S020": "cancelling after a timeout of its own request happens on the server's schedule (see S019)",
        "S026": "periodic pings follow the server's own schedule, longer than a check runs",
        "A022": "hanging up after an unanswered ping is the server's choice on its own schedule",
        "S029": "relevance is the server's own judgement of its suggestions; no outside measure exists",
    },
    "client": {
        "M074": "a checker cannot change the client's roots; judged when the client sends the notification",
        "M034": "the 2025-03-26 discovery (no resource metadata): the auth scenario serves RFC 9728 metadata",
        "M035": "the 2025-03-26 default endpoints (no metadata at all): the auth scenario serves metadata",
        "M075": "judged when the client sends notifications/roots/list_changed (see M074)",
        "S019": "the timeout of the client's requests is its configuration, usually longer than a check waits",
        "S020": "cancelling after a timeout happens on the client's schedule (see S019)",
        "S026": "periodic pings follow the client's own schedule, longer than a check runs",
        "A022": "hanging up after an unanswered ping is the client's choice on its own schedule",
        "S028": "ignoring a late answer needs the client to cancel a request first; judged when it does",
        "S027": _FAST,
        "SX12": _FAST,
        "M080": "judged when the client cancels a request (it decides when)",
        "M081": "judged when the client cancels a request (it decides when)",
        "A023": "judged when the client cancels a request (it decides when)",
        "A009": "closing an SSE stream is the client's choice; judged when it does",
        "A010": "several SSE streams at once are the client's choice; judged when it opens them",
    },
}


def _read(name: str) -> list[dict[str, str]]:
    path = _HERE / name
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as fh:
        return [row for row in csv.DictReader(fh) if (row.get("ID") or "").strip()]


@lru_cache(maxsize=1)
def requirements() -> dict[str, Requirement]:
    """Every requirement, the 145 of ``requirements.csv`` first, then the extra rules, by ID."""
    out: dict[str, Requirement] = {}
    for name in ("requirements.csv", "requirements-extra.csv"):
        for row in _read(name):
            rid = row["ID"].strip()
            party, scope = SCOPES.get(rid, ("server", "any"))
            out[rid] = Requirement(
                rid,
                row.get("Type", "").strip() or LEVELS.get(rid[:1], ""),
                row.get("Section", "").strip(),
                row.get("Requirement", "").strip(),
                party,
                scope,
                (row.get("Source") or "").strip(),
            )
    return out


def level(rid: str) -> str:
    """MUST, SHOULD or MAY for an ID (from its first letter when it is not in the list)."""
    req = requirements().get(rid)
    return req.level if req else LEVELS.get(rid[:1], "OTHER")


def order(rid: str) -> tuple[int, int, int, str]:
    """Sort key: the listed requirements first (MUST, SHOULD, MAY), then the extra rules."""
    extra = 1 if len(rid) > 1 and rid[1] == "X" else 0
    digits = "".join(ch for ch in rid[1:] if ch.isdigit())
    return (extra, {"M": 0, "S": 1, "A": 2}.get(rid[:1], 3), int(digits) if digits else 0, rid)


TRANSPORT_NAMES = {"stdio": "stdio", "http": "Streamable HTTP", "sse": "legacy HTTP+SSE", "ws": "WebSocket"}


def why_not_judged(req: Requirement, side: str, transport: str, protected: bool) -> tuple[str, str]:
    """(category, reason) for a requirement a run of ``side``'s checker gave no finding.

    Categories: ``other-party`` (judged by the other command), ``other-transport``, ``no-authorization`` (the
    target does not ask for any), ``not-observable`` (the reason from :data:`UNOBSERVABLE`), ``not-exercised`` (a
    checkable rule this run found nothing to judge by)."""
    if not req.binds(side):
        other = "mcpkit check-client" if side == "server" else "mcpkit check"
        return "other-party", f"a {req.party} obligation: judged by {other}"
    if req.scope == "stdio" and transport != "stdio":
        return "other-transport", f"applies to stdio only; this target is {TRANSPORT_NAMES.get(transport, transport)}"
    if req.scope in ("http", "auth") and transport == "stdio":
        what = "Streamable HTTP" if req.scope == "http" else "HTTP authorization"
        return "other-transport", f"applies to {what} only; this target is stdio"
    if req.scope == "http" and transport != "http":
        return "other-transport", f"applies to Streamable HTTP only; this target is {TRANSPORT_NAMES[transport]}"
    if req.scope == "auth" and not protected:
        return "no-authorization", "applies to servers that require authorization; this one answered without any"
    reason = UNOBSERVABLE[side].get(req.id)
    if reason is not None:
        return "not-observable", reason
    return "not-exercised", "nothing in this run exercised it"
