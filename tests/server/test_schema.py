"""The scalar fast path of tool argument validation must agree with pydantic exactly: whatever it accepts,
pydantic accepts with the same values and types (anything else falls through to pydantic itself)."""

from __future__ import annotations

import itertools
import math
import typing
from typing import Any

import pytest

from mcpkit import Client, MCPKit
from mcpkit.protocol import types as t
from mcpkit.server.schema import FunctionInfo, fast_validate


def f1(s: str, i: int, x: float, b: bool) -> None: ...


def f2(s: str = "d", i: int | None = None, x: float | None = 1.5, b: bool = False) -> None: ...


def f3(a: int | None, n: float | None = None) -> None: ...


VALUES: list[Any] = ["a", "", "5", "1.5", "true", 0, 1, -3, 2**53 + 1, 1.0, 1.5, -0.0, True, False, None, [], {}]
MISSING = object()


@pytest.mark.parametrize("fn", [f1, f2, f3], ids=lambda f: f.__name__)
def test_fast_path_agrees_with_pydantic(fn: Any) -> None:
    info = FunctionInfo(fn, name=fn.__name__)
    assert info.fast_plan is not None, "a function of plain scalars takes the fast path"
    names = [p.name for p in info.params]
    accepted = 0
    for combo in itertools.product(*[[*VALUES, MISSING] for _ in names]):
        for extra in ({}, {"zz": 1}):
            args = {k: v for k, v in zip(names, combo, strict=True) if v is not MISSING} | extra
            fast = fast_validate(info.fast_plan, args)
            if fast is None:
                continue  # the fast path declined: pydantic decides, as before
            accepted += 1
            ref = info.model.model_validate(args)  # must not raise
            for k in names:
                want = getattr(ref, k)
                assert fast[k] == want and type(fast[k]) is type(want), (fn.__name__, args, k)
    assert accepted > 0


def f4(text: str, n: int = 3, x: float | None = None, b: bool = False, s: str | None = "q", y: float = 2) -> None:
    """Do it.

    Args:
        text: the text
        x: a number or nothing
    """


def f5() -> None: ...


@pytest.mark.parametrize("fn", [f1, f2, f3, f4, f5], ids=lambda f: f.__name__)
def test_fast_input_schema_is_the_one_pydantic_generates(fn: Any) -> None:
    info = FunctionInfo(fn, name=fn.__name__)
    assert info.fast_plan is not None
    assert info.input_schema == info.model_input_schema()


def test_a_non_finite_default_goes_to_pydantic() -> None:
    def f(x: float = float("inf")) -> None: ...

    info = FunctionInfo(f, name="f")
    assert info.input_schema == info.model_input_schema()


@pytest.mark.parametrize("tp", [int, float, bool])
def test_scalar_return_schema_and_values_are_pydantics(tp: type) -> None:
    from pydantic import ConfigDict, TypeAdapter

    from mcpkit.server.schema import ReturnInfo, json_schema_of

    fast = ReturnInfo(tp)
    assert fast.structured and fast.adapter is None
    adapter = TypeAdapter(tp, config=ConfigDict(allow_inf_nan=False))  # (JSON has no NaN or Infinity)
    inner = json_schema_of(adapter, mode="serialization")
    assert fast.output_schema == {"type": "object", "properties": {"result": inner}, "required": ["result"]}
    for value in [0, 1, -7, 2**70, 1.5, -0.0, float("inf"), float("nan"), True, False, "3", "x", None]:
        try:
            want = {"result": adapter.dump_python(adapter.validate_python(value), mode="json")}
        except Exception as exc:
            with pytest.raises(type(exc)):
                ReturnInfo(tp).structure(value)
            continue
        got = ReturnInfo(tp).structure(value)
        assert got == want or (got != got and want != want), (tp, value)  # NaN is never equal to itself
        assert [type(v) for v in got.values()] == [type(v) for v in want.values()], (tp, value)


