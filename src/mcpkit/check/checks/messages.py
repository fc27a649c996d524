"""Every message of every session: JSON-RPC shape, ids, result xor error."""

from __future__ import annotations

from typing import Any

from ..wire import MAX_MESSAGE, MAX_RECORDED, OVERSIZED, Incoming, Wire
from ._base import (
    CheckerBase,
    _is_int,
    _short,
)


class MessageChecks(CheckerBase):
    """Every message of every session: JSON-RPC shape, ids, result xor error."""

    def check_messages(self) -> None:
        r = self.report
        lines = bad_lines = total = oversized = 0
        for wire in self.wires:
            seen_ids: set[str] = set()
            for inc in wire.incoming:
                if inc.error == OVERSIZED:
                    oversized += 1
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
                    self.judge_message(msg, inc, seen_ids, wire)
            for stray in wire.strays:
                if isinstance(stray.data, dict) and stray.data.get("id") is None and "error" in stray.data:
                    continue  # a parse-error reply (id null) to our malformed input
                sent = [m.get("id") for m in wire.sent if isinstance(m, dict) and "id" in m and "method" in m]
                if isinstance(stray.data, dict) and stray.data.get("id") in sent:
                    continue  # the id of a request we sent: a second answer (M027 judges where it travelled)
                r.fail(
                    "M006",
                    f"response id {stray.data.get('id')!r} matches no request we sent (we sent ids "
                    f"{_short(sent[-5:], 80)}): {stray.short(160)}",
                    "ids",
                )
        r.info["messages received"] = total
        dropped = sum(w.dropped for w in self.wires)
        if dropped:
            r.info["messages not kept"] = f"{dropped} past the {MAX_RECORDED} a session keeps (not judged)"
        if oversized:
            r.info["messages not read"] = f"{oversized} over {MAX_MESSAGE} bytes (the bound of mcpkit's client)"
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
        if not isinstance(msg, dict):
            r.fail("M001", f"not a JSON object: {inc.short(160)}", "messages")
            return
        if msg.get("jsonrpc") != "2.0":
            r.fail("M001", f'jsonrpc is {msg.get("jsonrpc")!r}, not "2.0": {_short(msg, 160)}', "messages")
        if "method" in msg:
            if not isinstance(msg["method"], str):
                req = "M005" if "id" in msg else "M010"
                r.fail(req, f"method is not a string: {_short(msg, 160)}", "messages")
            if "id" in msg:
                if str(msg.get("method", "")).startswith("notifications/"):
                    r.fail("M009", f"a notification carries an id: {_short(msg, 160)}", "messages")
                    return
                rid = msg["id"]
                if rid is None:
                    r.fail("M003", f"request id is null: {_short(msg, 160)}", "messages")
                    r.fail("M002", f"request id is null, not a string or integer: {_short(msg, 160)}", "messages")
                    return
                if not (_is_int(rid) or isinstance(rid, str)):
                    r.fail("M002", f"request id is neither string nor integer: {_short(msg, 160)}", "messages")
                key = wire.key(rid)
                if key in seen_ids:
                    r.fail("M004", f"request id {rid!r} reused in one session: {_short(msg, 160)}", "messages")
                seen_ids.add(key)
            return
        has_result, has_error = "result" in msg, "error" in msg
        if has_result == has_error:
            r.fail("M007", f"response with {'both' if has_result else 'neither'} result and error: {_short(msg, 160)}")
            return
        if "id" not in msg:
            r.fail("M001", f"a response without an id: {_short(msg, 160)}", "messages")
        if has_error:
            err = msg["error"]
            if not isinstance(err, dict) or not _is_int(err.get("code")) or not isinstance(err.get("message"), str):
                r.fail("M008", f"error without an integer code and a string message: {_short(msg, 160)}", "messages")
