"""From a Python function to MCP schemas: arguments (type hints + docstring) and the return annotation.

``FunctionInfo.of(fn)`` inspects the signature once (cheap, at decoration time); the pydantic model and the
JSON Schemas are built lazily on first use, so importing a server with many tools stays fast.

* Input: one pydantic model per function (``extra="forbid"``: unknown arguments are errors the model can act
  on), JSON Schema 2020-12 with ``$defs`` kept at the root so every ``$ref`` resolves, without the noise of
  auto-generated titles. Parameter descriptions come from ``Annotated[..., Field(description=...)]`` or the
  docstring (Google ``Args:``, Sphinx ``:param x:`` and NumPy ``Parameters`` styles).
* A parameter annotated with :class:`~mcpkit.server.context.Context` (or ``Context | None``) is injected and
  never appears in the schema.
* Output: see :class:`ReturnInfo`.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import inspect
import logging
import math
import re
import types
import typing
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, Union, cast, get_args, get_origin

if TYPE_CHECKING:
    from pydantic import BaseModel, TypeAdapter, ValidationError
    from pydantic.fields import FieldInfo

# pydantic is imported on first use (schemas are built lazily), so a server answers initialize without it.

from .dependencies import Depends, dependency_of, with_dependencies
from .docstrings import Docstring as Docstring  # (its import path since the parser moved to .docstrings)
from .docstrings import parse_docstring
from .typehints import describable as _describable
from .typehints import description_of as _description_of
from .typehints import has_description as _has_description
from .typehints import is_async_callable
from .typehints import is_context as _is_context
from .typehints import is_field_info as _is_field_info
from .typehints import is_model_class as _is_model_class
from .typehints import json_schema_of as json_schema_of
from .typehints import literal_choices as literal_choices
from .typehints import portable_type as portable_type
from .typehints import type_hints as _type_hints
from .typehints import type_name as _type_name
from .typehints import unwrap_optional as unwrap_optional

JSONDict = dict[str, Any]
logger: logging.Logger = logging.getLogger("mcpkit.server")


@dataclasses.dataclass(slots=True)
class Param:
    name: str
    annotation: Any
    default: Any  # inspect.Parameter.empty when required
    description: str | None
    field: FieldInfo | None = None  # ``x: int = Field(3, ge=1)`` in the signature

    @property
    def required(self) -> bool:
        return self.default is inspect.Parameter.empty


class FunctionInfo:
    """What a decorated function takes: its parameters (minus the injected Context) and their schema."""

    def __init__(self, fn: Callable[..., Any], *, name: str) -> None:
        self.fn: Callable[..., Any] = fn  # (what to call: fn, or what fills in its dependencies)
        self.name = name
        self.is_async: bool = is_async_callable(fn)
        sig = inspect.signature(fn)
        hints = _type_hints(fn, sig)
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            raise TypeError(
                f"{name}: {function_name(fn, name)} is a generator function (it uses yield), whose call gives a "
                "generator, not a result; return the values instead (a list, for several)"
            )
        described = fn
        while isinstance(described, functools.partial):  # (its own __doc__ is functools.partial's)
            described = described.func
        self.doc: Docstring = parse_docstring(inspect.getdoc(described))
        self.context_param: str | None = None
        self.params: list[Param] = []
        deps: dict[str, Depends] = {}
        for p in sig.parameters.values():
            if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                continue
            if p.kind is inspect.Parameter.POSITIONAL_ONLY:  # (arguments are passed by name: it could never be given)
                raise TypeError(
                    f"{name}: parameter {p.name!r} is positional-only (before '/'), but MCP passes arguments by "
                    "name; make it an ordinary parameter"
                )
            ann = hints.get(p.name, Any)
            if ann is inspect.Parameter.empty:
                ann = Any
            dep = dependency_of(p.default, ann, f"{name}: parameter {p.name!r}")
            if dep is not None:  # (not an argument: filled in on each call, see dependencies)
                deps[p.name] = dep
                continue
            if _is_context(ann):
                self.context_param = p.name
                continue
            if p.name.startswith("_"):
                raise ValueError(f"{name}: parameter {p.name!r} starts with '_' (not allowed in an MCP schema)")
            default, field = p.default, None
            if _is_field_info(default):
                field = default
                required = field.is_required()
                default = inspect.Parameter.empty if required else field.get_default(call_default_factory=True)
            description = self.doc.params.get(p.name) or _description_of(ann) or (field and field.description)
            self.params.append(Param(p.name, ann, default, description or None, field))
        if deps:  # the function to call becomes one that fills them in (it takes the Context when they need it)
            self.fn, self.context_param, self.is_async = with_dependencies(
                fn, deps, self.context_param, self.is_async, name
            )
        ret = hints.get("return", sig.return_annotation)
        self.return_annotation: Any = inspect.Signature.empty if ret is inspect.Parameter.empty else ret
        # plain-scalar parameters: validated by fast_validate(fast_plan, arguments) without pydantic (else None)
        self.fast_plan: FastPlan | None = _fast_plan(self.params)

    @property
    def description(self) -> str | None:
        return self.doc.summary

    @cached_property
    def model(self) -> type[BaseModel]:
        from pydantic import ConfigDict, Field, create_model

        fields: dict[str, Any] = {}
        for p in self.params:
            default = ... if p.required else p.default
            annotation = portable_type(p.annotation)
            if p.field is not None:
                if p.description and not p.field.description:
                    p.field.description = p.description
                fields[p.name] = (annotation, p.field)
            elif p.description is not None and not _has_description(p.annotation):
                fields[p.name] = (annotation, Field(default, description=p.description))
            else:
                fields[p.name] = (annotation, default)
        model: type[BaseModel] = create_model(  # type: ignore[call-overload]
            f"{_camel(self.name)}Arguments",
            __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=True),
            **fields,
        )
        return model

    @cached_property
    def input_schema(self) -> JSONDict:
        if self.fast_plan is not None:
            fast = _fast_schema(self.fast_plan, self.params)
            if fast is not None:
                return fast
        return self.model_input_schema()

    def check_schema(self, what: str) -> None:
        """Build the input schema now (a no-op for plain-scalar signatures, which need no pydantic) and turn a
        parameter type that cannot become a JSON Schema into a ``TypeError`` naming that parameter, so a bad
        annotation fails where the function is registered rather than at ``tools/list``."""
        if self.fast_plan is not None or all(_describable(p.annotation, set()) for p in self.params):
            return  # (decided without importing pydantic: a server answers initialize before pydantic loads)
        try:
            self.input_schema  # noqa: B018 - cached: tools/list reuses it
        except Exception as exc:
            from pydantic import TypeAdapter

            for p in self.params:
                if isinstance(p.annotation, str):  # text no name in the function's module resolves
                    raise TypeError(
                        f"{what}: parameter {p.name!r} is annotated {p.annotation!r}, which cannot be resolved: with "
                        "`from __future__ import annotations` an annotation is text, looked up in the module's "
                        "globals, so a class defined inside a function is not found; define it at module level "
                        "(or import what it names there)"
                    ) from exc
                try:
                    json_schema_of(TypeAdapter(portable_type(p.annotation)))
                except Exception as param_exc:
                    raise TypeError(
                        f"{what}: parameter {p.name!r} has type {_type_name(p.annotation)}, which cannot become a "
                        f"JSON Schema ({type(param_exc).__name__}); annotate it with a JSON-compatible type (str, "
                        "int, float, bool, list, dict, a pydantic model, a dataclass, a TypedDict, Literal/Enum)"
                    ) from exc
            raise TypeError(f"{what}: cannot build the input schema from its parameters: {exc}") from exc

    def model_input_schema(self) -> JSONDict:
        """The input schema as pydantic writes it from the arguments model (what the fast path must match)."""
        schema = json_schema_of(self.model)
        schema.setdefault("properties", {})
        schema["type"] = "object"
        if not self.params:
            schema["additionalProperties"] = False
        return schema

    def validate(self, arguments: JSONDict) -> dict[str, Any]:
        """Validated keyword arguments (raises pydantic ``ValidationError``)."""
        fast = self.fast_plan
        if fast is not None:
            # (no model is built for plain scalars: pydantic accepts every such signature, and a server whose tools
            # all take scalars never imports pydantic at all)
            kwargs = fast_validate(fast, arguments)
            if kwargs is not None:
                return kwargs
        return self.validate_model(arguments)

    def validate_model(self, arguments: JSONDict) -> dict[str, Any]:
        """:meth:`validate` through the pydantic model alone (for a caller that tried the fast plan itself)."""
        inst = self.model.model_validate(arguments)
        return {p.name: getattr(inst, p.name) for p in self.params}


# Fast argument validation for functions whose parameters are all plain scalars (str, int, float, bool, each
# optionally ``| None``) without Field constraints. Only arguments whose JSON types match exactly are accepted
# here, giving what the pydantic model would return for them (the same values; an int for a float becomes a
# float); anything else (a missing required argument, an unknown key, a value pydantic would coerce or reject)
# returns None and goes through the model, so errors and coercions are pydantic's own.
_SCALARS: tuple[type, ...] = (str, int, float, bool)
_REQUIRED = object()
_MAX_EXACT_FLOAT_INT = 2**53

FastPlan = tuple[tuple[str, type, bool, Any], ...]  # (name, scalar type, accepts None, default or _REQUIRED)


def _fast_plan(params: list[Param]) -> FastPlan | None:
    plan: list[tuple[str, type, bool, Any]] = []
    for p in params:
        if p.field is not None:
            return None
        ann, nullable = p.annotation, False
        if get_origin(ann) in (Union, types.UnionType):
            args = get_args(ann)
            if len(args) != 2 or type(None) not in args:
                return None
            ann = args[0] if args[1] is type(None) else args[1]
            nullable = True
        if ann not in _SCALARS:
            return None
        if p.required:
            default: Any = _REQUIRED
        else:
            default = p.default
            if default is not None and type(default) not in _SCALARS:
                return None  # pydantic may copy other defaults; leave them to it
        plan.append((p.name, ann, nullable, default))
    return tuple(plan)


_SCALAR_SCHEMA: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _fast_schema(plan: FastPlan, params: list[Param]) -> JSONDict | None:
    """The input schema pydantic would generate for a plain-scalar signature (pinned to it by a test), built from
    the fast plan (one entry per parameter, in order); None for what the plan does not cover exactly (e.g. a
    non-finite float default)."""
    properties: JSONDict = {}
    required: list[str] = []
    for (name, tp, nullable, default), p in zip(plan, params, strict=True):
        prop: JSONDict = (
            {"anyOf": [{"type": _SCALAR_SCHEMA[tp]}, {"type": "null"}]} if nullable else {"type": _SCALAR_SCHEMA[tp]}
        )
        if default is _REQUIRED:
            required.append(name)
        else:
            if type(default) is float and not math.isfinite(default):
                return None
            prop["default"] = default
        if p.description is not None:
            prop["description"] = p.description
        properties[name] = prop
    schema: JSONDict = {"additionalProperties": False, "properties": properties}
    if required:
        schema["required"] = required
    schema["type"] = "object"
    return schema


def fast_validate(plan: FastPlan, arguments: JSONDict) -> dict[str, Any] | None:
    kwargs: dict[str, Any] = {}
    seen = 0
    for name, tp, nullable, default in plan:
        if name not in arguments:
            if default is _REQUIRED:
                return None
            kwargs[name] = default
            continue
        seen += 1
        value = arguments[name]
        vt = type(value)
        if vt is not tp:
            if value is None and nullable:
                pass
            elif tp is float and type(value) is int and -_MAX_EXACT_FLOAT_INT <= value <= _MAX_EXACT_FLOAT_INT:
                value = float(value)
            else:
                return None
        kwargs[name] = value
    if seen != len(arguments):
        return None  # unknown arguments: pydantic reports them
    return kwargs


def function_name(fn: Callable[..., Any], default: str | None = None, kind: str = "tool") -> str:
    """A callable's ``__name__``; ``default`` or an error saying how to name it for those without one (lambdas,
    partials). ``kind`` ("tool", "prompt") is what is being registered."""
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str) or not name or name == "<lambda>":
        if default is not None:
            return default
        raise ValueError(
            f"this {kind} needs a name: {fn!r} has none (a lambda or a functools.partial has no usable __name__); "
            f'give one: @app.{kind}(name="...") or app.add_{kind}(fn, name="...")'
        )
    return name


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", name) if part) or "Tool"


#: one thing wrong with a tool's arguments: where (the argument's name, then the path inside its value; empty for
#: the arguments as a whole), what kind ("missing", "unexpected" or "invalid") and, when invalid, what is wrong
ArgumentProblem = tuple[tuple[str | int, ...], str, str]


def validation_problems(exc: ValidationError) -> list[ArgumentProblem]:
    """The problems a pydantic ``ValidationError`` of a function's arguments reports (see :data:`ArgumentProblem`)."""
    problems: list[ArgumentProblem] = []
    for err in exc.errors(include_url=False):
        path = tuple(err.get("loc", ()))
        kind = err.get("type")
        if kind == "extra_forbidden":
            problems.append((path, "unexpected", ""))
        elif kind == "missing":
            problems.append((path, "missing", ""))
        else:
            shown = repr(err.get("input"))
            if len(shown) > 60:
                shown = shown[:57] + "..."
            problems.append((path, "invalid", f"{err.get('msg')} (got {shown})"))
    return problems


