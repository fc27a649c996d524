"""The client honours the 2026-07-28 caching hints (a list page or a read reused while fresh, per cacheScope,
dropped by list_changed and resources/updated), and runs a middleware chain (retries of safe calls, logging)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client, MCPKit
from mcpkit.client.cache import ResponseCache
from mcpkit.client.middleware import CallLogging, ClientCall, Retry
from mcpkit.protocol.errors import ConnectionClosed, RequestTimeout
from support.toolkit import ERAS, TRANSPORTS, toolkit_client
from support.typecheck import mypy_strict

pytestmark = pytest.mark.timeout(60)


async def _asked(client: Client) -> dict[str, int]:
    result = (await client.call_tool("asked", {})).data
    assert isinstance(result, dict)
    return result


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_fresh_lists_and_reads_are_reused_and_notifications_invalidate_them(transport: str, mode: str) -> None:
    async with toolkit_client("cached", transport, mode) as client:
        for _ in range(3):
            await client.list_tools()
            assert (await client.read_text("data://clock")).startswith("read ")
        counts = await _asked(client)
        if mode == "modern":  # ttlMs 60 s: asked once each
            assert counts == {"tools/list": 1, "reads": 1}
        else:  # the handshake era has no caching hints: every call reaches the server
            assert counts == {"tools/list": 3, "reads": 3}
            return
        async with client.watch(tools=True, resource_uris=["data://clock"]) as watch:
            await client.call_tool("grow", {"name": "fresh"})
            assert (await watch.next(timeout=5))[0] == "notifications/tools/list_changed"
            assert "fresh" in [t.name for t in await client.list_tools()]  # the stale page was dropped
            await client.call_tool("touch", {})
            assert (await watch.next(timeout=5))[0] == "notifications/resources/updated"
            assert await client.read_text("data://clock") == "read 2"
        assert await _asked(client) == {"tools/list": 2, "reads": 2}


async def test_the_cache_can_be_turned_off() -> None:
    from support.toolkit import build

    async with Client(build("cached"), mode="modern", cache=False) as client:
        await client.read_text("data://clock")
        await client.read_text("data://clock")
        assert (await _asked(client))["reads"] == 2


def test_a_private_entry_is_never_served_to_another_identity_and_public_ones_are_shared() -> None:
    alice, bob = ResponseCache(identity="alice"), ResponseCache(identity="bob")
    shared_entries = alice._entries  # one store, two authorization contexts
    bob._entries = shared_entries
    private = {"contents": [{"uri": "u", "text": "alice's"}], "ttlMs": 60_000, "cacheScope": "private"}
    alice.put("resources/read", {"uri": "u"}, private)
    assert alice.get("resources/read", {"uri": "u"}) == private
    assert bob.get("resources/read", {"uri": "u"}) is None
    public = {"tools": [], "ttlMs": 60_000, "cacheScope": "public"}
    alice.put("tools/list", None, public)
    assert bob.get("tools/list", None) == public


def test_cache_rules_ttl_input_rounds_and_bounds() -> None:
    cache = ResponseCache(max_entries=2, max_bytes=10_000)
    cache.put("tools/list", None, {"tools": [], "ttlMs": 0})
    cache.put("tools/list", {"cursor": "a"}, {"tools": []})  # no hints: never stored
    cache.put("resources/read", {"uri": "x", "inputResponses": {}}, {"contents": [], "ttlMs": 1000})
    cache.put("tools/call", {"name": "x"}, {"content": [], "ttlMs": 1000})
    cache.put("resources/read", {"uri": "y"}, {"resultType": "input_required", "ttlMs": 1000})
    assert len(cache) == 0
    for i in range(5):
        cache.put("resources/read", {"uri": str(i)}, {"contents": [], "ttlMs": 60_000})
    assert len(cache) == 2 and cache.get("resources/read", {"uri": "4"}) is not None
    cache.put("resources/read", {"uri": "big"}, {"contents": [{"text": "x" * 20_000}], "ttlMs": 60_000})
    assert cache.get("resources/read", {"uri": "big"}) is None
    short = ResponseCache()
    short.put("resources/read", {"uri": "z"}, {"contents": [], "ttlMs": 1})
    time.sleep(0.01)
    assert short.get("resources/read", {"uri": "z"}) is None  # stale after ttlMs


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_retry_repeats_a_timed_out_safe_call_over_a_real_transport(
    transport: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The first call of each tool hangs until it times out: the read-only one is sent again and answers, the
    other's timeout goes to the caller and the server saw it once."""
    chain = [CallLogging(), Retry(attempts=3, backoff=0.01)]
    with caplog.at_level(logging.INFO, logger="mcpkit.client.calls"):
        async with toolkit_client("flaky", transport, mode, middleware=chain) as client:
            assert (await client.call_tool("look", {}, timeout=2.0)).text == "look: done"
            with pytest.raises(RequestTimeout):
                await client.call_tool("change", {}, timeout=2.0)
            assert (await client.call_tool("attempts", {})).data == {"look": 2, "change": 1}
    assert "tools/call failed (RequestTimeout); retrying" in caplog.text
    assert "tools/call failed after" in caplog.text and "tools/call ok in" in caplog.text


