"""What :mod:`mcpkit.server.schema` needs to know of Python types, before any schema is built: the JSON Schema
generator (2020-12, without auto-generated titles) and :func:`json_schema_of`, ``typing.TypedDict`` made portable to
pydantic (:func:`portable_type`), ``X | None`` and ``Literal``/``Enum`` choices read, a function's hints resolved one
by one when some cannot be, the ``Context`` parameter recognised without importing it, whether a type surely has a
JSON Schema (decided without pydantic), and a parameter's description from ``Annotated[..., Field(...)]``.

A leaf of ``server/``: it imports nothing of mcpkit. Its public names are re-exported by :mod:`mcpkit.server.schema`.
"""

from __future__ import annotations

import collections.abc as collections_abc
import contextlib
import dataclasses
import enum
import functools
import inspect
import re
import sys
import types
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin

if TYPE_CHECKING:
    from pydantic import BaseModel, TypeAdapter
    from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode

JSONDict = dict[str, Any]


@functools.cache
def _schema_generator() -> type[GenerateJsonSchema]:
    from pydantic.json_schema import GenerateJsonSchema

    class Schema(GenerateJsonSchema):
        """2020-12 JSON Schema without the auto-generated per-field titles."""

        def field_title_should_be_set(self, schema: Any) -> bool:
            return False

        def generate(self, schema: Any, mode: JsonSchemaMode = "validation") -> Any:
            out = super().generate(schema, mode)
            if isinstance(out, dict):
                out.pop("title", None)
            return out

    return Schema


def portable_type(tp: Any) -> Any:
    """``tp`` with every ``typing.TypedDict`` in it (nested in containers, unions, ``Annotated``, other TypedDicts)
    made the same ``typing_extensions.TypedDict``: before Python 3.12 pydantic reads only those, and refuses the
    ``typing`` ones users write. ``tp`` itself when there is none (and always from Python 3.12 on)."""
    if sys.version_info >= (3, 12):
        return tp
    return _portable(tp, {})


def _portable(tp: Any, done: dict[int, Any]) -> Any:
    if isinstance(tp, type) and type(tp).__module__ == "typing" and typing.is_typeddict(tp):
        if id(tp) in done:
            return done[id(tp)]  # (a recursive TypedDict: left as it is, pydantic says what it says of it)
        done[id(tp)] = tp
        import typing_extensions

        fields: dict[str, Any] = {}
        for name, hint in typing.get_type_hints(tp, include_extras=True).items():
            # (Required/NotRequired written as text, under `from __future__ import annotations`, are missed by
            # typing's own __required_keys__ before 3.12; the resolved hint still has them)
            qualifier = get_origin(hint)
            if qualifier in (typing.Required, typing.NotRequired):
                required, hint = qualifier is typing.Required, get_args(hint)[0]
            else:
                required = name in tp.__required_keys__  # type: ignore[attr-defined]
            marker = typing_extensions.Required if required else typing_extensions.NotRequired
            fields[name] = marker[_portable(hint, done)]
        made = typing_extensions.TypedDict(tp.__name__, fields)  # type: ignore[misc]
        made.__doc__, made.__module__, made.__qualname__ = tp.__doc__, tp.__module__, tp.__qualname__
        done[id(tp)] = made
        return made
    origin = get_origin(tp)
    if origin is None or origin is Literal:
        return tp
    args = get_args(tp)
    if origin is typing.Annotated:
        inner = _portable(args[0], done)
        return tp if inner is args[0] else typing.Annotated[(inner, *tp.__metadata__)]
    new = tuple(_portable(a, done) if a is not Ellipsis else a for a in args)
    if all(n is a for n, a in zip(new, args, strict=True)):
        return tp
    if origin in (Union, types.UnionType):
        return Union[new]  # noqa: UP007 - built from a tuple
    if isinstance(tp, types.GenericAlias):
        return types.GenericAlias(origin, new)
    copy_with = getattr(tp, "copy_with", None)
    return copy_with(new) if copy_with is not None else tp


def json_schema_of(adapter: TypeAdapter[Any] | type[BaseModel], mode: JsonSchemaMode = "validation") -> JSONDict:
    from pydantic import TypeAdapter

    if isinstance(adapter, TypeAdapter):
        return adapter.json_schema(schema_generator=_schema_generator(), mode=mode)
    return adapter.model_json_schema(schema_generator=_schema_generator(), mode=mode)


def is_async_callable(fn: Any) -> bool:
    """Whether calling ``fn`` gives a coroutine: an ``async def``, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004


def is_field_info(value: Any) -> bool:
    fields = sys.modules.get("pydantic.fields")
    return fields is not None and isinstance(value, fields.FieldInfo)


def is_model_class(tp: Any) -> bool:
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(tp, type) and issubclass(tp, pydantic.BaseModel)


def unwrap_optional(tp: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True)."""
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) < len(get_args(tp)):
            if len(args) == 1:
                return args[0], True
            return Union[tuple(args)], True  # noqa: UP007
    return tp, False