def format_argument_problems(problems: list[ArgumentProblem], what: str) -> str:
    """A message a model can act on: which argument, what was wrong, what was received."""
    said: list[str] = []
    for path, kind, detail in problems:
        loc = ".".join(str(x) for x in path) or "(arguments)"
        if kind == "unexpected":
            said.append(f"unexpected argument {loc!r}")
        elif kind == "missing":
            said.append(f"missing required argument {loc!r}")
        else:
            said.append(f"{loc}: {detail}")
    return f"Invalid arguments for {what}: " + "; ".join(said)


def format_validation_error(exc: ValidationError, what: str) -> str:
    """A message a model can act on: which argument, what was wrong, what was received."""
    return format_argument_problems(validation_problems(exc), what)


# ---------------------------------------------------------------------------------------------- return values


class ReturnInfo:
    """How a tool's return annotation maps to ``outputSchema`` and ``structuredContent``.

    * no annotation, ``Any``, ``None``, ``str``, ``bytes``, content types (``ContentBlock``, a union of them, a
      list of them, alone or mixed with other types), ``CallToolResult``: no output schema, the value is the content
      (``-> str`` sends the text once, as text content only);
    * a pydantic model, dataclass, TypedDict or ``dict[str, X]``: its object schema, structured content as is;
    * anything else (``int``, ``float``, ``bool``, ``list[X]``, unions, ...): wrapped as ``{"result": value}``.
    """

    def __init__(self, annotation: Any, *, structured: bool | None = None) -> None:
        self.annotation = annotation
        self.wrap: bool = False
        self.adapter: TypeAdapter[Any] | None = None
        self._scalar: type | None = None  # -> int / float / bool: schema and values without pydantic
        if structured is not False:
            self._read(annotation)
        # whether results carry structuredContent (an attribute, not a property: read on every call)
        self.structured: bool = self.adapter is not None or self._scalar is not None

    def _read(self, annotation: Any) -> None:
        if annotation in (int, float, bool):
            self.wrap = True
            self._scalar = annotation
            return
        if _is_unstructured(annotation):
            return
        tp = annotation
        if get_origin(tp) is typing.Annotated:
            tp = get_args(tp)[0]
        self.wrap = not _is_object_type(tp)
        try:
            self.adapter = _result_adapter(portable_type(annotation))
            self.output_schema  # noqa: B018 - build it now so a bad annotation fails here, not in tools/list
        except Exception as exc:
            logger.warning("no output schema for return annotation %r: %s", annotation, exc)
            self.adapter = None
            self.__dict__.pop("output_schema", None)

    @cached_property
    def output_schema(self) -> JSONDict | None:
        if self._scalar is not None:
            inner_type = _SCALAR_SCHEMA[self._scalar]
            return {"type": "object", "properties": {"result": {"type": inner_type}}, "required": ["result"]}
        if self.adapter is None:
            return None
        inner = json_schema_of(self.adapter, mode="serialization")
        if not self.wrap:
            inner.setdefault("type", "object")
            return inner
        defs = inner.pop("$defs", None)
        schema: JSONDict = {"type": "object", "properties": {"result": inner}, "required": ["result"]}
        if defs:
            schema["$defs"] = defs  # "#/$defs/..." refs still resolve from the root
        return schema

    def structure(self, value: Any) -> Any:
        """The ``structuredContent`` for ``value`` (validated against the annotation)."""
        scalar = self._scalar
        if scalar is not None:
            if type(value) is scalar and (scalar is not float or math.isfinite(cast(float, value))):
                return {"result": value}  # exactly what pydantic would give back for it
            if self.adapter is None:
                self.adapter = _result_adapter(scalar)  # coercions and errors are pydantic's own
        adapter = self.adapter
        assert adapter is not None
        data = adapter.dump_python(adapter.validate_python(value), mode="json", by_alias=True)
        return {"result": data} if self.wrap else data


