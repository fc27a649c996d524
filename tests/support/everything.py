"""Harness for the examples/everything.py tests (no tests here): a fresh app per test, a real ClientSession over
a memory pair with recording client handlers, and a look inside the event loop for "is this function still
running?" (to prove that a cancelled tool really stops)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from mcpkit.client.lowlevel import ClientSession
from mcpkit.server.app import MCPKit
from mcpkit.transports.memory import create_memory_pair
from support.paths import REPO

EVERYTHING = REPO / "examples" / "everything.py"
MODES = ("handshake", "modern")

_module: ModuleType | None = None


def everything_module() -> ModuleType:
    global _module
    if _module is None:
        spec = importlib.util.spec_from_file_location("everything_example", EVERYTHING)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules["everything_example"] = mod
        spec.loader.exec_module(mod)
        _module = mod
    return _module


def new_app() -> MCPKit:
    app = everything_module().create_app()
    assert isinstance(app, MCPKit)
    return app


@dataclass
class Recorder:
    """What the client's handlers saw."""

    notifications: list[tuple[str, Any]] = field(default_factory=list)
    logs: list[dict[str, Any]] = field(default_factory=list)
    sampling: list[dict[str, Any]] = field(default_factory=list)
    elicitations: list[dict[str, Any]] = field(default_factory=list)
    elicit_answer: dict[str, Any] = field(default_factory=lambda: {"action": "accept", "content": {"name": "Ada"}})
    event: asyncio.Event = field(default_factory=asyncio.Event)

    def on_notification(self, method: str, params: Any) -> None:
        self.notifications.append((method, params))
        self.event.set()

    def on_log(self, params: dict[str, Any]) -> None:
        self.logs.append(params)
        self.event.set()

    def on_sampling(self, params: dict[str, Any]) -> dict[str, Any]:
        self.sampling.append(params)
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "The answer is 42."},
            "model": "test-model",
            "stopReason": "endTurn",
        }

    def on_elicit(self, params: dict[str, Any]) -> dict[str, Any]:
        self.elicitations.append(params)
        return self.elicit_answer

    async def wait_for(self, method: str, timeout: float = 5.0) -> Any:
        """The params of the first notification ``method`` (waits for it)."""

        async def find() -> Any:
            while True:
                for m, p in self.notifications:
                    if m == method:
                        return p
                self.event.clear()
                await self.event.wait()

        return await asyncio.wait_for(find(), timeout)


@contextlib.asynccontextmanager
async def connect(
    app: MCPKit | None = None,
    *,
    mode: str | None = None,
    version: str | None = None,
    tap: Any = None,
    traffic: Any = None,
    rec: Recorder | None = None,
    client_handlers: bool = True,
    **kw: Any,
) -> AsyncIterator[tuple[ClientSession, MCPKit, Recorder]]:
    app = app or new_app()
    rec = rec or Recorder()
    c, s = create_memory_pair(tap=tap)
    task = asyncio.create_task(app.serve(s))
    options: dict[str, Any] = {
        "notification_handler": rec.on_notification,
        "logging_handler": rec.on_log,
        "tap": traffic,  # the client engine's message tap (a WireRecorder); ``tap``: the memory pair's bytes
    }
    if client_handlers:
        options.update(
            sampling_handler=rec.on_sampling,
            elicitation_handler=rec.on_elicit,
            roots=[{"uri": "file:///work", "name": "work"}, "file:///tmp"],
        )
    options.update(kw)
    try:
        era = mode or ("auto" if version is not None else "handshake")  # (a pinned revision chooses its era)
        async with ClientSession(c, mode=era, protocol_version=version, **options) as cs:
            yield cs, app, rec
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 5)


def text_of(result: Any) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)
