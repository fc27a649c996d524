"""What ``ctx.elicit`` can ask and what it hands back.

**Asking.** Elicitation forms are flat: an object of primitive fields (string, number, integer, boolean) and
choices, nothing nested (spec: client/elicitation, "Requested Schema"). ``ctx.elicit(message, what)`` takes:

- a pydantic model, a dataclass or a TypedDict of such fields: one form field each; ``data`` is an instance;
- ``bool``, ``str``, ``int``, ``float``: one field named ``value``; ``data`` is the value;
- a choice: ``Literal["a", "b"]``, an ``Enum`` with string values, or a list of strings; ``data`` is the choice
  (the Enum member for an Enum); ``list[Literal[...]]`` / ``list[AnEnum]`` is a multi-select (``data`` a list);
- ``None``: nothing to fill in, only accept, decline or cancel (a confirmation; ``data`` is None);
- a JSON Schema dict, sent as given; ``data`` is the content dict.

The schema is shaped for the request's revision: 2025-06-18 knows no default but a boolean's, and no titled or
multi-select choice but the legacy ``enumNames`` titles; 2025-11-25 and 2026-07-28 have defaults on every field,
titled choices (``oneOf`` of ``const``/``title``) and multi-select arrays. A type that cannot be asked in a form
is a ``TypeError`` naming the field and the reason, raised by ``ctx.elicit`` before anything is sent.

**The answer** is one of three classes, told apart by ``action``: :class:`AcceptedElicitation` (``data`` typed as
asked), :class:`DeclinedElicitation`, :class:`CancelledElicitation`; :data:`ElicitationResult` is their union, so
``if result.action == "accept":`` narrows it for a type checker and ``result.data`` is then a ``T``.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, Generic, Literal, TypeAlias, TypeVar, Union, get_args, get_origin

from ..protocol.errors import CapabilityNotSupported, InvalidParams
from ..protocol.versions import Features

T = TypeVar("T")
JSONDict = dict[str, Any]

__all__ = [
    "AcceptedElicitation",
    "CancelledElicitation",
    "DeclinedElicitation",
    "ElicitationResult",
    "Form",
    "elicitation_form",
]

# the keys a primitive field of a form may carry (JSON Schema keywords the spec lists for them)
_FIELD_KEYS = frozenset(
    {
        *("type", "title", "description", "default", "enum", "enumNames", "oneOf", "items", "format"),
        *("minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems"),
    }
)
_FORMATS = frozenset(("email", "uri", "date", "date-time"))
_SCALARS: dict[type, str] = {bool: "boolean", str: "string", int: "integer", float: "number"}


# ---------------------------------------------------------------------------------------------- the answer


@dataclasses.dataclass(frozen=True, slots=True)
class AcceptedElicitation(Generic[T]):
    """The user submitted the form: ``data`` is the answer in the type that was asked for; ``content`` is the
    raw content the client sent (a dict; ``{}`` for a URL-mode consent or a confirmation)."""

    data: T
    content: JSONDict
    action: Literal["accept"] = "accept"

    @property
    def accepted(self) -> Literal[True]:
        """True: ``result.accepted`` reads as ``result.action == "accept"``."""
        return True


@dataclasses.dataclass(frozen=True, slots=True)
class DeclinedElicitation:
    """The user explicitly declined (``data`` and ``content`` are None)."""

    action: Literal["decline"] = "decline"
    data: None = None
    content: None = None

    @property
    def accepted(self) -> Literal[False]:
        """False."""
        return False


@dataclasses.dataclass(frozen=True, slots=True)
class CancelledElicitation:
    """The user dismissed the request without choosing (``data`` and ``content`` are None)."""

    action: Literal["cancel"] = "cancel"
    data: None = None
    content: None = None

    @property
    def accepted(self) -> Literal[False]:
        """False."""
        return False


#: What ``ctx.elicit`` returns; narrow it with ``if result.action == "accept":`` (then ``result.data: T``).
ElicitationResult: TypeAlias = Union[AcceptedElicitation[T], DeclinedElicitation, CancelledElicitation]  # noqa: UP007


def elicitation_result(raw: JSONDict, read: Callable[[JSONDict], Any]) -> ElicitationResult[Any]:
    """The result of a client's answer ``raw`` (``action`` checked); ``read`` turns accepted content into data."""
    action = raw.get("action")
    if action == "decline":
        return DeclinedElicitation()
    if action == "cancel":
        return CancelledElicitation()
    if action != "accept":
        raise InvalidParams(f"the client answered the elicitation with an invalid action {action!r}")
    content = raw.get("content")
    content = dict(content) if isinstance(content, dict) else {}
    return AcceptedElicitation(read(content), content)


