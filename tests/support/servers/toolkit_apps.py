"""Apps for the toolkit tests (composition, transformation, visibility), served over stdio by
``python tests/support/servers/toolkit_apps.py <name>`` and over HTTP in-process (``build(name)``).

Every change a test makes goes through a tool of the app, so the same test drives stdio and HTTP alike.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Annotated, Any

from pydantic import Field

from mcpkit import Context, MCPKit
from mcpkit.server.transform import ArgTransform, forward, transform_tool


def compose_app() -> MCPKit:
    """``main`` mounts ``weather`` (live, prefix weather, with a lifespan) and imports ``copy`` (prefix copy)."""

    @contextlib.asynccontextmanager
    async def weather_lifespan(app: MCPKit) -> AsyncIterator[dict[str, str]]:
        yield {"units": "celsius"}

    weather = MCPKit("weather", lifespan=weather_lifespan)

    @weather.tool(tags={"public"}, scopes=["weather:read"])
    async def forecast(city: str, ctx: Context) -> str:
        """The forecast of a city."""
        await ctx.report_progress(1, 2)
        await ctx.report_progress(2, 2)
        await ctx.info(f"forecast for {city}")
        return f"{city}: sunny, {ctx.lifespan_state['units']} (served by {ctx.app.name})"

    @weather.tool
    async def ask_city(ctx: Context) -> str:
        """Ask the user for a city."""
        answer = await ctx.elicit("Which city?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"you chose {answer.content['name'] if answer.content else answer.action}"

    @weather.tool
    async def summarize(ctx: Context) -> str:
        """Ask the client's model."""
        reply = await ctx.sample("summarize the weather")
        return f"model says {reply.content.text}"  # type: ignore[union-attr]

    @weather.tool
    def double(x: int) -> int:
        """Twice x."""
        return 2 * x

    @weather.resource("data://today")
    def today() -> str:
        return "sunny today"

    @weather.tool
    async def touch(city: str, ctx: Context) -> str:
        """Tell the subscribers that today's weather and a city's data changed (on the server and on ctx.app)."""
        await weather.notify_resource_updated("data://today")
        await ctx.app.notify_resource_updated(f"data://city/{city}")
        return "touched"

    @weather.resource("data://city/{name}")
    def city(name: str) -> str:
        return f"data of {name}"

    @weather.prompt(completions={"style": ["short", "long"]})
    def brief(city: str, style: str = "short") -> str:
        """A weather brief."""
        return f"Write a {style} brief for {city}"

    app = MCPKit("main")

    @app.tool
    def local() -> str:
        """A tool of the parent itself."""
        return "parent"

    @app.tool
    def grow(name: str) -> str:
        """Register a tool on the mounted server at run time."""
        weather.add_tool(lambda: f"I am {name}", name=name, description="added later")
        return "grown"

    @app.tool
    def shrink(name: str) -> str:
        """Remove a tool of the mounted server."""
        weather.remove_tool(name)
        return "shrunk"

    copy = MCPKit("copy")

    @copy.tool
    def hello() -> str:
        return "hello from the copy"

    app.mount(weather, prefix="weather")
    app.import_server(copy, prefix="copy")

    @app.tool
    def grow_copy(name: str) -> str:
        """Register a tool on the imported server (it must not show)."""
        copy.add_tool(lambda: name, name=name)
        return "grown"

    return app


