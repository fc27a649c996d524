"""Source text for :mod:`mcpkit.client.codegen` that cannot carry code: Python identifiers made from a server's
names, string literals and docstrings made from its text.

Everything a server sends reaches the generated module through one of three doors, each closed to code:

* :func:`pascal` / :func:`snake` keep ASCII letters, digits and underscores only (other characters are folded to
  ASCII or dropped), never give a keyword, and cut the result to :data:`MAX_NAME_LENGTH`;
* :func:`py_str` writes a double-quoted literal that is pure ASCII: quotes, backslashes, control and non-ASCII
  characters are escapes, so the literal cannot end early and reads back as the same string;
* :func:`docstring` writes text for a triple-quoted docstring the same way (every ``\\`` escaped, and every ``"``
  next to another or at the end of a line, so no run of quotes can close it), wrapped to the line length.
"""

from __future__ import annotations

import keyword
import re
import textwrap
import unicodedata

MAX_NAME_LENGTH = 64
"""The longest identifier made from a server's name (before a suffix that keeps it unique)."""

MAX_DESCRIPTION_CHARS = 4000
"""Of a description, at most this many characters reach a docstring (the rest is cut, said with ``...``)."""

LINE_LENGTH = 120
"""The generated module's lines stay within this, but for a single word too long to break."""

# E741: a name a reader mistakes for a digit; keywords are handled apart
AMBIGUOUS = frozenset({"l", "I", "O"})


def _words(text: str) -> list[str]:
    """The ASCII words of ``text``: accents folded (``é`` → ``e``), everything else not a letter or digit a
    separator, ``camelCase`` split at its humps."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    spaced = re.sub(r"[^A-Za-z0-9]+", " ", folded)
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", spaced)
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", spaced)
    return spaced.split()


def pascal(text: str, fallback: str) -> str:
    """``text`` as a ``PascalCase`` identifier (``get-weather`` → ``GetWeather``); ``fallback`` when nothing of it
    is left, a prefix ``T`` before a leading digit."""
    name = "".join(w[:1].upper() + w[1:] for w in _words(text))[:MAX_NAME_LENGTH] or fallback
    if name[0].isdigit():
        name = "T" + name
    return name + "_" if keyword.iskeyword(name) else name


def snake(text: str, fallback: str) -> str:
    """``text`` as a ``snake_case`` identifier (``getWeather`` → ``get_weather``); ``fallback`` when nothing of it
    is left, ``fallback_`` before a leading digit; a keyword or an ambiguous name gets a trailing ``_``."""
    name = "_".join(w.lower() for w in _words(text))[:MAX_NAME_LENGTH].rstrip("_") or fallback
    if name[0].isdigit():
        name = f"{fallback}_{name}"
    return name + "_" if keyword.iskeyword(name) or name in AMBIGUOUS else name


def unique(wanted: str, taken: set[str], sep: str = "") -> str:
    """``wanted``, or ``wanted2``, ``wanted3``... (``sep`` between), the first not in ``taken``; claimed there."""
    name, n = wanted, 2
    while name in taken:
        name, n = f"{wanted}{sep}{n}", n + 1
    taken.add(name)
    return name


def _escape(text: str, quote: str = '"', doc: bool = False) -> str:
    """``text`` escaped for a literal in ``quote``; ``doc``: for a triple-quoted one, where a quote needs an escape
    only before another quote or at the end (no run of three, no quote next to the closing ones)."""
    out: list[str] = []
    for i, ch in enumerate(text):
        code = ord(ch)
        if ch == "\\" or (ch == quote and (not doc or i + 1 == len(text) or text[i + 1] == quote)):
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return "".join(out)


def py_str(text: str) -> str:
    """An ASCII Python literal whose value is ``text``: double-quoted, single-quoted when that needs fewer escapes
    (as ``ruff format`` writes it)."""
    quote = "'" if text.count('"') > text.count("'") else '"'
    return quote + _escape(text, quote) + quote


def docstring(text: str, indent: str, first: str = "") -> list[str]:
    """Lines of a docstring body for ``text`` (server text), each starting with ``indent`` (an empty line stays
    empty): escaped as :func:`py_str` escapes (so nothing closes the docstring and its value is ``text``), cut at
    :data:`MAX_DESCRIPTION_CHARS`, wrapped within :data:`LINE_LENGTH`. ``first``: the prefix of the first line
    (``name: `` of an ``Args:`` entry); the lines after it are indented four more."""
    if len(text) > MAX_DESCRIPTION_CHARS:
        text = text[:MAX_DESCRIPTION_CHARS] + "..."
    lines: list[str] = []
    width = LINE_LENGTH - len(indent) - 6  # (room for the opening and closing """)
    paragraphs = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for i, paragraph in enumerate(paragraphs):
        escaped = _escape(paragraph.strip() if first else paragraph.rstrip(), doc=True)
        lead = first if i == 0 else ("    " if first else "")
        if not escaped.strip():
            if lines and lines[-1] and i < len(paragraphs) - 1:
                lines.append("")
            continue
        body = escaped.lstrip(" ")
        margin = lead + " " * (len(escaped) - len(body)) if not first else lead
        wrapped = textwrap.wrap(
            body,
            width=max(width, 20),
            initial_indent=margin,
            subsequent_indent=" " * len(margin) if not first else "    ",
            break_long_words=False,
            break_on_hyphens=False,
        )
        lines += [indent + line for line in wrapped]
    while lines and not lines[-1]:
        lines.pop()
    return lines