# ---------------------------------------------------------------------------------------------- asking


@dataclasses.dataclass(frozen=True, slots=True)
class Form:
    """A ``requestedSchema`` and how to read the accepted content back into what was asked for."""

    schema: JSONDict
    read: Callable[[JSONDict], Any]


def elicitation_form(what: object, feats: Features) -> Form:
    """The form that asks for ``what`` (see the module docstring) in the revision ``feats``."""
    if what is None:
        return Form({"type": "object", "properties": {}}, lambda content: None)
    if isinstance(what, dict):
        return Form(what, lambda content: content)
    if isinstance(what, (list, tuple)):
        choices = [_choice_value(c, "the choices") for c in what]
        if not choices:
            raise TypeError("ctx.elicit(message, [...]): the list of choices is empty")
        prop = _choice_field(choices, None, feats, multi=False, base={})
        return Form(_single(prop), lambda content: _read_choice(content, choices))
    if isinstance(what, type) and _is_object_type(what):
        return _object_form(what, feats)
    prop = _field(what, "value", feats, {})
    adapter = _adapter(what)
    return Form(_single(prop), lambda content: _validated(adapter, content.get("value"), what))


def _single(prop: JSONDict) -> JSONDict:
    return {"type": "object", "properties": {"value": prop}, "required": ["value"]}


def _read_choice(content: JSONDict, choices: list[str]) -> str:
    value = content.get("value")
    if value not in choices:
        raise InvalidParams(f"the user's answer {value!r} is not one of the choices {choices}")
    return str(value)


def _is_object_type(tp: type) -> bool:
    from pydantic import BaseModel

    return issubclass(tp, BaseModel) or dataclasses.is_dataclass(tp) or typing.is_typeddict(tp)


def _object_form(tp: type, feats: Features) -> Form:
    """A pydantic model, dataclass or TypedDict: one form field per field."""
    from pydantic import BaseModel

    from .schema import json_schema_of

    adapter = _adapter(tp)
    full = json_schema_of(tp) if issubclass(tp, BaseModel) else json_schema_of(adapter)
    defs = full.get("$defs") or {}
    if issubclass(tp, BaseModel):
        hints = {name: f.annotation for name, f in tp.model_fields.items()}
    else:
        hints = typing.get_type_hints(tp)
    props: JSONDict = {}
    for name, generated in (full.get("properties") or {}).items():
        props[name] = _field(hints.get(name, Any), name, feats, _resolve(generated, defs))
    schema: JSONDict = {"type": "object", "properties": props}
    if full.get("required"):
        schema["required"] = list(full["required"])
    if issubclass(tp, BaseModel):
        return Form(schema, lambda content: _validated(tp, content, tp))
    return Form(schema, lambda content: _validated(adapter, content, tp))


def _resolve(prop: JSONDict, defs: JSONDict) -> JSONDict:
    """A generated property with its ``$ref`` followed and ``Optional``'s null branch dropped."""
    if "$ref" in prop:  # (the definition's title is its class's name, not the field's: left out)
        target = {k: v for k, v in defs.get(prop["$ref"].rsplit("/", 1)[-1], {}).items() if k != "title"}
        prop = {**target, **{k: v for k, v in prop.items() if k != "$ref"}}
    if "anyOf" in prop:
        branches = [_resolve(p, defs) for p in prop["anyOf"] if p.get("type") != "null"]
        if len(branches) == 1:
            prop = {**branches[0], **{k: v for k, v in prop.items() if k != "anyOf"}}
    return prop


