"""Sans-IO protocol layer: JSON-RPC envelope, error codes, revision gates, shaping, requestState sealing."""

from __future__ import annotations

import time

import orjson
import pytest

from mcpkit.protocol import errors, jsonrpc, versions
from mcpkit.protocol.jsonrpc import Batch, ErrorResponse, Invalid, Notification, Request, Response
from mcpkit.protocol.shaping import server_meta, shape_result
from mcpkit.server.request_state import RequestStateSealer, request_digest


@pytest.mark.req("M001", "M002", "M005", "A001")
def test_parse_request_with_string_and_integer_ids() -> None:
    r = jsonrpc.parse(b'{"jsonrpc":"2.0","id":"abc","method":"tools/list","params":{"cursor":"x"}}')
    assert isinstance(r, Request) and r.id == "abc" and r.method == "tools/list" and r.params == {"cursor": "x"}
    r2 = jsonrpc.parse(b'{"jsonrpc":"2.0","id":7,"method":"ping"}')
    assert isinstance(r2, Request) and r2.id == 7 and r2.params is None


@pytest.mark.req("M003", "M002")
@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","id":null,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":true,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":[1],"method":"ping"}',
    ],
)
def test_request_ids_must_be_string_or_integer_never_null(raw: bytes) -> None:
    r = jsonrpc.parse(raw)
    assert isinstance(r, Invalid) and r.id is None
    assert r.error()["code"] == errors.INVALID_REQUEST
    # the message says what the id was
    said = {b"null": "null", b"1.5": "a number (1.5)", b"true": "true", b"[1]": "an array"}
    kind = next(v for k, v in said.items() if b'"id":' + k in raw)
    assert r.error()["message"].endswith(f'"id" must be a string or an integer, not {kind}')


@pytest.mark.req("M005", "M010")
@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","id":1,"method":5}',
        b'{"jsonrpc":"2.0","method":null}',
        b'{"jsonrpc":"2.0","id":1}',
        b'{"id":1,"method":"ping"}',
        b'{"jsonrpc":"1.0","id":1,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":[1,2]}',
        b'"just a string"',
    ],
)
def test_invalid_envelopes_are_invalid_requests(raw: bytes) -> None:
    r = jsonrpc.parse(raw)
    assert isinstance(r, Invalid)
    assert r.error()["code"] == -32600


def test_invalid_request_keeps_a_readable_id() -> None:
    r = jsonrpc.parse(b'{"jsonrpc":"2.0","id":9,"method":"x","params":"nope"}')
    assert isinstance(r, Invalid) and r.id == 9


@pytest.mark.req("M009", "A002")
def test_notification_has_no_id() -> None:
    n = jsonrpc.parse(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}')
    assert isinstance(n, Notification)
    encoded = orjson.loads(jsonrpc.encode_notification("notifications/initialized", None))
    assert "id" not in encoded and encoded["method"] == "notifications/initialized"


@pytest.mark.req("M007", "M008")
def test_responses_result_xor_error() -> None:
    ok = jsonrpc.parse(b'{"jsonrpc":"2.0","id":1,"result":{}}')
    assert isinstance(ok, Response)
    err = jsonrpc.parse(b'{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}')
    assert isinstance(err, ErrorResponse)
    both = jsonrpc.parse(b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}')
    assert isinstance(both, Invalid) and both.is_response
    bad_err = jsonrpc.parse(b'{"jsonrpc":"2.0","id":1,"error":{"message":"no code"}}')
    assert isinstance(bad_err, Invalid)
    e = orjson.loads(jsonrpc.encode_error(3, errors.MethodNotFound("Method not found: x").to_error()))
    assert e == {"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "Method not found: x"}}
    assert "result" not in e


@pytest.mark.req("M011")
def test_batch_parses_each_member() -> None:
    b = jsonrpc.parse(b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"n"},42]')
    assert isinstance(b, Batch)
    assert [type(x) for x in b] == [Request, Notification, Invalid]
    empty = jsonrpc.parse(b"[]")
    assert isinstance(empty, Invalid)


