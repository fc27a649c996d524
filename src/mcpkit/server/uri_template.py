"""RFC 6570 URI templates, levels 1-3: expansion and the reverse, matching a URI back to its variables.

Supported expressions: ``{var}``, ``{+var}``, ``{#var}``, ``{.var}``, ``{/var}``, ``{;var}``, ``{?x,y}``,
``{&x}`` and several variables per expression (``{x,y}``). Values are strings (level 4 list/explode modifiers
are not supported and rejected when the template is parsed, so a mistake shows up at registration time).

Matching is what a server needs: ``UriTemplate("mcpkit://items/{id}").match("mcpkit://items/7")`` returns
``{"id": "7"}``. Query expressions (``{?q}``) are matched in any order and may be absent; simple expressions
never match across ``/``, so ``{id}`` cannot smuggle a path: neither a literal ``/`` nor an encoded one (``%2F``,
which would decode to ``/``), nor a dot segment (``.``, ``..``, ``%2E%2E``), is matched by ``{var}``, ``{.var}``,
``{/var}``, ``{;var}`` or ``{?var}``. Only the
reserved forms ``{+var}`` and ``{#var}`` may hold a ``/``: writing them is the template author's explicit opt-in to
path-like values (validate such a value before joining it onto a directory).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

_EXPRESSION = re.compile(r"\{([^{}]*)\}")
_VARNAME = re.compile(r"^(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*$")
_OPERATORS = "+#./;?&"
_RESERVED = ":/?#[]@!$&'()*+,;="
_DOT_SEGMENTS = frozenset((".", ".."))
# operator -> (first, separator, named, allow reserved characters)
_OP_RULES: dict[str, tuple[str, str, bool, bool]] = {
    "": ("", ",", False, False),
    "+": ("", ",", False, True),
    "#": ("#", ",", False, True),
    ".": (".", ".", False, False),
    "/": ("/", "/", False, False),
    ";": (";", ";", True, False),
    "?": ("?", "&", True, False),
    "&": ("&", "&", True, False),
}


class UriTemplateError(ValueError):
    """The template is not a valid level 1-3 RFC 6570 template."""


@dataclass(frozen=True, slots=True)
class _Expression:
    operator: str
    names: tuple[str, ...]


class UriTemplate:
    """A parsed RFC 6570 (level 1-3) URI template."""

    __slots__ = (
        "_flags",
        "_groups",
        "_may_hold_slash",
        "_parts",
        "_query_names",
        "_regex",
        "template",
        "variables",
    )

    def __init__(self, template: str) -> None:
        self.template: str = template
        parts: list[str | _Expression] = []
        pos = 0
        for m in _EXPRESSION.finditer(template):
            if m.start() > pos:
                parts.append(template[pos : m.start()])
            parts.append(_parse_expression(m.group(1), template))
            pos = m.end()
        rest = template[pos:]
        if "{" in rest or "}" in rest:
            raise UriTemplateError(f"unbalanced braces in URI template {template!r}")
        if rest:
            parts.append(rest)
        self._parts = tuple(parts)
        names: list[str] = []
        for p in parts:
            if isinstance(p, _Expression):
                for n in p.names:
                    if n in names:
                        raise UriTemplateError(f"variable {n!r} appears twice in {template!r}")
                    names.append(n)
        self.variables: tuple[str, ...] = tuple(names)
        self._groups: dict[str, str] = {}
        self._may_hold_slash: set[str] = set()  # groups of the reserved forms {+var} / {#var}
        self._flags: set[str] = set()  # groups holding ";name[=value]" (path-style parameters)
        self._query_names: tuple[str, ...] = ()
        self._regex = self._compile()

    @staticmethod
    def is_template(uri: str) -> bool:
        """True when ``uri`` contains an expression (``{...}``)."""
        return _EXPRESSION.search(uri) is not None

    def __repr__(self) -> str:
        return f"UriTemplate({self.template!r})"

    # ------------------------------------------------------------------ expansion

    def expand(self, values: dict[str, object]) -> str:
        """Expand with ``values`` (undefined or None variables are omitted, as RFC 6570 says)."""
        out: list[str] = []
        for part in self._parts:
            if isinstance(part, str):
                out.append(part)
                continue
            first, sep, named, reserved = _OP_RULES[part.operator]
            pieces: list[str] = []
            for name in part.names:
                value = values.get(name)
                if value is None:
                    continue
                text = _encode(_to_str(value), reserved)
                if named:
                    if text == "" and part.operator == ";":
                        pieces.append(name)
                    else:
                        pieces.append(f"{name}={text}")
                else:
                    pieces.append(text)
            if pieces:
                out.append(first + sep.join(pieces))
        return "".join(out)

    # ------------------------------------------------------------------ matching

    def _compile(self) -> re.Pattern[str]:
        regex: list[str] = ["^"]
        query: list[str] = []
        counter = 0

        def group(name: str, reserved: bool = False) -> str:
            nonlocal counter
            counter += 1
            g = f"g{counter}"
            self._groups[g] = name
            if reserved:
                self._may_hold_slash.add(g)
            return g

        parts = self._parts
        for i, part in enumerate(parts):
            if isinstance(part, str):
                regex.append(re.escape(part))
                continue
            op, names = part.operator, part.names
            if op in ("?", "&"):
                query.extend(names)
                continue
            if op == "" or op == "+":
                char = "[^?#]" if op == "+" else "[^/?#,]"
                if op == "+" and len(part.names) > 1:
                    char = "[^?#,]"
                # before a "{.ext}" the shortest value: the last dot starts the extension ("report.v2.pdf" is
                # name "report.v2", ext "pdf"), where the longest would take the whole and leave ext out
                following = parts[i + 1] if i + 1 < len(parts) else None
                many = "*?" if isinstance(following, _Expression) and following.operator == "." else "*"
                reserved = op == "+"
                pieces = [f"(?P<{group(names[0], reserved)}>{char}{many})"]
                pieces.extend(f"(?:,(?P<{group(n, reserved)}>{char}{many}))?" for n in names[1:])
                regex.append("".join(pieces))
            elif op == "#":
                inner = "".join(
                    f"(?P<{group(n, True)}>[^,]*)" if i == 0 else f"(?:,(?P<{group(n, True)}>[^,]*))?"
                    for i, n in enumerate(names)
                )
                regex.append(f"(?:#{inner})?")
            elif op == ".":
                regex.extend(f"(?:\\.(?P<{group(n)}>[^/?#.]*))?" for n in names)
            elif op == "/":
                regex.extend(f"(?:/(?P<{group(n)}>[^/?#]*))?" for n in names)
            elif op == ";":
                for n in names:
                    g = group(n)
                    self._flags.add(g)
                    regex.append(f"(?P<{g}>;{re.escape(n)}(?:=[^;/?#]*)?)?")
        if query:
            self._query_names = tuple(query)
            regex.append(r"(?:[?&](?P<q>[^#]*))?")
        regex.append("$")
        return re.compile("".join(regex), re.DOTALL)

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of ``uri`` if it matches this template, else None. Absent optional parts are left out."""
        m = self._regex.match(uri)
        if m is None:
            return None
        found: dict[str, str] = {}
        for g, name in self._groups.items():
            value = m.group(g)
            if value is not None:
                if g in self._flags:
                    value = value[len(name) + 1 :].removeprefix("=")
                value = unquote(value)
                if g not in self._may_hold_slash and ("/" in value or value in _DOT_SEGMENTS):
                    # an encoded "/" (%2F) must not turn a single-segment variable into a path, nor may a
                    # segment be "." or ".." (literal or %2E-encoded: "{dir}/{name}" would climb out)
                    return None
                found[name] = value
        if self._query_names:
            raw = m.group("q")
            if raw:
                wanted = set(self._query_names)
                for key, value in _query_pairs(raw):
                    if key in wanted and key not in found:
                        if "/" in value or value in _DOT_SEGMENTS:
                            return None
                        found[key] = value
        return found


