"""One OpenAPI operation as a tool's (or a resource's) definition: its arguments and where each goes.

Every parameter (path, query, header, cookie) becomes an argument of its own name, and so does each property of
a JSON or form body whose schema is an object (a body of another shape is the one argument ``body``). When two
would share a name, the parameter takes its location as a suffix (``id_query``). Argument names keep to
``[A-Za-z0-9_.-]`` (at most 64 characters), what every model provider accepts.

Some headers are never arguments, so a model never supplies them: ``Accept``, ``Content-Type`` and
``Authorization`` (OpenAPI itself says such parameter definitions are ignored), every header an ``apiKey``
security scheme names, and every header, query parameter or cookie the HTTP client already sets: the credentials
configured on the client pass through to the API as they are.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from .document import Document, OpenAPIError, UnsupportedOperation
from .schemas import SchemaConverter, is_object, object_schema, schema_type

JSONDict = dict[str, Any]

_ARG = re.compile(r"[^A-Za-z0-9_.-]+")
_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
_IGNORED_HEADERS = frozenset(("accept", "content-type", "authorization"))
_STYLES = {
    "path": ("simple", "label", "matrix"),
    "query": ("form", "spaceDelimited", "pipeDelimited", "deepObject"),
    "header": ("simple",),
    "cookie": ("form",),
}
_DEFAULT_STYLE = {"path": "simple", "query": "form", "header": "simple", "cookie": "form"}
JSON_TYPES = ("application/json",)
FORM_TYPE = "application/x-www-form-urlencoded"


@dataclass
class Param:
    """A parameter: its name on the wire, its argument, where it goes and how it is written."""

    name: str
    arg: str
    location: str
    required: bool
    style: str
    explode: bool
    kind: str | None  # the JSON type of its schema, when one


@dataclass
class Body:
    """The request body: its media type, and either one argument (``arg``) or one per property (``fields``:
    argument -> property)."""

    media_type: str
    required: bool
    arg: str | None = None
    fields: dict[str, str] = field(default_factory=dict)


@dataclass
class Operation:
    """What a component built from one operation needs to call it."""

    method: str
    path: str
    operation_id: str | None
    name: str
    summary: str
    description: str
    tags: tuple[str, ...]
    params: list[Param]
    body: Body | None
    input_schema: JSONDict
    output_schema: JSONDict | None
    wrap_result: bool  # the API's answer is not an object: structuredContent is {"result": answer}
    deprecated: bool
    media: str | None = None  # the media type of its first documented success answer (JSON when among them)
    accept: str | None = None  # what the request asks for (``Accept``): that answer's JSON media type, if any

    @property
    def has_arguments(self) -> bool:
        """Whether a call can take any argument at all."""
        return bool(self.params) or self.body is not None

    @property
    def label(self) -> str:
        """``GET /pets/{id}``."""
        return f"{self.method.upper()} {self.path}"


def is_json(media_type: str) -> bool:
    """``application/json`` or a ``+json`` type."""
    base = media_type.split(";", 1)[0].strip().lower()
    return base in JSON_TYPES or base.endswith("+json")


def tool_name(operation_id: str | None, method: str, path: str) -> str:
    """A component name from the operationId, else from the method and path (``get_pets_id``)."""
    raw = operation_id or f"{method}_{path}"
    name = re.sub("_{2,}", "_", _NAME.sub("_", raw)).strip("_.-") or method
    return name[:64]


def _argument(name: str) -> str:
    return (_ARG.sub("_", name).strip("_") or "arg")[:64]


class Reader:
    """Reads a document's operations into :class:`Operation` values."""

    def __init__(
        self,
        doc: Document,
        *,
        client_headers: Collection[str] = (),
        client_params: Collection[str] = (),
        client_cookies: Collection[str] = (),
        output_schemas: bool = True,
    ) -> None:
        self.doc = doc
        self.inputs: SchemaConverter = SchemaConverter(doc, "input")
        self.outputs: SchemaConverter = SchemaConverter(doc, "output")
        self.output_schemas = output_schemas
        hidden = {h.lower() for h in client_headers} | _IGNORED_HEADERS
        schemes = (doc.raw.get("components") or {}).get("securitySchemes") or {}
        for scheme in schemes.values() if isinstance(schemes, dict) else ():
            scheme = doc.resolve(scheme, "components.securitySchemes")
            if isinstance(scheme, dict) and (scheme.get("type"), scheme.get("in")) == ("apiKey", "header"):
                name = scheme.get("name")
                if isinstance(name, str):
                    hidden.add(name.lower())
        self._hidden = {"header": hidden, "query": set(client_params), "cookie": set(client_cookies), "path": set()}

    def read(self, method: str, path: str, op: JSONDict, item: JSONDict, name: Callable[[str], str]) -> Operation:
        """The operation ``method path``; ``name`` turns the default name into the one it gets."""
        where = f"{method.upper()} {path}"
        if not path.startswith("/"):
            raise UnsupportedOperation(f"{where}: a path must start with '/'")
        operation_id = op.get("operationId") if isinstance(op.get("operationId"), str) else None
        properties: JSONDict = {}
        required: list[str] = []
        defs: JSONDict = {}
        params: list[Param] = []
        taken: set[str] = set()
        declared = self._parameters(item.get("parameters"), op.get("parameters"), where)
        body, body_props, body_required, body_defs = self._body(op.get("requestBody"), where)
        defs.update(body_defs)
        body_args = set(body_props)
        for spec in declared:
            location, wire = spec["in"], spec["name"]
            if wire.lower() in self._hidden[location] or (location != "header" and wire in self._hidden[location]):
                if spec.get("required") and location == "path":
                    raise UnsupportedOperation(f"{where}: path parameter {wire!r} cannot be hidden")
                continue
            style = spec.get("style", _DEFAULT_STYLE[location])
            if style not in _STYLES[location]:
                raise UnsupportedOperation(f"{where}: parameter {wire!r} has style {style!r}, which is not sent")
            explode = spec.get("explode", style == "form")
            raw_schema = spec.get("schema")
            if raw_schema is None and isinstance(spec.get("content"), dict) and spec["content"]:
                raw_schema = next(iter(spec["content"].values())).get("schema")  # (content-encoded: as its schema)
            schema, used = self.inputs.convert(raw_schema if raw_schema is not None else {}, where)
            defs.update(used)
            arg = _argument(wire)
            if arg in taken or arg in body_args:
                arg = _argument(f"{wire}_{location}")
            if arg in taken or arg in body_args:
                raise UnsupportedOperation(f"{where}: two arguments would be called {arg!r}")
            taken.add(arg)
            if isinstance(spec.get("description"), str) and isinstance(schema, dict):
                schema = {**schema, "description": spec["description"]}
            if spec.get("deprecated") is True and isinstance(schema, dict):
                schema = {**schema, "deprecated": True}
            properties[arg] = schema
            is_required = bool(spec.get("required")) or location == "path"
            if is_required:
                required.append(arg)
            params.append(Param(wire, arg, location, is_required, style, bool(explode), schema_type(schema, defs)))
        missing = set(re.findall(r"\{([^{}]+)\}", path)) - {p.name for p in params if p.location == "path"}
        if missing:
            raise UnsupportedOperation(f"{where}: the path names {sorted(missing)}, which no path parameter defines")
        for arg, prop in body_props.items():
            if arg in taken:
                raise UnsupportedOperation(f"{where}: two arguments would be called {arg!r}")
            properties[arg] = prop
        required.extend(body_required)
        input_schema: JSONDict = {"type": "object", "properties": properties}
        if required:
            input_schema["required"] = required
        input_schema["additionalProperties"] = False
        if defs:
            input_schema["$defs"] = defs
        output_schema, wrap = self._output(op.get("responses"), where) if self.output_schemas else (None, False)
        media = self._media(op.get("responses"), where)
        summary = op.get("summary")
        description = op.get("description")
        tags = tuple(t for t in op.get("tags") or () if isinstance(t, str))
        return Operation(
            method=method,
            path=path,
            operation_id=operation_id,
            name=name(tool_name(operation_id, method, path)),
            summary=summary.strip() if isinstance(summary, str) else "",
            description=description.strip() if isinstance(description, str) else "",
            tags=tags,
            params=params,
            body=body,
            input_schema=input_schema,
            output_schema=output_schema,
            wrap_result=wrap,
            deprecated=op.get("deprecated") is True,
            media=media,
            accept=media if media is not None and is_json(media) else None,
        )

    def _parameters(self, shared: Any, own: Any, where: str) -> list[JSONDict]:
        """The operation's parameters, the path item's ones it does not override included."""
        out: dict[tuple[str, str], JSONDict] = {}
        for group in (shared, own):
            for raw in group or () if isinstance(group, list) else ():
                spec = self.doc.resolve(raw, where)
                if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
                    raise OpenAPIError(f"{where}: a parameter needs a name")
                if spec.get("in") not in _STYLES:
                    raise OpenAPIError(f"{where}: parameter {spec['name']!r} has no valid 'in'")
                out[(spec["in"], spec["name"])] = spec
        return list(out.values())

    def _body(self, raw: Any, where: str) -> tuple[Body | None, JSONDict, list[str], JSONDict]:
        """The body, its arguments' schemas, the required ones, the ``$defs`` they need."""
        if raw is None:
            return None, {}, [], {}
        spec = self.doc.resolve(raw, where)
        content = spec.get("content") if isinstance(spec, dict) else None
        if not isinstance(content, dict) or not content:
            return None, {}, [], {}
        media = next((m for m in content if is_json(m)), None) or next(
            (m for m in content if m.split(";")[0].strip().lower() in (FORM_TYPE, "text/plain")), None
        )
        if media is None:
            raise UnsupportedOperation(f"{where}: no request body media type mcpkit sends ({', '.join(content)})")
        media_spec = content[media] if isinstance(content[media], dict) else {}
        schema, defs = self.inputs.convert(media_spec.get("schema", {}), where)
        body_required = spec.get("required") is True
        description = spec.get("description") if isinstance(spec.get("description"), str) else None
        shape = object_schema(schema, defs) if media.split(";")[0].strip().lower() != "text/plain" else None
        if shape is not None:
            props: JSONDict = {}
            fields: dict[str, str] = {}
            inner_required = set(shape.get("required") or ())
            required: list[str] = []
            for key, prop in shape["properties"].items():
                if isinstance(prop, dict) and prop.get("readOnly") is True:
                    continue  # (the API sets it)
                arg = _argument(key)
                if arg in fields:
                    raise UnsupportedOperation(f"{where}: two body properties would be called {arg!r}")
                fields[arg] = key
                props[arg] = prop
                if body_required and key in inner_required:
                    required.append(arg)
            return Body(media, body_required, fields=fields), props, required, defs
        if description and isinstance(schema, dict):
            schema = {**schema, "description": description}
        return Body(media, body_required, arg="body"), {"body": schema}, ["body"] if body_required else [], defs

    def _media(self, responses: Any, where: str) -> str | None:
        """The media type of the first documented success answer: its JSON one when it documents several (the
        request asks for it)."""
        if not isinstance(responses, dict):
            return None
        responses = {str(k): v for k, v in responses.items()}  # (YAML reads 200 as a number)
        for code in sorted(responses):
            if not code.startswith("2"):
                continue
            response = self.doc.resolve(responses[code], where)
            content = response.get("content") if isinstance(response, dict) else None
            if isinstance(content, dict) and content:
                chosen = next((m for m in content if is_json(str(m))), next(iter(content)))
                return str(chosen).split(";")[0].strip()
        return None

    def _output(self, responses: Any, where: str) -> tuple[JSONDict | None, bool]:
        """The output schema from the first success response with a JSON body (an object schema as it is,
        anything else wrapped as ``{"result": ...}``); None when there is none."""
        if not isinstance(responses, dict):
            return None, False
        responses = {str(k): v for k, v in responses.items()}  # (YAML reads 200 as a number)
        codes = sorted(c for c in responses if c[:1] == "2" and c.isdigit())
        codes += [c for c in responses if c.upper() == "2XX"]
        for code in codes:
            response = self.doc.resolve(responses[code], where)
            content = response.get("content") if isinstance(response, dict) else None
            if not isinstance(content, dict):
                continue
            media = next((m for m in content if is_json(m)), None)
            if media is None or not isinstance(content[media], dict) or "schema" not in content[media]:
                continue
            if content[media]["schema"] in ({}, True):
                return None, False  # (any JSON at all: nothing to promise; with other media types documented too,
                # the request asks for JSON, and an answer of another type is an error result, see components.py)
            schema, defs = self.outputs.convert(content[media]["schema"], where)
            if schema.get("type") == "object" and "$ref" not in schema:
                return ({**schema, "$defs": {**schema.get("$defs", {}), **defs}} if defs else schema), False
            if is_object(schema, defs):
                return {"type": "object", "allOf": [schema], **({"$defs": defs} if defs else {})}, False
            wrapped: JSONDict = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
            if defs:
                wrapped["$defs"] = defs
            return wrapped, True
        return None, False


__all__ = ["FORM_TYPE", "Body", "Operation", "Param", "Reader", "is_json", "tool_name"]
