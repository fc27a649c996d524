"""The parts of a function's docstring that become MCP descriptions: the description of the tool, prompt or
resource (the text before the first section) and one description per parameter, in the Google (``Args:`` and its
synonyms), Sphinx (``:param x:``) and NumPy (``Parameters`` + rule) styles."""

from __future__ import annotations

import dataclasses
import inspect
import re

# Google-style section headers (the Napoleon list). The description of a tool or prompt is the text before the
# first of them; "Args" and its synonyms give the parameter descriptions; every other section is left out.
_ARG_SECTIONS = (
    "args",
    "arguments",
    "parameters",
    "params",
    "keyword args",
    "keyword arguments",
    "kwargs",
    "other parameters",
)
_GOOGLE_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Kwargs|Other Parameters|Returns?|"
    r"Raises|Yields?|Examples?|Notes?|Attributes|Methods|References|See Also|Todo|Warnings?|Warns|Caution|"
    r"Danger|Error|Hint|Important|Tip|Attention)\s*:\s*$"
)
_SPHINX_PARAM = re.compile(r"^\s*:param\s+(?:[^:]+\s)?(\w+)\s*:\s*(.*)$")
_NUMPY_RULE = re.compile(r"^\s*-{3,}\s*$")


@dataclasses.dataclass(slots=True)
class Docstring:
    summary: str | None
    params: dict[str, str]


def parse_docstring(doc: str | None) -> Docstring:
    """Split a docstring into its description and per-parameter descriptions."""
    if not doc:
        return Docstring(None, {})
    lines = inspect.cleandoc(doc).splitlines()
    params: dict[str, str] = {}
    summary: list[str] = []
    section: str | None = None
    current: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        sphinx = _SPHINX_PARAM.match(line)
        if sphinx:
            current = str(sphinx.group(1))
            params[current] = sphinx.group(2).strip()
            section = "sphinx"
            i += 1
            continue
        if line.strip().startswith(":") and section == "sphinx":
            current = None
            i += 1
            continue
        g = _GOOGLE_SECTION.match(line)
        if g:
            section = "args" if g.group(1).lower() in _ARG_SECTIONS else "other"
            current = None
            i += 1
            continue
        if i + 1 < len(lines) and _NUMPY_RULE.match(lines[i + 1]) and line.strip():
            name = line.strip().lower()
            section = "numpy" if name in _ARG_SECTIONS else "other"
            current = None
            i += 2
            continue
        if section is None:
            summary.append(line)
        elif section == "args":
            m = re.match(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line) if line[:1].isspace() else None
            indent = len(line) - len(line.lstrip())
            if m and (current is None or indent <= _arg_indent(lines, i)):
                current = str(m.group(1)).lstrip("*")
                params[current] = m.group(2).strip()
            elif current and line.strip():
                params[current] = (params[current] + " " + line.strip()).strip()
            elif not line.strip():
                current = None if not line[:1].isspace() else current
        elif section == "numpy":
            if line and not line[:1].isspace():
                current = line.split(":")[0].strip().lstrip("*")
                params[current] = ""
            elif current and line.strip():
                params[current] = (params[current] + " " + line.strip()).strip()
        elif section == "sphinx" and current and line.strip():
            params[current] = (params[current] + " " + line.strip()).strip()
        i += 1
    text = "\n".join(summary).strip()
    return Docstring(text or None, params)


def _arg_indent(lines: list[str], i: int) -> int:
    # the indentation of the first argument line of the current Args section
    j = i
    while j > 0 and not _GOOGLE_SECTION.match(lines[j - 1]):
        j -= 1
    for line in lines[j:]:
        if line.strip():
            return len(line) - len(line.lstrip())
    return 0


__all__ = ["Docstring", "parse_docstring"]