def guarded_mount_app() -> MCPKit:
    """``main`` mounts ``inner`` (prefix ``in``), which mounts ``deep`` (prefix ``deep``). Each has an interceptor
    that wraps a tool's text as ``<server>:<tool name it was called by>(<text>)`` and each completion value as
    ``<server>:<value>`` (showing the order of the chains and the names each sees); ``inner`` refuses whatever is
    called ``secret`` (a tool, a prompt, a resource, a completion of one) and ``deep`` whatever is called
    ``classified``, with error -32001."""
    from mcpkit.protocol.errors import MCPError

    def server(name: str, refused: str) -> MCPKit:
        app = MCPKit(name)

        async def guard(call: Any, call_next: Any) -> Any:
            named = call.params.get("ref") if call.method == "completion/complete" else call.params
            target = str(named.get("name") or named.get("uri") or "")
            if target.rsplit("/", 1)[-1] == refused:
                raise MCPError(f"{name} refuses {target}", code=-32001)
            result = await call_next(call)
            if call.method == "tools/call" and not result.get("isError") and result.get("content"):
                text = result["content"][0]["text"]
                result = {**result, "content": [{"type": "text", "text": f"{name}:{call.params['name']}({text})"}]}
            if call.method == "completion/complete":
                values = [f"{name}:{v}" for v in result["completion"]["values"]]
                result = {**result, "completion": {**result["completion"], "values": values}}
            return result

        app.add_interceptor(guard)
        return app

    main, inner, deep = server("main", "-"), server("inner", "secret"), server("deep", "classified")
    for app in (inner, deep):

        @app.tool
        def echo(text: str) -> str:
            """A plain def (it runs inline)."""
            return text

        @app.tool
        async def ask(ctx: Context) -> str:
            answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
            return f"hello {answer.content['name'] if answer.content else answer.action}"

        app.add_tool(lambda: "the secret", name="secret")
        app.add_tool(lambda: "classified", name="classified")
        styles = {"style": ["formal", "casual"]}
        app.add_prompt(lambda style="formal": "a secret prompt", name="secret", completions=styles)
        app.add_prompt(lambda style="formal": "an open prompt", name="open", completions=styles)
        app.add_resource("data://secret", "secret data")
        app.add_resource("data://open", "open data")
        app.add_resource("data://item/{key}", lambda key: f"item {key}", completions={"key": ["7", "8"]})
        app.add_resource("data://{key}/classified", lambda key: f"item {key}", completions={"key": ["7", "8"]})

    inner.mount(deep, prefix="deep")
    main.mount(inner, prefix="in")
    return main


def transform_app() -> MCPKit:
    """``search(query, limit, api_key)`` and tools derived from it."""
    app = MCPKit("transform")

    @app.tool
    def search(query: str, limit: int = 10, api_key: str = "") -> dict[str, Any]:
        """Search the catalog."""
        return {"query": query, "limit": limit, "key_used": bool(api_key)}

    original = app.get_tool("search")
    assert original is not None
    app.add_tool(
        transform_tool(
            original,
            name="find",
            description="Find things in the catalog.",
            args={
                "query": ArgTransform(name="q", description="What to look for"),
                "limit": ArgTransform(default=3),
                "api_key": ArgTransform(hide=True, default="secret-key"),
            },
        )
    )

    async def shout(q: str) -> str:
        result = await forward(q=q)
        return str(result["structuredContent"]["query"]).upper()

    app.add_tool(
        transform_tool(
            original,
            name="shout",
            args={"query": ArgTransform(name="q"), "api_key": ArgTransform(hide=True, default="k")},
            fn=shout,
        )
    )
    return app


def visibility_app() -> MCPKit:
    """Tags, include/exclude, enable/disable at run time, per-principal views (principal from ``X-User``)."""
    app = MCPKit("visibility", exclude_tags={"internal"}, page_size=2)
    for i in range(5):
        app.add_tool(lambda i=i: f"public {i}", name=f"public_{i}", tags={"public"})

    @app.tool(tags={"admin"})
    def wipe() -> str:
        return "wiped"

    @app.tool(tags={"internal"})
    def debug_dump() -> str:
        return "internal state"

    @app.tool(enabled=False)
    def beta() -> str:
        return "beta"

    @app.resource("secret://plan", tags={"admin"})
    def plan() -> str:
        return "the plan"

    @app.prompt(tags={"admin"}, completions={"topic": ["all", "mine"]})
    def admin_prompt(topic: str = "all") -> str:
        return f"admin {topic}"

    @app.tool
    def set_admin(on: bool) -> str:
        """Show or hide the admin tag."""
        if on:
            app.enable(tags="admin")
        else:
            app.disable(tags="admin")
        return "ok"

    @app.tool
    def set_beta(on: bool) -> str:
        if on:
            app.enable("beta")
        else:
            app.disable("beta")
        return "ok"

    return app