def _result_adapter(annotation: Any) -> TypeAdapter[Any]:
    """The adapter that validates and dumps a tool's results: one that refuses NaN and Infinity, which JSON cannot
    carry (dumped, they would become ``null`` where the output schema says number), except for a model, dataclass
    or TypedDict, whose own configuration decides."""
    from pydantic import ConfigDict, PydanticUserError, TypeAdapter

    try:
        return TypeAdapter(annotation, config=ConfigDict(allow_inf_nan=False))
    except PydanticUserError:  # (a type with a configuration of its own takes no other)
        return TypeAdapter(annotation)


def _is_unstructured(annotation: Any) -> bool:
    if annotation in (inspect.Signature.empty, Any, None, type(None), str, bytes, bytearray):
        return True
    tp, _ = unwrap_optional(annotation)
    if tp in (str, bytes):
        return True
    from ..protocol import types as t  # (only now: the common answers above need no pydantic)
    from .content import Audio, File, Image

    content = (Image, Audio, File, t.TextContent, t.ImageContent, t.AudioContent, t.EmbeddedResource, t.ResourceLink)
    if isinstance(tp, type) and issubclass(tp, t.CallToolResult):
        return True
    return _names_content(tp, (*content, t.TextResourceContents, t.BlobResourceContents), in_list=False)


