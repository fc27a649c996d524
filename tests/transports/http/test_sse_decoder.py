"""The one client-side Server-Sent Events decoder (``transports/http/sse_decoder.py``) against the WHATWG rules
(issue 14.4): every split of a stream gives the same events, and the size bound holds before buffering."""

from __future__ import annotations

import pytest

from mcpkit.transports.http.sse_decoder import SSEDecoder, SSEEventTooLarge

STREAM = (
    b"\xef\xbb\xbf: a comment\r\n"
    b"retry: 1500\r\nid: 1\r\ndata: a\r\ndata: b\r\n\r\n"  # CRLF, two data lines
    b"id: x\0y\ndata: c\n\n"  # an id with NUL: ignored
    b"event: custom\rdata: d\r\r"  # CR line ends
    b"id: 9\n\n"  # no data: nothing dispatched, but the id is taken
    b"retry: 12x\ndata\n\n"  # a bad retry is ignored; a bare "data" field is an empty line of data
    b"data: cut off"  # no blank line before the end: never dispatched
)
EXPECTED = [("message", b"a\nb", "1"), ("message", b"c", "1"), ("custom", b"d", "1"), ("message", b"", "9")]


def decode(chunks: list[bytes], limit: int = 1000) -> tuple[list[tuple[str, bytes, str]], SSEDecoder]:
    decoder = SSEDecoder(limit)
    events = [(e.event, e.data, e.id) for chunk in chunks for e in decoder.feed(chunk)]
    return events, decoder


def test_whatwg_rules_in_one_piece() -> None:
    events, decoder = decode([STREAM])
    assert events == EXPECTED
    assert decoder.retry == 1500 and decoder.last_event_id == "9"


def test_every_split_gives_the_same_events() -> None:
    """Cut in two at every offset (CR and LF of a CRLF apart, a BOM in pieces) and byte by byte."""
    for i in range(len(STREAM) + 1):
        assert decode([STREAM[:i], STREAM[i:]])[0] == EXPECTED, i
    assert decode([bytes([b]) for b in STREAM])[0] == EXPECTED


def test_new_stream_keeps_the_last_event_id_and_forgets_the_partial_event() -> None:
    events, decoder = decode([b"id: 5\ndata: x\n\ndata: half"])
    assert events == [("message", b"x", "5")]
    decoder.new_stream()
    assert [(e.data, e.id) for e in decoder.feed(b"data: y\n\n")] == [(b"y", "5")]


@pytest.mark.parametrize(
    "chunks",
    [
        [b"data: " + b"x" * 1100 + b"\n\n"],  # one long line, in one piece
        [b"data: " + b"x" * 400 + b"\n"] * 3,  # many lines of one event
        [b"x" * 600] * 4,  # a line that never ends (bound: the limit + 1 KiB for the field name)
    ],
)
def test_event_and_line_bounds(chunks: list[bytes]) -> None:
    with pytest.raises(SSEEventTooLarge, match="1000-byte limit"):
        decode(chunks, limit=1000)


def test_empty_data_line_flood_costs_a_byte_per_line() -> None:
    """64 Ki lines of bare ``data`` (the most lines that fit a 64 KiB bound) before the event is refused: the
    decoder holds about a byte per line (a list of lines held 8-byte references: 512 KiB and more)."""
    import tracemalloc

    decoder = SSEDecoder(64 * 1024)
    chunk = b"data\n" * 4096
    tracemalloc.start()
    try:
        with pytest.raises(SSEEventTooLarge):
            for _ in range(20):
                decoder.feed(chunk)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024, f"peak {peak / 1024:.0f} KiB"
