"""A real headless browser for the tests: Debian's ``chromium`` driven by Playwright (``playwright`` from PyPI, in
the dev extra; no browser download: the system binary is launched). ``chromium_path()`` FAILS the test in CI
(``CI`` set: scripts/test.sh installs chromium with apt, so a missing binary is a broken build) and skips it with
a loud reason elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from mcpkit.testing.processes import StartWait

from .paths import REPO

# The flags a headless Chromium needs on a machine with no network but loopback, run as root, in a container.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]

MISSING = (
    "!!! chromium NOT FOUND: the browser tests cannot run. Install it "
    "(`apt-get update && apt-get install -y chromium chromium-driver`, or run `bash scripts/test.sh`). !!!"
)

ARTIFACTS = Path(__file__).resolve().parent.parent.parent / ".artifacts" / "inspector"


def chromium_path() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path is not None:
            return path
    if os.environ.get("CI"):
        pytest.fail(MISSING)
    pytest.skip(MISSING)


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched headless Chromium (a Playwright ``Browser``), closed at the end."""
    path = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def screenshot(page: Any, name: str) -> Path:
    """Save a screenshot of ``page`` as ``.artifacts/inspector/<name>.png`` (kept by CI as an artifact)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path


class InspectorURL:
    """The parts of an inspector's ``url`` (``http://127.0.0.1:PORT/#token=...``) the browser tests use."""

    url: str

    @property
    def base(self) -> str:
        """``http://127.0.0.1:PORT`` (no token)."""
        return self.url.split("/#", 1)[0]

    @property
    def token(self) -> str:
        return self.url.split("#token=", 1)[1]


class InspectorProcess(InspectorURL):
    """``mcpkit <command> ... --no-browser`` (inspect or dev) as a real subprocess; ``url`` is the page it printed."""

    def __init__(self, *args: str, cwd: str | None = None, env: dict[str, str] | None = None, timeout: float = 30.0):
        import select
        import subprocess
        import sys

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpkit.cli.main", *args, "--no-browser"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env={**os.environ, **(env or {})},
        )
        assert self.proc.stdout is not None
        # ``timeout`` seconds, longer while the process is still working (its CPU time grows: a loaded machine
        # starts it slowly), never more than 4 times that (one hung or spinning is given up on)
        wait = StartWait(self.proc.pid, timeout)
        self.url = ""
        seen: list[str] = []
        while not wait.over():
            if not select.select([self.proc.stdout], [], [], 0.2)[0]:
                if self.proc.poll() is not None:
                    break
                continue
            line = self.proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if "http://" in line:
                self.url = line.strip().split()[-1]
                break
        if not self.url:
            self._end()
            err = self.proc.stderr.read() if self.proc.stderr is not None else ""  # (before stop() closes it)
            self.stop()
            raise AssertionError(f"mcpkit {args[0]} printed no URL in {wait.elapsed:.0f}s: {''.join(seen)}\n{err}")

    def stop(self) -> None:
        self._end()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def _end(self) -> None:
        import subprocess

        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class InspectorThread(InspectorURL):
    """An :class:`~mcpkit.inspector.Inspector` served in this process (``start_inspector``: uvicorn on 127.0.0.1, a
    real connection to ``target``) on an event loop of its own thread, for a test that acts inside the inspector at
    a moment it chooses: ``run(fn)`` calls ``fn()`` in one callback of that loop (nothing else runs there meanwhile:
    what ``fn`` publishes reaches the page's queue at once, before any of it is sent) and returns what it returned.
    ``options`` go to ``Inspector`` (``hub=EventHub(queue_size=...)``, ``log=MessageLog(max_entries=...)``)."""

    def __init__(self, target: str, *, timeout: float = 30.0, **options: Any) -> None:
        import asyncio
        import threading

        from mcpkit.inspector import Inspector, start_inspector

        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="inspector", daemon=True)
        self._thread.start()
        self._timeout = timeout

        async def start() -> Any:
            self.inspector = Inspector(target, **options)
            return await start_inspector(self.inspector)

        try:
            self.running = asyncio.run_coroutine_threadsafe(start(), self.loop).result(timeout)
        except BaseException:
            self._end_loop()
            raise
        self.url: str = self.running.url

    def run(self, fn: Any) -> Any:
        """``fn()`` called on the inspector's loop, in one callback (awaited, when it is a coroutine function that
        never waits); its result."""
        import asyncio
        import inspect

        async def call() -> Any:
            result = fn()
            return await result if inspect.isawaitable(result) else result

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(self._timeout)

    def stop(self) -> None:
        import asyncio

        try:
            asyncio.run_coroutine_threadsafe(self.running.stop(), self.loop).result(self._timeout)
        finally:
            self._end_loop()

    def _end_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(self._timeout)
        if not self._thread.is_alive():
            self.loop.close()


