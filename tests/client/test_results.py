"""What a call gives back is typed past the payload: ``ToolResult[T]`` with ``result_type=T``; the ``data`` of a
failed call raises ``ToolCallError`` (the error result stays readable) instead of being the error text;
``server_info`` is typed (and still the dict the server sent); ``.text`` where a result is mostly text. The static
side is checked with ``mypy --strict`` on a program that uses them."""

from __future__ import annotations

import contextlib
import sys
import textwrap
import typing
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from mcpkit import (
    Client,
    Context,
    InvalidServerResult,
    MCPError,
    MCPKit,
    ResultType,
    ToolCallError,
    ToolError,
    ToolOutputError,
)
from mcpkit.client.client import ServerInfo
from support.paths import SERVERS
from support.typecheck import mypy_strict, pyright_problems, pyright_revealed, pyright_strict, revealed_types

ERAS = ("handshake", "modern")


class Seat(BaseModel):
    row: int
    seat: str


def make_app() -> MCPKit:
    app = MCPKit("results", "2.1.0", title="Results")

    @app.tool
    def double(n: int) -> int:
        """Twice n."""
        return 2 * n

    @app.tool
    def book(row: int) -> Seat:
        """A seat."""
        if row > 30:
            raise ToolError(f"row {row} does not exist")
        return Seat(row=row, seat="A")

    @app.resource("notes://{name}")
    def note(name: str) -> str:
        return f"note {name}"

    @app.prompt
    def review(code: str) -> str:
        """Review code."""
        return f"Please review:\n{code}"

    @app.tool
    async def summarize(text: str, ctx: Context) -> str:
        """Sample a summary."""
        return (await ctx.sample(f"Summarize: {text}")).text

    return app


@pytest.mark.parametrize("mode", ERAS)
async def test_data_of_a_failed_call_raises_tool_call_error_and_the_result_stays_readable(mode: str) -> None:
    async with Client(make_app(), mode=mode) as client:  # type: ignore[arg-type]
        bad = await client.call_tool("double", {"n": "many"})
        assert bad.is_error and "Invalid arguments for tool 'double'" in bad.text
        with pytest.raises(ToolCallError) as caught:
            _ = bad.data
        assert caught.value.result is bad and "tool 'double' failed: Invalid arguments" in str(caught.value)
        refused = await client.call_tool("book", {"row": 99}, result_type=Seat)
        with pytest.raises(ToolCallError, match="row 99 does not exist"):
            _ = refused.data
        assert refused.text == "row 99 does not exist"
        assert (await client.call_tool("double", {"n": 4})).data == 8


@pytest.mark.parametrize("mode", ERAS)
async def test_result_type_gives_data_of_that_type(mode: str) -> None:
    async with Client(make_app(), mode=mode) as client:  # type: ignore[arg-type]
        result = await client.call_tool("book", {"row": 3}, result_type=Seat)
        assert result.data == Seat(row=3, seat="A") and isinstance(result.data, Seat)


class SeatDict(typing.TypedDict):
    row: int
    seat: typing.NotRequired[str]


class Booking(typing.TypedDict):
    seats: list[SeatDict]


@pytest.mark.parametrize("mode", ERAS)
async def test_result_type_takes_a_typing_typeddict_on_every_python(mode: str) -> None:
    """The guide's ``result_type=`` a TypedDict: one written with ``typing.TypedDict`` (nested, with a
    ``NotRequired`` key) validates on Python 3.11 too, where pydantic reads only ``typing_extensions`` ones."""
    async with Client(make_app(), mode=mode) as client:  # type: ignore[arg-type]
        result = await client.call_tool("book", {"row": 3}, result_type=SeatDict)
        assert result.data == {"row": 3, "seat": "A"}
        both = await client.call_tool("double", {"n": 2}, result_type=dict[str, Booking] | int)
        assert both.data == 4
        with pytest.raises(ToolOutputError, match="result_type=Booking"):
            await client.call_tool("book", {"row": 3}, result_type=Booking)


@pytest.mark.parametrize("mode", ERAS)
async def test_server_info_is_a_typed_implementation(mode: str) -> None:
    async with Client(make_app(), mode=mode) as client:  # type: ignore[arg-type]
        info = client.server_info
        assert isinstance(info, ServerInfo)
        assert (info.name, info.version, info.title) == ("results", "2.1.0", "Results")
        assert info == client.session.server_info == {"name": "results", "version": "2.1.0", "title": "Results"}
        assert info["name"] == "results"  # still the dict the server sent


