"""The shape of an elicitation form the client accepts, and the nulls of an answer to one.

**The form.** A form-mode ``requestedSchema`` is an object of flat fields (spec: client/elicitation, "Requested
Schema"; schema.ts ``PrimitiveSchemaDefinition``): a string (with its ``format``, ``enum``/``enumNames`` or
titled ``oneOf`` choices), a number or integer, a boolean, or (2025-11-25 on) a multi-select: an array whose
``items`` are string choices (``enum``, or ``anyOf`` of ``const``/``title``). A field may also be a nullable one of
these (``anyOf``/``oneOf`` of it and ``{"type": "null"}``, or ``"type": [it, "null"]``), which the official Python
SDK's servers send for ``Optional`` fields. :func:`check_form` refuses anything else (a nested object, an array of
numbers, a ``$ref``) before the user's handler sees it: a client cannot render it as a form, and no answer to it
would be a valid ``ElicitResult``.

**Nulls.** An ``ElicitResult``'s content holds strings, numbers, booleans and lists of strings, never null
(schema.ts; the TypeScript SDK refuses the whole result). :func:`without_nulls` drops a null the handler gave for
a field that is not required (it means the same as no value), keeps one for a required field whose schema
explicitly allows null (a server of the official Python SDK asks for those), and refuses any other.
"""

from __future__ import annotations

from typing import Any

from ..protocol.errors import InvalidParams
from ..protocol.jsonrpc import JSONDict
from .results import ElicitationContentError

_SCALAR_TYPES = frozenset(("string", "number", "integer", "boolean"))


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null"


def _nullable_part(field: JSONDict) -> Any:
    """The non-null member of a nullable field written as ``anyOf``/``oneOf`` of it and null, else None."""
    if "type" in field:
        return None
    for key in ("anyOf", "oneOf"):
        members = field.get(key)
        if isinstance(members, list) and len(members) == 2 and any(_is_null(m) for m in members):
            other = members[1] if _is_null(members[0]) else members[0]
            return other if not _is_null(other) else None
    return None


def _multi_select_items(items: Any) -> bool:
    if not isinstance(items, dict):
        return False
    if items.get("type") == "string":
        return True
    choices = items.get("anyOf", items.get("oneOf"))
    return isinstance(choices, list) and bool(choices) and all(isinstance(c, dict) and "const" in c for c in choices)


def _field_problem(field: Any, nullable_ok: bool = True) -> str | None:
    """Why ``field`` is not a form field (None: it is one)."""
    if not isinstance(field, dict):
        return "not a schema object"
    kind = field.get("type")
    if kind is None:
        inner = _nullable_part(field) if nullable_ok else None
        if inner is not None:
            return _field_problem(inner, nullable_ok=False)
        return "no primitive type (a form field is a string, number, integer, boolean or a multi-select)"
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if not nullable_ok or len(kinds) != 1 or len(kind) != 2:
            return f"type {kind!r} (a form field has one primitive type, or it and null)"
        kind = kinds[0]
    if kind in _SCALAR_TYPES:
        return None
    if kind == "array":
        if _multi_select_items(field.get("items")):
            return None
        return "an array of other than string choices (a multi-select's items are strings)"
    return f"type {kind!r} (a form field is a string, number, integer, boolean or a multi-select; nothing nested)"


def check_form(schema: Any) -> None:
    """Refuse (-32602, naming the property) a form's ``requestedSchema`` that is not an object of form fields."""
    if not isinstance(schema, dict):
        raise InvalidParams("elicitation requestedSchema must be an object schema")
    if schema.get("type", "object") != "object":
        raise InvalidParams(f"elicitation requestedSchema must be of type 'object', not {schema.get('type')!r}")
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise InvalidParams("elicitation requestedSchema.properties must be an object")
    for name, field in properties.items():
        problem = _field_problem(field)
        if problem is not None:
            raise InvalidParams(
                f"elicitation requestedSchema property {name!r} is not a form field: {problem}",
                {"property": name},
            )


def _allows_null(field: Any) -> bool:
    if not isinstance(field, dict):
        return False
    kind = field.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return _nullable_part(field) is not None


def without_nulls(content: JSONDict, schema: Any) -> JSONDict:
    """``content`` without the nulls of fields that are not required; a null for a required field stays only if
    its schema allows null, else :class:`ElicitationContentError` names the field."""
    if not any(v is None for v in content.values()):
        return content
    schema = schema if isinstance(schema, dict) else {}
    required = schema.get("required")
    required = set(required) if isinstance(required, list) else set()
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    kept: JSONDict = {}
    for key, value in content.items():
        if value is not None:
            kept[key] = value
        elif key in required:
            if not _allows_null(properties.get(key)):
                raise ElicitationContentError(
                    f"elicitation content at {key}: null for a required field whose schema does not allow null "
                    "(an elicitation answer holds a string, number, boolean or list of strings)"
                )
            kept[key] = None  # (the server's schema asks for it: an official Python SDK server's Optional field)
    return kept


__all__ = ["check_form", "without_nulls"]
