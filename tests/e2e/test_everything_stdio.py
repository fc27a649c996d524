"""`python examples/everything.py` spawned as a real subprocess, driven over stdio in both eras."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mcpkit.client.lowlevel import ClientSession
from mcpkit.protocol.errors import MCPError
from mcpkit.transports.stdio import StdioClientTransport, StdioServer
from support.everything import EVERYTHING, MODES, REPO, Recorder, text_of


def _session(argv: list[str], mode: str, rec: Recorder, **kw: object) -> tuple[StdioClientTransport, dict[str, object]]:
    transport = StdioClientTransport(StdioServer(argv, cwd=str(REPO)))
    options: dict[str, object] = {
        "mode": mode,
        "notification_handler": rec.on_notification,
        "logging_handler": rec.on_log,
        "sampling_handler": rec.on_sampling,
        "elicitation_handler": rec.on_elicit,
        "roots": ["file:///work"],
        "log_level": "info" if mode == "modern" else None,
        **kw,
    }
    return transport, options


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.req("M055", "M065", "M068", "M051", "M061", "M089", "S025")
async def test_everything_over_stdio(mode: str) -> None:
    rec = Recorder()
    transport, options = _session([sys.executable, str(EVERYTHING)], mode, rec)
    await transport.start()
    async with ClientSession(transport, **options) as cs:  # type: ignore[arg-type]
        assert cs.server_info is not None and cs.server_info["name"] == "mcpkit-everything"
        assert len((await cs.list_tools()).tools) == 11
        assert text_of(await cs.call_tool("echo", {"text": "x" * 100_000})) == "x" * 100_000
        assert (await cs.call_tool("add", {"a": 20, "b": 22})).structured_content == {"result": 42}
        progress: list[float] = []
        r = await cs.call_tool("slow", {"steps": 3, "delay_ms": 1}, on_progress=lambda p, t, m: progress.append(p))
        assert text_of(r) == "done after 3 steps" and progress == [1, 2, 3]
        assert text_of(await cs.call_tool("sample", {"prompt": "q"})) == "The answer is 42."
        assert text_of(await cs.call_tool("ask_name", {})) == "Hello, Ada!"
        assert json.loads(text_of(await cs.call_tool("roots", {}))) == [{"uri": "file:///work"}]
        assert (await cs.call_tool("fail", {})).is_error
        assert (await cs.call_tool("image", {})).content[0].type == "image"
        # all 100 static resources over the real pipe, page by page
        uris: list[str] = []
        cursor = None
        while True:
            page = await cs.list_resources(cursor)
            uris += [r.uri for r in page.resources]
            cursor = page.next_cursor
            if not cursor:
                break
        assert len(uris) == 101
        blob = (await cs.read_resource("mcpkit://static/100")).dump()["contents"][0]
        assert blob["mimeType"] == "application/octet-stream" and "blob" in blob
        item = (await cs.read_resource("mcpkit://items/42")).dump()["contents"][0]
        assert json.loads(item["text"])["id"] == 42
        with pytest.raises(MCPError):
            await cs.read_resource("mcpkit://items/0")
        greet = await cs.get_prompt("greet", {"name": "Ada"})
        assert len(greet.messages) == 2
        c = await cs.complete({"type": "ref/prompt", "name": "greet"}, "style", "fr")
        assert c.completion.values == ["friendly"]
        c = await cs.complete({"type": "ref/resource", "uri": "mcpkit://items/{id}"}, "id", "10")
        assert c.completion.values == ["10", "100"]
        assert len((await cs.list_prompts()).prompts) == 4
        assert (await cs.get_prompt("simple")).messages[0].content.text  # type: ignore[union-attr]
        embedded = (await cs.get_prompt("with_resource", {"n": "7"})).dump()["messages"][0]["content"]
        assert embedded["resource"]["text"] == "Static resource 7"
        assert (await cs.get_prompt("with_image")).dump()["messages"][0]["content"]["type"] == "image"
        assert len((await cs.list_resource_templates()).resource_templates) == 1
        await cs.set_logging_level("info")
        assert text_of(await cs.call_tool("log", {"level": "debug", "message": "d"})) == "filtered"
        assert text_of(await cs.call_tool("log", {"level": "notice", "message": "n"})) == "sent"
        assert rec.logs[-1] == {"level": "notice", "logger": "everything", "data": "n"}
        # cancelling slow over the pipe: the call ends at once and the server keeps serving
        started = asyncio.Event()
        call = asyncio.create_task(
            cs.call_tool("slow", {"steps": 500, "delay_ms": 20}, on_progress=lambda *a: started.set())
        )
        await asyncio.wait_for(started.wait(), 10)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert text_of(await cs.call_tool("echo", {"text": "after cancel"})) == "after cancel"
        if mode == "handshake":
            await cs.subscribe_resource("mcpkit://counter")
            await cs.call_tool("touch", {})
            assert await rec.wait_for("notifications/resources/updated") == {"uri": "mcpkit://counter"}
            await cs.call_tool("add_tool", {"name": "later"})
            await rec.wait_for("notifications/tools/list_changed")
        else:
            async with cs.listen(tools=True, resource_uris=["mcpkit://counter"]) as sub:
                await cs.call_tool("touch", {})
                assert (await sub.next(timeout=5))[0] == "notifications/resources/updated"
                await cs.call_tool("add_tool", {"name": "later"})
                assert (await sub.next(timeout=5))[0] == "notifications/tools/list_changed"
        assert text_of(await cs.call_tool("later", {"text": "t"})) == "later: t"


LIFESPAN_SERVER = textwrap.dedent(
    """
    import contextlib, sys
    from mcpkit import MCPKit, Context

    @contextlib.asynccontextmanager
    async def lifespan(app):
        print("lifespan start", file=sys.stderr, flush=True)
        yield {"db": "connected"}
        print("lifespan stop", file=sys.stderr, flush=True)

    app = MCPKit("lifespan-test", lifespan=lifespan)

    @app.tool
    async def state(ctx: Context) -> str:
        print("a stray print from user code")  # must not corrupt the protocol stream
        return ctx.lifespan_state["db"]

    if __name__ == "__main__":
        app.run()
    """
)


async def test_stdio_runs_lifespan_and_survives_stray_prints(tmp_path: Path) -> None:
    server = tmp_path / "server.py"
    server.write_text(LIFESPAN_SERVER)
    transport = StdioClientTransport(StdioServer([sys.executable, str(server)], cwd=str(REPO)))
    await transport.start()
    async with ClientSession(transport, mode="handshake") as cs:
        assert text_of(await cs.call_tool("state", {})) == "connected"
        assert text_of(await cs.call_tool("state", {})) == "connected"
    lines = list(transport.stderr_lines)
    assert lines.count("lifespan start") == 1
    assert "a stray print from user code" in lines
    assert lines[-1] == "lifespan stop"


def test_importing_the_library_configures_no_logging() -> None:
    code = (
        "import logging, runpy, sys\n"
        f"mod = runpy.run_path({str(EVERYTHING)!r})\n"
        "assert logging.getLogger().handlers == [], logging.getLogger().handlers\n"
        "names = [n for n in logging.root.manager.loggerDict if n.startswith('mcpkit')]\n"
        "assert names and all(not logging.getLogger(n).handlers for n in names)\n"
        "print('ok')\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, cwd=str(REPO))
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"ok\n"


def test_initialize_is_answered_before_pydantic_loads() -> None:
    """Cold start: schemas and MCP models load on first use, so the initialize answer does not wait for pydantic."""
    code = textwrap.dedent(
        f"""
        import asyncio, json, runpy, sys
        from mcpkit.transports.memory import create_memory_pair
        app = runpy.run_path({str(EVERYTHING)!r})["app"]

        async def main():
            c, s = create_memory_pair()
            task = asyncio.create_task(app.serve(s))
            info = {{"name": "x", "version": "0"}}
            init = {{"protocolVersion": "2025-06-18", "capabilities": {{}}, "clientInfo": info}}
            await c.send(json.dumps({{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}}).encode())
            answer = json.loads(await c.receive())
            assert answer["result"]["serverInfo"]["name"] == "mcpkit-everything", answer
            assert "pydantic" not in sys.modules, "pydantic was imported before initialize was answered"
            await c.send(b'{{"jsonrpc": "2.0", "method": "notifications/initialized"}}')
            await c.send(b'{{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}}')
            tools = json.loads(await c.receive())["result"]["tools"]
            assert len(tools) == 11 and "pydantic" in sys.modules
            await c.close()
            await task
            print("ok")

        asyncio.run(main())
        """
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, cwd=str(REPO))
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert p.stdout == b"ok\n"