def literal_choices(tp: Any) -> list[str] | None:
    """The string choices of a ``Literal[...]`` or a str ``Enum`` annotation (for automatic completion)."""
    tp, _ = unwrap_optional(tp)
    if get_origin(tp) is typing.Annotated:
        tp = get_args(tp)[0]
    if get_origin(tp) is Literal:
        values = [v for v in get_args(tp) if isinstance(v, str)]
        return values or None
    import enum

    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return [str(m.value) for m in tp]
    return None


_CONTEXT_NAME = re.compile(r"^(?:Optional\[)?(?:[\w.]+\.)?Context(?:\]|\s*\|\s*None)?$")


def is_context(tp: Any) -> bool:
    if isinstance(tp, str):  # an annotation that could not be resolved (e.g. Context imported locally)
        return _CONTEXT_NAME.match(tp.strip()) is not None
    tp, _ = unwrap_optional(tp)
    # Context (or a subclass) by its class marker, so schema need not import context (which imports schema)
    return isinstance(tp, type) and getattr(tp, "_injected_as_context", False) is True


def type_hints(fn: Callable[..., Any], sig: inspect.Signature) -> dict[str, Any]:
    """The function's annotations resolved. When one cannot be (``from __future__ import annotations`` with a name
    imported inside a function, such as ``Context``), each of the others is still resolved on its own in the
    function's globals, so ``-> str`` stays ``str`` beside an unresolvable ``ctx: Context``; what cannot be resolved
    stays its text."""
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:
        pass
    globalns = getattr(inspect.unwrap(fn), "__globals__", {})
    raw = {name: p.annotation for name, p in sig.parameters.items()}
    raw["return"] = sig.return_annotation
    hints: dict[str, Any] = {}
    for name, ann in raw.items():
        if isinstance(ann, str):
            with contextlib.suppress(Exception):
                ann = typing.get_type_hints(_Annotated(ann), globalns, include_extras=True)["x"]
        hints[name] = ann
    return hints


class _Annotated:
    """A stand-in holding one annotation's text, for ``typing.get_type_hints`` to resolve on its own."""

    def __init__(self, text: str) -> None:
        self.__annotations__ = {"x": text}


_PLAIN_TYPES: frozenset[Any] = frozenset(
    (str, int, float, bool, bytes, type(None), None, Any, object, list, dict, set, frozenset, tuple)
)
_PLAIN_MODULES = frozenset(("datetime", "uuid", "decimal", "pathlib", "ipaddress"))
_CONTAINERS = frozenset(
    (list, dict, set, frozenset, tuple, Union, types.UnionType, typing.Annotated, Literal)
) | frozenset(getattr(collections_abc, n) for n in ("Sequence", "Mapping", "Set", "MutableSequence", "Iterable"))


def describable(tp: Any, seen: set[int]) -> bool:
    """True when ``tp`` surely has a JSON Schema (scalars, containers, Literal, Enum, dataclasses and TypedDicts of
    such, pydantic models), decided without pydantic; False means "ask pydantic" (which may still accept it)."""
    if tp in _PLAIN_TYPES or isinstance(tp, typing.TypeVar):
        return True
    origin = get_origin(tp)
    if origin is not None:
        if origin not in _CONTAINERS:
            return False
        if origin is Literal:
            return True
        args = get_args(tp)
        if origin is typing.Annotated:
            args = args[:1]
        return all(a is Ellipsis or describable(a, seen) for a in args)
    if not isinstance(tp, type):
        return False
    if id(tp) in seen:
        return True  # a recursive type: pydantic describes it with $defs
    seen.add(id(tp))
    if issubclass(tp, enum.Enum) or is_model_class(tp) or tp.__module__ in _PLAIN_MODULES:
        return True
    if dataclasses.is_dataclass(tp) or (issubclass(tp, dict) and hasattr(tp, "__required_keys__")):
        try:
            hints = typing.get_type_hints(tp, include_extras=True)
        except Exception:
            return False
        return all(describable(h, seen) for h in hints.values())
    return False


def type_name(tp: Any) -> str:
    return tp.__qualname__ if isinstance(tp, type) else repr(tp)


def description_of(annotation: Any) -> str | None:
    if get_origin(annotation) is typing.Annotated:
        for meta in get_args(annotation)[1:]:
            description = getattr(meta, "description", None)
            if isinstance(description, str) and description:
                return description
    return None


def title_of(annotation: Any) -> str | None:
    """The ``title`` an ``Annotated[..., Field(title=...)]`` gives (None: none)."""
    if get_origin(annotation) is typing.Annotated:
        for meta in get_args(annotation)[1:]:
            title = getattr(meta, "title", None)
            if isinstance(title, str) and title:
                return title
    return None


def has_description(annotation: Any) -> bool:
    return description_of(annotation) is not None


__all__ = [
    "describable",
    "description_of",
    "has_description",
    "is_context",
    "is_field_info",
    "is_model_class",
    "json_schema_of",
    "literal_choices",
    "portable_type",
    "title_of",
    "type_hints",
    "type_name",
    "unwrap_optional",
]