async def test_retry_repeats_safe_calls_only_and_logging_records_each_call(caplog: pytest.LogCaptureFixture) -> None:
    app = MCPKit("flaky")

    @app.tool(annotations={"readOnlyHint": True})
    def look() -> str:
        return "seen"

    @app.tool
    def change() -> str:
        return "changed"

    failures: dict[str, int] = {}

    async def drop_first_attempt(call: ClientCall, call_next: Any) -> Any:
        if call.attempt == 1:
            failures[call.method] = failures.get(call.method, 0) + 1
            raise ConnectionClosed("connection lost")
        return await call_next()

    chain = [CallLogging(), Retry(attempts=3, backoff=0.01), drop_first_attempt]
    with caplog.at_level(logging.INFO, logger="mcpkit.client.calls"):
        async with Client(app, middleware=chain) as client:
            assert [t.name for t in await client.list_tools()] == ["look", "change"]
            assert (await client.call_tool("look", {})).text == "seen"  # read-only: safe to repeat
            with pytest.raises(ConnectionClosed):
                await client.call_tool("change", {})  # not safe to repeat: the failure goes to the caller
    assert "tools/list ok" in caplog.text and "tools/call failed" in caplog.text
    with pytest.raises(ValueError):
        Retry(attempts=0)


async def test_a_client_middleware_is_an_async_function_whatever_its_parameters_are_named(tmp_path: Path) -> None:
    """The chain calls a middleware positionally, so ``async def mw(c, proceed)`` is one, at run time and for
    ``mypy --strict`` (whose ``ClientMiddleware`` protocol named the parameters ``call`` and ``call_next``)."""
    seen: list[str] = []

    async def timing(c: ClientCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
        seen.append(c.method)
        return await proceed()

    app = MCPKit("mw")

    @app.tool
    def look() -> str:
        return "seen"

    async with Client(app, middleware=[timing]) as client:
        assert (await client.call_tool("look")).text == "seen"
    assert "tools/call" in seen
    pytest.importorskip("mypy")
    program = tmp_path / "program.py"
    program.write_text(
        "from collections.abc import Awaitable, Callable\n"
        "from typing import Any\n\n"
        "from mcpkit import Client, MCPKit\n"
        "from mcpkit.client.middleware import ClientCall, Retry\n\n"
        "async def timing(c: ClientCall, proceed: Callable[[], Awaitable[Any]]) -> Any:\n"
        "    return await proceed()\n\n"
        "async def main() -> None:\n"
        '    async with Client(MCPKit("mw"), middleware=[Retry(), timing]) as client:\n'
        "        await client.list_tools()\n",
        encoding="utf-8",
    )
    proc = mypy_strict(program, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
