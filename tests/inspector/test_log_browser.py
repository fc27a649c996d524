"""The message log (static/log.js) in a real Chromium: the keyboard focus of a row drawn as a window over the log, and
the rows' positions when a row's height changes with the page's size."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from support.browser import (
    FLOOD,
    LOG_ROWS,
    TWO_FRAMES,
    InspectorThread,
    chromium,
    log_drawn,
    log_messages,
    open_inspector,
)

# The seq of the log row that has focus (0: none), and the id of the element that has it.
FOCUSED_ROW = "() => Number(document.activeElement.closest('#log > li')?.dataset.seq || 0)"
FOCUSED_ID = "() => document.activeElement.id || document.activeElement.tagName"
IN_TAB_ORDER = """() => [...document.querySelectorAll('#log-scroll, #log button.row')].filter((el) => el.tabIndex >= 0)
  .map((el) => el.id || Number(el.parentElement.dataset.seq))"""


@pytest.fixture
def running() -> Iterator[InspectorThread]:
    inspector = InspectorThread(FLOOD, mode="handshake")
    try:
        yield inspector
    finally:
        inspector.stop()


@pytest.fixture
def page(running: InspectorThread) -> Iterator[Any]:
    with chromium() as browser:
        yield open_inspector(browser, running)


def scroll_to(page: Any, entries: list[int], seq: int) -> None:
    """The log scrolled (as the wheel or the scroll bar does) to show entry ``seq`` at its top."""
    height = page.evaluate("() => document.querySelector('#log li').getBoundingClientRect().height")
    page.evaluate(f"() => {{ document.getElementById('log-scroll').scrollTop = {entries.index(seq) * height}; }}")


def test_a_focused_row_scrolled_out_of_the_window_keeps_its_place_for_the_arrow_keys(
    page: Any, running: InspectorThread
) -> None:
    """A focused row scrolled far out of the window (its element removed) leaves focus on the log's scroll box, not
    on the page's body: ArrowDown goes on from that row, scrolled back into view; the row is given focus back when
    it is drawn again. One place of the log is in the tab order (the focused row, or the box when it is not drawn).
    Before, focus fell to the body and the arrow keys scrolled the page."""
    log_messages(running, 400)
    entries, _ = log_drawn(page, running)
    middle = entries[len(entries) // 2]
    scroll_to(page, entries, middle)
    log_drawn(page, running, middle)
    page.focus(f"#log li[data-seq='{middle}'] button.row")
    page.keyboard.press("ArrowDown")
    after = entries[entries.index(middle) + 1]
    assert page.evaluate(FOCUSED_ROW) == after
    assert page.evaluate(IN_TAB_ORDER) == [after]
    # scrolled away with the wheel, past the window's margin: the row's element goes, focus stays in the log
    box = page.locator("#log-scroll").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, -100_000)
    page.wait_for_function(f"() => !document.querySelector(\"#log li[data-seq='{after}']\")", timeout=30_000)
    page.evaluate(TWO_FRAMES)
    assert page.evaluate(FOCUSED_ID) == "log-scroll"
    assert page.evaluate(IN_TAB_ORDER) == ["log-scroll"]
    # the arrow key goes on from the row it was on, scrolled into view
    page.keyboard.press("ArrowDown")
    following = entries[entries.index(after) + 1]
    assert page.evaluate(FOCUSED_ROW) == following
    seen = [r["seq"] for r in page.evaluate(LOG_ROWS) if r["seen"]]
    assert following in seen, seen
    assert page.evaluate(IN_TAB_ORDER) == [following]
    # scrolled away and back: the row has focus again once drawn
    page.mouse.wheel(0, 100_000)
    page.wait_for_function(f"() => !document.querySelector(\"#log li[data-seq='{following}']\")", timeout=30_000)
    assert page.evaluate(FOCUSED_ID) == "log-scroll"
    scroll_to(page, entries, following)
    page.wait_for_function(f"() => ({FOCUSED_ROW})() === {following}", timeout=30_000)
    page.keyboard.press("ArrowUp")
    assert page.evaluate(FOCUSED_ROW) == after


def test_the_rows_are_placed_again_when_their_height_changes_with_the_pages_size(
    page: Any, running: InspectorThread
) -> None:
    """A row's height is measured again when the log's box is resized (a zoom, a window resized): scrolled to the
    middle of 400 rows whose height grew with the font, every row drawn is where the full list has it (it drifted
    by the old height times the rows above it: the height was measured once)."""
    log_messages(running, 400)
    entries, rows = log_drawn(page, running)
    before = rows[0]["height"]
    middle = entries[len(entries) // 2]
    page.evaluate("() => { document.documentElement.style.fontSize = '150%'; }")  # (a text zoom: rows get taller)
    page.set_viewport_size({"width": 1200, "height": 900})
    page.evaluate(TWO_FRAMES)
    scroll_to(page, entries, middle)
    entries, rows = log_drawn(page, running, middle)
    assert rows[0]["height"] > before + 1, (before, rows[0]["height"])
    seen = [r["seq"] for r in rows if r["seen"]]
    assert abs(entries.index(seen[0]) - entries.index(middle)) <= 1, (seen[0], middle)


def test_the_log_is_one_stop_of_the_tab_order_and_home_and_end_reach_its_ends(
    page: Any, running: InspectorThread
) -> None:
    """Before any row had focus the log's scroll box is its one place in the tab order: ArrowDown from it focuses the
    first row in view; End focuses the last entry and Home the first, each scrolled into view."""
    log_messages(running, 400)
    entries, _ = log_drawn(page, running)
    assert page.evaluate(IN_TAB_ORDER) == ["log-scroll"]
    page.focus("#log-clear")  # (the control before the log)
    page.keyboard.press("Tab")
    assert page.evaluate(FOCUSED_ID) == "log-scroll"
    page.keyboard.press("ArrowDown")
    seen = [r["seq"] for r in page.evaluate(LOG_ROWS) if r["seen"]]
    assert page.evaluate(FOCUSED_ROW) == seen[0]
    page.keyboard.press("Home")
    assert page.evaluate(FOCUSED_ROW) == entries[0]
    assert entries[0] in [r["seq"] for r in page.evaluate(LOG_ROWS) if r["seen"]]
    page.keyboard.press("End")
    last = page.evaluate("() => Number(document.querySelector('#log li:last-child').dataset.seq)")
    assert page.evaluate(FOCUSED_ROW) == last >= entries[-1]
    page.keyboard.press("Shift+Tab")  # (out of the log: one stop)
    assert page.evaluate(FOCUSED_ID) == "log-clear"