# ---------------------------------------------------------------------------------------------- the message log

# A stdio server that sends what a test asks in bulk (log messages, list changes; see its docstring).
FLOOD = f"{sys.executable} {REPO / 'tests' / 'support' / 'servers' / 'flood_inspector_server.py'}"
# Resolves after two animation frames: what the page draws once per frame for the events it took in is drawn by then.
TWO_FRAMES = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"
# The log's rows in the page: seq, where each is in the list (px from its top), its height and whether it is in view
# (the list scrolls in #log-scroll).
LOG_ROWS = """() => { const ol = document.getElementById('log'), top = ol.getBoundingClientRect().top;
  const box = document.getElementById('log-scroll').getBoundingClientRect();
  return [...ol.querySelectorAll('li')].map((li) => { const r = li.getBoundingClientRect();
    return { seq: Number(li.dataset.seq), at: r.top - top, height: r.height,
             seen: r.bottom > box.top + 1 && r.top < box.bottom - 1 }; }); }"""


def open_inspector(browser: Any, running: InspectorURL) -> Any:
    """A page (1400 x 1000) on the inspector at ``running.url``, once it is connected and lists the tools."""
    page = browser.new_context(bypass_csp=True, viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(running.url)
    page.locator("#status-text", has_text="connected").wait_for(timeout=30_000)
    page.locator("#tools-list button").first.wait_for(timeout=30_000)
    return page


def log_messages(running: InspectorThread, n: int) -> None:
    """``n`` messages (``notifications/message`` from the server) logged in the inspector's message log, in one
    callback of its loop."""
    inspector = running.inspector

    async def record() -> None:
        for i in range(n):
            message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": i}}
            inspector.log.record("in", json.dumps(message).encode())

    running.run(record)


def logged(running: InspectorThread) -> list[int]:
    """The seqs of the entries of the inspector's message log, in order."""
    seqs: list[int] = running.run(lambda: [e.seq for e in running.inspector.log.entries()])
    return seqs


def misplaced(rows: list[dict[str, Any]], entries: list[int], seq: int) -> str | None:
    """What is wrong with the log's ``rows`` (``LOG_ROWS``) for the log's ``entries``: ``seq`` not drawn, the rows
    not a run of the entries, or not where the full list of rows of one height has them; None if nothing."""
    if seq not in [r["seq"] for r in rows]:
        return f"{seq} not drawn"
    first = entries.index(rows[0]["seq"]) if rows[0]["seq"] in entries else -1
    if [r["seq"] for r in rows] != entries[first : first + len(rows)]:
        return "not a run of the log's entries"
    height = min(r["height"] for r in rows)
    if abs(rows[0]["at"] - first * height) >= 1:
        return f"{rows[0]} not at {first} x {height} px"
    return None


def log_drawn(
    page: Any, running: InspectorThread, wait_for: int | None = None
) -> tuple[list[int], list[dict[str, Any]]]:
    """The log's seqs and the page's rows (``LOG_ROWS``), once it drew ``wait_for`` (the log's last by default) and
    every row it drew is where the full list has it, the log unchanged while the page was read (a bounded wait: a
    page that fell behind lists the tools and the rest again, and their messages are logged too)."""
    deadline = time.monotonic() + 30
    while True:
        entries = logged(running)
        rows: list[dict[str, Any]] = page.evaluate(LOG_ROWS)
        wrong = misplaced(rows, entries, entries[-1] if wait_for is None else wait_for) if rows else "no rows"
        if wrong is None and logged(running) == entries:
            return entries, rows
        assert time.monotonic() < deadline, wrong
        page.evaluate(TWO_FRAMES)
        time.sleep(0.05)
