"""The refusal of a composed tool's arguments names the tool as the client called it: a mounted, imported, nested,
transformed or intercepted tool's error says ``m_t``, never the name its own server knows it by (a tool the
client cannot see, and cannot call by that name), through a real client in both eras."""

from typing import Annotated, Any

import pytest

from mcpkit import Client, Context, MCPKit, Tool
from mcpkit.server.dependencies import Depends
from mcpkit.server.transform import transform_tool
from support.toolkit import ERAS

pytestmark = pytest.mark.timeout(120)

WRONG = {  # arguments refused for a tool taking (a: int), and what the refusal says
    "unexpected": ({"a": 1, "zz": 2}, "'zz'"),
    "missing": ({}, "'a'"),
    "wrong type": ({"a": "not a number"}, "a: "),
}


def settings() -> str:
    return "settings"


def child(name: str, *, intercepted: bool = False) -> MCPKit:
    """A server with ``t(a: int)``, ``td`` (the same with a dependency), ``ts`` (made from a JSON Schema) and
    ``tt`` (a transform of ``t``); ``intercepted``: with an interceptor of its own (its calls go through its chain)."""
    app = MCPKit(name)

    @app.tool
    def t(a: int) -> int:
        return a

    @app.tool
    async def td(a: int, cfg: Annotated[str, Depends(settings)], ctx: Context) -> str:
        return f"{a} {cfg}"

    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    app.add_tool(Tool.from_schema("ts", schema, lambda arguments, ctx: arguments["a"]))
    app.add_tool(transform_tool(app.get_tool("t"), name="tt"))  # type: ignore[arg-type]
    if intercepted:

        async def passing(call: Any, call_next: Any) -> Any:
            return await call_next(call)

        app.add_interceptor(passing)
    return app


def composed() -> MCPKit:
    """A parent that mounts, imports, nests and transforms the tools of :func:`child`."""
    app = MCPKit("parent")
    app.mount(child("c1"), "m")
    app.import_server(child("c2"), "i")
    app.mount(child("c3", intercepted=True), "g")
    middle = MCPKit("middle")
    middle.mount(child("c4"), "m2")
    app.mount(middle, "m1")
    guarded = MCPKit("guarded")
    guarded.mount(child("c5", intercepted=True), "m4")
    guarded.add_interceptor(lambda call, call_next: call_next(call))
    app.mount(guarded, "m3")
    app.add_tool(transform_tool(app.get_tool("m_t"), name="renamed"))  # type: ignore[arg-type]
    return app


SERVED = {  # the name the client calls: the name its own server knows it by
    **{f"{prefix}_{tool}": tool for prefix in ("m", "i", "g", "m1_m2", "m3_m4") for tool in ("t", "td", "ts", "tt")},
    "renamed": "t",
}


@pytest.mark.parametrize("mode", ERAS)
async def test_a_composed_tools_argument_errors_name_the_tool_the_client_called(mode: str) -> None:
    async with Client(composed(), mode=mode) as client:
        listed = {t.name for t in await client.list_tools()}
        assert set(SERVED) <= listed
        for served, inner in SERVED.items():
            assert (await client.call_tool(served, {"a": 3})).is_error is False, served
            for case, (arguments, named) in WRONG.items():
                result = await client.call_tool(served, arguments)
                said = result.text
                assert result.is_error and f"tool {served!r}" in said and named in said, (served, case, said)
                assert f"tool {inner!r}" not in said, (served, case, said)
