"""Dependency injection (:mod:`mcpkit.server.dependencies`): ``Depends(fn)`` parameters of tools, prompts and
resource templates are left out of what the client sees and filled in on each call, through real clients (in
memory, framed as JSON, in both eras; and a stdio subprocess).

(No ``from __future__ import annotations`` here: the servers below are built inside functions, and an
``Annotated[T, Depends(local_function)]`` annotation kept as text could not be resolved; that case has its own
test, which checks the error that says so.)"""

import asyncio
import sys
import threading
from collections.abc import AsyncIterator
from typing import Annotated, Any

import pytest

from mcpkit import Client, Context, MCPKit, ToolError
from mcpkit.server.dependencies import MAX_DEPTH, Depends
from mcpkit.server.transform import ArgTransform, transform_tool
from support.paths import SERVERS

ERAS = ["handshake", "modern"]


class Settings:
    def __init__(self, greeting: str) -> None:
        self.greeting = greeting


def app_with_dependencies(log: list[str]) -> MCPKit:
    app = MCPKit("deps")

    def settings() -> Settings:
        log.append("settings")
        return Settings("Hello")

    async def caller(ctx: Context) -> str:
        log.append("caller")
        info = ctx.client_info or {}
        return str(info.get("name"))

    async def connection(cfg: Annotated[Settings, Depends(settings)]) -> AsyncIterator[str]:
        log.append("open")
        try:
            yield f"conn({cfg.greeting})"
        except ToolError as exc:
            log.append(f"saw {exc}")
            raise
        finally:
            log.append("close")

    @app.tool
    async def greet(
        name: str,
        cfg: Annotated[Settings, Depends(settings)],
        conn: str = Depends(connection),
        who: str = Depends(caller),
    ) -> str:
        """Greets."""
        log.append("greet")
        return f"{cfg.greeting} {name} via {conn} for {who}"

    @app.tool
    async def fail(conn: Annotated[str, Depends(connection)]) -> str:
        raise ToolError("tool broke")

    def broken() -> str:
        raise ToolError("the database is down")

    @app.tool
    def needs_broken(x: int, db: str = Depends(broken)) -> int:
        return x

    def counted() -> int:
        log.append("counted")
        return len(log)

    @app.tool
    def twice(a: int = Depends(counted, cache=False), b: int = Depends(counted, cache=False)) -> list[int]:
        return [a, b]

    def thread_name() -> str:
        return threading.current_thread().name

    @app.tool
    def sync_tool(where: str = Depends(thread_name)) -> list[str]:
        return [where, threading.current_thread().name]

    async def async_dep() -> str:
        return "made on the loop"

    @app.tool
    def sync_with_async_dep(made: str = Depends(async_dep)) -> list[str]:
        return [made, str(threading.current_thread() is threading.main_thread())]

    @app.prompt
    def hello(topic: str, cfg: Settings = Depends(settings)) -> str:
        return f"{cfg.greeting}, let us talk about {topic}"

    @app.resource("notes://{day}")
    async def notes(day: str, who: str = Depends(caller)) -> str:
        return f"notes of {day} for {who}"

    return app


@pytest.mark.parametrize("mode", ERAS)
async def test_dependency_parameters_are_not_arguments_and_are_filled_in_on_each_call(mode: str) -> None:
    log: list[str] = []
    async with Client(app_with_dependencies(log), mode=mode, client_info={"name": "ada-client", "version": "1"}) as c:
        tools = {t.name: t for t in await c.list_tools()}
        assert tools["greet"].input_schema["properties"].keys() == {"name"}
        assert tools["greet"].input_schema["required"] == ["name"]
        assert tools["fail"].input_schema["properties"] == {}
        r = await c.call_tool("greet", {"name": "Ada"})
        assert r.text == "Hello Ada via conn(Hello) for ada-client"
        # settings ran once for two parameters that ask for it; the generator closed after the call
        assert log == ["settings", "open", "caller", "greet", "close"]
        await c.call_tool("greet", {"name": "Bob"})
        assert log.count("settings") == 2  # (nothing kept across calls)
        refused = await c.call_tool("greet", {"name": "Ada", "cfg": "x"}, raise_on_error=False)
        assert refused.is_error  # a dependency's name is not an argument the client may send


@pytest.mark.parametrize("mode", ERAS)
async def test_a_generator_dependency_cleans_up_after_a_failed_call_and_sees_its_exception(mode: str) -> None:
    log: list[str] = []
    async with Client(app_with_dependencies(log), mode=mode) as c:
        r = await c.call_tool("fail", {}, raise_on_error=False)
        assert r.is_error and "tool broke" in r.text
        assert log == ["settings", "open", "saw tool broke", "close"]
        assert (await c.call_tool("greet", {"name": "Ada"})).text.startswith("Hello Ada")  # the session goes on


