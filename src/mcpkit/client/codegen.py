"""Typed client code for a server's tools: :func:`generate` writes one Python module (``mcpkit codegen TARGET -o
module.py`` is the command) with, for each tool, a ``TypedDict`` of its arguments (and of its structured result
when it has an ``outputSchema``), and a class wrapping a :class:`~mcpkit.Client` whose ``async`` methods call the
tools with typed keyword arguments and return typed results.

The module is checked by ``mypy --strict`` and ``ruff`` like hand-written code, and is the same text for the same
tools (tools in name order, everything else in the server's order). The server is untrusted: its names become
identifiers of letters, digits and ``_`` only, its text goes into escaped string literals and docstrings (see
:mod:`mcpkit.client.codegen_text`), and its schemas are read within bounds (:data:`MAX_TOOLS`,
:data:`~mcpkit.client.codegen_types.MAX_SCHEMA_DEPTH`, :data:`~mcpkit.client.codegen_types.MAX_SCHEMA_NODES`).
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..protocol.types import Tool
from .codegen_text import AMBIGUOUS, LINE_LENGTH, docstring, pascal, py_str, snake, unique
from .codegen_types import Alias, Field, Record, Types, split_union
from .results import is_wrapped

__all__ = ["MAX_TOOLS", "CodegenError", "generate"]

MAX_TOOLS = 1000
"""The most tools :func:`generate` writes a module for (``mcpkit codegen --max-tools``)."""

# names the module defines or imports, which no generated name may take
_MODULE_NAMES = frozenset(
    {"annotations", "Any", "Enum", "Final", "Literal", "NotRequired", "TypeAlias", "TypedDict", "cast"}
    | {"Client", "ToolResult", "NotSent", "NOT_SENT"}
)
# names the annotations use, which a method (a name in the class's scope) or a TypedDict key must not shadow
_ANNOTATION_NAMES = frozenset({"str", "int", "float", "bool", "list", "dict"})
_METHOD_RESERVED = _ANNOTATION_NAMES | {"client"}
_PARAM_RESERVED = _ANNOTATION_NAMES | {"self", "arguments", "result", "cast"}
_INDENT = "    "


class CodegenError(ValueError):
    """The tools cannot be made into a module as asked (more than ``max_tools``, a class name that is no
    identifier)."""


@dataclass
class _Param:
    name: str
    field: Field


@dataclass
class _Method:
    name: str
    tool: Tool
    params: list[_Param]
    returns: str | None  # None: no outputSchema, the ToolResult is returned


def generate(
    tools: Iterable[Tool | Mapping[str, Any]],
    *,
    server_name: str = "server",
    server_version: str | None = None,
    class_name: str | None = None,
    max_tools: int = MAX_TOOLS,
) -> str:
    """The source of a Python module with a typed wrapper of :class:`~mcpkit.Client` for these tools (the
    :class:`~mcpkit.protocol.types.Tool` models of ``client.list_tools()``, or their wire dicts).

    The class is ``class_name``, or ``<ServerName>Tools`` from ``server_name``; it is built on a connected client
    (``EverythingTools(client)``), and each tool is a method ``await tools.get_weather(city="Oslo", days=2)``:
    required properties are required keyword arguments; an optional one defaults to ``NOT_SENT``, which leaves it
    out of the call (the server applies its own default). A tool with an ``outputSchema`` returns its structured
    result typed (the ``TypedDict``, or the value of a ``{"result": ...}`` wrapper), one without returns the
    :class:`~mcpkit.ToolResult`. Every method calls with ``raise_on_error=True``: a tool's error is a
    :class:`~mcpkit.ToolCallError`.

    Raises :class:`CodegenError` for more than ``max_tools`` tools or a ``class_name`` that is no identifier."""
    models = [t if isinstance(t, Tool) else Tool.model_validate(t) for t in tools]
    if len(models) > max_tools:
        raise CodegenError(f"the server lists {len(models)} tools, more than max_tools={max_tools}")
    models.sort(key=lambda t: t.name)
    if class_name is not None and (not class_name.isidentifier() or keyword.iskeyword(class_name)):
        raise CodegenError(f"class name {class_name!r} is not a Python identifier")
    taken = set(_MODULE_NAMES)
    cls = unique(class_name or pascal(server_name, "Server") + "Tools", taken)
    types = Types(taken)
    method_names: set[str] = set(_METHOD_RESERVED)
    methods = [_method(tool, types, method_names) for tool in models]
    return _module(server_name, server_version, cls, types, methods)


def _method(tool: Tool, types: Types, method_names: set[str]) -> _Method:
    base = pascal(tool.name, "Tool")
    record = types.object(tool.input_schema, f"{base}Input")
    param_names = set(_PARAM_RESERVED)
    ordered = [f for f in record.fields if f.required] + [f for f in record.fields if not f.required]
    params = [_Param(_claim(snake(f.key, "arg"), param_names, _PARAM_RESERVED), f) for f in ordered]
    for i, p in enumerate(params):  # (a type too long beside its name is named: at most _PARAM_TYPE_NAME)
        if len(_param_text(p)) + 9 > LINE_LENGTH and len(p.field.type) > _PARAM_TYPE_NAME:
            alias = types.named(p.field.type, f"{base}{pascal(p.field.key, 'Arg')}"[:_PARAM_TYPE_NAME], force=True)
            params[i] = _Param(p.name, replace(p.field, type=alias))
    returns: str | None = None
    schema = tool.output_schema
    if isinstance(schema, dict):
        properties = schema.get("properties")
        if is_wrapped(schema) and isinstance(properties, dict):  # result.data is the value inside {"result": ...}
            inner = types.expr(properties.get("result"), schema, f"{base}Result")
            types.typing.add("TypeAlias")
            returns = unique(f"{base}Output", types.taken)
            types.defs.append(Alias(returns, inner))
        elif isinstance(properties, dict) and properties:
            returns = types.object(schema, f"{base}Output").name
        else:
            returns = types.named(types.expr(schema, schema, f"{base}Output"), f"{base}Output")
    return _Method(_claim(snake(tool.name, "tool"), method_names, _METHOD_RESERVED), tool, params, returns)


_PARAM_TYPE_NAME = 40  # (a parameter's name, 64 at most, its type's name and the indent fit one line)


def _param_text(p: _Param) -> str:
    """A parameter as the method's signature writes it."""
    if p.field.required:
        return f"{p.name}: {p.field.type}"
    return f"{p.name}: {_or_not_sent(p.field.type)} = NOT_SENT"