def test_parse_error_is_typed() -> None:
    with pytest.raises(errors.ParseError) as ei:
        jsonrpc.parse(b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert ei.value.code == -32700


@pytest.mark.req("M015")
def test_encoding_never_contains_a_raw_newline() -> None:
    data = jsonrpc.encode_result(1, {"text": "line1\nline2\r\n", "nested": {"a": ["\n"]}})
    assert b"\n" not in data and b"\r" not in data
    assert orjson.loads(data)["result"]["text"] == "line1\nline2\r\n"


def test_integers_beyond_64_bits_are_encoded_exactly() -> None:
    """JSON numbers have no size limit: an integer orjson cannot write (beyond 64 bits) is written by the standard
    library instead, digit for digit, in every message the encoder makes; what neither can write is still refused
    with orjson's own error."""
    import json

    big = {"n": 2**70, "neg": -(2**80), "list": [2**64, 1.5, "x", None, True]}
    made = [
        jsonrpc.encode_result(1, big),
        jsonrpc.encode_error(2, {"code": -32000, "message": "m", "data": big}),
        jsonrpc.encode_request(3, "sampling/createMessage", big),
        jsonrpc.encode_notification("notifications/message", big),
        jsonrpc.encode({"jsonrpc": "2.0", "id": 4, "result": big}),
        jsonrpc.encode(Response(5, big)),
        jsonrpc.encode([{"jsonrpc": "2.0", "id": 6, "result": big}]),
    ]
    for data in made:
        assert b"\n" not in data and b" " not in data
        decoded = json.loads(data)
        body = decoded[0] if isinstance(decoded, list) else decoded
        got = body.get("result") or body.get("params") or body["error"]["data"]
        assert got == big and type(got["n"]) is int, data
    with pytest.raises(TypeError, match="Dict key must be str"):
        jsonrpc.encode_result(1, {"bad": {1: 2}})
    with pytest.raises(TypeError):
        jsonrpc.encode_result(1, {"n": 2**70, "bad": object()})


@pytest.mark.req("M002", "M006")
def test_a_message_whose_id_is_beyond_64_bits_is_read_exactly() -> None:
    """orjson reads an integer literal beyond 64 bits as a float: a message whose id is one is read again with
    exact integers, so its answer carries the same id and its numbers are the ones sent; a fractional id is still
    refused, and in a message with an ordinary id a wide integer is the nearest float (the documented limit)."""
    wide, neg = 2**64, -(2**63) - 1
    r = jsonrpc.parse(b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"a":[%d,1.5]}}' % (wide, 10**30))
    assert isinstance(r, Request) and r.id == wide and type(r.id) is int
    assert r.params == {"a": [10**30, 1.5]} and type(r.params["a"][0]) is int
    assert jsonrpc.encode_result(r.id, {}) == b'{"jsonrpc":"2.0","id":18446744073709551616,"result":{}}'
    r = jsonrpc.parse(bytearray(b'{"jsonrpc":"2.0","id":%d,"result":{"n":%d}}' % (neg, wide)))
    assert isinstance(r, Response) and (r.id, r.result) == (neg, {"n": wide})
    r = jsonrpc.parse(memoryview(b'{"jsonrpc":"2.0","id":%d,"error":{"code":1,"message":"m"}}' % wide))
    assert isinstance(r, ErrorResponse) and r.id == wide
    b = jsonrpc.parse(f'[{{"jsonrpc":"2.0","id":1,"method":"ping"}},{{"jsonrpc":"2.0","id":{neg},"method":"ping"}}]')
    assert isinstance(b, Batch) and [m.id for m in b] == [1, neg]  # type: ignore[union-attr]
    r = jsonrpc.parse(b'{"jsonrpc":"1.0","id":%d,"method":"ping"}' % wide)
    assert isinstance(r, Invalid) and r.id == wide  # (refused, with its id)
    r = jsonrpc.parse(b'{"jsonrpc":"2.0","id":1e3,"method":"ping"}')
    assert isinstance(r, Invalid) and r.id is None
    r = jsonrpc.parse(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":%d}}' % wide)
    assert isinstance(r, Request) and type(r.params["n"]) is float  # type: ignore[index]


def test_every_error_code_round_trips_as_a_typed_exception() -> None:
    cases = {
        -32700: errors.ParseError,
        -32600: errors.InvalidRequest,
        -32601: errors.MethodNotFound,
        -32602: errors.InvalidParams,
        -32603: errors.InternalError,
        -32002: errors.ResourceNotFound,
        -32042: errors.URLElicitationRequired,
        -32020: errors.HeaderMismatch,
        -32021: errors.MissingRequiredClientCapability,
        -32022: errors.UnsupportedProtocolVersion,
    }
    for code, cls in cases.items():
        exc = errors.error_from_response({"code": code, "message": "m", "data": {"uri": "u", "k": 1}})
        assert isinstance(exc, cls), code
        assert exc.code == code and exc.data == {"uri": "u", "k": 1}
        assert exc.to_error()["code"] == code
    odd = errors.error_from_response({"code": -1, "message": "app"})
    assert type(odd) is errors.MCPError and odd.code == -1
    assert isinstance(errors.error_from_response("garbage"), errors.InternalError)
    upv = errors.UnsupportedProtocolVersion("1999-01-01", ["2026-07-28"])
    assert upv.to_error()["data"] == {"supported": ["2026-07-28"], "requested": "1999-01-01"}
    mrc = errors.MissingRequiredClientCapability({"sampling": {}})
    assert mrc.to_error()["data"] == {"requiredCapabilities": {"sampling": {}}}


def test_feature_gates_per_revision() -> None:
    f = versions.features
    assert [v for v in versions.ALL_VERSIONS if f(v).batches] == ["2025-03-26"]
    assert not f("2024-11-05").audio and f("2025-03-26").audio
    assert not f("2025-03-26").structured_output and f("2025-06-18").structured_output
    assert not f("2025-06-18").elicitation or f("2025-06-18").elicitation  # present from 2025-06-18
    assert f("2025-06-18").elicitation and not f("2025-03-26").elicitation
    assert f("2025-11-25").url_elicitation and not f("2025-06-18").url_elicitation
    modern = f("2026-07-28")
    assert modern.modern and modern.result_type and modern.input_required and modern.listen
    assert not modern.ping and not modern.set_level and modern.resource_not_found_code == -32602
    assert f("2025-11-25").resource_not_found_code == -32002
    assert f("2024-11-05").always_next_cursor and not f("2025-06-18").always_next_cursor


@pytest.mark.req("M045", "M046", "S016")
def test_the_latest_known_revision_is_picked_by_the_sdks_order_not_by_the_strings() -> None:
    assert versions.latest_of(["2025-06-18", "2026-07-28", "2024-11-05"]) == "2026-07-28"
    assert versions.latest_of(["2025-03-26", "9999-99-99", 7]) == "2025-03-26"  # (what it does not know is ignored)
    assert versions.latest_of([]) is None and versions.latest_of(["draft"]) is None


def test_handshake_negotiation_echoes_or_answers_latest() -> None:
    for v in versions.HANDSHAKE_VERSIONS:
        assert versions.negotiate_handshake(v) == v
    assert versions.negotiate_handshake("2099-01-01") == versions.LATEST_HANDSHAKE
    assert versions.negotiate_handshake("2024-11-05", ("2025-06-18",)) == "2025-06-18"


def test_shaping_modern_adds_result_type_cache_hints_and_server_info() -> None:
    info = server_meta({"name": "s", "version": "1"})
    r = shape_result("tools/list", {"tools": []}, versions.features("2026-07-28"), info)
    assert r["resultType"] == "complete" and r["ttlMs"] == 0 and r["cacheScope"] in ("public", "private")
    assert orjson.loads(jsonrpc.encode_result(1, r))["result"]["_meta"] == {
        "io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}
    }
    assert "nextCursor" not in r
    c = shape_result("tools/call", {"content": []}, versions.features("2026-07-28"))
    assert c["resultType"] == "complete" and "ttlMs" not in c and c["isError"] is False


def test_shaping_handshake_strips_modern_keys_and_applies_seed_rulings() -> None:
    modern_like = {
        "tools": [],
        "resultType": "complete",
        "ttlMs": 5,
        "cacheScope": "public",
        "_meta": {"io.modelcontextprotocol/serverInfo": {}},
    }
    old = shape_result("tools/list", dict(modern_like), versions.features("2025-03-26"))
    assert old == {"tools": [], "nextCursor": ""}
    new = shape_result("tools/list", dict(modern_like), versions.features("2025-06-18"))
    assert new == {"tools": []}
    call_old = shape_result("tools/call", {"content": []}, versions.features("2024-11-05"))
    assert call_old == {"content": [], "isError": False, "structuredContent": {}}
    call_new = shape_result("tools/call", {"content": []}, versions.features("2025-11-25"))
    assert call_new == {"content": [], "isError": False}


def test_request_state_seal_and_tamper() -> None:
    sealer = RequestStateSealer([b"k" * 32])
    token = sealer.seal({"m": "tools/call", "a": {"x": {"action": "accept"}}})
    assert sealer.open(token)["a"] == {"x": {"action": "accept"}}
    body, mac = token.rsplit(".", 1)
    tampered = body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1] + "." + mac
    for bad in (tampered, token + "x", "v1.garbage", "", 42, None, "v1." + "a" * 300_000):
        with pytest.raises(errors.InvalidParams):
            sealer.open(bad)
    other = RequestStateSealer([b"z" * 32])
    with pytest.raises(errors.InvalidParams):
        other.open(token)
    rotated = RequestStateSealer([b"new" * 11, b"k" * 32])
    assert rotated.open(token)["m"] == "tools/call"
    expired = RequestStateSealer([b"k" * 32], ttl=-1).seal({"m": "x"})
    with pytest.raises(errors.InvalidParams, match="expired"):
        sealer.open(expired)
    assert request_digest("tools/call", {"name": "a", "arguments": {"x": 1}}) != request_digest(
        "tools/call", {"name": "a", "arguments": {"x": 2}}
    )
    assert time.time() > 0


