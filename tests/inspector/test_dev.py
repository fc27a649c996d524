"""``mcpkit dev``: the real command runs a server with the inspector attached (a real headless Chromium on the
page); editing a tool's docstring reloads the server and the page shows the new text; a change that does not load
keeps the last good server running and the page shows the error; errors are unmasked."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.browser import InspectorProcess, chromium, screenshot

SERVER = '''from mcpkit import MCPKit

app = MCPKit("devloop")


@app.tool
def hello(name: str = "world") -> str:
    """{doc}"""
    return "hello " + name


@app.tool
def crash() -> str:
    """Raise an error that dev mode shows whole."""
    raise ValueError("the secret detail")
'''


def write(path: Path, doc: str, extra: str = "") -> None:
    path.write_text(SERVER.replace("{doc}", doc) + extra)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path / "server.py", "Say hello.")
    return tmp_path


@pytest.fixture
def dev(project: Path) -> Iterator[InspectorProcess]:
    proc = InspectorProcess("dev", str(project / "server.py"), env={"WATCHFILES_FORCE_POLLING": "1"})
    try:
        yield proc
    finally:
        proc.stop()


def tool_text(page: Any) -> str:
    return str(page.text_content("#tools-list button[data-key='hello']"))


@pytest.mark.xfail(
    reason="open bug: in about one run in five the dev loop under polling (WATCHFILES_FORCE_POLLING) reloads once and "
    "then reacts to no further edit, even one saved again seconds later; cause not found yet",
    strict=False,
)
def test_editing_a_docstring_reloads_and_a_broken_change_keeps_the_last_good_server(
    project: Path, dev: InspectorProcess
) -> None:
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(dev.url)
        page.locator("#tools-list button[data-key='hello']", has_text="Say hello.").wait_for(timeout=20_000)
        assert "watching" in page.text_content("#dev")

        time.sleep(0.3)  # (file times of a fast filesystem: make the edit a visible change)
        write(project / "server.py", "Say hello, reloaded.")
        page.locator("#tools-list button[data-key='hello']", has_text="Say hello, reloaded.").wait_for(timeout=30_000)
        page.locator("#dev", has_text="reloaded 1 time").wait_for(timeout=10_000)

        write(project / "server.py", "Say hello, broken.", extra="\ndef oops(:\n")
        page.locator("#dev.failed", has_text="syntax error").wait_for(timeout=30_000)
        screenshot(page, "dev-reload-failed")
        assert "Say hello, reloaded." in tool_text(page)  # the last good server still answers
        page.click("#tools-list button[data-key='hello']")
        page.fill("#tool-form [name='name']", "dev")
        page.click("#call-button")
        page.locator(".call[data-status='done'] pre.text", has_text="hello dev").wait_for(timeout=20_000)

        page.click("#tools-list button[data-key='crash']")
        page.click("#call-button")
        failed = page.locator(".call.iserror").first
        failed.wait_for(timeout=20_000)
        assert "the secret detail" in failed.text_content()  # errors unmasked in dev mode

        write(project / "server.py", "Say hello, fixed.")
        page.locator("#tools-list button[data-key='hello']", has_text="Say hello, fixed.").wait_for(timeout=30_000)
        page.locator("#dev:not(.failed)").wait_for(timeout=10_000)
        screenshot(page, "dev-reloaded")
