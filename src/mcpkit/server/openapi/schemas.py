"""OpenAPI schema objects as JSON Schema 2020-12, the dialect of MCP's ``inputSchema`` and ``outputSchema``.

OpenAPI 3.1 schemas are 2020-12 already; 3.0's are a variant, converted here: ``nullable: true`` admits ``null``,
a boolean ``exclusiveMinimum``/``exclusiveMaximum`` becomes the number form, ``example`` becomes ``examples``.
Keywords only OpenAPI reads (``discriminator``, ``xml``, ``externalDocs``, ``x-*`` extensions) are dropped.

A reference to a component schema (``#/components/schemas/Pet``) becomes ``#/$defs/Pet``, and the tool's schema
carries the ``$defs`` it needs (all that it reaches, so recursive schemas work); any other local reference is
inlined. Each direction has its own copy: a ``readOnly`` property is never required in what a client sends, a
``writeOnly`` one never in what the API answers.
"""

from __future__ import annotations

from typing import Any

from .document import Document, OpenAPIError, UnsupportedOperation

JSONDict = dict[str, Any]

MAX_SCHEMA_DEPTH = 64
"""How deep one schema may nest (objects in objects, ...) before the document is refused."""

_COMPONENT = "#/components/schemas/"
_DROPPED = frozenset(("discriminator", "xml", "externalDocs", "nullable", "example"))
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
)


class SchemaConverter:
    """Converts a document's schemas for one direction: ``"input"`` (what is sent) or ``"output"`` (what comes
    back). Component schemas are converted once and shared by every tool of that direction."""

    def __init__(self, doc: Document, direction: str) -> None:
        self.doc = doc
        self.direction = direction
        self._skip_required = "readOnly" if direction == "input" else "writeOnly"
        self._components: dict[str, JSONDict] = {}
        self._uses: dict[str, set[str]] = {}

    def convert(self, schema: Any, where: str) -> tuple[JSONDict, JSONDict]:
        """``(schema, defs)``: the converted schema and the ``$defs`` it needs."""
        used: set[str] = set()
        out = self._convert(schema, where, used, 0, ())
        return out, self.defs(used, where)

    def defs(self, used: set[str], where: str) -> JSONDict:
        """The converted component schemas ``used`` names, and every one they reach."""
        out: JSONDict = {}
        todo = sorted(used)
        while todo:
            name = todo.pop()
            if name in out:
                continue
            out[name] = self._component(name, where)
            todo.extend(n for n in self._uses[name] if n not in out)
        for name in out:
            _refuse_reference_loop(name, out, where)
        return dict(sorted(out.items()))

    def _component(self, name: str, where: str) -> JSONDict:
        found = self._components.get(name)
        if found is None:
            used: set[str] = set()
            self._components[name] = {}  # (a schema that refers to itself meets this placeholder)
            self._uses[name] = used
            target = self.doc.pointer(_COMPONENT + name, where)
            found = self._components[name] = self._convert(target, where, used, 0, (name,))
        return found

    def _convert(self, schema: Any, where: str, used: set[str], depth: int, seen: tuple[str, ...]) -> Any:
        if isinstance(schema, bool):
            return schema
        if not isinstance(schema, dict):
            raise OpenAPIError(f"{where}: a schema must be an object (found {type(schema).__name__})")
        if depth > MAX_SCHEMA_DEPTH:
            raise OpenAPIError(f"{where}: a schema nested deeper than {MAX_SCHEMA_DEPTH}")
        ref = schema.get("$ref")
        if isinstance(ref, str):
            converted = self._reference(ref, where, used, depth, seen)
            if self.doc.version == "3.0" or len(schema) == 1:
                return converted  # (3.0: a $ref's siblings are ignored)
            rest = self._convert({k: v for k, v in schema.items() if k != "$ref"}, where, used, depth + 1, seen)
            return {"allOf": [converted, rest]} if rest else converted
        out: JSONDict = {}
        for key, value in schema.items():
            if key in _DROPPED or key.startswith("x-"):
                continue
            if key in _SCHEMA_MAPS and isinstance(value, dict):
                out[key] = {k: self._convert(v, where, used, depth + 1, seen) for k, v in value.items()}
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                out[key] = [self._convert(v, where, used, depth + 1, seen) for v in value]
            elif key in _SCHEMA_ONE and isinstance(value, (dict, bool)):
                out[key] = self._convert(value, where, used, depth + 1, seen)
            elif key == "items" and isinstance(value, list):  # (draft-4 tuple form)
                out["prefixItems"] = [self._convert(v, where, used, depth + 1, seen) for v in value]
            else:
                out[key] = value
        if self.doc.version == "3.0":
            _from_30(schema, out)
        if "example" in schema and "examples" not in out:
            out["examples"] = [schema["example"]]
        required = out.get("required")
        props = out.get("properties")
        if isinstance(required, list) and isinstance(props, dict):
            kept = [r for r in required if not (isinstance(props.get(r), dict) and props[r].get(self._skip_required))]
            if kept != required:
                if kept:
                    out["required"] = kept
                else:
                    del out["required"]
        return out

    def _reference(self, ref: str, where: str, used: set[str], depth: int, seen: tuple[str, ...]) -> Any:
        if ref.startswith(_COMPONENT) and "/" not in ref[len(_COMPONENT) :]:
            name = ref[len(_COMPONENT) :].replace("~1", "/").replace("~0", "~")
            if not isinstance((self.doc.raw.get("components") or {}).get("schemas", {}).get(name), (dict, bool)):
                raise OpenAPIError(f"{where}: the reference {ref!r} points at nothing")
            used.add(name)
            if name not in self._components:
                self._component(name, where)
            return {"$ref": "#/$defs/" + name.replace("~", "~0").replace("/", "~1")}
        if not ref.startswith("#"):
            raise UnsupportedOperation(f"{where}: the reference {ref!r} is not in this document (never fetched)")
        if ref in seen:
            raise UnsupportedOperation(f"{where}: {ref!r} refers to itself outside components/schemas")
        target = self.doc.resolve({"$ref": ref}, where)
        return self._convert(target, where, used, depth + 1, (*seen, ref))