@pytest.mark.parametrize("mode", ERAS)
async def test_text_shortcuts_where_a_result_is_mostly_text(mode: str) -> None:
    async with Client(make_app(), mode=mode, sampling_handler=lambda p: "short") as client:  # type: ignore[arg-type]
        assert (await client.read_resource("notes://a")).text == "note a"
        assert (await client.get_prompt("review", {"code": "x = 1"})).text == "Please review:\nx = 1"
        assert (await client.call_tool("summarize", {"text": "long"})).text == "short"  # CreateMessageResult.text


def test_the_typed_surface_as_a_type_checker_sees_it(tmp_path: Path) -> None:
    """``mypy --strict`` reveals the types a new user's program relies on (no cast, no type: ignore)."""
    pytest.importorskip("mypy")
    program = tmp_path / "program.py"
    program.write_text(
        textwrap.dedent(
            """
            from dataclasses import dataclass

            from pydantic import BaseModel

            from mcpkit import Client, Context, ElicitationParams, MCPKit, SamplingParams

            class Seat(BaseModel):
                row: int

            @dataclass
            class Answer:
                ok: bool

            app = MCPKit("x")

            @app.tool
            async def tool(ctx: Context) -> str:
                yes = await ctx.elicit("Delete?", bool)
                if yes.action == "accept":
                    reveal_type(yes.data)
                form = await ctx.elicit("Form?", Answer)
                if form.accepted:
                    reveal_type(form.data)
                reveal_type(ctx.headers)
                return "ok"

            async def llm(params: SamplingParams) -> str:
                reveal_type(params.max_tokens)
                return params.text

            def user(params: ElicitationParams) -> dict[str, object]:
                return {"ok": True}

            async def main() -> None:
                async with Client(app, sampling_handler=llm, elicitation_handler=user) as client:
                    seat = await client.call_tool("book", {"row": 1}, result_type=Seat)
                    reveal_type(seat.data)
                    seats = await client.call_tool("list", result_type=list[Seat])
                    reveal_type(seats.data)
                    reveal_type(client.server_info)
                    reveal_type((await client.read_resource("a://b")).text)
            """
        )
    )
    proc = mypy_strict(program, tmp_path)
    revealed = revealed_types(proc.stdout)
    assert "error:" not in proc.stdout, proc.stdout
    assert revealed == [
        "bool",
        "program.Answer",
        "mcpkit.hosting.RequestHeaders | None",
        "int",
        "program.Seat",
        "list[program.Seat]",
        "mcpkit.client.handlers.ServerInfo | None",
        "str",
    ], proc.stdout


@pytest.mark.parametrize("mode", ERAS)
async def test_result_type_of_a_special_form_validates_with_or_without_the_result_type_wrapper(mode: str) -> None:
    """``int | None`` and ``Literal[...]`` are no classes: ``ResultType[...]`` carries them to a type checker, and
    at run time a call takes them bare or wrapped alike (the wrapper is the form itself)."""
    assert ResultType[int | None] == int | None
    async with Client(make_app(), mode=mode) as client:  # type: ignore[arg-type]
        for result_type in (int | None, ResultType[int | None], ResultType[typing.Literal[4, 6]]):
            assert (await client.call_tool("double", {"n": 2}, result_type=result_type)).data == 4
        with pytest.raises(ToolOutputError, match="does not fit result_type"):
            await client.call_tool("double", {"n": 1}, result_type=ResultType[typing.Literal[4, 6]])


RESULT_TYPES_PROGRAM = """
from typing import Literal

from pydantic import BaseModel

from mcpkit import Client, MultiClient, ResultType

class Seat(BaseModel):
    row: int

async def main(client: Client, many: MultiClient) -> None:
    reveal_type((await client.call_tool("t", result_type=Seat)).data)
    reveal_type((await client.call_tool("t", result_type=list[Seat])).data)
    reveal_type((await client.call_tool("t", result_type=ResultType[int | None])).data)
    reveal_type((await client.call_tool("t", result_type=ResultType[Literal["a", "b"]])).data)
    reveal_type((await client.call_tool("t", result_type=int | None)).data)
    reveal_type((await client.call_tool("t")).data)
    reveal_type((await many.call_tool("s__t", result_type=ResultType[int | None])).data)
    handle = await client.call_tool_as_task("t", result_type=ResultType[Literal["a", "b"]])
    reveal_type(handle)
"""