async def test_duplicate_id_in_a_batch_is_refused_inside_its_answer() -> None:
    """A batch member whose id is already in flight is refused inside the batch's one answer (bounded by
    max_batch_size), not with a message of its own beside it: a request-scoped transport gets the whole answer
    back from ``Peer.handle`` and nothing answer-like on the stream; the original request keeps running."""
    import asyncio

    from mcpkit.engine import BATCH, RESULT, Outgoing, Peer, RequestContext

    sent: list[Outgoing | None] = []
    release = asyncio.Event()

    class Recorder:
        async def send(self, data: bytes, msg: Outgoing | None = None) -> None:
            sent.append(msg)

    async def handler(ctx: RequestContext) -> dict[str, object]:
        if ctx.id == 1:
            await release.wait()
        return {"id": ctx.id}

    peer = Peer(Recorder(), request_handler=handler, batch_policy=lambda: True)
    first = asyncio.ensure_future(peer.handle(jsonrpc.parse(b'{"jsonrpc":"2.0","id":1,"method":"slow"}'), Recorder()))
    await asyncio.sleep(0.01)
    batch = b'[{"jsonrpc":"2.0","id":1,"method":"dup"},{"jsonrpc":"2.0","id":2,"method":"x"}]'
    answer = await peer.handle(jsonrpc.parse(batch), Recorder())
    assert answer is not None and answer.kind == BATCH
    items = {item["id"]: item for item in orjson.loads(answer.data)}
    assert items[1]["error"]["code"] == errors.INVALID_REQUEST and "already in use" in items[1]["error"]["message"]
    assert items[2]["result"] == {"id": 2}
    assert sent == []  # nothing went to an outbox
    release.set()
    done = await first
    assert done is not None and (done.kind, done.id) == (RESULT, 1)
