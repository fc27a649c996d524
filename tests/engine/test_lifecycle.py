"""Lifecycle and bad input, with hand-made messages over memory AND stdio: nothing crashes the server, every
error has the right code, and the session goes on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from support.core import MODERN_META, RawPeer, raw_memory, raw_stdio

TRANSPORTS = ["memory", "stdio"]


@contextlib.asynccontextmanager
async def raw(transport: str) -> AsyncIterator[RawPeer]:
    if transport == "memory":
        async with raw_memory() as p:
            yield p
    else:
        async with raw_stdio() as (p, _t):
            yield p


def meta(**over: Any) -> dict[str, Any]:
    m = dict(MODERN_META)
    m.update(over)
    return {k: v for k, v in m.items() if v is not None}


@pytest.mark.req("S021", "M001")
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_bad_input_gets_the_right_error_and_the_session_goes_on(transport: str) -> None:
    async with raw(transport) as p:
        await p.initialize()
        await p.send(b'{"jsonrpc": "2.0", "id": 1, "method": ')  # invalid JSON
        e = await p.recv()
        assert e["error"]["code"] == -32700 and e["id"] is None
        cases: list[tuple[bytes, Any]] = [
            (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', None),
            (b'{"jsonrpc":"2.0","id":5,"method":42}', 5),
            (b'{"id":6,"method":"ping"}', 6),
            (b'{"jsonrpc":"2.0","id":7,"method":"ping","params":[1]}', 7),
            (b'{"jsonrpc":"2.0"}', None),
            (b"[]", None),
            (b"17", None),
        ]
        for raw_msg, rid in cases:
            await p.send(raw_msg)
            e = await p.recv()
            assert e["error"]["code"] == -32600, raw_msg
            assert e["id"] == rid
        r = await p.request(8, "no/such/method")
        assert r["error"]["code"] == -32601
        r = await p.request(9, "tools/call", {"name": "nope", "arguments": {}})
        assert r["error"]["code"] == -32602
        r = await p.request(10, "resources/read", {"uri": "test://missing"})
        assert r["error"]["code"] == -32002 and r["error"]["data"] == {"uri": "test://missing"}
        assert (await p.request(11, "ping")) == {"jsonrpc": "2.0", "id": 11, "result": {}}


@pytest.mark.req("M079", "A001")
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_ping_before_initialize_and_requests_before_initialize(transport: str) -> None:
    async with raw(transport) as p:
        assert (await p.request("p", "ping"))["result"] == {}
        r = await p.request(2, "tools/list")
        assert r["error"]["code"] == -32600 and "initialize" in r["error"]["message"]


@pytest.mark.req("M042", "M045", "M046", "S016", "M047")
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    ("requested", "answered"),
    [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2099-12-31", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
    ],
)
async def test_version_negotiation(transport: str, requested: str, answered: str) -> None:
    async with raw(transport) as p:
        r = await p.initialize(requested)
        res = r["result"]
        assert res["protocolVersion"] == answered
        assert res["serverInfo"] == {"name": "core-test", "version": "1.2.3"}
        assert isinstance(res["capabilities"], dict) and "tools" in res["capabilities"]
        assert res["instructions"] == "test server"


@pytest.mark.req("M040")
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_initialize_param_errors(transport: str) -> None:
    async with raw(transport) as p:
        r = await p.request(1, "initialize", {"capabilities": {}, "clientInfo": {"name": "x", "version": "1"}})
        assert r["error"]["code"] == -32602
        r = await p.request(2, "initialize", {"protocolVersion": 20250618, "capabilities": {}})
        assert r["error"]["code"] == -32602
        r = await p.request(3, "initialize", {"protocolVersion": "2025-06-18", "capabilities": "none"})
        assert r["error"]["code"] == -32602
        ok = await p.initialize("2025-06-18")
        assert ok["result"]["protocolVersion"] == "2025-06-18"
        again = await p.request(4, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})
        assert again["error"]["code"] == -32600


@pytest.mark.req("M011", "M041", "A003")
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_batches_in_the_handshake_era(transport: str) -> None:
    async with raw(transport) as p:
        await p.send([{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26"}}])
        r = await p.recv()
        # before initialize no batch can be valid in any era: refused whole, in one error that says why
        assert isinstance(r, dict) and r["id"] is None and r["error"]["code"] == -32600
        assert "initialize MUST NOT be part of a batch" in r["error"]["message"]
        await p.initialize("2025-03-26")
        batch = [
            {
                "jsonrpc": "2.0",
                "id": "a",
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "1"}},
            },
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "zz", "progress": 1}},
            {"jsonrpc": "2.0", "id": "b", "method": "ping"},
            {"jsonrpc": "2.0", "id": "c", "method": "nope"},
        ]
        await p.send(batch)
        r, _ = await p.recv_until(lambda m: isinstance(m, list))
        by_id = {x["id"]: x for x in r}
        assert set(by_id) == {"a", "b", "c"}  # the notification is never answered
        assert by_id["a"]["result"]["content"][0]["text"] == "1"
        assert by_id["b"]["result"] == {}
        assert by_id["c"]["error"]["code"] == -32601


@pytest.mark.req("M009")
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_notifications_are_never_answered(transport: str) -> None:
    async with raw(transport) as p:
        await p.initialize()
        for method in ("notifications/whatever", "notifications/cancelled", "notifications/progress"):
            await p.send({"jsonrpc": "2.0", "method": method, "params": {"requestId": 999}})
        r = await p.request("after", "ping")
        assert r["result"] == {}
        with pytest.raises(asyncio.TimeoutError):
            await p.recv(timeout=0.3)


@pytest.mark.req("M004", "M006")
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_duplicate_in_flight_id_is_refused_not_crossed(transport: str) -> None:
    async with raw(transport) as p:
        await p.initialize()
        slow = {
            "jsonrpc": "2.0",
            "id": 42,
            "method": "tools/call",
            "params": {"name": "slow", "arguments": {"steps": 3}},
        }
        await p.send(slow)
        await asyncio.sleep(0.05)
        await p.send({"jsonrpc": "2.0", "id": 42, "method": "ping"})
        first = await p.recv()
        assert first["id"] == 42 and first["error"]["code"] == -32600
        second = await p.recv(timeout=5)
        assert second["id"] == 42 and second["result"]["content"][0]["text"] == "done 3"


@pytest.mark.req("A024")
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_cancel_for_unknown_or_finished_requests_is_ignored(transport: str) -> None:
    async with raw(transport) as p:
        await p.initialize()
        r = await p.request(1, "ping")
        assert r["result"] == {}
        await p.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
        await p.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "never"}})
        await p.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}})
        assert (await p.request(2, "ping"))["result"] == {}


@pytest.mark.req("M082")
async def test_server_ignores_a_cancel_of_initialize() -> None:
    async with raw_memory() as p:
        await p.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}})
        await p.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
        r = await p.recv()
        assert r["id"] == 1 and r["result"]["protocolVersion"] == "2025-11-25"


@pytest.mark.req("S014")
async def test_server_sends_no_request_before_initialized() -> None:
    async with raw_memory() as p:
        r = await p.request(
            0,
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}, "sampling": {}, "roots": {}}},
        )
        assert "result" in r
        await p.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ask", "arguments": {}}})
        with pytest.raises(asyncio.TimeoutError):
            await p.recv(timeout=0.4)  # the server waits for notifications/initialized
        await p.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        req = await p.recv()
        assert req["method"] == "elicitation/create"


# ---------------------------------------------------------------------------------------------- modern era


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_modern_meta_errors(transport: str) -> None:
    async with raw(transport) as p:
        r = await p.request(1, "server/discover", {})
        assert r["error"]["code"] == -32602
        r = await p.request(2, "tools/list", {"_meta": meta(**{"io.modelcontextprotocol/clientCapabilities": None})})
        assert r["error"]["code"] == -32602
        r = await p.request(
            3, "tools/list", {"_meta": meta(**{"io.modelcontextprotocol/protocolVersion": "2030-01-01"})}
        )
        assert r["error"]["code"] == -32022
        assert r["error"]["data"]["requested"] == "2030-01-01"
        assert "2026-07-28" in r["error"]["data"]["supported"]
        r = await p.request(4, "tools/call", {"name": "ask", "arguments": {}, "_meta": meta()})
        assert r["error"]["code"] == -32021
        assert r["error"]["data"]["requiredCapabilities"] == {"elicitation": {}}
        for removed in ("ping", "logging/setLevel", "resources/subscribe"):
            r = await p.request(f"rm-{removed}", removed, {"_meta": meta(), "uri": "x", "level": "info"})
            assert r["error"]["code"] == -32601, removed
        r = await p.request(5, "server/discover", {"_meta": meta()})
        res = r["result"]
        assert res["resultType"] == "complete" and "2026-07-28" in res["supportedVersions"]
        assert res["ttlMs"] >= 0 and res["cacheScope"] in ("public", "private")
        assert res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "core-test"
        # a modern batch is refused whole, in one error (batches do not exist in 2026-07-28)
        await p.send([{"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {"_meta": meta()}}])
        b = await p.recv()
        assert isinstance(b, dict) and b["error"]["code"] == -32600
        assert "batches do not exist in 2026-07-28" in b["error"]["message"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_modern_input_required_round_trip_and_tampering(transport: str) -> None:
    caps = {"elicitation": {}, "sampling": {}, "roots": {}}
    m = meta(**{"io.modelcontextprotocol/clientCapabilities": caps})
    async with raw(transport) as p:
        params: dict[str, Any] = {"name": "ask", "arguments": {}, "_meta": m}
        r1 = (await p.request(1, "tools/call", params))["result"]
        assert r1["resultType"] == "input_required"
        (key1,) = r1["inputRequests"]
        assert r1["inputRequests"][key1]["method"] == "elicitation/create"
        assert "id" not in r1["inputRequests"][key1]
        state1 = r1["requestState"]
        answer = {"action": "accept", "content": {"name": "Bob"}}
        r2 = (await p.request(2, "tools/call", {**params, "inputResponses": {key1: answer}, "requestState": state1}))[
            "result"
        ]
        (key2,) = r2["inputRequests"]
        assert r2["inputRequests"][key2]["method"] == "sampling/createMessage"
        sample = {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"}
        r3 = (
            await p.request(
                3, "tools/call", {**params, "inputResponses": {key2: sample}, "requestState": r2["requestState"]}
            )
        )["result"]
        (key3,) = r3["inputRequests"]
        roots = {"roots": [{"uri": "file:///x"}]}
        r4 = (
            await p.request(
                4, "tools/call", {**params, "inputResponses": {key3: roots}, "requestState": r3["requestState"]}
            )
        )["result"]
        assert r4["resultType"] == "complete"
        assert r4["content"][0]["text"] == "accept:Bob|4|file:///x"
        # tampered, foreign or misplaced state -> -32602
        body, mac = state1.rsplit(".", 1)
        tampered = body[:-3] + ("xyz" if body[-3:] != "xyz" else "abc") + "." + mac
        for i, bad in enumerate((tampered, "v1.nope.nope", 12)):
            r = await p.request(10 + i, "tools/call", {**params, "inputResponses": {}, "requestState": bad})
            assert r["error"]["code"] == -32602
        other_call = {"name": "echo", "arguments": {"text": "x"}, "_meta": m, "requestState": state1}
        r = await p.request(20, "tools/call", other_call)
        assert r["error"]["code"] == -32602
        r = await p.request(21, "tools/call", {**params, "inputResponses": "nope"})
        assert r["error"]["code"] == -32602


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_modern_resource_not_found_is_invalid_params(transport: str) -> None:
    async with raw(transport) as p:
        r = await p.request(1, "resources/read", {"uri": "test://missing", "_meta": meta()})
        assert r["error"]["code"] == -32602 and r["error"]["data"]["uri"] == "test://missing"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_both_eras_on_one_connection(transport: str) -> None:
    async with raw(transport) as p:
        await p.initialize("2025-06-18")
        legacy = (await p.request(1, "tools/list"))["result"]
        assert "resultType" not in legacy and "ttlMs" not in legacy
        modern = (await p.request(2, "tools/list", {"_meta": meta()}))["result"]
        assert modern["resultType"] == "complete" and "ttlMs" in modern
