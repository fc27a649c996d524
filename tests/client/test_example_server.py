"""The high-level Client against mcpkit's own example server (examples/everything.py, an MCPKit app): in process
(the server object as the target: memory pair, bytes on the wire) and as a stdio subprocess, in both eras; every
tool, resource and prompt it offers."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from typing import Any

import pytest

from mcpkit.client.client import Client, ToolCallError
from mcpkit.protocol.errors import MCPError
from mcpkit.protocol.types import BlobResourceContents, EmbeddedResource, ImageContent, TextResourceContents
from support.paths import REPO

EXAMPLE = REPO / "examples" / "everything.py"
if not EXAMPLE.is_file():  # pragma: no cover
    pytest.skip("examples/everything.py missing", allow_module_level=True)
sys.path.insert(0, str(EXAMPLE.parent))
from everything import create_app  # noqa: E402

ERAS = ["handshake", "modern"]
KINDS = ["memory", "stdio"]


def target(kind: str) -> Any:
    return create_app() if kind == "memory" else [sys.executable, str(EXAMPLE)]


async def _until(pred: Any, timeout: float = 5.0) -> bool:
    for _ in range(int(timeout / 0.02)):
        if pred():
            return True
        await asyncio.sleep(0.02)
    return bool(pred())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ERAS)
async def test_every_tool(kind: str, mode: str) -> None:
    logs: list[dict[str, Any]] = []
    notes: list[str] = []
    asked: list[dict[str, Any]] = []

    def user(params: dict[str, Any]) -> Any:
        asked.append(params)
        return {"name": "Lin"}

    async with Client(
        target(kind),
        mode=mode,
        roots=[{"uri": "file:///src", "name": "src"}],
        sampling_handler=lambda p: "a sampled answer",
        elicitation_handler=user,
        logging_handler=logs.append,
        log_level="info",
        on_notification=lambda m, p: notes.append(m),
    ) as c:
        assert c.server_info and c.server_info.name == "mcpkit-everything"
        tools = {t.name for t in await c.list_tools()}
        assert tools >= {
            "echo",
            "add",
            "slow",
            "sample",
            "ask_name",
            "roots",
            "touch",
            "add_tool",
            "log",
            "fail",
            "image",
        }
        assert (await c.call_tool("echo", {"text": "hé"})).data == "hé"
        added = await c.call_tool("add", {"a": 20, "b": 22})
        assert added.validated and added.structured == {"result": 42} and added.data == 42
        seen: list[tuple[float, float | None, str | None]] = []
        slow = await c.call_tool("slow", {"steps": 3, "delay_ms": 5}, on_progress=lambda *a: seen.append(a))
        assert slow.text == "done after 3 steps"
        assert [s[0] for s in seen] == [1.0, 2.0, 3.0] and seen[-1][1] == 3.0
        assert (await c.call_tool("sample", {"prompt": "hi"})).text == "a sampled answer"
        assert (await c.call_tool("ask_name")).text == "Hello, Lin!" and asked[0]["message"] == "What is your name?"
        assert json.loads((await c.call_tool("roots")).text) == [{"uri": "file:///src", "name": "src"}]
        assert (await c.call_tool("log", {"level": "warning", "message": "careful"})).text == "sent"
        assert (await c.call_tool("log", {"level": "debug", "message": "hidden"})).text == "filtered"
        assert [m["data"] for m in logs] == ["careful"]
        failed = await c.call_tool("fail")
        assert failed.is_error and failed.text == "This tool always fails."
        with pytest.raises(ToolCallError, match="always fails"):
            await c.call_tool("fail", raise_on_error=True)
        image = await c.call_tool("image")
        png = next(b for b in image.content if isinstance(b, ImageContent))
        assert png.mime_type == "image/png" and base64.b64decode(png.data)[:4] == b"\x89PNG"
        assert (await c.call_tool("add_tool", {"name": "late"})).text == "added tool late"
        if mode == "handshake":
            assert await _until(lambda: "notifications/tools/list_changed" in notes)
        assert "late" in {t.name for t in await c.list_tools()}
        assert (await c.call_tool("late", {"text": "x"})).text == "late: x"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ERAS)
async def test_every_resource_and_prompt(kind: str, mode: str) -> None:
    async with Client(target(kind), mode=mode) as c:
        resources = await c.list_resources()
        uris = [r.uri for r in resources]
        assert len(resources) == 101 and "mcpkit://counter" in uris  # 11 pages of 10, walked
        for n in (1, 2, 99, 100):
            contents = (await c.read_resource(f"mcpkit://static/{n}")).contents[0]
            if n % 2:
                assert isinstance(contents, TextResourceContents) and contents.text == f"Static resource {n}"
            else:
                assert isinstance(contents, BlobResourceContents)
                assert base64.b64decode(contents.blob) == bytes([n]) * 16 + f"static {n}".encode()
        templates = await c.list_resource_templates()
        assert [t.uri_template for t in templates] == ["mcpkit://items/{id}"]
        assert json.loads(await c.read_text("mcpkit://items/7")) == {"id": 7, "name": "Item 7"}
        with pytest.raises(MCPError):
            await c.read_resource("mcpkit://items/1000")
        ids = await c.complete("mcpkit://items/{id}", "id", "9")
        assert ids.completion.values[:2] == ["9", "90"]
        assert await c.read_text("mcpkit://counter") == "0"

        prompts = {p.name for p in await c.list_prompts()}
        assert prompts == {"simple", "greet", "with_resource", "with_image"}
        simple = await c.get_prompt("simple")
        assert simple.messages[0].content.text == "This is a simple prompt without arguments."  # type: ignore[union-attr]
        greet = await c.get_prompt("greet", {"name": "Ada", "style": "formal"})
        assert [m.role for m in greet.messages] == ["user", "assistant"]
        assert (await c.complete("greet", "style", "f")).completion.values == ["formal", "friendly", "funny"]
        embedded = await c.get_prompt("with_resource", {"n": 3})  # a non-string argument is sent as "3"
        assert isinstance(embedded.messages[0].content, EmbeddedResource)
        pic = await c.get_prompt("with_image")
        assert isinstance(pic.messages[0].content, ImageContent)


@pytest.mark.parametrize("kind", KINDS)
async def test_resource_updates_both_eras(kind: str) -> None:
    notes: list[tuple[str, Any]] = []
    async with Client(target(kind), mode="handshake", on_notification=lambda m, p: notes.append((m, p))) as c:
        await c.subscribe_resource("mcpkit://counter")
        assert (await c.call_tool("touch")).text == "counter is now 1"
        assert await _until(lambda: ("notifications/resources/updated", {"uri": "mcpkit://counter"}) in notes)
        assert await c.read_text("mcpkit://counter") == "1"
    async with Client(target(kind), mode="modern") as c, c.listen(resource_uris=["mcpkit://counter"]) as sub:
        await c.call_tool("touch")
        method, params = await sub.next(timeout=5)
        assert method == "notifications/resources/updated" and params["uri"] == "mcpkit://counter"


@pytest.mark.parametrize("mode", ERAS)
async def test_cancel_and_decline(mode: str) -> None:
    async with Client(create_app(), mode=mode, elicitation_handler=lambda p: None) as c:
        assert (await c.call_tool("ask_name")).text == "No name given (decline)"
        task = asyncio.create_task(c.call_tool("slow", {"steps": 200, "delay_ms": 10}))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await c.call_tool("echo", {"text": "after"})).text == "after"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ERAS)
async def test_watch_is_era_portable(kind: str, mode: str) -> None:
    async with Client(target(kind), mode=mode) as c:
        async with c.watch(tools=True, resource_uris=["mcpkit://counter"]) as w:
            await c.call_tool("touch")
            method, params = await w.next(timeout=5)
            assert (method, params["uri"]) == ("notifications/resources/updated", "mcpkit://counter")
            await c.call_tool("add_tool", {"name": f"watched_{mode}"})
            method, _ = await w.next(timeout=5)
            assert method == "notifications/tools/list_changed"
        # after the watch ended (unsubscribed), updates no longer arrive through it
        await c.call_tool("touch")
        assert await c.read_text("mcpkit://counter") == "2"