def per_principal_app() -> MCPKit:
    """A view per principal: ``admin``-tagged components only for alice."""
    app = visibility_app()
    app.set_view_filter(lambda component, principal: "admin" not in component.tags or principal == "alice")
    return app


def tool_search_app() -> MCPKit:
    """``per_principal``'s tools and rules behind tool search (``forecast`` always listed), tools to find, one that
    adds a tool, and ``recorded``: the tool of every ``tools/call`` an interceptor saw."""
    app = per_principal_app()
    seen: list[str] = []

    async def record(call: Any, call_next: Any) -> Any:
        seen.append(call.params.get("name"))
        return await call_next(call)

    app.add_interceptor(record, methods="tools/call")
    for i in range(40):
        app.add_tool(lambda i=i: f"metric {i}", name=f"metric_{i}", description=f"Reports fleet metric number {i}.")

    @app.tool
    def send_email(to: str, subject: str) -> str:
        """Send an email message."""
        return f"sent {subject!r} to {to}"

    @app.tool
    def archive(folder: Annotated[str, Field(description="The email folder to archive")]) -> str:
        """Archive a folder."""
        return f"archived {folder}"

    @app.tool(scopes=["files:admin"])
    def purge(path: str) -> str:
        """Purge a path for good."""
        return f"purged {path}"

    @app.tool
    async def forecast(city: str, ctx: Context) -> str:
        """The weather forecast of a city."""
        await ctx.report_progress(1, 2, "looking at the sky")
        return f"{city}: sunny"

    @app.tool
    def add_tool_named(name: str, description: str) -> str:
        app.add_tool(lambda: name, name=name, description=description)
        return "added"

    @app.tool
    def recorded() -> list[str]:
        return list(seen)

    app.add_tool_search(always_visible=["forecast"])
    return app


def legacy_app(version: str) -> MCPKit:
    """A server speaking one handshake-era revision only, which asks its client things mid-call."""
    app = MCPKit(f"legacy-{version}", versions=[version])
    state: dict[str, Any] = {"cancelled": False, "running": 0, "most": 0}

    @app.tool
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"Hello, {answer.content['name'] if answer.content else answer.action}!"

    @app.tool
    async def sample(ctx: Context) -> str:
        reply = await ctx.sample("say something")
        return f"model: {reply.content.text}"  # type: ignore[union-attr]

    @app.tool
    async def roots(ctx: Context) -> str:
        return ",".join(str(r.uri) for r in await ctx.list_roots())

    @app.tool
    async def slow(steps: int, ctx: Context) -> str:
        import asyncio

        state["running"] += 1
        state["most"] = max(state["most"], state["running"])
        try:
            for i in range(steps):
                await ctx.report_progress(i + 1, steps)
                await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            state["cancelled"] = True
            raise
        finally:
            state["running"] -= 1
        return "done"

    @app.tool
    async def chatty(name: str, together: int, ctx: Context) -> str:
        """Logs ``name: 0`` .. ``name: 4`` (info) once ``together`` calls of it run at once (at most 20 s)."""
        import asyncio

        state["chatting"] = state.get("chatting", 0) + 1
        try:
            async with asyncio.timeout(20):
                while state["chatting"] < together:
                    await asyncio.sleep(0.01)
            for i in range(5):
                await ctx.info(f"{name}: {i}")
                await asyncio.sleep(0.02)
        finally:
            state["chatting"] -= 1
        return name

    @app.tool
    def was_cancelled() -> bool:
        return bool(state["cancelled"])

    @app.tool
    async def roots_later(ctx: Context) -> str:
        """Asks the client for its roots a moment after the call ended (apart from any request: on HTTP, the
        standalone stream)."""
        import asyncio

        session = ctx.request_context.session
        assert session is not None

        async def ask() -> None:
            await asyncio.sleep(0.3)
            state["later"] = await session.request("roots/list", None)

        task = asyncio.get_running_loop().create_task(ask())
        state.setdefault("tasks", set()).add(task)
        return "asking later"

    @app.tool
    def most_at_once() -> int:
        """The most ``slow`` calls this process ran at the same time."""
        return int(state["most"])

    @app.tool
    def environment(name: str) -> str:
        """The value of one environment variable of the server's process (empty when unset)."""
        import os

        return os.environ.get(name, "")

    _add_process_tools(app)
    return app


