"""Registering a tool (``MCPKit.tool``, ``Tool.from_schema``): an ``x-mcp-header`` declaration that breaks a rule of
2026-07-28 is refused there, naming the tool and the rule, rather than listed for clients to drop or to refuse
calls of one by one."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any

import pytest
from pydantic import Field

from mcpkit import Client, Context, MCPKit, Tool
from mcpkit.protocol.errors import ConnectionClosed

SAFE = 2**53 - 1


async def _echo(arguments: dict[str, Any], ctx: Any) -> str:
    return "ok"


def _shard_schema(**bounds: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"shard": {"type": "integer", "x-mcp-header": "Shard", **bounds}}}


@pytest.mark.parametrize(
    "bounds",
    [
        {"maximum": 2**64},
        {"minimum": -(2**63)},
        {"minimum": 0, "maximum": SAFE + 1},
        {"exclusiveMaximum": 2**53 + 1},
        {"exclusiveMinimum": -(2**53) - 1},
        {"maximum": 1e300},
        {"enum": [1, 2**60]},
        {"const": -(2**60)},
    ],
)
def test_an_integer_header_whose_declared_range_reaches_beyond_the_safe_range_is_refused_at_registration(
    bounds: dict[str, Any],
) -> None:
    """Values beyond ±(2^53-1) cannot travel exactly in an Mcp-Param header (a JavaScript intermediary reads
    another number): a declaration admitting them by its bounds (or listing one) is refused when registered."""
    with pytest.raises(ValueError) as caught:
        Tool.from_schema("pick", _shard_schema(**bounds), _echo)
    message = str(caught.value)
    assert "'pick'" in message and "'Shard'" in message and "2^53" in message, message


@pytest.mark.parametrize(
    "bounds",
    [
        {},
        {"minimum": -SAFE, "maximum": SAFE},
        {"exclusiveMinimum": -(2**53), "exclusiveMaximum": 2**53},
        {"minimum": 0, "maximum": 10, "enum": [1, 2, 3]},
    ],
)
def test_an_integer_header_bounded_within_the_safe_range_or_unbounded_is_registered(bounds: dict[str, Any]) -> None:
    """Bounds within the range (or none: each value is then checked when called) are a valid declaration."""
    tool = Tool.from_schema("pick", _shard_schema(**bounds), _echo)
    assert dict(tool.param_headers or {}) == {"shard": ("shard",)}


def test_a_decorated_tool_whose_header_parameter_is_bounded_beyond_the_safe_range_is_refused() -> None:
    app = MCPKit("bounds")
    with pytest.raises(ValueError, match=r"tool 'pick'.*'Shard'.*2\^53"):

        @app.tool
        def pick(shard: Annotated[int, Field(ge=0, le=2**64, json_schema_extra={"x-mcp-header": "Shard"})]) -> int:
            return shard

    assert app.get_tool("pick") is None

    @app.tool
    def within(shard: Annotated[int, Field(ge=0, le=SAFE, json_schema_extra={"x-mcp-header": "Shard"})]) -> int:
        return shard

    tool = app.get_tool("within")
    assert tool is not None and dict(tool.param_headers or {}) == {"shard": ("shard",)}


@pytest.mark.parametrize(
    ("prop", "rule"),
    [
        ({"type": "number", "x-mcp-header": "N"}, "string, integer or boolean"),
        ({"type": "string", "x-mcp-header": "Bad Name"}, "not a valid header name token"),
    ],
)
def test_a_header_declaration_clients_would_drop_the_tool_for_is_refused_at_registration(
    prop: dict[str, Any], rule: str
) -> None:
    """Conforming clients leave out a tool whose x-mcp-header breaks a rule of the spec; the server said nothing,
    so the tool vanished from every client's list. Registering it now fails, naming the rule."""
    schema = {"type": "object", "properties": {"n": prop}}
    with pytest.raises(ValueError, match=rule):
        Tool.from_schema("dropped", schema, _echo)


def test_a_decorated_tool_with_a_number_header_parameter_is_refused_at_registration() -> None:
    app = MCPKit("rules")
    with pytest.raises(ValueError, match=r"tool 'dropped'.*string, integer or boolean"):

        @app.tool
        def dropped(n: Annotated[float, Field(json_schema_extra={"x-mcp-header": "N"})]) -> float:
            return n


async def test_a_tool_waiting_on_the_client_when_its_session_ends_is_not_an_internal_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A session that ends while a tool awaits the client (here ``ctx.sample``: the client goes away) is normal:
    the tool's ``ConnectionClosed`` is logged at INFO, with no traceback and no ERROR (before: ``ERROR tool 'ask'
    failed`` with a traceback, and "an internal error occurred" to whoever could still read the answer). A
    ``ConnectionClosed`` of a connection the tool opened itself (its own Client, closed) is still
    the tool's failure: logged as an error, an ``isError`` result."""
    app = MCPKit("asks")
    asked = asyncio.Event()
    seen: list[BaseException] = []

    @app.tool
    async def ask(ctx: Context) -> str:
        try:
            await ctx.sample("anyone there?")
        except BaseException as exc:
            seen.append(exc)
            raise
        return "answered"

    other = MCPKit("other")
    other.tool(lambda: "pong", name="ping")

    @app.tool
    async def relay() -> str:
        own = Client(other)
        async with own:
            pass
        await own.call_tool("ping", {})  # its own connection, closed: ConnectionClosed
        return "unreachable"

    async def never_answer(params: Any) -> str:
        asked.set()
        await asyncio.Event().wait()
        return "never"

    caplog.set_level(logging.DEBUG, logger="mcpkit")
    async with Client(app, sampling_handler=never_answer, protocol_version="2025-11-25") as client:
        relayed = await asyncio.wait_for(client.call_tool("relay", {}), 30)
        assert relayed.is_error and "internal error" in relayed.text
        assert any(r.levelno == logging.ERROR and "relay" in r.getMessage() for r in caplog.records)
        caplog.clear()
        call = asyncio.create_task(client.call_tool("ask", {}))
        await asyncio.wait_for(asked.wait(), 10)
    call.cancel()  # (the client is closed: what its call gets is not the point here)
    await asyncio.gather(call, return_exceptions=True)
    for _ in range(100):  # (the server side finishes the tool after the client is gone: bounded wait)
        if any("ask" in r.getMessage() and "session" in r.getMessage() for r in caplog.records):
            break
        await asyncio.sleep(0.05)
    assert seen and isinstance(seen[0], ConnectionClosed)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    ended = [r for r in caplog.records if "ask" in r.getMessage() and "session" in r.getMessage()]
    assert ended and ended[0].levelno == logging.INFO and ended[0].exc_info is None, caplog.records
