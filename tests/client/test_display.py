"""How names and descriptions are shown to people (``mcpkit.client.display``, used by the CLI and the inspector):
a title once, docstring markup rendered rather than printed."""

from __future__ import annotations

import os
import subprocess
import sys

from mcpkit.client.display import display_name, plain, segments, shown_description
from support.paths import REPO

EVERYTHING = str(REPO / "examples" / "everything.py")


def test_rest_and_markdown_inline_markup_become_styled_pieces() -> None:
    assert segments("Work for ``steps`` x ``delay_ms``, reporting progress.") == [
        ("", "Work for "),
        ("code", "steps"),
        ("", " x "),
        ("code", "delay_ms"),
        ("", ", reporting progress."),
    ]
    assert segments("See :class:`~mcpkit.Client` and :func:`run`.") == [
        ("", "See "),
        ("code", "Client"),
        ("", " and "),
        ("code", "run"),
        ("", "."),
    ]
    assert segments("a `b` *c* **d**") == [
        ("", "a "),
        ("code", "b"),
        ("", " "),
        ("em", "c"),
        ("", " "),
        ("strong", "d"),
    ]
    assert plain("Use `the docs <https://example.com>`_ now") == "Use the docs now"
    assert plain("Example::\n\n    code") == "Example:\n\n    code"


def test_text_that_only_looks_like_markup_stays_as_written() -> None:
    assert plain("2*3*4 and snake_case_name and a * b") == "2*3*4 and snake_case_name and a * b"
    assert plain("an unclosed ``literal") == "an unclosed ``literal"
    assert segments("") == [] and segments(None) == []


def test_a_description_that_repeats_the_title_is_not_shown_twice() -> None:
    assert shown_description("Add two integers.", "Add two integers") is None
    assert shown_description("  add TWO   integers  ", "Add two integers") is None
    assert shown_description("Add two integers, exactly.", "Add two integers") == "Add two integers, exactly."
    assert shown_description(None, "x") is None and shown_description("   ", "x") is None


def test_the_display_name_prefers_title_then_annotation_title_then_name() -> None:
    assert display_name({"name": "add", "title": "Add"}) == "Add"
    assert display_name({"name": "add", "annotations": {"title": "Adder"}}) == "Adder"
    assert display_name({"name": "add", "title": " ", "annotations": {}}) == "add"


def test_mcpkit_tools_shows_a_title_once_and_no_rest_markup() -> None:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "220"}
    env.pop("FORCE_COLOR", None)
    proc = subprocess.run(
        [sys.executable, "-m", "mcpkit.cli.main", "tools", EVERYTHING],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.count("Add two integers") == 1, out
    assert "``" not in out and "Work for steps x delay_ms" in out
    assert "steps: integer = 5" in out and "delay_ms: integer = 100" in out
