"""Showing a server's names and descriptions to a person: one title, and docstring markup rendered, not printed.

A server built from Python docstrings sends descriptions written in reStructuredText or Markdown (``steps``,
:class:`Foo`, *emphasis*), and often a ``title`` that its description only repeats ("Add two integers" and
"Add two integers."). The faces that show them (the ``mcpkit`` command, the inspector page) use this module so
they read alike:

- :func:`display_name`: the name to show (``title``, then ``annotations.title``, then ``name``: the order the
  specification gives for tools);
- :func:`shown_description`: the description to show under that name, or None when it only repeats it;
- :func:`segments`: a description split into ``(style, text)`` pieces, the inline markup recognised and removed
  (``code``, ``em``, ``strong``, or ``""`` for plain text); :func:`plain` joins them back into plain text.

Nothing here renders anything: every piece is plain text, for the caller to show as text (never as markup).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["display_name", "plain", "segments", "shown_description"]

Segment = tuple[str, str]

MAX_MARKUP_CHARS = 100_000
"""Descriptions longer than this are shown as plain text, unparsed (the scan stays linear and small)."""

# One pass over the inline markup of reStructuredText and Markdown. Order matters: a role before interpreted text,
# a double backtick before a single one, ** before *.
_INLINE = re.compile(
    r"""
      (?P<role>:[A-Za-z][\w.+:-]*:`(?P<role_body>[^`\n]+)`)         # :class:`~a.B`, :func:`x`
    | ``(?P<literal>[^`\n](?:[^\n]*?[^`\n])?)``                     # ``literal``
    | `(?P<interp>[^`\n]+)`(?:__?)?                                 # `interpreted`, `code`, `link <url>`_
    | (?<![\w*])\*\*(?P<strong>[^*\n]+?)\*\*(?![\w*])               # **strong**
    | (?<![\w*])\*(?P<em>[^*\s](?:[^*\n]*?[^*\s])?)\*(?![\w*])      # *emphasis*
    """,
    re.VERBOSE,
)
_LINK_TARGET = re.compile(r"^(?P<text>.*?)\s*<[^<>]*>$", re.DOTALL)
_SPACES = re.compile(r"\s+")


def _reference_text(body: str) -> str:
    """What a role's or a link's body shows: ``Text <target>`` -> Text; ``~a.b.C`` -> C; ``!x`` -> x."""
    match = _LINK_TARGET.match(body)
    if match and match.group("text"):
        return match.group("text")
    body = body.lstrip("!")
    if body.startswith("~"):
        return body[1:].rsplit(".", 1)[-1]
    return body


def segments(text: str | None) -> list[Segment]:
    """``text`` as ``(style, piece)`` pairs: the inline markup of reST and Markdown recognised and removed.

    ``style`` is ``"code"`` (``literal``, `interpreted`, :role:`target`), ``"strong"``, ``"em"`` or ``""``. A
    paragraph ending in ``::`` (reST's literal-block marker) ends in one colon. Newlines are kept."""
    if not text:
        return []
    if len(text) > MAX_MARKUP_CHARS:
        return [("", text)]
    text = re.sub(r"(?<=\S)::(?=\s*(\n|$))", ":", text)
    text = re.sub(r"(?m)(^|\s)::(?=\s*(\n|$))", r"\1", text)
    out: list[Segment] = []
    pos = 0
    for match in _INLINE.finditer(text):
        if match.start() > pos:
            out.append(("", text[pos : match.start()]))
        if match.group("role") is not None:
            out.append(("code", _reference_text(match.group("role_body"))))
        elif match.group("literal") is not None:
            out.append(("code", match.group("literal")))
        elif match.group("interp") is not None:
            body = match.group("interp")
            linked = match.group(0).endswith("_")
            out.append(("" if linked else "code", _reference_text(body) if linked else body))
        elif match.group("strong") is not None:
            out.append(("strong", match.group("strong")))
        else:
            out.append(("em", match.group("em")))
        pos = match.end()
    if pos < len(text):
        out.append(("", text[pos:]))
    merged: list[Segment] = []
    for style, piece in out:
        if merged and merged[-1][0] == style:
            merged[-1] = (style, merged[-1][1] + piece)
        elif piece:
            merged.append((style, piece))
    return merged


def plain(text: str | None) -> str:
    """``text`` with its inline markup removed (see :func:`segments`)."""
    return "".join(piece for _, piece in segments(text))


def _same_words(a: str, b: str) -> bool:
    def norm(s: str) -> str:
        return _SPACES.sub(" ", s).strip().rstrip(".:;!").strip().casefold()

    return norm(a) == norm(b)


def display_name(item: Any) -> str:
    """The name to show for a tool, prompt, resource or template (a model or its JSON dict): its ``title``, else
    its ``annotations.title`` (tools), else its ``name``."""

    def get(obj: Any, key: str, attr: str) -> Any:
        if isinstance(obj, dict):
            return obj.get(key)
        return getattr(obj, attr, None)

    title = get(item, "title", "title")
    if isinstance(title, str) and title.strip():
        return title
    annotations = get(item, "annotations", "annotations")
    if annotations is not None:
        ann_title = get(annotations, "title", "title")
        if isinstance(ann_title, str) and ann_title.strip():
            return ann_title
    name = get(item, "name", "name")
    return name if isinstance(name, str) else ""


def shown_description(description: str | None, shown_name: str | None) -> str | None:
    """The description to show under ``shown_name``: None when there is none or when it only repeats the name
    (same words, case and final punctuation aside)."""
    if not description or not description.strip():
        return None
    if shown_name and _same_words(plain(description), shown_name):
        return None
    return description.strip()