def test_result_type_as_mypy_and_pyright_see_it(tmp_path: Path, node_bin: Path, pyright_js: Path) -> None:
    """What docs/guides/client.md promises each checker infers: a class keeps its type, ``ResultType[X]`` gives
    ``X`` (a union, a ``Literal``), a bare special form gives ``Any`` -- the same in mypy --strict and pyright
    strict, with no error in either."""
    program = tmp_path / "program.py"
    program.write_text(RESULT_TYPES_PROGRAM, encoding="utf-8")
    proc = mypy_strict(program, tmp_path)
    assert "error:" not in proc.stdout, proc.stdout
    assert revealed_types(proc.stdout) == [
        "program.Seat",
        "list[program.Seat]",
        "int | None",
        "Literal['a'] | Literal['b']",
        "Any",
        "Any",
        "int | None",
        "mcpkit.client.tasks.TaskHandle[Literal['a'] | Literal['b']]",
    ], proc.stdout
    report = pyright_strict(program, tmp_path, node_bin, pyright_js)
    assert pyright_problems(report) == []
    assert pyright_revealed(report) == [
        "Seat",
        "list[Seat]",
        "int | None",
        "Literal['a', 'b']",
        "Any",
        "Any",
        "int | None",
        "TaskHandle[Literal['a', 'b']]",
    ]


# ------------------------------------------------------------------------------------------ invalid results


@contextlib.asynccontextmanager
async def invalid_results_target(transport: str) -> AsyncIterator[Any]:
    """The target of a Client for the invalid-results server over ``transport`` (memory, stdio, http, ws)."""
    from support.servers.invalid_results_server import build_server

    if transport == "memory":
        yield build_server()
    elif transport == "stdio":
        yield [sys.executable, str(SERVERS / "invalid_results_server.py")]
    else:
        from support.mcp_http import running

        async with running(build_server(), ws=transport == "ws") as (base, _):
            yield base.replace("http://", "ws://") + "/ws" if transport == "ws" else base + "/mcp"


@pytest.mark.parametrize("transport", ["memory", "stdio", "http", "ws"])
@pytest.mark.parametrize("era", ERAS)
async def test_a_result_that_does_not_fit_the_protocol_types_raises_invalid_server_result(
    era: str, transport: str
) -> None:
    """A server result that fails the protocol's typed models is a mcpkit error naming the method and the first
    invalid field (not a raw pydantic ValidationError), with the ValidationError as its cause; the session goes on."""
    async with invalid_results_target(transport) as target, Client(target, mode=era, timeout=20) as client:
        cases: list[tuple[Any, str, str]] = [
            (lambda: client.call_tool("t"), "tools/call", "content.1"),
            (lambda: client.session.call_tool("t"), "tools/call", "content.1"),
            (lambda: client.list_tools(), "tools/list", "tools.1.name"),
            (lambda: client.session.list_tools(), "tools/list", "tools.1.name"),
            (lambda: client.get_prompt("p"), "prompts/get", "messages.0.role"),
            (lambda: client.read_resource("x://1"), "resources/read", "contents.0"),
            (lambda: client.list_resources(), "resources/list", "resources.0.name"),
        ]
        for call, method, field in cases:
            with pytest.raises(InvalidServerResult) as caught:
                await call()
            exc = caught.value
            assert isinstance(exc, MCPError) and exc.method == method, (method, exc)
            assert exc.field.startswith(field), (field, exc.field)
            assert method in str(exc) and exc.field in str(exc), str(exc)
            assert isinstance(exc.__cause__, ValidationError), method
        assert await client.ping() >= 0


@pytest.mark.parametrize("era", ERAS)
async def test_an_invalid_handshake_result_raises_invalid_server_result(era: str) -> None:
    """An invalid InitializeResult (handshake) or DiscoverResult (2026-07-28) fails connecting with a mcpkit error
    naming the method and the field, not a pydantic ValidationError."""
    method = "initialize" if era == "handshake" else "server/discover"
    command = [sys.executable, str(SERVERS / "hostile_cli_server.py"), "invalid-initialize"]
    client = Client(command, mode=era, timeout=20)
    with pytest.raises(InvalidServerResult) as caught:
        async with client:
            pass
    exc = caught.value
    assert exc.method == method and exc.field == "capabilities", str(exc)
    assert isinstance(exc.__cause__, ValidationError)