def _refuse_reference_loop(name: str, defs: JSONDict, where: str) -> None:
    """Refuse (:class:`UnsupportedOperation`) a component schema that is only a reference to one that is only a
    reference ... back to it: it describes nothing, and a client resolving it would never stop."""
    chain = [name]
    schema = defs[name]
    while isinstance(schema, dict) and len(schema) == 1 and isinstance(ref := schema.get("$ref"), str):
        target = ref.removeprefix("#/$defs/").replace("~1", "/").replace("~0", "~")
        if target in chain:
            loop = " -> ".join([*chain[chain.index(target) :], target])
            raise UnsupportedOperation(
                f"{where}: the component schema {target!r} is only a reference to itself ({loop})"
            )
        chain.append(target)
        schema = defs.get(target)


def _from_30(schema: JSONDict, out: JSONDict) -> None:
    """OpenAPI 3.0's own keywords in their 2020-12 form (``out`` is the converted copy of ``schema``)."""
    for low, high in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        flag = schema.get(high)
        if isinstance(flag, bool):
            if flag and low in schema:
                out[high] = schema[low]
                out.pop(low, None)
            else:
                out.pop(high, None)
    if schema.get("nullable") is True:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            out["type"] = [*kind, "null"]
        elif kind is None:
            inner = dict(out)
            out.clear()
            out["anyOf"] = [inner, {"type": "null"}]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]


def schema_type(schema: Any, defs: JSONDict) -> str | None:
    """The JSON type a (converted) schema names, following one ``$ref`` into ``defs`` (None when not one)."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return schema_type(defs.get(ref[len("#/$defs/") :].replace("~1", "/").replace("~0", "~")), {})
        kind = schema.get("type")
        if isinstance(kind, str):
            return kind
        if isinstance(kind, list):
            named = [k for k in kind if k != "null"]
            return named[0] if len(named) == 1 else None
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list):
                kinds = {schema_type(o, defs) for o in options} - {"null"}
                if len(kinds) == 1:
                    return kinds.pop()
    return None


def is_object(schema: Any, defs: JSONDict, depth: int = 0) -> bool:
    """Whether every value ``schema`` admits is an object (``type: object``, through ``$ref`` and ``allOf``)."""
    if not isinstance(schema, dict) or depth > MAX_SCHEMA_DEPTH:
        return False
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if not ref.startswith("#/$defs/"):
            return False
        target = defs.get(ref[len("#/$defs/") :].replace("~1", "/").replace("~0", "~"))
        if not is_object(target, defs, depth + 1):
            return False
    if schema.get("type") == "object":
        return True
    parts = schema.get("allOf")
    if isinstance(parts, list) and parts:
        return any(is_object(p, defs, depth + 1) for p in parts) and not isinstance(schema.get("type"), list)
    return isinstance(ref, str)


def object_schema(schema: Any, defs: JSONDict) -> JSONDict | None:
    """The object schema ``schema`` is (following one ``$ref``) when its properties can become tool arguments
    one by one: ``type: object`` with ``properties`` and no composition keywords. None otherwise."""
    if isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and len(schema) == 1:
        ref = schema["$ref"]
        if not ref.startswith("#/$defs/"):
            return None
        schema = defs.get(ref[len("#/$defs/") :].replace("~1", "/").replace("~0", "~"))
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return None
    if schema.get("type") not in ("object", None) or any(k in schema for k in ("allOf", "anyOf", "oneOf", "not")):
        return None
    return schema


__all__ = ["MAX_SCHEMA_DEPTH", "SchemaConverter", "is_object", "object_schema", "schema_type"]
