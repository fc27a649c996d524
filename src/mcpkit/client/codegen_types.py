"""JSON Schema to Python types, for :mod:`mcpkit.client.codegen`.

:class:`Types` turns the schemas of a server's tools into type expressions (``str``, ``list[int]``,
``Literal["a", "b"] | None``) and the named types they need: a ``TypedDict`` for each object with properties (an
object reached through ``$ref`` is named after its definition and written once, so a recursive schema refers to
its own name; an ``allOf`` of object schemas is one of every part's properties), a ``tuple[...]`` for an array
of fixed length whose items each have a schema (``prefixItems``), a quoted ``TypeAlias`` for an expression too long
for a line. What it does not understand is
``Any``; a schema deeper than :data:`MAX_SCHEMA_DEPTH` or a server whose schemas hold more than
:data:`MAX_SCHEMA_NODES` subschemas in all gets ``Any`` for the rest, and beyond :data:`MAX_NAMED_TYPES` named
types an object is a ``dict[str, Any]`` (nothing is ever refused).

Names the server chose pass through :mod:`mcpkit.client.codegen_text` before they reach the source.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from .codegen_text import MAX_NAME_LENGTH, pascal, py_str, unique

MAX_SCHEMA_DEPTH = 32
"""Subschemas nested deeper than this (``properties``, ``items``, ``anyOf`` ... each a level) are typed ``Any``."""

MAX_SCHEMA_NODES = 20_000
"""Subschemas read in all, every tool's schemas together; the ones beyond are typed ``Any``."""

MAX_NAMED_TYPES = 2_000
"""TypedDicts and aliases written in all; beyond, an object is typed ``dict[str, Any]`` and a long expression is
written inline."""

MAX_LITERAL_VALUES = 256
"""An ``enum`` with more values is typed by its ``type`` (``str``), not as a ``Literal``."""

MAX_LITERAL_LENGTH = 200
"""An ``enum``/``const`` string longer than this is typed by its ``type``, not as a ``Literal``."""

ALIAS_OVER = 72
"""A field's or a result's type expression longer than this gets a name (a ``TypeAlias``)."""

_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}
_MAX_INT = 1 << 63


@dataclass
class Field:
    """One key of a TypedDict (and one parameter, for a tool's input)."""

    key: str
    type: str
    required: bool
    description: str | None


@dataclass
class Record:
    """A TypedDict to write."""

    name: str
    description: str | None
    fields: list[Field] = field(default_factory=list)


@dataclass
class Alias:
    """A ``Name: TypeAlias = "expression"`` to write."""

    name: str
    type: str