def _query_pairs(raw: str) -> list[tuple[str, str]]:
    """The ``name=value`` pairs of a query, percent-decoded only: RFC 6570 writes a space as %20 and "+" as %2B,
    so a "+" is a literal "+" (not a space, as in HTML form encoding)."""
    pairs = []
    for part in raw.split("&"):
        if part:
            key, _, value = part.partition("=")
            pairs.append((unquote(key), unquote(value)))
    return pairs


def _parse_expression(body: str, template: str) -> _Expression:
    if not body:
        raise UriTemplateError(f"empty expression in URI template {template!r}")
    op = body[0] if body[0] in _OPERATORS else ""
    if body[0] in "=,!@|":
        raise UriTemplateError(f"reserved operator {body[0]!r} in URI template {template!r}")
    names = tuple(n.strip() for n in body[len(op) :].split(","))
    for n in names:
        if n.endswith("*") or ":" in n:
            raise UriTemplateError(f"level 4 modifier in {{{body}}} is not supported ({template!r})")
        if not _VARNAME.match(n):
            raise UriTemplateError(f"invalid variable name {n!r} in URI template {template!r}")
    return _Expression(op, names)


def _to_str(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _encode(text: str, reserved: bool) -> str:
    return quote(text, safe=_RESERVED + "%" if reserved else "")


__all__ = ["UriTemplate", "UriTemplateError"]
