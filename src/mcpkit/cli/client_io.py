"""The terminal side of the client commands: reading what the user typed (``key=value`` arguments, ``--answer``
values, interactive elicitation answers), rendering results for people or as JSON for scripts, and
:class:`CLIError`, the error a command ends with. The commands themselves are in :mod:`mcpkit.cli.client_commands`.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console


MAX_SHOWN_DEPTH = 64
"""Human output shows structured values this many levels deep (deeper levels are replaced by a note)."""


class CLIError(Exception):
    def __init__(self, message: str, code: int = 1, detail: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.detail = detail


# ---------------------------------------------------------------------------------------------- helpers


def parse_value(raw: str) -> Any:
    """``"3"`` -> 3, ``"true"`` -> True, ``'{"a":1}'`` -> dict, anything that is not JSON -> the string itself."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


_TRUE = frozenset(("true", "1", "yes", "on"))
_FALSE = frozenset(("false", "0", "no", "off"))


def coerce_arguments(raw: dict[str, str], schema: dict[str, Any] | None) -> dict[str, Any]:
    """``key=value`` arguments read by the tool's input schema: ``isbn=978`` stays the string ``"978"`` for a
    string parameter and ``n=3`` is the integer 3 for an integer one; a value that cannot be what the schema says
    is a ``CLIError`` naming the parameter. Without a schema for a key, a value that parses as JSON is that JSON."""
    props = (schema or {}).get("properties")
    props = props if isinstance(props, dict) else {}
    defs = (schema or {}).get("$defs") or (schema or {}).get("definitions") or {}
    out: dict[str, Any] = {}
    for key, text in raw.items():
        prop = props.get(key)
        out[key] = _coerce(key, text, _deref(prop, defs)) if isinstance(prop, dict) else parse_value(text)
    return out