@pytest.mark.parametrize("mode", ERAS)
async def test_a_failing_dependency_fails_the_call_as_the_tool_would(mode: str) -> None:
    async with Client(app_with_dependencies([]), mode=mode) as c:
        r = await c.call_tool("needs_broken", {"x": 1}, raise_on_error=False)
        assert r.is_error and "the database is down" in r.text
        assert (await c.call_tool("greet", {"name": "Ada"})).text.startswith("Hello Ada")


async def test_cache_false_runs_a_dependency_for_each_parameter() -> None:
    log: list[str] = []
    async with Client(app_with_dependencies(log)) as c:
        r = await c.call_tool("twice", {})
    assert r.data == [1, 2] and log == ["counted", "counted"]


async def test_where_sync_functions_and_their_dependencies_run() -> None:
    async with Client(app_with_dependencies([])) as c:
        # a plain def with plain def dependencies: both where the tool's thread policy says (its first calls, while
        # learning, on a worker thread), together
        dep_thread, tool_thread = (await c.call_tool("sync_tool", {})).data
        assert dep_thread == tool_thread
        # a plain def with an async def dependency: the dependency on the loop, the function on a worker thread
        assert (await c.call_tool("sync_with_async_dep", {})).data == ["made on the loop", "False"]


async def test_a_cancelled_sync_tool_keeps_its_dependencies_until_its_thread_is_done() -> None:
    # a plain def tool with an async def dependency runs on a worker thread, which a cancellation cannot stop: the
    # dependency's cleanup (closing a connection) must wait until the function no longer uses what it was given
    app = MCPKit("cancelled")
    log: list[str] = []
    started, release = threading.Event(), threading.Event()

    async def connection() -> AsyncIterator[dict[str, bool]]:
        conn = {"open": True}
        try:
            yield conn
        except BaseException as exc:
            log.append(f"saw {type(exc).__name__}")
            raise
        finally:
            conn["open"] = False
            log.append("close")

    @app.tool
    def blocking(conn: dict[str, bool] = Depends(connection)) -> str:
        started.set()
        release.wait(10)
        log.append(f"tool done, connection open: {conn['open']}")
        return "done"

    @app.tool
    def ping() -> str:
        return "pong"

    async with Client(app) as c:
        call = asyncio.create_task(c.call_tool("blocking", {}))
        assert await asyncio.to_thread(started.wait, 10)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        for _ in range(100):  # (the server takes the cancellation; a cleanup that did not wait would run now)
            if log:
                break
            await asyncio.sleep(0.01)
        release.set()
        for _ in range(1000):
            if len(log) == 3:
                break
            await asyncio.sleep(0.01)
        assert log == ["tool done, connection open: True", "saw CancelledError", "close"]
        assert (await c.call_tool("ping", {})).text == "pong"  # the session goes on


@pytest.mark.parametrize("mode", ERAS)
async def test_prompts_and_resource_templates_take_dependencies_too(mode: str) -> None:
    async with Client(app_with_dependencies([]), mode=mode, client_info={"name": "ada-client", "version": "1"}) as c:
        prompts = {p.name: p for p in await c.list_prompts()}
        assert [a.name for a in prompts["hello"].arguments or []] == ["topic"]
        got = await c.get_prompt("hello", {"topic": "tea"})
        assert got.messages[0].content.text == "Hello, let us talk about tea"  # type: ignore[union-attr]
        read = await c.read_resource("notes://monday")
        assert read.contents[0].text == "notes of monday for ada-client"  # type: ignore[union-attr]


async def test_a_transformed_tool_keeps_its_originals_dependencies() -> None:
    log: list[str] = []
    app = app_with_dependencies(log)
    app.add_tool(transform_tool(app.get_tool("greet"), name="hi", args={"name": ArgTransform(name="person")}))
    async with Client(app) as c:
        tools = {t.name: t for t in await c.list_tools()}
        assert tools["hi"].input_schema["properties"].keys() == {"person"}
        assert (await c.call_tool("hi", {"person": "Ada"})).text.startswith("Hello Ada via conn(Hello)")


async def test_a_mounted_apps_tools_keep_their_dependencies() -> None:
    parent = MCPKit("parent")
    parent.mount(app_with_dependencies([]), "child")
    async with Client(parent) as c:
        assert (await c.call_tool("child_greet", {"name": "Ada"})).text.startswith("Hello Ada via conn(Hello)")