class Types:
    """The named types made so far (:attr:`defs`, in the order they were made) and the typing names they use."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken  # every module-level name, shared with the module writer
        self.defs: list[Record | Alias] = []
        self.typing: set[str] = set()
        self.nodes: int = 0
        self._named: dict[tuple[str, str], str] = {}  # (pointer, root identity) -> the TypedDict made for it
        self._inline: dict[tuple[str, str], str] = {}  # the same, for a definition that is no object
        self._resolving: set[tuple[str, str]] = set()
        self._roots: dict[int, tuple[Any, str]] = {}  # id(root) -> (root, its identity)

    # ------------------------------------------------------------------------------------------ entry points

    def object(self, schema: Any, hint: str, root: Any = None) -> Record:
        """The TypedDict for an object schema (a tool's input or output), named ``hint`` (made unique): its
        properties, even when it has none."""
        root = schema if root is None else root
        if isinstance(schema, dict) and isinstance(schema.get("allOf"), list):
            schema = self._merged(schema, root, 0) or schema  # (a model extending another: their properties)
        name = self._typed_dict(schema if isinstance(schema, dict) else {}, root, hint, 0, ("#", self._identity(root)))
        found = next(d for d in self.defs if isinstance(d, Record) and d.name == name)
        return found

    def expr(self, schema: Any, root: Any, hint: str, depth: int = 0) -> str:
        """The type expression for ``schema`` (a subschema of ``root``, which its ``$ref`` resolve against); an
        object with properties inside it becomes a TypedDict named ``hint``."""
        self.nodes += 1
        if depth > MAX_SCHEMA_DEPTH or self.nodes > MAX_SCHEMA_NODES or not isinstance(schema, dict):
            return self._any()  # (also true, false and anything that is no schema)
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self._nullable(schema, self._ref(ref, root, depth))
        for key in ("const", "enum"):
            if key in schema:
                values = [schema[key]] if key == "const" else schema[key]
                literal = self._literal(values) if isinstance(values, list) else None
                if literal is not None:
                    return literal
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                several = len(options) > 1
                parts = [
                    self.expr(s, root, f"{hint}{i + 1}" if several else hint, depth + 1) for i, s in enumerate(options)
                ]
                return self._nullable(schema, self.union(parts))
        every = schema.get("allOf")
        if isinstance(every, list) and len(every) == 1:
            return self._nullable(schema, self.expr(every[0], root, hint, depth + 1))
        if isinstance(every, list) and every:
            merged = self._merged(schema, root, depth)  # (objects: one TypedDict of every part's properties)
            if merged is None or len(self.defs) >= MAX_NAMED_TYPES:
                return self._any()  # (another intersection has no Python type)
            return self._nullable(schema, self._typed_dict(merged, root, hint, depth, None))
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if isinstance(k, str)]
            return self.union([self.expr({**schema, "type": k}, root, hint, depth + 1) for k in kinds] or [self._any()])
        if kind is None and isinstance(schema.get("properties"), dict):
            kind = "object"
        return self._nullable(schema, self._of_type(kind, schema, root, hint, depth))

    def union(self, parts: list[str]) -> str:
        """``a | b``, each once, ``None`` last; ``Any`` when one of them is."""
        members: dict[str, None] = {}
        for part in parts:
            members.update(dict.fromkeys(split_union(part)))
        seen = list(members)
        if "Any" in members:
            return "Any"
        if "None" in seen:
            seen = [p for p in seen if p != "None"] + ["None"]
        return " | ".join(seen)

    def named(self, expr: str, hint: str, force: bool = False) -> str:
        """``expr``, or the name of a new alias of it when it is too long to read inline (``force``: in any case)."""
        if (len(expr) <= ALIAS_OVER and not force) or len(self.defs) >= MAX_NAMED_TYPES:
            return expr
        self.typing.add("TypeAlias")
        name = unique(hint[:MAX_NAME_LENGTH], self.taken)
        self.defs.append(Alias(name, expr))
        return name

    # ------------------------------------------------------------------------------------------ the parts

    def _any(self) -> str:
        self.typing.add("Any")
        return "Any"

    def _nullable(self, schema: dict[str, Any], expr: str) -> str:
        return self.union([expr, "None"]) if schema.get("nullable") is True else expr

    def _of_type(self, kind: Any, schema: dict[str, Any], root: Any, hint: str, depth: int) -> str:
        if isinstance(kind, str) and kind in _SCALARS:
            return _SCALARS[kind]
        if kind == "array":
            items = schema.get("items")
            prefix = schema.get("prefixItems")
            if prefix is None and isinstance(items, list):  # (draft-07 and before: items as a list)
                prefix, items = items, schema.get("additionalItems")
            if isinstance(prefix, list) and prefix:
                return self._tuple(schema, prefix, items, root, hint, depth)
            inner = self.expr(items, root, f"{hint}Item", depth + 1) if isinstance(items, dict) else self._any()
            return f"list[{inner}]"
        if kind == "object":
            properties = schema.get("properties")
            if isinstance(properties, dict) and properties and len(self.defs) < MAX_NAMED_TYPES:
                return self._typed_dict(schema, root, hint, depth, None)
            extra = schema.get("additionalProperties")
            value = self.expr(extra, root, f"{hint}Value", depth + 1) if isinstance(extra, dict) else self._any()
            return f"dict[str, {value}]"
        return self._any()

    def _tuple(self, schema: dict[str, Any], prefix: list[Any], rest: Any, root: Any, hint: str, depth: int) -> str:
        """An array whose first items have their own schemas: a ``tuple[...]`` when its length is exactly theirs,
        else a list of the union of every item's type (``Any`` for the items after them, when any may follow)."""
        parts = [self.expr(s, root, f"{hint}{i + 1}", depth + 1) for i, s in enumerate(prefix)]
        low, high = schema.get("minItems"), schema.get("maxItems")
        closed = rest is False or (type(high) is int and high <= len(prefix))
        if closed and type(low) is int and low >= len(prefix):
            return f"tuple[{', '.join(parts)}]"
        if not closed:
            parts.append(self.expr(rest, root, f"{hint}Item", depth + 1) if isinstance(rest, dict) else self._any())
        return f"list[{self.union(parts)}]"

    def _merged(self, schema: dict[str, Any], root: Any, depth: int) -> dict[str, Any] | None:
        """One object schema of ``schema`` and the parts of its ``allOf`` (at any depth, through local ``$ref``):
        every part's properties (a key that parts type differently: any value) and ``required``. None when a part
        is not an object schema (a type, an ``anyOf``, an enum...): that intersection has no Python type."""
        properties: dict[str, Any] = {}
        required: list[str] = []
        pending: list[tuple[Any, int]] = [(schema, depth)]
        seen: set[int] = set()
        while pending:
            part, level = pending.pop(0)
            self.nodes += 1
            if level > MAX_SCHEMA_DEPTH or self.nodes > MAX_SCHEMA_NODES or not isinstance(part, dict):
                return None
            ref = part.get("$ref")
            if isinstance(ref, str):
                target = self._target(ref, root)
                if not isinstance(target, dict) or len(part) > 1:
                    return None  # (a remote reference, or one with siblings: not followed)
                if id(target) in seen:
                    continue  # (reached again: a diamond, or a cycle; its properties are in already)
                seen.add(id(target))
                pending.insert(0, (target, level + 1))  # (in place: the parts' properties in their order)
                continue
            if part.get("type", "object") != "object" or any(k in part for k in _NOT_AN_OBJECT):
                return None
            every = part.get("allOf")
            if isinstance(every, list):
                pending[0:0] = [(p, level + 1) for p in every]
            own = part.get("properties")
            for key, sub in own.items() if isinstance(own, dict) else ():
                properties[key] = sub if properties.get(key, sub) == sub else True
            needed = part.get("required")
            required += [r for r in needed if isinstance(r, str)] if isinstance(needed, list) else []
        if not properties:
            return None
        merged: dict[str, Any] = {"type": "object", "properties": properties, "required": list(dict.fromkeys(required))}
        if isinstance(schema.get("description"), str):
            merged["description"] = schema["description"]
        return merged

    def _literal(self, values: list[Any]) -> str | None:
        if not values or len(values) > MAX_LITERAL_VALUES:
            return None
        parts: list[str] = []
        none = False
        for value in values:
            if value is None:
                none = True
            elif isinstance(value, bool):
                parts.append(repr(value))
            elif isinstance(value, int) and -_MAX_INT <= value < _MAX_INT:
                parts.append(str(value))
            elif isinstance(value, str) and len(value) <= MAX_LITERAL_LENGTH:
                parts.append(py_str(value))
            else:
                return None  # (a float, an object, an array, a huge value: typed by the schema's type instead)
        unique_parts = list(dict.fromkeys(parts))
        if unique_parts:
            self.typing.add("Literal")
        literal = f"Literal[{', '.join(unique_parts)}]" if unique_parts else ""
        return self.union([p for p in (literal, "None" if none else "") if p])

    def _typed_dict(self, schema: dict[str, Any], root: Any, hint: str, depth: int, key: tuple[str, str] | None) -> str:
        self.typing.add("TypedDict")
        name = unique(hint[:MAX_NAME_LENGTH], self.taken)  # (a nested type's name grows with each level)
        if key is not None:
            self._named[key] = name
        description = schema.get("description")
        made = Record(name, description if isinstance(description, str) else None)
        self.defs.append(made)
        properties = schema.get("properties")
        required = schema.get("required")
        needed = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
        for prop, sub in properties.items() if isinstance(properties, dict) else ():
            prop_hint = name + pascal(prop, "Field")
            expr = self.named(self.expr(sub, root, prop_hint, depth + 1), f"{prop_hint}Type")
            text = sub.get("description") if isinstance(sub, dict) else None
            made.fields.append(Field(prop, expr, prop in needed, text if isinstance(text, str) else None))
            if any(f.required is False for f in made.fields):
                self.typing.add("NotRequired")
        return name

    def _identity(self, root: Any) -> str:
        """What makes two roots the same for their ``$ref``: their whole text (two tools sending the same schema
        share its types)."""
        known = self._roots.get(id(root))
        if known is None or known[0] is not root:
            try:
                text = json.dumps(root, sort_keys=True, default=str)
            except (TypeError, ValueError, RecursionError):
                text = f"#{id(root)}"
            known = self._roots[id(root)] = (root, text)
        return known[1]

    @staticmethod
    def _target(ref: str, root: Any) -> Any:
        """What a local ``$ref`` (``#``, a JSON pointer into ``root``) points at; None for anything else."""
        if ref != "#" and not ref.startswith("#/"):
            return None
        target: Any = root
        for part in ref[1:].split("/")[1:] if ref != "#" else []:
            part = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                return None
        return target

    def _ref(self, ref: str, root: Any, depth: int) -> str:
        """A local ``$ref`` (``#``, ``#/$defs/Name``, any JSON pointer into the root): an object with properties
        is a TypedDict named after the pointer's last part, written once; another schema is read inline (a cycle
        through such schemas only is ``Any``). A remote reference or an anchor is ``Any``."""
        if ref != "#" and not ref.startswith("#/"):
            return self._any()  # (a remote document, or a "#name" anchor)
        key = (ref, self._identity(root))
        if key in self._named:
            return self._named[key]
        if key in self._inline:
            return self._inline[key]
        target = self._target(ref, root)
        if target is None:
            return self._any()
        hint = pascal(ref.rsplit("/", 1)[-1], "Model")
        properties = target.get("properties") if isinstance(target, dict) else None
        is_object = isinstance(properties, dict) and properties and target.get("type", "object") == "object"
        if is_object and len(self.defs) < MAX_NAMED_TYPES:
            return self._typed_dict(target, root, hint, depth + 1, key)
        if key in self._resolving:
            return self._any()
        self._resolving.add(key)
        try:
            expr = self._inline[key] = self.expr(target, root, hint, depth + 1)
        finally:
            self._resolving.discard(key)
        return expr


_NOT_AN_OBJECT = ("anyOf", "oneOf", "enum", "const", "items", "prefixItems", "not")


def split_union(expr: str) -> list[str]:
    """The top-level members of ``a | b`` (a ``|`` inside brackets or a string literal belongs to its member)."""
    parts: list[str] = []
    level, start, quoted, escaped = 0, 0, False, False
    for i, ch in enumerate(expr):
        if quoted:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch == "[":
            level += 1
        elif ch == "]":
            level -= 1
        elif ch == "|" and level == 0:
            parts.append(expr[start:i].strip())
            start = i + 1
    parts.append(expr[start:].strip())
    return [p for p in parts if p]
