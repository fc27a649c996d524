"""Every message of every session: JSON-RPC shape, ids, result xor error."""

from __future__ import annotations

import json
from typing import Any

from ...protocol.versions import features, is_supported
from ..jsonrpc_rules import judge_envelope, judge_error
from ..wire import MAX_MESSAGE, MAX_RECORDED, OVERSIZED, TOO_DEEP, Incoming, Wire
from ..wire_http import HttpWire
from ._base import (
    CheckerBase,
    shortened,
)

#: the channels whose messages came unasked, and how evidence names them
_WHERE = {
    "http-replay": "on the stream a GET with Last-Event-ID replayed",
    "http-get": "on the standalone GET stream",
}


class MessageChecks(CheckerBase):
    """Every message of every session: JSON-RPC shape, ids, result xor error."""

    def check_messages(self) -> None:
        r = self.report
        lines = bad_lines = total = oversized = 0
        deep: list[Incoming] = []
        for wire in self.wires:
            seen_ids: set[str] = set()
            delivered: set[str] = set()  # the requests received, as JSON with sorted keys
            for inc in wire.incoming:
                if inc.error == OVERSIZED:
                    oversized += 1
                    continue
                if inc.error == TOO_DEEP:  # valid JSON the checker cannot read: said, not judged
                    deep.append(inc)
                    continue
                lines += 1
                if inc.error is not None:
                    bad_lines += 1
                    if inc.channel == "stdout":
                        r.fail("M016", f"stdout line is not a JSON-RPC message ({inc.error}): {inc.short(160)!r}")
                        if inc.raw.lstrip().startswith(("{", "[")) or inc.raw.rstrip().endswith(("}", "]")):
                            r.fail("M015", f"a message split across lines (embedded newline?): {inc.short(160)!r}")
                    else:
                        r.fail("M001", f"HTTP payload is not JSON ({inc.error}): {inc.short(160)!r}")
                    continue
                items = inc.data if isinstance(inc.data, list) else [inc.data]
                if isinstance(inc.data, list) and not inc.data:
                    r.fail("M001", "an empty JSON array was sent", "messages")
                for msg in items:
                    total += 1
                    seen = seen_ids
                    if isinstance(msg, dict) and "method" in msg and "id" in msg:
                        canonical = json.dumps(msg, sort_keys=True, default=str)
                        if inc.channel == "http-replay" and canonical in delivered:
                            # the same request delivered again by a Last-Event-ID replay (A012 judges from which
                            # stream): a redelivery, not a new request reusing its id (M004)
                            seen = set()
                        delivered.add(canonical)
                    self.judge_message(msg, inc, seen, wire)
            for stray in wire.strays:
                if isinstance(stray.data, dict) and "result" not in stray.data and "error" not in stray.data:
                    continue  # no answer at all (e.g. {}): M001 judged its shape
                if isinstance(stray.data, dict) and stray.data.get("id") is None and "error" in stray.data:
                    continue  # a parse-error reply (id null) to our malformed input
                sent = [m.get("id") for m in wire.sent if isinstance(m, dict) and "id" in m and "method" in m]
                if isinstance(stray.data, dict) and stray.data.get("id") in sent:
                    continue  # the id of a request we sent: a second answer (M027 judges where it travelled)
                r.fail(
                    "M006",
                    f"response id {stray.data.get('id')!r} matches no request we sent (we sent ids "
                    f"{shortened(sent[-5:], 80)}): {stray.short(160)}",
                    "ids",
                )
        r.info["messages received"] = total
        dropped = sum(w.dropped for w in self.wires)
        if dropped:
            r.info["messages not kept"] = f"{dropped} past the {MAX_RECORDED} a session keeps (not judged)"
        if oversized:
            r.info["messages not read"] = f"{oversized} over {MAX_MESSAGE} bytes (the bound of mcpkit's client)"
        if deep:
            r.warn(
                "M016" if deep[0].channel == "stdout" else "M001",
                f"{len(deep)} message(s) with {TOO_DEEP}, not judged (a request such a message answered counts as "
                f"unanswered): {deep[0].short(120)!r}",
                "messages",
            )
        if self.transport == "stdio":
            if lines and not bad_lines:
                r.ok("M016", f"all {lines} stdout lines of {len(self.wires)} session(s) are JSON-RPC messages")
                r.ok("M014", f"{lines} newline-delimited messages", "stdout")
                r.ok("M015", "no message spans lines", "stdout")
            elif lines:
                r.fail("M014", f"{bad_lines} of {lines} stdout lines are not messages", "stdout")
        if total:
            for req, what in (
                ("M001", "every message is JSON-RPC 2.0"),
                ("M007", "every response has exactly one of result and error"),
                ("M008", "every error has an integer code and a string message"),
                ("M009", "no notification carries an id"),
                ("M010", "every notification has a method string"),
            ):
                if self.report.status(req) != "fail":
                    r.ok(req, f"{what} ({total} message(s))", "messages")
            sreqs = [i for w in self.wires for i in w.server_requests]
            methods = sorted({str(i.data.get("method")) for i in sreqs if isinstance(i.data, dict)})
            for req in ("M002", "M003", "M004", "M005"):
                if self.report.status(req) != "fail":
                    if sreqs:
                        r.ok(
                            req,
                            f"{len(sreqs)} server-sent request(s) ({', '.join(methods)}): string/integer ids, "
                            "unique per session, method strings",
                            "messages",
                        )
                    else:
                        r.skip(req, "the server sent no requests")
            if any(w.responses for w in self.wires) and self.report.status("M006") != "fail":
                n = sum(len(w.responses) for w in self.wires)
                r.ok("M006", f"all {n} responses carried the id of their request", "ids")

    def judge_message(self, msg: Any, inc: Incoming, seen_ids: set[str], wire: Wire) -> None:
        r = self.report
        shown = shortened(msg, 160) if isinstance(msg, dict) else inc.short(160)
        if inc.channel in _WHERE:  # where a message no request of ours asked for came from, to find it again
            shown += f" ({_WHERE[inc.channel]})"
        scope = "in one session"
        if isinstance(wire, HttpWire) and wire.session_id is None and wire.modern_meta is None:
            # the MCP session is the client's from its initialize on, with or without a session id
            scope += " (the server assigns no Mcp-Session-Id, yet the session is the client's since initialize)"
        if not judge_envelope(r, msg, shown, seen_ids, wire.key, scope):
            return
        if "id" not in msg:
            version = wire.protocol_version or self.version
            if "error" in msg and is_supported(version) and features(version).error_id_optional:
                r.warn(
                    "M001",
                    f"an error response without an id: {shown} (JSON-RPC 2.0 requires the id, null when the "
                    f"request's is unknown; the {version} schema makes it optional on an error response)",
                    "messages",
                )
            else:
                r.fail("M001", f"a response without an id: {shown}", "messages")
        judge_error(r, msg, shown)
