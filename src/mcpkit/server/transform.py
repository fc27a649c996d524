"""Tool transformation: a new tool derived from an existing one, which stays as it is.

    from mcpkit.server.transform import ArgTransform, forward, transform_tool

    find = transform_tool(
        app.get_tool("search"),
        name="find",
        description="Find things in the catalog.",
        args={
            "query": ArgTransform(name="q", description="What to look for"),   # renamed, re-described
            "limit": ArgTransform(default=3),                                   # a new default
            "api_key": ArgTransform(hide=True, default=os.environ["KEY"]),     # hidden: the model never sees it
        },
    )
    app.add_tool(find)

What the client sees is the derived schema; a call maps the arguments back to the original's names, fills the
defaults and the hidden values, and runs the original (its validation, its result). A hidden argument cannot be
set by the client: a call naming it (or any argument the derived schema does not have) is refused. The derived
tool runs as a task when the original may (it keeps the original's task support).

``fn=`` wraps the original: an ``async def`` taking the derived arguments (and optionally a ``Context``) that
calls :func:`forward` (derived names) or :func:`forward_raw` (the original's names) to run the original and gets
its ``CallToolResult`` as a dict; what ``fn`` returns is the derived tool's result (its return annotation, if any,
gives the output schema; a returned ``CallToolResult`` dict is sent as it is). ``fn`` gets what the derived schema
promises: a default it shows for an argument the client left out, and what the client sent for a derived argument
``fn`` does not take goes on with :func:`forward`. A parameter ``fn`` annotates is listed with ``fn``'s type (the
schema shown is the one the call is checked against). Any :class:`Tool` can be the
original: a function tool, a mounted tool, a proxied one.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..protocol.versions import Features
from .pagination import Listed
from .schema import ArgumentProblem, FunctionInfo, ReturnInfo, format_argument_problems
from .tools import Tool, error_result, internal_error_message

if TYPE_CHECKING:
    from .context import Context
    from .sync_exec import SyncPolicy

JSONDict = dict[str, Any]
_MISSING: Any = object()


@dataclass(frozen=True)
class ArgTransform:
    """How one argument of the original tool appears in the derived one.

    ``name``: its new name; ``description``: its new description; ``default``: a default (the argument becomes
    optional); ``hide``: remove it from the schema and always pass ``default`` (or the original's own default).
    """

    name: str | None = None
    description: str | None = None
    default: Any = _MISSING
    hide: bool = False


class _Forwarding:
    __slots__ = ("ctx", "feats", "name", "passed", "tool")

    def __init__(
        self, tool: TransformedTool, ctx: Context | None, feats: Features, passed: JSONDict, name: str
    ) -> None:
        self.tool = tool
        self.ctx = ctx
        self.feats = feats
        self.passed = passed  # what the client sent for derived arguments fn does not take
        self.name = name  # the tool's name as the client called it


_current: contextvars.ContextVar[_Forwarding | None] = contextvars.ContextVar("mcpkit_forwarding", default=None)


async def forward(**arguments: Any) -> JSONDict:
    """Inside a transformed tool's ``fn``: run the original with these (derived) arguments; its
    ``CallToolResult`` as a dict (``content``, ``structuredContent``, ``isError``). What the client sent for a
    derived argument ``fn`` does not take goes too (``fn`` never saw it: dropping it would ignore the client)."""
    current = _current.get()
    if current is None:
        raise RuntimeError("forward() is only available inside the fn of a transformed tool")
    mapped = current.tool.checked({**current.passed, **arguments} if current.passed else arguments, current.name)
    if isinstance(mapped, str):
        return error_result(mapped)
    return await current.tool.run_original(mapped, current.ctx, current.feats, current.name)


async def forward_raw(**arguments: Any) -> JSONDict:
    """Like :func:`forward`, with the original tool's own argument names (no mapping, no defaults)."""
    current = _current.get()
    if current is None:
        raise RuntimeError("forward_raw() is only available inside the fn of a transformed tool")
    return await current.tool.run_original(dict(arguments), current.ctx, current.feats, current.name)


class _Info:
    """The part of :class:`~mcpkit.server.schema.FunctionInfo` the dispatcher reads of a tool."""

    def __init__(self, input_schema: JSONDict, context_param: str | None, is_async: bool, description: str) -> None:
        self.input_schema = input_schema
        self.context_param = context_param
        self.is_async = is_async
        self.fast_plan: None = None
        self.description = description
        self.params: list[Any] = []


def _typed_by(wrapper: FunctionInfo, schema: JSONDict, original: str) -> None:
    """Give each property of the derived ``schema`` that ``fn`` annotates the type ``fn`` validates (its schema,
    with the definitions it refers to), keeping the description and default the derived schema shows (the
    original's, or the transform's), else ``fn``'s: what a client is shown is what the call is checked against."""
    annotated = [p.name for p in wrapper.params if p.annotation is not Any]
    if not annotated:
        return
    own = wrapper.input_schema
    properties: dict[str, Any] = schema["properties"]
    for name in annotated:
        derived = properties[name]
        typed = {k: v for k, v in own["properties"][name].items() if k not in ("description", "default", "title")}
        for key in ("description", "default"):
            if key in derived:
                typed[key] = derived[key]
            elif key in own["properties"][name]:
                typed[key] = own["properties"][name][key]
        properties[name] = typed
    definitions: JSONDict = own.get("$defs", {})
    if definitions:
        merged: JSONDict = schema.setdefault("$defs", {})
        for key, value in definitions.items():
            if merged.setdefault(key, value) != value:
                raise ValueError(
                    f"transform of tool {original!r}: fn's type {key!r} is not the original's type of that name; "
                    "rename one of them"
                )


class TransformedTool(Tool):
    """A tool derived from ``original`` by :func:`transform_tool` (see the module docstring)."""

    def __init__(
        self,
        original: Tool,
        *,
        name: str | None,
        title: str | None,
        description: str | None,
        args: Mapping[str, ArgTransform],
        fn: Callable[..., Any] | None,
        annotations: JSONDict | None,
        tags: frozenset[str] | None,
        meta: JSONDict | None,
    ) -> None:  # (Tool.__init__ is not run: there is no function of its own to read)
        self.original = original
        self.name: str = name or original.name
        self.title: str | None = title if title is not None else original.title
        self.description: str = description if description is not None else original.description
        self.annotations: JSONDict | None = annotations if annotations is not None else original.annotations
        self.icons: list[Any] | None = original.icons
        self.meta: JSONDict | None = meta if meta is not None else original.meta
        self.thread: None = None
        self.sync: SyncPolicy | None = None
        self.task_support: str | None = original.task_support
        self.fn: Callable[..., Any] = fn if fn is not None else original.fn
        self._structured_output = None
        self._args = dict(args)
        schema = copy.deepcopy(original.input_schema)
        properties: dict[str, Any] = schema.setdefault("properties", {})
        required: list[str] = list(schema.get("required", []))
        unknown = sorted(set(args) - set(properties))
        if unknown:
            raise ValueError(f"transform of tool {original.name!r}: it has no arguments {unknown}")
        self._to_original: dict[str, str] = {}  # derived name -> original name (visible arguments)
        self._fixed: dict[str, Any] = {}  # original name -> value always passed (hidden) or by default
        renamed: dict[str, Any] = {}
        for arg, prop in properties.items():
            rule = args.get(arg, ArgTransform())
            if rule.hide:
                if rule.default is not _MISSING:
                    self._fixed[arg] = rule.default
                elif arg in required:
                    raise ValueError(f"transform of tool {original.name!r}: hidden argument {arg!r} needs a default")
                continue
            new = rule.name or arg
            if new in renamed:
                raise ValueError(f"transform of tool {original.name!r}: two arguments would be called {new!r}")
            prop = dict(prop)
            if rule.description is not None:
                prop["description"] = rule.description
            if rule.default is not _MISSING:
                prop["default"] = rule.default
                self._fixed[arg] = rule.default
            renamed[new] = prop
            self._to_original[new] = arg
        schema["properties"] = renamed
        # the defaults the derived schema shows (a wrapper taking such an argument gets it when the client leaves
        # it out, as the schema promised)
        self._defaults: JSONDict = {n: p["default"] for n, p in renamed.items() if "default" in p}
        new_required = [n for n, o in self._to_original.items() if o in required and o not in self._fixed]
        self._required = new_required
        if new_required:
            schema["required"] = new_required
        else:
            schema.pop("required", None)
        self._hidden = {a for a, r in args.items() if r.hide}
        self._wrapper: FunctionInfo | None = None
        context_param = original.info.context_param
        is_async = original.info.is_async
        if fn is not None:
            self._wrapper = FunctionInfo(fn, name=self.name)
            extra = [p.name for p in self._wrapper.params if p.name not in self._to_original]
            if extra:
                raise ValueError(f"transformed tool {self.name!r}: fn takes {extra}, which the derived tool does not")
            _typed_by(self._wrapper, schema, original.name)
            self._defaults = {n: p["default"] for n, p in renamed.items() if "default" in p}
            context_param = "ctx"  # (forward() needs the request's Context, whether fn takes one or not)
            is_async = True
            annotation = self._wrapper.return_annotation
            self._returns = ReturnInfo(annotation) if annotation is not inspect.Signature.empty else None
        else:
            self._returns = None
        self.info: _Info = _Info(schema, context_param, is_async, self.description)  # type: ignore[assignment]
        self.tags: frozenset[str] = original.tags if tags is None else tags
        self.scopes: tuple[str, ...] = original.scopes
        self.debug: bool = original.debug
        Listed.__init__(self)

    @property
    def returns(self) -> ReturnInfo:
        return self._returns if self._returns is not None else self.original.returns

    @property
    def output_schema(self) -> JSONDict | None:
        # (fn's return annotation, else the original's schema: an original with no Python function, e.g. an API
        # operation's tool, has one without a ReturnInfo)
        return self._returns.output_schema if self._returns is not None else self.original.output_schema

    def to_original(self, arguments: Mapping[str, Any], name: str | None = None) -> JSONDict | str:
        """The original's arguments for these derived ones (defaults and hidden values filled in), or the message
        of the refusal when a name is not one of the derived tool's arguments (naming the tool ``name``, the name
        the client called it by; None: its own)."""
        name = name or self.name
        out: JSONDict = {}
        for key, value in arguments.items():
            original = self._to_original.get(key)
            if original is None:
                return f"tool {name!r} has no argument {key!r}"
            out[original] = value
        missing = [arg for arg in self._required if arg not in arguments]
        if missing:  # (said here, in the names the client knows: the original would name its own)
            problems = "; ".join(f"missing required argument {arg!r}" for arg in missing)
            return f"Invalid arguments for tool {name!r}: {problems}"
        for original, value in self._fixed.items():
            if original in self._hidden or original not in out:
                out[original] = value
        return out

    def original_arguments(self, arguments: Any) -> JSONDict | None:
        """The original's arguments a call with ``arguments`` runs it with, when that is known before the call
        (None: ``fn`` decides what it forwards, or the arguments are refused)."""
        if self._wrapper is not None or not isinstance(arguments, dict | None):
            return None
        mapped = self.to_original(arguments or {})
        return None if isinstance(mapped, str) else mapped

    def argument_problems(self, arguments: JSONDict) -> list[ArgumentProblem]:
        mapped = self.to_original(arguments)
        if isinstance(mapped, str):  # (a derived tool of this one maps to valid names: only its own values are wrong)
            return [((), "invalid", mapped)]
        return self._derived_problems(self.original.argument_problems(mapped))

    def _derived_problems(self, problems: list[ArgumentProblem]) -> list[ArgumentProblem]:
        """``problems`` of the original's arguments, said in this tool's argument names (a problem with a hidden
        argument stays in the original's names: :meth:`checked` does not show it to the client)."""
        to_derived = {original: derived for derived, original in self._to_original.items()}
        out: list[ArgumentProblem] = []
        for path, kind, detail in problems:
            if path and isinstance(path[0], str) and path[0] in to_derived:
                path = (to_derived[path[0]], *path[1:])
            out.append((path, kind, detail))
        return out

    def checked(self, arguments: JSONDict, name: str | None = None) -> JSONDict | str:
        """The original's arguments for these derived ones, or the refusal to send the client, naming this tool
        (``name``: as the client called it, when that is not its own name) and its arguments as the client knows
        them (the original's own refusal would name the original and its arguments: a tool the client may not see,
        and names it is refused for when it sends them)."""
        name = name or self.name
        mapped = self.to_original(arguments, name)
        if isinstance(mapped, str):
            return mapped
        problems = self.original.argument_problems(mapped)
        if not problems:
            return mapped
        sent = {self._to_original[name] for name in arguments}
        if any(path and path[0] not in sent for path, _, _ in problems):
            # a value the server set (hidden, or a default the client left out) is wrong: the server's mistake
            wrong = "; ".join(f"{'.'.join(map(str, p)) or '(arguments)'}: {d or k}" for p, k, d in problems)
            error = ValueError(f"its fixed arguments are invalid: {wrong}")
            return internal_error_message(f"tool {name!r}", error, self.debug)
        return format_argument_problems(self._derived_problems(problems), f"tool {name!r}")

    def _refusal_of(self, passed: JSONDict, name: str) -> str | None:
        """The refusal of the values the client sent for arguments the wrapper does not take (None: they are
        valid), in this tool's names (``name``: the tool's)."""
        mapped = {self._to_original[arg]: value for arg, value in passed.items()}
        wrong = [p for p in self.original.argument_problems(mapped) if p[0] and p[0][0] in mapped]
        return format_argument_problems(self._derived_problems(wrong), f"tool {name!r}") if wrong else None

    async def run_original(
        self, arguments: JSONDict, ctx: Context | None, feats: Features, name: str | None = None
    ) -> JSONDict:
        """Call the original tool with its own arguments; its ``CallToolResult`` (a refusal or failure naming
        the tool ``name``, the one the client called: None, this one's own name)."""
        original_ctx = ctx if self.original.info.context_param is not None else None
        result = self.original.call(arguments, original_ctx, feats, name or self.name)
        return result if type(result) is dict else await result  # type: ignore[misc]

    def call(self, arguments: JSONDict, ctx: Context | None, feats: Features, name: str | None = None) -> Any:
        name = name or self.name
        if self._wrapper is None:
            mapped = self.checked(arguments, name)
            if isinstance(mapped, str):
                return error_result(mapped)
            original_ctx = ctx if self.original.info.context_param is not None else None
            return self.original.call(mapped, original_ctx, feats, name)
        return self._call_wrapper(arguments, ctx, feats, name)

    async def _call_wrapper(self, arguments: JSONDict, ctx: Context | None, feats: Features, name: str) -> JSONDict:
        wrapper = self._wrapper
        assert wrapper is not None
        unknown = [k for k in arguments if k not in self._to_original]
        if unknown:
            return error_result(f"tool {name!r} has no argument {unknown[0]!r}")
        taken: JSONDict = {}
        for param in wrapper.params:
            if param.name in arguments:
                taken[param.name] = arguments[param.name]
            elif (default := self._defaults.get(param.name, _MISSING)) is not _MISSING:
                taken[param.name] = default  # (the default the derived schema shows the client)
        passed = {k: v for k, v in arguments.items() if k not in taken}
        if passed and (refusal := self._refusal_of(passed, name)) is not None:  # (before fn runs, as for its own)
            return error_result(refusal)
        try:
            kwargs = wrapper.validate_model(taken)
            if wrapper.context_param is not None:
                kwargs[wrapper.context_param] = ctx
            token = _current.set(_Forwarding(self, ctx, feats, passed, name))
            try:
                if wrapper.is_async:  # (wrapper.fn: fn, or what fills in fn's dependencies)
                    value = await wrapper.fn(**kwargs)
                else:
                    value = await asyncio.to_thread(wrapper.fn, **kwargs)  # (to_thread carries the context)
            finally:
                _current.reset(token)
        except Exception as exc:
            return self._failed(exc, feats, ctx, name)
        return self.result(value, feats)

    def build_result(self, value: Any, feats: Features) -> JSONDict:
        if isinstance(value, dict) and isinstance(value.get("content"), list):
            return dict(value)  # a CallToolResult (what forward() returned): as it is
        return super().build_result(value, feats)


def transform_tool(
    tool: Tool,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    args: Mapping[str, ArgTransform] | None = None,
    fn: Callable[..., Any] | None = None,
    annotations: JSONDict | None = None,
    tags: set[str] | frozenset[str] | None = None,
    meta: JSONDict | None = None,
) -> TransformedTool:
    """A tool derived from ``tool`` (see the module docstring); register it with ``app.add_tool(...)`` (and, to
    offer only the derived one, ``app.disable(tool.name)`` or register the original nowhere)."""
    return TransformedTool(
        tool,
        name=name,
        title=title,
        description=description,
        args=args or {},
        fn=fn,
        annotations=annotations,
        tags=frozenset(tags) if tags is not None else None,
        meta=meta,
    )


__all__ = ["ArgTransform", "TransformedTool", "forward", "forward_raw", "transform_tool"]
