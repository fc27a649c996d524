"""The JSON-RPC envelope rules both checkers judge every message by (M001-M005, M007-M010): the server's
messages in ``mcpkit check``, the client's in ``mcpkit check-client``. Each side judges the rest of an answer
itself (whose id it must carry: M001, M006)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .report import Report


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def judge_envelope(r: Report, msg: Any, shown: str, seen: set[str], key: Callable[[Any], str], scope: str) -> bool:
    """Judge one message's envelope (``shown`` is how the evidence quotes it); a request's id is recorded in
    ``seen`` by ``key(id)`` (M004: not twice ``scope``). True when ``msg`` is an answer with exactly one of
    ``result`` and ``error``, for the caller to judge further."""
    if not isinstance(msg, dict):
        r.fail("M001", f"not a JSON object: {shown}", "messages")
        return False
    if not any(k in msg for k in ("method", "id", "result", "error")):  # e.g. {}: neither a request nor an answer
        r.fail("M001", f"not a JSON-RPC message (no method, id, result or error): {shown}", "messages")
        return False
    if msg.get("jsonrpc") != "2.0":
        r.fail("M001", f'jsonrpc is {msg.get("jsonrpc")!r}, not "2.0": {shown}', "messages")
    if "method" in msg:
        if not isinstance(msg["method"], str):
            r.fail("M005" if "id" in msg else "M010", f"method is not a string: {shown}", "messages")
        if "id" not in msg:
            return False
        if str(msg.get("method", "")).startswith("notifications/"):
            r.fail("M009", f"a notification carries an id: {shown}", "messages")
            return False
        rid = msg["id"]
        if rid is None:
            r.fail("M003", f"request id is null: {shown}", "messages")
            r.fail("M002", f"request id is null, not a string or integer: {shown}", "messages")
            return False
        if not (_is_int(rid) or isinstance(rid, str)):
            r.fail("M002", f"request id is neither string nor integer: {shown}", "messages")
        k = key(rid)
        if k in seen:
            r.fail("M004", f"request id {rid!r} used twice {scope}: {shown}", "messages")
        seen.add(k)
        return False
    if ("result" in msg) == ("error" in msg):
        r.fail("M007", f"an answer with {'both' if 'result' in msg else 'neither'} result and error: {shown}")
        return False
    return True


def names_itself(info: Any) -> bool:
    """An implementation's info (``serverInfo``, ``clientInfo``): an object with a string name and version."""
    return isinstance(info, dict) and isinstance(info.get("name"), str) and isinstance(info.get("version"), str)


def judge_error(r: Report, msg: dict[str, Any], shown: str) -> None:
    """M008: an answer's error has an integer code and a string message."""
    if "error" in msg:
        err = msg["error"]
        if not isinstance(err, dict) or not _is_int(err.get("code")) or not isinstance(err.get("message"), str):
            r.fail("M008", f"error without an integer code and a string message: {shown}", "messages")