def _param_lines(p: _Param, indent: str) -> list[str]:
    """A parameter on its line of a signature written one per line; too long, its union split at each ``|``, one
    member a line, as ``ruff format`` writes it."""
    line = f"{indent}{_param_text(p)},"
    if len(line) <= LINE_LENGTH:
        return [line]
    typed = p.field.type if p.field.required else _or_not_sent(p.field.type)
    first, *rest = split_union(typed)
    tail = "," if p.field.required else " = NOT_SENT,"
    if not rest:
        return [line]
    return [f"{indent}{p.name}: {first}", *[f"{indent}| {m}" for m in rest[:-1]], f"{indent}| {rest[-1]}{tail}"]


def _claim(wanted: str, taken: set[str], reserved: frozenset[str]) -> str:
    """``wanted`` made unique in ``taken``; a reserved name gets a trailing ``_`` first (``self`` → ``self_``)."""
    return unique(wanted + "_" if wanted in reserved else wanted, taken, "_")


# ---------------------------------------------------------------------------------------------- writing


def _module(server: str, version: str | None, cls: str, types: Types, methods: list[_Method]) -> str:
    typing = set(types.typing) | {"Final"}
    if any(m.returns is not None for m in methods):
        typing.add("cast")
    if any(m.params for m in methods):
        typing.add("Any")
    mcpkit_names = ["Client"] + (["ToolResult"] if any(m.returns is None for m in methods) else [])
    if any(m.returns is None for m in methods):
        typing.add("Any")
    named = f"{server} {version}" if version else server
    lines = _doc_open(docstring(f"Typed client for the MCP server {named}.", ""), "")
    lines += [
        "",
        "Made by ``mcpkit codegen`` from the server's tools/list: make it again when the server changes. Use::",
        "",
        "    async with Client(TARGET) as client:",
        f"        tools = {cls}(client)",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from enum import Enum",
        f"from typing import {', '.join(sorted(typing, key=_import_order))}",
        "",
        f"from mcpkit import {', '.join(mcpkit_names)}",
        "",
        "",
        "class NotSent(Enum):",
        '    """The default of an optional argument: the argument is left out of the call."""',
        "",
        '    NOT_SENT = "NOT_SENT"',
        "",
        "",
        "NOT_SENT: Final = NotSent.NOT_SENT",
    ]
    for made in types.defs:
        lines += ["", ""] + (_record(made) if isinstance(made, Record) else _alias(made))
    lines += ["", "", f"class {cls}:"]
    lines += _doc_open(docstring(f"The tools of the MCP server {named}.", _INDENT), _INDENT)
    lines += [
        "",
        f"{_INDENT}Each method calls one tool through ``client`` (a connected :class:`mcpkit.Client`).",
        '    """',
    ]
    lines += ["", f"{_INDENT}def __init__(self, client: Client) -> None:", f"{_INDENT * 2}self.client = client"]
    for method in methods:
        lines += ["", *_method_source(method)]
    return "\n".join(lines) + "\n"