def test_a_function_without_dependencies_is_called_as_it_is() -> None:
    app = MCPKit("plain")

    def echo(text: str) -> str:
        return text

    app.add_tool(echo)
    tool = app.get_tool("echo")
    assert tool is not None and tool.fn is echo  # (no wrapper, nothing added to its calls)


def test_a_declaration_that_cannot_work_is_refused_where_it_is_registered() -> None:
    app = MCPKit("bad")

    def wants_an_argument(user_id: str) -> str:
        return user_id

    with pytest.raises(TypeError, match="takes 'user_id', which is neither the Context nor a Depends"):

        @app.tool
        def t1(x: str = Depends(wants_an_argument)) -> str:
            return x

    def a(b: str = Depends(lambda: "")) -> str:  # (replaced below: a -> b -> a)
        return b

    def b(x: str = Depends(a)) -> str:
        return x

    a.__defaults__ = (Depends(b),)
    with pytest.raises(TypeError, match="cycle"):

        @app.tool
        def t2(x: str = Depends(a)) -> str:
            return x

    chain: Any = lambda: "end"  # noqa: E731
    for _ in range(MAX_DEPTH + 1):
        chain = (lambda dep: lambda v=Depends(dep): v)(chain)
    with pytest.raises(TypeError, match=f"more than {MAX_DEPTH} deep"):

        @app.tool
        def t3(x: str = Depends(chain)) -> str:
            return x

    exactly: Any = lambda: "end"  # noqa: E731
    for _ in range(MAX_DEPTH - 1):  # (with `exactly` itself: MAX_DEPTH levels)
        exactly = (lambda dep: lambda v=Depends(dep): v)(exactly)

    @app.tool
    def deepest(x: str = Depends(exactly)) -> str:
        return x

    local = wants_an_argument
    with pytest.raises(TypeError, match=r"t4: parameter 'x'.*cannot be resolved.*define the dependency at module"):

        @app.tool
        def t4(x: "Annotated[str, Depends(local)]") -> str:  # (text, as `from __future__ import annotations` makes)
            return x

    with pytest.raises(TypeError, match="takes a function"):
        Depends("not callable")  # type: ignore[arg-type]
    assert all(app.get_tool(name) is None for name in ("t1", "t2", "t3", "t4"))
    assert app.get_tool("deepest") is not None


def diamonds(levels: int, calls: list[str]) -> Any:
    """A dependency ``levels + 2`` deep: one on top, then ``levels`` levels of two functions that each take both of
    the level below, then one at the bottom (planned naively, each level doubles the work)."""
    bottom: Any = lambda: calls.append("bottom") or 0  # noqa: E731
    pair = [bottom, bottom]
    for _ in range(levels):
        pair = [(lambda a, b: lambda x=Depends(a), y=Depends(b): max(x, y) + 1)(*pair) for _ in range(2)]
    return (lambda a, b: lambda x=Depends(a), y=Depends(b): max(x, y))(*pair)


async def test_diamonds_of_dependencies_are_planned_once_each(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpkit.server import dependencies

    planned = 0
    plan = dependencies._plan

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal planned
        planned += 1
        if planned > 10_000:
            raise AssertionError("planning walks the shared parts of the graph again and again")
        return plan(*args, **kwargs)

    monkeypatch.setattr(dependencies, "_plan", counted)
    app = MCPKit("diamonds")
    calls: list[str] = []

    @app.tool
    def tall(v: int = Depends(diamonds(MAX_DEPTH - 2, calls))) -> int:  # (exactly MAX_DEPTH deep)
        return v

    assert planned <= 4 * MAX_DEPTH  # (one plan per edge of the graph, at most)
    async with Client(app) as c:
        r = await c.call_tool("tall", {})
    assert r.structured == {"result": MAX_DEPTH - 2} and calls == ["bottom"]

    planned = 0
    with pytest.raises(TypeError, match=f"more than {MAX_DEPTH} deep"):
        app.add_tool(lambda v=Depends(diamonds(MAX_DEPTH - 1, [])): v, name="taller")
    assert planned <= 4 * MAX_DEPTH and app.get_tool("taller") is None


@pytest.mark.parametrize("mode", ERAS)
async def test_dependencies_over_stdio_in_a_subprocess(mode: str) -> None:
    server = [sys.executable, str(SERVERS / "dependencies_server.py")]
    async with Client(server, mode=mode) as c:
        tools = {t.name: t for t in await c.list_tools()}
        assert tools["whoami"].input_schema["properties"].keys() == {"greeting"}
        r = await c.call_tool("whoami", {"greeting": "Hi"})
    assert r.text == "Hi, mcpkit (request handled by pid-scoped store 1)"