def _add_process_tools(app: MCPKit) -> None:
    """``process`` (the id of the server's process: which one of a proxy's upstream connections answered) and
    ``crash`` (end the server's process at once, as a crash does)."""

    @app.tool
    def process() -> int:
        """The id of the server's process."""
        import os

        return os.getpid()

    @app.tool
    def crash() -> str:
        """End the server's process at once, as a crash does."""
        import os

        os._exit(3)


def cached_app() -> MCPKit:
    """Lists and a resource with 2026-07-28 caching hints; tools report how often the server was asked (and
    ``process``, ``crash``)."""
    app = MCPKit("cached", list_ttl_ms=60_000, list_cache_scope="public")
    counts = {"tools/list": 0, "reads": 0}

    @app.resource("data://clock", ttl_ms=60_000, cache_scope="private")
    def clock() -> str:
        counts["reads"] += 1
        return f"read {counts['reads']}"

    @app.tool
    def asked() -> dict[str, int]:
        return dict(counts)

    @app.tool
    def grow(name: str) -> str:
        app.add_tool(lambda: name, name=name)
        return "grown"

    @app.tool
    async def touch() -> str:
        await app.notify_resource_updated("data://clock")
        return "touched"

    original = app._handlers["tools/list"]

    def counting(ctx: Any, params: Any) -> Any:
        counts["tools/list"] += 1
        return original(ctx, params)

    app.set_handler("tools/list", counting)
    _add_process_tools(app)
    return app


def ticking_app() -> MCPKit:
    """A server that changes by itself, with no request asking: every 0.1 s it tells its subscribers that
    ``data://tick`` (its text: the server's process id) was updated; with ``process`` and ``crash``. With
    ``TOOLKIT_PID_DIR`` set, each process serving it leaves an empty file named after its id there."""

    @contextlib.asynccontextmanager
    async def ticking(app: MCPKit) -> AsyncIterator[None]:
        import asyncio
        import os
        from pathlib import Path

        pids = os.environ.get("TOOLKIT_PID_DIR")
        if pids:
            (Path(pids) / str(os.getpid())).touch()

        async def tick() -> None:
            while True:
                await asyncio.sleep(0.1)
                await app.notify_resource_updated("data://tick")

        task = asyncio.get_running_loop().create_task(tick())
        try:
            yield None
        finally:
            task.cancel()

    app = MCPKit("ticking", lifespan=ticking)

    @app.resource("data://tick")
    def tick() -> str:
        import os

        return str(os.getpid())

    _add_process_tools(app)
    return app


def flaky_app() -> MCPKit:
    """Tools whose first call hangs (until cancelled) and later calls answer at once: ``look`` (read-only, safe to
    repeat) and ``change`` (not); ``attempts`` says how often each was called."""
    app = MCPKit("flaky")
    attempts = {"look": 0, "change": 0}

    async def first_hangs(name: str) -> str:
        import asyncio

        attempts[name] += 1
        if attempts[name] == 1:
            await asyncio.sleep(60)
        return f"{name}: done"

    @app.tool(annotations={"readOnlyHint": True})
    async def look() -> str:
        return await first_hangs("look")

    @app.tool
    async def change() -> str:
        return await first_hangs("change")

    @app.tool(name="attempts")
    def attempts_made() -> dict[str, int]:
        return dict(attempts)

    return app