def _import_order(name: str) -> tuple[int, str]:
    """isort's order within one import: constants, classes, then functions."""
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name


def _class_key(key: str, blocked: set[str]) -> bool:
    """Can ``key`` be a field of a class-syntax TypedDict (else the functional syntax writes it as a string)? Not
    when it is no plain identifier, or names something the class's annotations use (in a class body, a field
    named ``list`` would be what a later ``list[int]`` means)."""
    return (
        key.isidentifier()
        and key.isascii()
        and not keyword.iskeyword(key)
        and not key.startswith("__")
        and (key not in blocked)
    )


_LITERALS = re.compile(r"\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'")


def _names_in(expr: str) -> set[str]:
    """The identifiers a type expression uses (not the text of its string literals)."""
    return set(re.findall(r"[A-Za-z_]\w*", _LITERALS.sub("", expr)))


def _record(record: Record) -> list[str]:
    def typed(f: Field) -> str:
        return f.type if f.required else f"NotRequired[{f.type}]"

    blocked = {"NotRequired", record.name}.union(*(_names_in(f.type) for f in record.fields))
    fits = all(len(f"{_INDENT}{f.key}: {typed(f)}") <= LINE_LENGTH for f in record.fields)
    if fits and all(_class_key(f.key, blocked) for f in record.fields):
        lines = [f"class {record.name}(TypedDict):"]
        doc = docstring(record.description or "", _INDENT)
        if doc:
            lines += _doc_block(doc, _INDENT)
            if record.fields:
                lines.append("")
        lines += [
            f"{_INDENT}{f.key}: {typed(f)}" + ("  # noqa: E741" if f.key in AMBIGUOUS else "") for f in record.fields
        ]
        if len(lines) == 1:
            lines.append(f"{_INDENT}pass")
        return lines
    noqa = "  # noqa: UP013" if not fits and all(_class_key(f.key, blocked) for f in record.fields) else ""
    lines = [f"{record.name} = TypedDict({noqa}", f"{_INDENT}{py_str(record.name)},", f"{_INDENT}{{"]
    for f in record.fields:
        lines += _keyed(f.key, f": {py_str(typed(f))},", _INDENT * 2)
    return [*lines, f"{_INDENT}}},", ")"]


def _keyed(key: str, rest: str, indent: str, lead: str = "") -> list[str]:
    """``<lead>"key"<rest>`` at ``indent``; a key too long for the line is split over lines (implicit concatenation:
    the same string) in parentheses, or in the brackets of a subscript (``lead`` ``arguments``), as ``ruff format``
    leaves it."""
    flat = f"{indent}{lead}[{py_str(key)}]{rest}" if lead else f"{indent}{py_str(key)}{rest}"
    if len(flat) <= LINE_LENGTH:
        return [flat]
    inner = indent + _INDENT
    chunks = [""]
    for ch in key:
        if chunks[-1] and len(inner) + len(py_str(chunks[-1] + ch)) > LINE_LENGTH:
            chunks.append("")
        chunks[-1] += ch
    opener, closer = ("[", "]") if lead else ("(", ")")
    return [f"{indent}{lead}{opener}", *[f"{inner}{py_str(c)}" for c in chunks], f"{indent}{closer}{rest}"]


