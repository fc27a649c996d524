"""Showing text a server sent to a person, safely: :func:`visible` is the ONE sanitizer the CLI and the checker use.

A server controls tool names, descriptions, results, resource and prompt text, error and progress messages,
elicitation titles and its own stderr. Printed as they are, ANSI/OSC escape sequences in them would clear the
screen, set the window title or hide an OSC 8 link, and bidi overrides would make text read differently from what
it is. :func:`visible` turns every such character into a visible escape (``\\x1b``, ``\\u202e``), and
:func:`text` wraps the result in a :class:`rich.text.Text`, which rich never parses as markup (so ``[link=...]``
or a tool named ``[/x]`` are shown as written).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.text import Text

__all__ = ["MAX_CELL_CHARS", "json_visible", "text", "visible"]

MAX_CELL_CHARS = 10_000
"""Longest one-line server string (a name, a table cell, a progress message) shown whole; the rest is cut with a
note saying how much. Multi-line text (results, resources, stderr) is shown whole: its size is bounded upstream."""

_BIDI_AND_INVISIBLE = [
    *(0x061C, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2028, 0x2029, 0x2060, 0xFEFF),
    *range(0x202A, 0x202F),  # LRE RLE PDF LRO RLO
    *range(0x2066, 0x206A),  # LRI RLI FSI PDI
]


def _table(keep_newlines: bool) -> dict[int, str]:
    table: dict[int, str] = {}
    for cp in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]:
        table[cp] = f"\\x{cp:02x}"
    for cp in _BIDI_AND_INVISIBLE:
        table[cp] = f"\\u{cp:04x}"
    del table[0x09]  # a tab is harmless
    if keep_newlines:
        del table[0x0A]
    else:
        table[0x0A] = "\\n"
    return table


_MULTI_LINE = _table(keep_newlines=True)
_ONE_LINE = _table(keep_newlines=False)


def visible(value: Any, *, one_line: bool = False, limit: int | None = None) -> str:
    """``str(value)`` with every control character (C0 but tab/newline, DEL, C1 — so every ANSI/OSC sequence —
    and bidi overrides, isolates and zero-width characters) replaced by a visible escape such as ``\\x1b``.

    ``one_line=True`` also escapes newlines (for names and table cells) and cuts the text at
    :data:`MAX_CELL_CHARS` characters (or ``limit``), with a note of how many characters were left out.
    """
    s = value if isinstance(value, str) else str(value)
    if limit is None and one_line:
        limit = MAX_CELL_CHARS
    cut = ""
    if limit is not None and len(s) > limit:
        cut = f" [... {len(s) - limit} more characters not shown]"
        s = s[:limit]
    return s.translate(_ONE_LINE if one_line else _MULTI_LINE) + cut


def text(value: Any, style: str = "", *, one_line: bool = False) -> Text:
    """:func:`visible` as a rich ``Text`` (never parsed as markup), optionally styled."""
    from rich.text import Text

    return Text(visible(value, one_line=one_line), style=style)


_JSON_TABLE = {cp: f"\\u{cp:04x}" for cp in [0x7F, *range(0x80, 0xA0), *_BIDI_AND_INVISIBLE]}


def json_visible(encoded: str) -> str:
    """JSON text (as ``json.dumps(..., ensure_ascii=False)`` writes it) with DEL, C1, bidi and zero-width characters
    written as ``\\uXXXX`` escapes: still the same JSON value, and safe to print on a terminal (``json.dumps``
    already escapes C0 controls)."""
    return encoded.translate(_JSON_TABLE)