def _deref(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = prop.get("$ref")
    if isinstance(ref, str) and isinstance(defs, dict):
        target = defs.get(ref.rsplit("/", 1)[-1])
        if isinstance(target, dict):
            return {**target, **{k: v for k, v in prop.items() if k != "$ref"}}
    return prop


def _types_of(prop: dict[str, Any]) -> list[str]:
    kind = prop.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    found: list[str] = []
    for branch in prop.get("anyOf") or prop.get("oneOf") or []:
        if isinstance(branch, dict):
            found += [k for k in _types_of(branch) if k not in found]
    if not found and "enum" in prop:
        found = sorted({_json_type(v) for v in prop["enum"]})
    return found


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _coerce(key: str, text: str, prop: dict[str, Any]) -> Any:
    types = _types_of(prop)
    if not types:
        return parse_value(text)
    if types == ["string"]:
        return text
    lowered = text.strip().lower()
    if "boolean" in types and lowered in _TRUE | _FALSE:
        return lowered in _TRUE
    if "null" in types and lowered in ("null", "none", ""):
        return None
    parsed = parse_value(text)
    kind = _json_type(parsed)
    if kind in types or (kind == "integer" and "number" in types):
        return parsed
    if "string" in types:
        return text
    wanted = " or ".join(types)
    raise CLIError(f"argument {key!r} must be {wanted} (the tool's input schema says so), got {text!r}", code=2)


def parse_pairs(pairs: tuple[str, ...], *, json_values: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CLIError(f"expected key=value, got {pair!r}", code=2)
        if key in out:  # (one would silently win: say so instead)
            raise CLIError(f"{key!r} is given twice ({key}=...): give each argument once", code=2)
        out[key] = parse_value(value) if json_values else value
    return out


def stdout_console() -> Console:
    """A rich console on stdout, as the commands print their results."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


def stderr_console() -> Console:
    """A rich console on stderr, for the commands' notes and errors."""
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def _clip(value: Any, depth: int = 0) -> Any:
    """``value`` with containers deeper than :data:`MAX_SHOWN_DEPTH` replaced by a note (recursion is bounded)."""
    if isinstance(value, (dict, list)):
        if depth >= MAX_SHOWN_DEPTH:
            return f"<{type(value).__name__} nested deeper than {MAX_SHOWN_DEPTH} levels: use --json to see it all>"
        if isinstance(value, dict):
            return {k: _clip(v, depth + 1) for k, v in value.items()}
        return [_clip(v, depth + 1) for v in value]
    return value


def print_json(value: Any, *, machine: bool) -> None:
    """Print ``value`` as JSON: plain and compact for a machine (``--json``), else highlighted; what a server
    sent is made visible first (no terminal escape sequence)."""
    from ..client.safe import json_visible, visible

    if machine:
        try:
            text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
        except RecursionError:
            limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(limit, 5000))  # the wire parser caps nesting (1,024 levels): this is bounded
            try:
                text = json.dumps(value, ensure_ascii=False, default=str)
            except RecursionError:
                raise CLIError("the result is nested too deeply to print as JSON") from None
            finally:
                sys.setrecursionlimit(limit)
        click.echo(json_visible(text))
        return
    from rich.syntax import Syntax

    text = visible(json.dumps(_clip(value), indent=2, ensure_ascii=False, default=str))
    stdout_console().print(Syntax(text, "json", theme="ansi_dark", background_color="default", word_wrap=True))


class Answers:
    """Elicitation handler when nobody is at a terminal: accept a form with the ``--answer`` values, or decline and
    say how to answer (``--interactive`` or ``--answer KEY=VALUE``). URL elicitations are always declined here."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers

    def __call__(self, params: dict[str, Any]) -> Any:
        from ..client.safe import text

        err = stderr_console()
        err.print(text("The server asks: ", "bold yellow") + text(params.get("message", "")))
        if params.get("mode") == "url":  # consent to open a URL is never given on the user's behalf
            err.print(text("  open: ") + text(params.get("url", ""), one_line=True))
            err.print(text("  declined: only a person can complete this; run again with --interactive"), soft_wrap=True)
            return {"action": "decline"}
        props = (params.get("requestedSchema") or {}).get("properties") or {}
        if self.answers:
            content: dict[str, Any] = {}
            for key, raw in self.answers.items():
                prop = props.get(key) if isinstance(props, dict) else None
                is_string = isinstance(prop, dict) and prop.get("type") == "string"
                content[key] = raw if is_string else parse_value(raw)  # "007" stays a string where one is asked
            return {"action": "accept", "content": content}
        wanted = list(props) if isinstance(props, dict) else []
        example = " ".join(f"--answer {text(n, one_line=True).plain}=..." for n in wanted[:5]) or "--answer KEY=VALUE"
        err.print(
            text(
                "  declined: no terminal to ask on (stdin is not a TTY). To answer, run again with --interactive "
                f"(answer on the terminal) or with {example}."
            ),
            soft_wrap=True,
        )
        return {"action": "decline"}


def _prompt_value(name: str, prop: dict[str, Any], required: bool) -> Any:
    """Ask for one form field on the terminal (stderr), honouring its type, enum/oneOf choices and default.

    Every server string (title, description, choices) is shown through :func:`~mcpkit.cli.safe.visible`; a
    choice is answered by its visible form and mapped back to the server's value."""
    from rich.prompt import Confirm, FloatPrompt, IntPrompt, Prompt

    from ..client.safe import text, visible

    err = stderr_console()
    label = text(prop.get("title") or name, one_line=True)
    label.append("" if required else " (optional)")
    if prop.get("description"):
        label.append(" - " + visible(prop["description"], one_line=True), style="dim")
    default = prop.get("default")
    kind = prop.get("type")
    choices: list[str] | None = None
    titles: dict[str, str] = {}
    if isinstance(prop.get("enum"), list):
        choices = [str(c) for c in prop["enum"]]
    elif isinstance(prop.get("oneOf") or prop.get("anyOf"), list):
        options: list[Any] = prop.get("oneOf") or prop.get("anyOf") or []
        choices = [str(o.get("const")) for o in options if isinstance(o, dict) and "const" in o]
        titles = {str(o.get("const")): str(o.get("title", o.get("const"))) for o in options if isinstance(o, dict)}
    if kind == "array":
        items = prop.get("items") or {}
        allowed = items.get("enum") or [o.get("const") for o in items.get("anyOf") or items.get("oneOf") or []]
        label.append(" (comma-separated: " + ", ".join(visible(a, one_line=True) for a in allowed) + ")")
        raw = Prompt.ask(
            label, console=err, default=",".join(str(d) for d in default) if isinstance(default, list) else None
        )
        return [part.strip() for part in (raw or "").split(",") if part.strip()]
    if titles:
        label.append(" (" + ", ".join(f"{visible(c)}={visible(t)}" for c, t in titles.items()) + ")")
    if kind == "boolean":
        return Confirm.ask(label, console=err, default=bool(default) if default is not None else False)
    if kind == "integer" and not choices:
        return IntPrompt.ask(label, console=err, default=default)
    if kind == "number" and not choices:
        return FloatPrompt.ask(label, console=err, default=default)
    shown = {visible(c, one_line=True): c for c in choices} if choices is not None else None
    answer = Prompt.ask(
        label,
        console=err,
        choices=list(shown) if shown is not None else None,
        default=None if default is None else visible(default, one_line=True),
    )
    if shown is not None and answer is not None:
        return shown.get(answer, answer)
    return answer


def ask_user(params: dict[str, Any]) -> Any:
    """Elicitation handler for a terminal: URL mode asks for consent; form mode asks field by field.

    Fields left empty keep their schema default (the client fills it in) or are omitted when optional. The
    server's message and URL are shown through :func:`~mcpkit.cli.safe.visible` (no markup, no hidden link)."""
    from rich.prompt import Confirm

    from ..client.safe import text

    err = stderr_console()
    err.print(text("The server asks: ", "bold yellow") + text(params.get("message", "")))
    if params.get("mode") == "url":
        err.print(text("  open: ") + text(params.get("url", ""), one_line=True))
        return {"action": "accept" if Confirm.ask("Did you complete it?", console=err, default=True) else "decline"}
    schema = params.get("requestedSchema") or {}
    required = set(schema.get("required") or [])
    content: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        if not isinstance(prop, dict):
            continue
        value = _prompt_value(name, prop, name in required)
        if value in (None, "") and name not in required:
            continue
        content[name] = value
    return {"action": "accept", "content": content}


def described(name: str | None, description: str | None) -> Any:
    """A listing's description cell: the display name once (bold) when there is one, then the description unless
    it only repeats that name, its docstring markup (``code``, *em*, :role:`x`) rendered as styles, never printed.
    Every piece is made visible (:func:`~mcpkit.cli.safe.visible`) and never parsed as rich markup."""
    from rich.text import Text

    from ..client.display import segments, shown_description
    from ..client.safe import visible

    out = Text()
    if name:
        out.append(visible(name, one_line=True), style="bold")
    desc = shown_description(description, name)
    if desc:
        if name:
            out.append("\n")
        for style, piece in segments(desc):
            out.append(visible(piece), style={"code": "cyan", "strong": "bold", "em": "italic"}.get(style, ""))
    return out


def _schema_type(prop: Any, defs: dict[str, Any], depth: int = 0) -> str:
    """A short type for a JSON Schema: ``string``, ``list[integer]``, ``{x*: integer, y: integer}``, ``A|B``."""
    if not isinstance(prop, dict):
        return "any"
    if depth > 3:
        return "..."
    ref = prop.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        target = defs.get(name)
        return _schema_type(target, defs, depth + 1) if isinstance(target, dict) else name
    for key in ("anyOf", "oneOf"):
        if isinstance(prop.get(key), list):
            return "|".join(_schema_type(p, defs, depth + 1) for p in prop[key])
    if "enum" in prop and isinstance(prop["enum"], list):
        return "|".join(json.dumps(v) for v in prop["enum"][:8]) + ("|..." if len(prop["enum"]) > 8 else "")
    if "const" in prop:
        return json.dumps(prop["const"])
    typ = prop.get("type")
    if isinstance(typ, list):
        return "|".join(str(t) for t in typ)
    if typ == "array" or (typ is None and "items" in prop):
        return f"list[{_schema_type(prop.get('items'), defs, depth + 1)}]" if "items" in prop else "list"
    if typ == "object" or (typ is None and "properties" in prop):
        props = prop.get("properties")
        if isinstance(props, dict) and props:
            required = set(prop.get("required") or [])
            inner = ", ".join(
                f"{k}{'*' if k in required else ''}: {_schema_type(v, defs, depth + 1)}" for k, v in props.items()
            )
            return "{" + inner + "}"
        extra = prop.get("additionalProperties")
        if isinstance(extra, dict):
            return f"dict[string, {_schema_type(extra, defs, depth + 1)}]"
        return "object"
    return str(typ) if typ is not None else "any"


def describe_args(schema: dict[str, Any]) -> str:
    """A tool's or a prompt's arguments in one line (``name: type``, optional ones marked), from its schema."""
    props = schema.get("properties") or {}
    if not isinstance(props, dict):
        return ""
    defs = schema.get("$defs") or schema.get("definitions") or {}
    required = set(schema.get("required") or [])
    parts = []
    for name, prop in props.items():
        shown = f"{name}{'*' if name in required else ''}: {_schema_type(prop, defs if isinstance(defs, dict) else {})}"
        if isinstance(prop, dict) and "default" in prop:
            try:
                default = json.dumps(prop["default"], ensure_ascii=False)
            except (TypeError, ValueError):
                default = "..."
            shown += f" = {default if len(default) <= 40 else default[:37] + '...'}"
        parts.append(shown)
    return ", ".join(parts)


def _content_lines(blocks: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """(kind, payload) per content block, for human output."""
    out: list[tuple[str, Any]] = []
    for b in blocks:
        kind = b.get("type")
        if kind == "text":
            out.append(("text", b.get("text", "")))
        elif kind in ("image", "audio"):
            size = len(base64.b64decode(b.get("data", "") or "", validate=False)) if b.get("data") else 0
            out.append(("note", f"[{kind} {b.get('mimeType', '?')}, {size} bytes]"))
        elif kind == "resource_link":
            out.append(("note", f"[resource link] {b.get('uri')} ({b.get('name')})"))
        elif kind == "resource":
            res = b.get("resource") or {}
            if "text" in res:
                out.append(("note", f"[embedded resource {res.get('uri')}]"))
                out.append(("text", res["text"]))
            else:
                out.append(("note", f"[embedded binary resource {res.get('uri')}, {res.get('mimeType', '?')}]"))
        else:
            out.append(("json", b))
    return out


def print_content(blocks: list[dict[str, Any]]) -> None:
    """Print a result's content blocks for a person: text as it is, other kinds as a short description."""
    from ..client.safe import text

    console = stdout_console()
    for kind, payload in _content_lines(blocks):
        if kind == "text":
            console.print(text(payload))
        elif kind == "note":
            console.print(text(payload, "cyan"))
        else:
            print_json(payload, machine=False)


# ---------------------------------------------------------------------------------------------- options


def same_as_text(blocks: list[dict[str, Any]], structured: Any) -> bool:
    """True when the content is one text block that only repeats the structured value (as JSON, or the value of a
    ``{"result": ...}`` wrapper): the result is then printed once."""
    if len(blocks) != 1 or blocks[0].get("type") != "text":
        return False
    text = blocks[0].get("text", "")
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        parsed = text  # a plain string result
    if parsed == structured:
        return True
    return is_result_wrapper(structured) and parsed == structured["result"]


def is_result_wrapper(structured: Any) -> bool:
    """Whether structured content is a lone ``result`` member (how a tool returning a non-object wraps it)."""
    return isinstance(structured, dict) and list(structured) == ["result"]


def result_dict(result: Any) -> Any:
    """``result.dump()``; a structuredContent nested deeper than pydantic serializes is put in as it is."""
    try:
        return result.dump()
    except (ValueError, RecursionError):
        out = result.raw.model_copy(update={"structured_content": None}).dump()
        out["structuredContent"] = result.structured
        return out


#: The columns of a listing of named things that take arguments (tools, prompts): (header, rich column options).
NAMED_WITH_ARGUMENTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("Name", {"style": "bold cyan", "no_wrap": True}),
    ("Description", {}),
    ("Arguments (* = required)", {"style": "green"}),
)


def print_table(title: str, columns: Sequence[tuple[str, dict[str, Any]]], rows: Iterable[Sequence[Any]]) -> None:
    """Print one listing as a rich table on stdout: ``columns`` are (header, rich column options), each row's
    cells already made safe to show (``safe.text``)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for header, options in columns:
        table.add_column(header, **options)
    for row in rows:
        table.add_row(*row)
    stdout_console().print(table)


# ---------------------------------------------------------------------------------------------- tasks


async def follow_task(
    client: Any,
    tool: str,
    arguments: dict[str, Any],
    deadline: float,
    ttl: int | None,
    callbacks: tuple[Any, Any],
    machine: bool,
) -> Any:
    """``mcpkit call`` of a task: start it (its id shown on stderr), follow it with the progress and status
    ``callbacks``; the deadline or Ctrl-C (asyncio.run cancels the command's coroutine) cancels it on the server."""
    import asyncio

    from ..client.safe import visible
    from ..client.tasks import TaskCancelled

    on_progress, on_status = callbacks
    handle = await client.call_tool_as_task(tool, arguments, ttl=ttl, on_progress=on_progress, on_status=on_status)
    if not machine and handle.task_id:
        stderr_console().print(f"task {visible(handle.task_id, one_line=True)} started", markup=False)
    try:
        async with asyncio.timeout(deadline):
            return await handle.result()
    except TimeoutError:
        await _cancel_quietly(handle)
        raise CLIError(f"timed out after {deadline}s: task {handle.task_id} cancelled") from None
    except asyncio.CancelledError:
        await _cancel_quietly(handle)
        raise CLIError(f"interrupted: task {handle.task_id} cancelled", code=130) from None
    except TaskCancelled:
        raise CLIError(f"task {handle.task_id} was cancelled on the server") from None


async def _cancel_quietly(handle: Any) -> None:
    import asyncio
    import contextlib

    with contextlib.suppress(Exception):
        await asyncio.wait_for(handle.cancel(), 5.0)