def _doc_block(doc: list[str], indent: str) -> list[str]:
    """A docstring of the lines :func:`~.codegen_text.docstring` made (at least one)."""
    if len(doc) == 1:
        return [f'{indent}"""{doc[0].lstrip()}"""']
    return [f'{indent}"""{doc[0].lstrip()}', *doc[1:], f'{indent}"""']


def _doc_open(doc: list[str], indent: str) -> list[str]:
    """A docstring's first lines, the closing quotes left to add."""
    return [f'{indent}"""{doc[0].lstrip()}', *doc[1:]]


def _alias(alias: Alias) -> list[str]:
    head = f"{alias.name}: TypeAlias = "
    literal = py_str(alias.type)
    if len(head) + len(literal) <= LINE_LENGTH:
        return [head + literal]
    chunks: list[str] = []
    current = ""
    for ch in alias.type:
        if len(py_str(current + ch)) > LINE_LENGTH - 8:
            chunks.append(current)
            current = ""
        current += ch
    chunks.append(current)
    return [head + "(", *[f"{_INDENT}{py_str(c)}" for c in chunks], ")"]


def _or_not_sent(expr: str) -> str:
    """``expr | NotSent``, a ``None`` in it kept last (ruff's RUF036)."""
    if expr == "None" or expr.endswith(" | None"):
        return f"{expr.removesuffix('None').removesuffix(' | ')} | NotSent | None".removeprefix(" | ")
    return f"{expr} | NotSent"


def _method_source(method: _Method) -> list[str]:
    tool = method.tool
    returns = method.returns or "ToolResult[Any]"
    params = [_param_text(p) for p in method.params]
    head = f"{_INDENT}async def {method.name}("
    flat = head + ", ".join(["self", *(["*"] if params else []), *params]) + f") -> {returns}:"
    if len(flat) <= LINE_LENGTH:
        lines = [flat]
    else:
        lines = [head, f"{_INDENT * 2}self,", *([f"{_INDENT * 2}*,"] if params else [])]
        for p in method.params:
            lines += _param_lines(p, _INDENT * 2)
        lines.append(f"{_INDENT}) -> {returns}:")
    inner = _INDENT * 2
    text = tool.description or tool.title or f"Call the tool {tool.name}."
    doc = docstring(text, inner) or docstring(f"Call the tool {tool.name}.", inner)
    described = [p for p in method.params if (p.field.description or "").strip()]
    if described:
        doc += ["", f"{inner}Args:"]
        for p in described:
            doc += docstring(p.field.description or "", inner + _INDENT, first=f"{p.name}: ")
    lines += _doc_block(doc, inner)
    required = [p for p in method.params if p.field.required]
    entries = [f"{py_str(p.field.key)}: {p.name}" for p in required]
    flat_dict = f"{inner}arguments: dict[str, Any] = {{{', '.join(entries)}}}"
    if required and len(flat_dict) <= LINE_LENGTH:
        lines.append(flat_dict)
    elif required:
        lines.append(f"{inner}arguments: dict[str, Any] = {{")
        for p in required:
            lines += _keyed(p.field.key, f": {p.name},", inner + _INDENT)
        lines.append(f"{inner}}}")
    elif method.params:
        lines.append(f"{inner}arguments: dict[str, Any] = {{}}")
    for p in method.params:
        if not p.field.required:
            lines.append(f"{inner}if {p.name} is not NOT_SENT:")
            lines += _keyed(p.field.key, f" = {p.name}", inner + _INDENT, "arguments")
    args = "arguments" if method.params else "{}"
    call = f"self.client.call_tool({py_str(tool.name)}, {args}, raise_on_error=True)"
    statement = f"{inner}{'return' if method.returns is None else 'result ='} await {call}"
    if len(statement) > LINE_LENGTH:
        opener = statement[: statement.index("(") + 1]
        args_lines = [f"{inner}{_INDENT}{part}," for part in (py_str(tool.name), args, "raise_on_error=True")]
        lines += [opener, *args_lines, f"{inner})"]
    else:
        lines.append(statement)
    if method.returns is not None:
        lines.append(f"{inner}return cast({method.returns}, result.data)")
    return lines