def as_tools_app() -> MCPKit:
    """``per_principal``'s rules (``secret://plan`` and ``admin_prompt`` for alice only) with resources and prompts
    as tools (pages of 3 over the app's pages of 2): text, binary and templated resources, one needing scope
    ``files:admin``, a tool that adds a resource, and ``recorded``: every request an interceptor saw."""
    app = per_principal_app()
    seen: list[str] = []

    async def record(call: Any, call_next: Any) -> Any:
        seen.append(f"{call.method} {call.params.get('uri') or call.params.get('name') or ''}".strip())
        return await call_next(call)

    app.add_interceptor(record)

    @app.resource("docs://readme")
    def readme() -> str:
        """The readme."""
        return "read me first"

    @app.resource("docs://logo", mime_type="image/png")
    def logo() -> bytes:
        return b"\x89PNG\r\n\x1a\nlogo"

    @app.resource("docs://pages/{name}")
    def page(name: str) -> str:
        """A page by name."""
        return f"page {name}"

    @app.resource("secret://keys", scopes=["files:admin"])
    def keys() -> str:
        return "the keys"

    @app.prompt
    def summarize(topic: str, style: str = "short") -> str:
        """Summarize a topic."""
        return f"Summarize {topic}, {style}."

    @app.tool
    def add_resource_named(uri: str) -> str:
        app.add_resource(uri, f"new {uri}")
        return "added"

    @app.tool
    def recorded() -> list[str]:
        return list(seen)

    app.add_resources_as_tools(page_size=3)
    app.add_prompts_as_tools()
    return app


def paged_upstream_app() -> MCPKit:
    """An upstream for a proxy with tools of its own: 7 tools in pages of 2 (``up0``..``up5`` and ``clash``),
    a resource and a prompt named as the proxy's own are named (``clash``, ``data://clash``)."""
    app = MCPKit("paged-upstream", page_size=2)
    for i in range(6):
        app.add_tool(lambda i=i: f"upstream {i}", name=f"up{i}")
    app.add_tool(lambda: "the upstream's clash", name="clash")
    app.add_resource("data://up", "upstream data")
    app.add_resource("data://clash", "the upstream's clash data")
    app.add_prompt(lambda: "the upstream's prompt", name="up_prompt")
    return app


def resources_only_app() -> MCPKit:
    """An upstream with resources, a template and a prompt, and no tools."""
    app = MCPKit("resources-only")
    app.add_resource("notes://today", "today's notes")
    app.add_resource("notes://day/{day}", lambda day: f"notes of {day}")
    app.add_prompt(lambda topic: f"talk about {topic}", name="talk")
    return app


def unsubscribable_app() -> MCPKit:
    """An upstream with a resource and a tool, declaring no resource subscriptions."""
    app = MCPKit("unsubscribable")
    app.resource_subscriptions = False
    app.add_resource("data://up", "upstream data")
    app.add_tool(lambda: "pong", name="ping")
    return app


APPS = {
    "cached": cached_app,
    "flaky": flaky_app,
    "legacy-2024-11-05": lambda: legacy_app("2024-11-05"),
    "legacy-2025-03-26": lambda: legacy_app("2025-03-26"),
    "legacy-2025-06-18": lambda: legacy_app("2025-06-18"),
    "compose": compose_app,
    "guarded_mount": guarded_mount_app,
    "ticking": ticking_app,
    "transform": transform_app,
    "visibility": visibility_app,
    "per_principal": per_principal_app,
    "tool_search": tool_search_app,
    "as_tools": as_tools_app,
    "paged_upstream": paged_upstream_app,
    "resources_only": resources_only_app,
    "unsubscribable": unsubscribable_app,
}


def build(name: str) -> MCPKit:
    """A fresh instance of the app called ``name``."""
    return APPS[name]()


if __name__ == "__main__":
    import os

    refuse_if = os.environ.get("TOOLKIT_REFUSE_IF")  # (a server that cannot start while that file exists)
    if refuse_if and os.path.exists(refuse_if):
        sys.exit(f"refusing to start: {refuse_if} exists")
    if "http" in sys.argv[2:]:  # (on a port of its own; it says which: "mcpkit: serving http on <url>")
        build(sys.argv[1]).run("http", port=0)
    else:  # (any other argument: a mark telling its processes apart, see support.toolkit.processes_of)
        build(sys.argv[1]).run()