def _field(tp: Any, name: str, feats: Features, generated: JSONDict) -> JSONDict:
    """One form field for the Python type ``tp`` (``generated``: pydantic's schema for it, with constraints,
    title, description and default)."""
    base = {k: v for k, v in generated.items() if k in ("title", "description", "default")}
    if base.get("default", 0) is None:
        del base["default"]
    inner = _unwrap(tp)
    origin = get_origin(inner)
    if origin in (list, set, frozenset, tuple, Sequence):
        args = get_args(inner)
        values, titles = _choices_of(args[0] if args else Any, name)
        if values is None:
            raise TypeError(f"elicitation field {name!r}: a list must be of choices (Literal or Enum), not {inner!r}")
        if "default" in base:
            base["default"] = [_plain(v) for v in base["default"]]
        return _choice_field(values, titles, feats, multi=True, base=base)
    values, titles = _choices_of(inner, name)
    if values is not None:
        if "default" in base:
            base["default"] = _plain(base["default"])
        return _choice_field(values, titles, feats, multi=False, base=base)
    kind = _SCALARS.get(inner) if isinstance(inner, type) else None
    if kind is None:
        kind = generated.get("type") if generated.get("type") in _SCALARS.values() else None
    if kind is None:
        raise TypeError(
            f"elicitation field {name!r}: {_type_name(inner)} cannot be asked in a form (a form holds strings, "
            "numbers, integers, booleans and choices: Literal, Enum, a list of strings; nothing nested)"
        )
    prop: JSONDict = {"type": kind, **base}
    for key in ("minLength", "maxLength", "minimum", "maximum"):
        if key in generated:
            prop[key] = generated[key]
    if generated.get("format") in _FORMATS:
        prop["format"] = generated["format"]
    if "exclusiveMinimum" in generated and "minimum" not in prop:
        prop["minimum"] = generated["exclusiveMinimum"]
    if "exclusiveMaximum" in generated and "maximum" not in prop:
        prop["maximum"] = generated["exclusiveMaximum"]
    if not feats.elicitation_choices and kind != "boolean":
        prop.pop("default", None)  # 2025-06-18: only a boolean field has a default
    return {k: v for k, v in prop.items() if k in _FIELD_KEYS}


def _choice_field(
    values: list[str], titles: list[str] | None, feats: Features, *, multi: bool, base: JSONDict
) -> JSONDict:
    """A single- or multi-select field, titled when ``titles`` are given, in the revision's vocabulary."""
    if multi:
        if not feats.elicitation_choices:  # (the client's revision cannot show it: not a bug of the tool)
            raise CapabilityNotSupported(
                f"a multi-select field needs protocol 2025-11-25 or later; this request is at {feats.version} "
                "(ask for one choice, or for each option as a boolean)"
            )
        items: JSONDict = (
            {"anyOf": [{"const": v, "title": t} for v, t in zip(values, titles, strict=True)]}
            if titles
            else {"type": "string", "enum": values}
        )
        return {"type": "array", **base, "items": items}
    if titles and feats.elicitation_choices:
        return {
            "type": "string",
            **base,
            "oneOf": [{"const": v, "title": t} for v, t in zip(values, titles, strict=True)],
        }
    prop: JSONDict = {"type": "string", **base, "enum": values}
    if titles:
        prop["enumNames"] = titles  # 2025-06-18's (legacy) titles
    if not feats.elicitation_choices:
        prop.pop("default", None)
    return prop


def _choices_of(tp: Any, name: str) -> tuple[list[str] | None, list[str] | None]:
    """The values (and titles, for an Enum whose names say more than its values) of a choice type, else None."""
    if get_origin(tp) is Literal:
        return [_choice_value(v, f"field {name!r}") for v in get_args(tp)], None
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        members = list(tp)
        values = [_choice_value(m.value, f"field {name!r} ({tp.__name__})") for m in members]
        titles = [m.name.replace("_", " ").capitalize() for m in members]
        if all(t.casefold() == v.casefold() for t, v in zip(titles, values, strict=True)):
            return values, None
        return values, titles
    return None, None


def _choice_value(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"elicitation choices are strings; {where} has {value!r}")
    return value


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def _unwrap(tp: Any) -> Any:
    """``Optional[X]`` and ``Annotated[X, ...]`` -> ``X``."""
    while True:
        origin = get_origin(tp)
        if origin is typing.Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            rest = [a for a in get_args(tp) if a is not type(None)]
            if len(rest) != 1:
                return tp
            tp = rest[0]
        else:
            return tp


def _type_name(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) else repr(tp)


def _adapter(tp: Any) -> Any:
    from pydantic import TypeAdapter

    from .schema import portable_type

    return TypeAdapter(portable_type(tp))  # (every typing.TypedDict in it, nested ones and Required keys included)


def _validated(adapter: Any, value: Any, what: Any) -> Any:
    """``value`` read into the asked type; an answer that does not fit is
    :class:`~mcpkit.protocol.errors.InvalidParams` (a tool that lets it through answers ``isError`` with its
    message) rather than an internal error."""
    from pydantic import BaseModel, ValidationError

    try:
        if isinstance(adapter, type) and issubclass(adapter, BaseModel):
            return adapter.model_validate(value)
        return adapter.validate_python(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        shown = f"field {where}" if where else repr(value)[:80]
        raise InvalidParams(f"the user's answer does not fit {_type_name(what)} ({shown}): {first['msg']}") from None
