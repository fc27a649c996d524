"""Era selection by the client, and subscriptions/listen, over memory and stdio."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import textwrap
from typing import Any

import orjson
import pytest

from mcpkit.client.lowlevel import ClientSession
from mcpkit.protocol import versions
from mcpkit.protocol.errors import MCPError
from mcpkit.server.lowlevel import Server
from mcpkit.transports.memory import create_memory_pair
from mcpkit.transports.stdio import StdioClientTransport, StdioServer
from support.core import CORE_SERVER, load_core_server, open_session


@pytest.mark.req("M039", "M044")
async def test_auto_falls_back_to_initialize_against_a_legacy_only_server() -> None:
    legacy = Server("legacy", versions=versions.HANDSHAKE_VERSIONS)
    wire: list[Any] = []
    c, s = create_memory_pair(tap=lambda d, b: wire.append(orjson.loads(b)))
    task = asyncio.create_task(legacy.serve(s))
    async with ClientSession(c, mode="auto") as cs:
        assert cs.protocol_version == "2025-11-25"
    assert [m.get("method") for m in wire if "method" in m][:3] == [
        "server/discover",
        "initialize",
        "notifications/initialized",
    ]
    await asyncio.wait_for(task, 5)


async def test_auto_falls_back_when_the_probe_times_out() -> None:
    """A legacy server that ignores unknown methods silently: the probe times out, then initialize works."""
    c, s = create_memory_pair()

    async def silent_legacy() -> None:
        while (data := await s.receive()) is not None:
            m = orjson.loads(data)
            if m.get("method") == "initialize":
                r = {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "old", "version": "1"}}
                await s.send(orjson.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}))

    task = asyncio.create_task(silent_legacy())
    async with ClientSession(c, mode="auto", discover_timeout=0.3) as cs:
        assert cs.protocol_version == "2025-06-18"
    task.cancel()


async def test_a_modern_error_means_modern_and_the_client_retries_a_supported_version() -> None:
    """-32022 with data.supported is a modern answer: no fallback to initialize; retry with what is supported."""
    c, s = create_memory_pair()
    seen: list[str] = []

    async def picky_modern() -> None:
        while (data := await s.receive()) is not None:
            m = orjson.loads(data)
            if "id" not in m:
                continue
            seen.append(m["method"])
            v = m.get("params", {}).get("_meta", {}).get("io.modelcontextprotocol/protocolVersion")
            if m["method"] == "initialize" or v != "2026-07-28":
                err = {"code": -32022, "message": "unsupported", "data": {"supported": ["2026-07-28"], "requested": v}}
                await s.send(orjson.dumps({"jsonrpc": "2.0", "id": m["id"], "error": err}))
            else:
                r = {
                    "resultType": "complete",
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": {},
                    "ttlMs": 0,
                    "cacheScope": "public",
                }
                await s.send(orjson.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}))

    task = asyncio.create_task(picky_modern())
    async with ClientSession(c, mode="auto") as cs:
        assert cs.protocol_version == "2026-07-28"
    assert "initialize" not in seen
    task.cancel()


@pytest.mark.parametrize("transport", ["memory", "stdio"])
async def test_pinned_versions_and_modes(transport: str) -> None:
    for v in versions.ALL_VERSIONS:
        async with open_session(transport, protocol_version=v) as cs:
            assert cs.protocol_version == v
            assert (await cs.call_tool("echo", {"text": v})).content[0].text == v  # type: ignore[union-attr]


@contextlib.asynccontextmanager
async def _stdio_with_trigger() -> Any:
    """A stdio server whose `touch` tool changes the tool list and a resource (to drive listen streams)."""
    code = textwrap.dedent(
        f"""
        import sys; sys.path.insert(0, {str(CORE_SERVER.parent)!r})
        from core_server import server, TOOLS

        @server.handler("resources/subscribe")
        async def _sub(ctx, params):
            return {{}}

        orig = server._handlers["tools/call"]
        async def call(ctx, params):
            if params.get("name") == "touch":
                TOOLS.append({{"name": "t%d" % len(TOOLS), "inputSchema": {{"type": "object"}}}})
                await server.notify_list_changed("tools")
                await server.notify_resource_updated("test://hello")
                return {{"content": [{{"type": "text", "text": "touched"}}]}}
            return await orig(ctx, params)
        server.set_handler("tools/call", call)
        server.run()
        """
    )
    t = StdioClientTransport(StdioServer([sys.executable, "-c", code]))
    await t.start()
    async with ClientSession(t, mode="modern") as cs:
        yield cs


@pytest.mark.req("M055", "S025")
@pytest.mark.parametrize("transport", ["memory", "stdio"])
async def test_subscriptions_listen_streams_notifications_with_the_subscription_id(transport: str) -> None:
    if transport == "memory":
        mod = load_core_server()

        async def touch() -> None:
            await mod.server.notify_list_changed("tools")
            await mod.server.notify_resource_updated("test://hello")
            await mod.server.notify_resource_updated("test://other")

        ctx = open_session("memory", server_mod=mod, mode="modern")
    else:
        ctx = _stdio_with_trigger()
    async with ctx as cs:
        if transport == "stdio":

            async def touch() -> None:
                await cs.call_tool("touch")

        async with cs.listen(tools=True, prompts=True, resource_uris=["test://hello"]) as sub:
            # prompts are not offered by this server: the acknowledgement leaves them out
            assert sub.acknowledged == {"toolsListChanged": True, "resourceSubscriptions": ["test://hello"]}
            await touch()
            got = [await sub.next(timeout=5), await sub.next(timeout=5)]
            methods = sorted(m for m, _ in got)
            assert methods == ["notifications/resources/updated", "notifications/tools/list_changed"]
            for _, params in got:
                assert params["_meta"]["io.modelcontextprotocol/subscriptionId"] == sub.id
            with pytest.raises(asyncio.TimeoutError):
                await sub.next(timeout=0.3)  # test://other was not subscribed
        # leaving the block cancelled the listen request; the session goes on
        assert (await cs.call_tool("echo", {"text": "x"})).content[0].text == "x"  # type: ignore[union-attr]


async def test_server_shutdown_ends_listen_streams_gracefully() -> None:
    mod = load_core_server()
    async with open_session("memory", server_mod=mod, mode="modern") as cs, cs.listen(tools=True) as sub:
        await mod.server.close_listeners()
        items = [item async for item in sub]
        assert items == []
        result = await asyncio.wait_for(sub._task, 5)
        assert result["_meta"]["io.modelcontextprotocol/subscriptionId"] == sub.id
        assert result["resultType"] == "complete"


_V = "io.modelcontextprotocol/protocolVersion"
_CAPS = "io.modelcontextprotocol/clientCapabilities"
_INFO = "io.modelcontextprotocol/clientInfo"
_LEVEL = "io.modelcontextprotocol/logLevel"


class _InfoDict(dict[str, Any]):
    """A dict subclass (what a caller of modern_context may pass; orjson never makes one)."""


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ({_V: "2026-07-28", _CAPS: {"x": {}}, _INFO: {"name": "c"}}, ({"x": {}}, {"name": "c"}, None)),
        ({_V: "2026-07-28", _CAPS: {}}, ({}, None, None)),
        ({_V: "2026-07-28", _CAPS: {}, _INFO: "c"}, ({}, None, None)),
        ({_V: "2026-07-28", _CAPS: {}, _INFO: _InfoDict(name="c")}, ({}, {"name": "c"}, None)),
        ({_V: "2026-07-28", _CAPS: {}, _LEVEL: "info"}, ({}, None, "info")),
        ({_V: "2026-07-28", _CAPS: {}, _LEVEL: None}, ({}, None, None)),
        ({_V: "2026-07-28", _CAPS: {}, _LEVEL: "loud"}, "invalid log level"),
        ({_V: "2026-07-28"}, "clientCapabilities"),
        ({_V: "2026-07-28", _CAPS: []}, "clientCapabilities"),
        ({_CAPS: {}}, "protocolVersion"),
        ({_V: ["2026-07-28"], _CAPS: {}}, "protocolVersion"),
        ({_V: 20260728, _CAPS: {}}, "protocolVersion"),
        ({_V: "2099-01-01", _CAPS: {}}, "Unsupported protocol version"),
        ({_V: "2025-11-25", _CAPS: {}}, "Unsupported protocol version"),
        (None, "protocolVersion"),
        ({}, "protocolVersion"),
    ],
)
def test_a_modern_requests_meta_is_read_or_refused_naming_what_is_wrong(meta: Any, expected: Any) -> None:
    """Server.modern_context reads the usual _meta with one test per key and everything else fully: the same
    outcome either way (the revision's features, the capabilities, the client info only when it is an object,
    the log level; or the error that names what is wrong)."""
    server = Server("s")
    if isinstance(expected, str):
        with pytest.raises(MCPError) as err:
            server.modern_context(meta)
        assert expected in str(err.value)
        return
    feats, caps, info, level = server.modern_context(meta)
    assert feats.version == "2026-07-28" and feats.modern
    assert (caps, info, level) == expected
    if meta.get(_INFO) is not None and info is not None:
        assert info is meta[_INFO]


def test_a_server_whose_modern_versions_were_replaced_reads_the_new_ones() -> None:
    server = Server("s")
    meta = {_V: "2026-07-28", _CAPS: {}}
    assert server.modern_context(meta)[0].version == "2026-07-28"
    server.modern_versions = ()
    with pytest.raises(MCPError, match="Unsupported protocol version"):
        server.modern_context(meta)
