"""Recovering the id of a request too large to be read, from its first and last bytes only."""

from __future__ import annotations

import orjson
import pytest

from mcpkit.protocol.oversize import KEEP_BYTES, MAX_ID_CHARS, recover_request_id

FILLER = "x" * 100_000


def _cut(message: bytes) -> tuple[bytes, bytes]:
    return message[:KEEP_BYTES], message[-KEEP_BYTES:]


def _ids(message: bytes) -> int | str | None:
    return recover_request_id(*_cut(message))


@pytest.mark.parametrize("rid", [7, 0, -3, "req-1", "", "é"])
def test_an_id_written_first_is_recovered(rid: int | str) -> None:
    msg = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"arguments": {"text": FILLER}}}
    assert _ids(orjson.dumps(msg)) == rid


@pytest.mark.parametrize("rid", [7, "abc"])
def test_an_id_written_last_is_recovered_from_the_tail(rid: int | str) -> None:
    # (the TypeScript SDK writes method, params, jsonrpc, id)
    msg = {"method": "tools/call", "params": {"arguments": {"text": FILLER}}, "jsonrpc": "2.0", "id": rid}
    assert _ids(orjson.dumps(msg)) == rid
    spaced = b'{ "method" : "x", "params" : {"t": "' + FILLER.encode() + b'"} , "id" : ' + orjson.dumps(rid) + b" }\r"
    assert _ids(spaced) == rid


def test_a_response_is_never_answered_with_its_id() -> None:
    for msg in (
        {"jsonrpc": "2.0", "id": 1, "result": {"text": FILLER}},
        {"result": {"text": FILLER}, "jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "error": {"code": 1, "message": FILLER}, "id": 1},
    ):
        assert _ids(orjson.dumps(msg)) is None


def test_an_id_that_is_not_top_level_or_not_certain_is_not_taken() -> None:
    cases = [
        # the id of a nested object at the end, not the request's
        {"method": "x", "params": {"t": FILLER, "id": 5}},
        # an id in the middle (neither in the head nor in the tail)
        {"method": "x", "params": {"t": FILLER}, "id": 5, "more": FILLER},
        # a notification
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"t": FILLER}},
        # a method not seen in the head (it comes after the long params)
        {"params": {"t": FILLER}, "method": "x", "id": 5},
        # ids that are not request ids, or too long
        {"jsonrpc": "2.0", "id": None, "method": "x", "params": {"t": FILLER}},
        {"jsonrpc": "2.0", "id": True, "method": "x", "params": {"t": FILLER}},
        {"jsonrpc": "2.0", "id": 1.5, "method": "x", "params": {"t": FILLER}},
        {"jsonrpc": "2.0", "id": "i" * (MAX_ID_CHARS + 1), "method": "x", "params": {"t": FILLER}},
        {"method": "x", "params": {"t": FILLER}, "id": "i" * (MAX_ID_CHARS + 1)},
        {"method": "x", "params": {"t": FILLER}, "id": 10**17},
    ]
    for msg in cases:
        assert _ids(orjson.dumps(msg)) is None, msg
    # a string id with an escape, or text that only looks like an id inside a string value
    assert _ids(b'{"method":"x","params":{"t":"' + FILLER.encode() + b'"},"id":"a\\"b"}') is None
    assert _ids(b'{"method":"x","params":{"t":"' + FILLER.encode() + b'\\",\\"id\\":5}"}') is None
    # not an object, not JSON
    assert _ids(b"[" + FILLER.encode() + b',"id":1}') is None
    assert _ids(b"\xff\xfe" + FILLER.encode()) is None


def test_a_number_cut_by_the_end_of_the_head_is_not_taken() -> None:
    head = b'{"jsonrpc":"2.0","id":12'  # the id goes on past the kept bytes
    assert recover_request_id(head, b'"}}') is None
    assert recover_request_id(head + b"3,", b'"}}') is None  # (no "method" seen)
    assert recover_request_id(b'{"jsonrpc":"2.0","method":"m","id":123,"params":{"t":"', b'"}}') == 123