def test_a_server_of_scalar_tools_never_imports_pydantic(tmp_path: Any) -> None:
    """Serving, listing and calling plain-scalar tools stays off pydantic (its import costs ~12 MB and ~100 ms)."""
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "probe.py"
    script.write_text(
        textwrap.dedent(
            """
            import asyncio, json, sys
            from mcpkit import MCPKit

            app = MCPKit("probe")

            @app.tool
            async def echo(text: str, times: int = 1) -> str:
                return text * times

            @app.tool
            def add(a: int, b: int) -> int:
                return a + b

            class Out:
                def __init__(self):
                    self.got = []
                async def send(self, data, msg=None):
                    self.got.append(json.loads(data))

            async def main():
                out = Out()
                peer = app.create_session(out).peer
                frames = [
                    {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
                     "capabilities": {}, "clientInfo": {"name": "p", "version": "1"}}},
                    {"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                    {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                     "params": {"name": "echo", "arguments": {"text": "ab", "times": 2}}},
                    {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "add",
                     "arguments": {"a": 2, "b": 3}}},
                ]
                for f in frames:
                    answer = await peer.handle(__import__("mcpkit.protocol.jsonrpc", fromlist=["parse"]).parse(
                        json.dumps(f).encode()), out)
                    if answer is not None:  # (handle returns the answer: see Peer.handle)
                        await out.send(answer.data, answer)
                by_id = {m["id"]: m for m in out.got}
                assert [t["name"] for t in by_id[1]["result"]["tools"]] == ["echo", "add"], by_id
                assert by_id[1]["result"]["tools"][1]["outputSchema"]["properties"]["result"] == {"type": "integer"}
                assert by_id[2]["result"]["content"][0]["text"] == "abab", by_id
                assert by_id[3]["result"]["structuredContent"] == {"result": 5}, by_id
                print(sorted(m for m in sys.modules if m.split(".")[0] in ("pydantic", "pydantic_core")))

            asyncio.run(main())
            """
        )
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


class _Address(typing.TypedDict):
    street: str
    number: int


class _Parcel(typing.TypedDict, total=False):
    to: typing.Required[_Address]
    weight: float
    tags: list[_Address]


async def test_typing_typeddicts_are_tool_parameters_and_results_on_every_python() -> None:
    """``typing.TypedDict`` (what users import; pydantic reads only ``typing_extensions``' before Python 3.12), as a
    parameter, nested, in a list, optional, and as the return annotation: schemas and validation as documented, not
    an empty input schema and an internal error on every call."""
    app = MCPKit("typeddicts")

    @app.tool
    def ship(parcel: _Parcel, back: _Address | None = None) -> _Parcel:
        return parcel

    async with Client(app) as client:
        (tool,) = await client.list_tools()
        parcel = tool.input_schema["$defs"]["_Parcel"]
        assert parcel["required"] == ["to"] and set(parcel["properties"]) == {"to", "weight", "tags"}
        assert tool.output_schema is not None and tool.output_schema["required"] == ["to"]
        sent = {"to": {"street": "Main", "number": 1}, "tags": [{"street": "Side", "number": 2}]}
        result = await client.call_tool("ship", {"parcel": sent})
        assert not result.is_error and result.structured == sent
        bad = await client.call_tool("ship", {"parcel": {"to": {"street": "Main", "number": "one"}}})
        assert bad.is_error and "parcel.to.number" in (bad.text or "")


async def test_a_non_finite_result_is_an_error_not_structured_content_that_breaks_the_output_schema() -> None:
    """JSON has no NaN or Infinity: a tool declared ``-> float`` (or ``list[float]``, ``dict[str, float]``) that
    returns one gets an error result, not ``structuredContent`` with ``null`` where its outputSchema says number
    (which the official SDK's client and mcpkit's both refuse, failing the call with the server's contract
    broken). Finite values are unchanged."""
    app = MCPKit("non-finite")

    @app.tool
    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else math.nan

    @app.tool
    def scaled(factor: float) -> list[float]:
        return [1.0 * factor, math.inf * factor]

    @app.tool
    def ratios(total: float) -> dict[str, float]:
        return {"share": 1 / total if total else math.nan}

    async with Client(app) as client:
        assert (await client.call_tool("mean", {"values": [1, 2]})).data == 1.5
        assert (await client.call_tool("ratios", {"total": 4})).data == {"share": 0.25}
        for name, arguments in [("mean", {"values": []}), ("scaled", {"factor": 2}), ("ratios", {"total": 0})]:
            result = await client.call_tool(name, arguments)
            assert result.is_error and result.structured is None, (name, result)


def test_a_parameter_type_that_names_a_local_class_says_why_it_cannot_be_resolved() -> None:
    """Under ``from __future__ import annotations`` (this module) an annotation is text, resolved in the module's
    globals: a model defined inside a function cannot be found. The error says so and how to fix it, rather than
    that a pydantic model "cannot become a JSON Schema"."""
    from pydantic import BaseModel

    class Query(BaseModel):
        text: str

    def search(query: Query) -> str:
        return query.text

    with pytest.raises(TypeError) as caught:
        MCPKit("local-types").add_tool(search)
    message = str(caught.value)
    assert "parameter 'query'" in message and "'Query'" in message
    assert "from __future__ import annotations" in message and "module level" in message
    assert "cannot become a JSON Schema" not in message


def test_a_positional_only_parameter_is_refused_where_the_function_is_registered() -> None:
    """MCP passes arguments by name: a positional-only parameter (before ``/``) could never be given, and every
    call failed with an internal error. Registering such a tool or prompt is a ``TypeError`` naming it."""

    def add(a: int, /, b: int) -> int:
        return a + b

    app = MCPKit("positional")
    for register in (app.add_tool, app.add_prompt):
        with pytest.raises(TypeError, match=r"add: parameter 'a' is positional-only .* make it an ordinary"):
            register(add)


async def test_a_partial_is_described_by_the_function_it_wraps() -> None:
    """A ``functools.partial`` registered as a tool is described by its function's docstring (what the model reads),
    not by the docstring of ``functools.partial`` itself."""
    import functools

    def multiply(a: int, b: int) -> int:
        """Multiply a by b.

        Args:
            a: The first factor.
        """
        return a * b

    app = MCPKit("partials")
    app.add_tool(functools.partial(multiply, b=3), name="triple")
    async with Client(app) as client:
        (tool,) = await client.list_tools()
        assert tool.description == "Multiply a by b."
        assert tool.input_schema["properties"]["a"]["description"] == "The first factor."
        assert (await client.call_tool("triple", {"a": 2})).data == 6


def test_a_generator_function_is_refused_where_it_is_registered() -> None:
    """A generator function (``yield``, async or not) gives a generator object, not a result: it used to be
    accepted and every call answered with the generator's repr (``"<generator object ... at 0x...>"``). Registering
    one as a tool or prompt is a ``TypeError`` saying to return the values instead."""

    def numbers() -> typing.Iterator[int]:
        yield 1

    async def words() -> typing.AsyncIterator[str]:
        yield "a"

    app = MCPKit("generators")
    for fn in (numbers, words):
        for register in (app.add_tool, app.add_prompt):
            with pytest.raises(TypeError, match=r"is a generator function .* return"):
                register(fn)


async def test_a_bare_dict_result_is_the_object_like_typing_dict_and_dict_of_str() -> None:
    """``-> dict`` means ``dict[str, Any]``: its outputSchema is an object schema and ``structuredContent`` is the
    returned dict itself, exactly as for ``-> typing.Dict`` and ``-> dict[str, Any]`` (not ``{"result": {...}}``
    for the bare one alone). Non-str keys and optional dicts are still wrapped."""
    app = MCPKit("dicts")

    @app.tool
    def bare() -> dict:  # type: ignore[type-arg]
        return {"a": 1}

    @app.tool
    def legacy() -> typing.Dict:  # type: ignore[type-arg]  # noqa: UP006
        return {"a": 1}

    @app.tool
    def keyed() -> dict[str, Any]:
        return {"a": 1}

    @app.tool
    def maybe() -> dict | None:  # type: ignore[type-arg]
        return {"a": 1}

    async with Client(app) as client:
        schemas = {tool.name: tool.output_schema for tool in await client.list_tools()}
        object_schema = {"type": "object", "additionalProperties": True}
        assert schemas["bare"] == schemas["legacy"] == schemas["keyed"] == object_schema
        assert schemas["maybe"] is not None and schemas["maybe"]["required"] == ["result"]
        for name in ("bare", "legacy", "keyed"):
            result = await client.call_tool(name, {})
            assert not result.is_error and result.structured == {"a": 1}, name
        assert (await client.call_tool("maybe", {})).structured == {"result": {"a": 1}}


async def test_a_return_annotation_of_content_blocks_gets_no_output_schema() -> None:
    """A tool annotated with content blocks (``-> ContentBlock``, ``-> list[ContentBlock]``, a list of a union of
    content types, optional or in a ``Sequence``) returns its content: it lists no outputSchema and its result is
    that content, with no structuredContent. Before, such a tool declared ``{"result": ...}`` as its outputSchema
    and then sent no structuredContent, breaking the spec's MUST (mcpkit's client raised ToolOutputError). A list
    that may hold content blocks among other values (``list[int | TextContent]``) is content too: its value can
    be all content blocks, which no structured result could then carry. Lists of plain values keep their schema."""
    app = MCPKit("content-annotations")
    hello = t.TextContent(text="hello")
    dot = t.ImageContent(data="iVBORw0KGgo=", mime_type="image/png")

    @app.tool
    def one() -> t.ContentBlock:
        return hello

    @app.tool
    def blocks() -> list[t.ContentBlock]:
        return [hello, dot]

    @app.tool
    def union_list() -> list[t.TextContent | t.ImageContent]:
        return [hello, dot]

    @app.tool
    def maybe_blocks() -> list[t.ContentBlock] | None:
        return [hello]

    @app.tool
    def sequence() -> typing.Sequence[t.ContentBlock]:
        return [hello]

    @app.tool
    def mixed() -> list[int | t.TextContent]:
        return [hello]

    @app.tool
    def numbers() -> list[int]:
        return [1, 2]

    async with Client(app) as client:
        schemas = {tool.name: tool.output_schema for tool in await client.list_tools()}
        assert schemas.pop("numbers") is not None
        assert schemas == dict.fromkeys(schemas, None) and len(schemas) == 6, schemas
        for name in schemas:
            result = await client.call_tool(name, {})
            assert not result.is_error and result.structured is None, (name, result)
            assert result.content[0] == hello, (name, result)
        assert [c.type for c in (await client.call_tool("blocks", {})).content] == ["text", "image"]
        assert (await client.call_tool("numbers", {})).data == [1, 2]
