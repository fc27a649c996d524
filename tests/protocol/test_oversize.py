"""Finding the id of a request too large to be read, while its bytes stream past, in bounded memory."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from mcpkit.protocol.oversize import MAX_ID_BYTES, MAX_ID_CHARS, RequestIdScanner

FILLER = "x" * 100_000


def _scan(message: bytes, chunk: int) -> int | str | None:
    scanner = RequestIdScanner()
    for i in range(0, len(message), chunk):
        scanner.feed(message[i : i + chunk])
    return scanner.request_id()


def _ids(message: bytes) -> int | str | None:
    """The id found, the same whatever the chunks (every split point of a short message is tried)."""
    chunks = (7, 512, 4096, 65536, len(message)) + ((1,) if len(message) < 4000 else ())
    found = {_scan(message, chunk) for chunk in chunks}
    assert len(found) == 1, found
    return found.pop()


def _dumps(msg: Any) -> bytes:
    return json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.parametrize("rid", [7, 0, -3, 2**70, "req-1", "", "é", 'a"b\\', "é" * MAX_ID_CHARS])
def test_an_id_is_found_wherever_it_stands(rid: int | str) -> None:
    members: list[tuple[str, Any]] = [
        ("jsonrpc", "2.0"),
        ("method", "tools/call"),
        ("params", {"arguments": {"text": FILLER, "rows": [{"id": 1, "v": [1, "]}"]}] * 100}}),
    ]
    for where in range(len(members) + 1):  # first (mcpkit, the Python SDK), last (the TypeScript SDK), between
        msg = dict([*members[:where], ("id", rid), *members[where:]])
        assert _ids(_dumps(msg)) == rid, where
    spaced = b'{ "method" : "x" ,\r\n "params" : {"t": "' + FILLER.encode() + b'"} , "id" : ' + _dumps(rid) + b" }\r"
    assert _ids(spaced) == rid


def test_a_response_is_never_answered_with_its_id() -> None:
    for msg in (
        {"jsonrpc": "2.0", "id": 1, "result": {"text": FILLER}},
        {"result": {"text": FILLER}, "jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "error": {"code": 1, "message": FILLER}, "id": 1},
        {"id": 1, "method": "x", "params": {"t": FILLER}, "result": {}},
    ):
        assert _ids(_dumps(msg)) is None


def test_an_id_that_is_not_the_top_level_ones_is_never_taken() -> None:
    cases: list[Any] = [
        {"method": "x", "params": {"t": FILLER, "id": 5}},  # a nested object's id
        {"method": "x", "params": [{"id": 5}, FILLER]},
        {"method": "x", "params": {"t": FILLER + '","id":5,"'}},  # text that looks like an id inside a string
        {"method": "x", "params": {"t": FILLER + '\\","id":5,"\\\\'}},
        {"method": "x", "t": FILLER + '"},"id":5}'},
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"t": FILLER}},  # a notification
        # ids that are not request ids, or too long
        {"jsonrpc": "2.0", "id": None, "method": "x", "params": {"t": FILLER}},
        {"jsonrpc": "2.0", "id": True, "method": "x", "params": {"t": FILLER}},
        {"jsonrpc": "2.0", "id": 1.5, "method": "x", "params": {"t": FILLER}},
        {"jsonrpc": "2.0", "id": [1], "method": "x", "params": {"t": FILLER}},
        {"jsonrpc": "2.0", "id": {"id": 1}, "method": "x", "params": {"t": FILLER}},
        {"jsonrpc": "2.0", "id": "i" * (MAX_ID_CHARS + 1), "method": "x", "params": {"t": FILLER}},
        {"method": "x", "params": {"t": FILLER}, "id": 10 ** (MAX_ID_BYTES + 1)},
    ]
    for msg in cases:
        assert _ids(_dumps(msg)) is None, str(msg)[:200]
    # not an object, not JSON
    assert _ids(b'[{"method":"x","id":1},"' + FILLER.encode() + b'"]') is None
    assert _ids(b"\xff\xfe" + FILLER.encode()) is None
    assert _ids(b'{"method":"x","id":1' + b"\\" + FILLER.encode()) is None  # (cut: the id is not followed by , or })


def test_a_key_written_with_escapes_is_the_same_key() -> None:
    assert _ids(b'{"\\u006dethod":"x","params":{"t":"' + FILLER.encode() + b'"},"\\u0069d":12}') == 12


def test_memory_stays_bounded_and_time_linear_whatever_the_shape() -> None:
    """A few hundred bytes kept, whatever is fed; 8 MiB of each shape read in well under a CPU second (measured:
    0.01 to 1.0 s for 64 MiB; the bound leaves room for a loaded machine)."""
    size = 8 << 20
    shapes = {
        "one long string": b'{"method":"m","params":{"data":"' + b"A" * size + b'"},"id":1}',
        "records": _dumps(
            {"method": "m", "params": {"rows": [{"id": i, "v": [1, None]} for i in range(size // 24)]}, "id": 1}
        ),
        "escaped text": _dumps({"method": "m", "params": {"t": 'say "hi"\n' * (size // 12)}, "id": 1}),
        "many members": b'{"method":"m",' + b'"a":1,' * (size // 6) + b'"id":1}',
        "deep nesting": b'{"method":"m","params":' + b"[" * (size // 2) + b"]" * (size // 2) + b',"id":1}',
    }
    for name, message in shapes.items():
        scanner = RequestIdScanner()
        started = time.process_time()
        for i in range(0, len(message), 1 << 18):
            scanner.feed(message[i : i + (1 << 18)])
            assert len(scanner._capture or b"") <= MAX_ID_BYTES and len(scanner._keys) <= 4  # (all it keeps)
        took = time.process_time() - started
        assert scanner.request_id() == 1, name
        assert took < 3.0, (name, took)
