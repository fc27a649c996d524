"""Tools run as tasks from the inspector (the client's task API), in both protocol forms: the task's status is
shown in its call, its result when it completes, and cancelling the call cancels the server's task."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from mcpkit.inspector import Inspector
from support.browser import InspectorProcess, chromium
from support.paths import SERVERS

SERVER = SERVERS / "tasks_inspector_server.py"


def _app() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("tasks_inspector_server", SERVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.app


async def _ended(inspector: Inspector, call_id: str) -> dict[str, Any]:
    for _ in range(400):
        call = {c["id"]: c for c in inspector.snapshot()["calls"]}[call_id]
        if call["status"] != "running":
            return call
        await asyncio.sleep(0.025)
    raise AssertionError(f"{call_id} still runs")


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_a_tool_runs_as_a_task_and_a_cancel_cancels_the_task(mode: str) -> None:
    inspector = Inspector(_app(), mode=mode)
    await inspector.connect()
    try:
        done = await _ended(inspector, await inspector.start_call("brew", {"steps": 3}, as_task=True))
        assert done["status"] == "done" and done["result"]["content"][0]["text"] == "brewed in 3 steps"
        assert done["taskState"]["status"] == "completed" and done["taskState"]["taskId"]
        running = await inspector.start_call("brew", {"steps": 100, "delay_ms": 50}, as_task=True)
        for _ in range(200):
            state = {c["id"]: c for c in inspector.snapshot()["calls"]}[running].get("taskState")
            if state and state["status"] == "working":
                break
            await asyncio.sleep(0.025)
        assert inspector.cancel_call(running)
        cancelled = await _ended(inspector, running)
        assert cancelled["status"] == "cancelled" and cancelled["taskState"]["status"] == "cancelled"
        if mode == "handshake":
            listed = {t["taskId"]: t["status"] for t in (await inspector.tasks("list"))["tasks"]}
            assert listed[cancelled["taskState"]["taskId"]] == "cancelled"
    finally:
        await inspector.aclose()


@pytest.fixture
def inspector() -> Iterator[InspectorProcess]:
    proc = InspectorProcess("inspect", f"{sys.executable} {SERVER}", "--mode", "handshake")
    try:
        yield proc
    finally:
        proc.stop()


def test_the_page_runs_a_tool_as_a_task_and_lists_the_tasks(inspector: InspectorProcess) -> None:
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(inspector.url)
        page.click("#tools-list button[data-key='brew']")
        page.check("#task-toggle")
        page.click("#call-button")
        page.locator(".call[data-status='done'] .task-state", has_text="completed").wait_for(timeout=20_000)
        assert "brewed in 3 steps" in page.text_content(".call[data-status='done']")
        page.click("#tab-tasks")
        page.locator("#tasks td", has_text="completed").wait_for(timeout=10_000)