_LISTS = (list, tuple, collections.abc.Sequence)


def _names_content(tp: Any, content: tuple[type, ...], *, in_list: bool) -> bool:
    """Whether a value of type ``tp`` may be content (or a list of content, unless ``in_list``): then the tool's
    result is that content and it has no output schema. ``Annotated`` (``ContentBlock`` is one) and unions are
    looked through; so is one list level, as :func:`to_content` turns a list of content into several blocks. A
    union or list that mixes content with other values (``list[int | TextContent]``) counts as content too: its
    value may be all content, which no structured result would carry, and the rest is sent as JSON text."""
    origin = get_origin(tp)
    if origin is typing.Annotated:
        return _names_content(get_args(tp)[0], content, in_list=in_list)
    if origin is Union or origin is types.UnionType:
        return any(_names_content(a, content, in_list=in_list) for a in get_args(tp))
    if origin in _LISTS and not in_list:
        return any(_names_content(a, content, in_list=True) for a in get_args(tp) if a is not Ellipsis)
    return isinstance(tp, type) and issubclass(tp, content)


def _is_object_type(tp: Any) -> bool:
    if tp is dict:  # a bare ``dict`` means ``dict[str, Any]``, as ``typing.Dict`` does
        return True
    if isinstance(tp, type):
        if _is_model_class(tp) or dataclasses.is_dataclass(tp):
            return True
        import typing_extensions

        if typing_extensions.is_typeddict(tp):
            return True
    origin = get_origin(tp)
    if origin is dict:
        args = get_args(tp)
        return not args or args[0] is str
    return False


__all__ = [
    "Docstring",
    "FunctionInfo",
    "Param",
    "ReturnInfo",
    "ArgumentProblem",
    "format_argument_problems",
    "format_validation_error",
    "validation_problems",
    "json_schema_of",
    "literal_choices",
    "parse_docstring",
    "portable_type",
]
