"""Streamable HTTP server, reading messages and the engine's encoded answers.

How many requests a POST carries, whether it has any, and what the engine's bytes say: how its answer to a request
starts (so the first other message turns the answer into an SSE stream), whether an answer is a result or an
error (and which HTTP status an error gets), whether an outgoing message is a request or a response. These read
the engine's encoding (``encode_result``/``encode_error`` key order) rather than parse it, on the hot path.
"""

from __future__ import annotations

from typing import Any

import orjson

from ...protocol.errors import HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION
from ...protocol.jsonrpc import Batch, Invalid, Request

MODERN_400 = frozenset((HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION))


_NOTIFICATION_HEAD = b'{"jsonrpc":"2.0","method":'  # how the engine encodes a notification (method first, no id)


def _is_response(data: bytes) -> bool:
    if data.startswith(_NOTIFICATION_HEAD):
        return False  # it has a method: a notification (or a request), without parsing a large one
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return isinstance(obj, list) or (isinstance(obj, dict) and "method" not in obj)


def _is_request(data: bytes) -> bool:
    if b'"id"' not in data and b"\\u" not in data:
        return False  # no id key anywhere (nor an escaped one): not a request, without parsing
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return isinstance(obj, dict) and "method" in obj and "id" in obj


def _final_prefix(msg: Any) -> tuple[bytes, ...]:
    """How the engine's answer to ``msg`` starts (``encode_result``/``encode_error`` key order; a batch answer
    is an array): anything else the handler sends first makes the answer an SSE stream."""
    if type(msg) is Batch:
        return (b"[",)
    rid = msg.id
    if type(rid) is int:
        return (b'{"jsonrpc":"2.0","id":%d,"result"' % rid, b'{"jsonrpc":"2.0","id":%d,"error"' % rid)
    head = b'{"jsonrpc":"2.0","id":' + orjson.dumps(rid) + b',"'
    return (head + b'result"', head + b'error"')


def _is_result(data: bytes, rid: Any) -> bool:
    """Whether ``data``, the engine's answer to request ``rid``, is a result (not an error response), read from how
    it starts (``encode_result`` key order: '{"jsonrpc":"2.0","id":<id>,"result":...'). For an integer id of at most
    20 digits the marker lies within the first 53 bytes, where an error has '"error":{"code":'; no formatting."""
    if type(rid) is int and -(10**19) < rid < 10**20:
        return data.find(b',"result":', 22, 53) != -1
    return data.startswith(b'{"jsonrpc":"2.0","id":' + orjson.dumps(rid) + b',"result"')


def _request_count(msg: Any) -> int:
    """How many requests a batch holds (at least 1: the POST itself is in flight)."""
    n = 0
    for item in msg:
        if type(item) is Request:
            n += 1
    return n or 1


def _has_requests(msg: Any) -> bool:
    t = type(msg)
    if t is Request:
        return True
    if t is Batch:
        for item in msg:
            ti = type(item)
            if ti is Request or (ti is Invalid and not item.is_response):
                return True
    return False


def _error_status(data: bytes, modern: bool, new_session: bool) -> int:
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return 200
    if not isinstance(obj, dict):
        return 200
    err = obj.get("error")
    if not isinstance(err, dict):
        return 200
    if new_session:
        return 400  # a failed initialize: no session is created
    if modern and err.get("code") in MODERN_400:
        return 400
    return 200
