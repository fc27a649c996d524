"""Registering a tool (``MCPKit.tool``, ``Tool.from_schema``): an ``x-mcp-header`` declaration that breaks a rule of
2026-07-28 is refused there, naming the tool and the rule, rather than listed for clients to drop or to refuse
calls of one by one."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import Field

from mcpkit import MCPKit, Tool

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
