"""The components an OpenAPI operation becomes: a tool, a static resource or a resource template.

A tool call checks its arguments against the input schema (a refusal is an ``isError`` result naming what is
wrong), sends the request (:mod:`.http`) and turns the answer into a ``CallToolResult``: a 2xx JSON answer is
``structuredContent`` when the operation documents its schema (checked against it: an answer that does not match
is an ``isError`` result rather than structured content that breaks its own promise), and its text either way;
text is text, an image or audio body that content, anything else an embedded blob. Any other status is an
``isError`` result with the status and the start of the body. A resource read answers the body as its contents;
a 404 is "resource not found".
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from ...protocol.errors import InternalError, ResourceNotFound
from ..resources import Resource, ResourceBase, ResourceTemplate
from ..tools import SchemaTool, error_result
from ..uri_template import UriTemplate
from .http import Answer, APIError, Caller
from .operations import Operation

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..completions import Completer
    from ..context import Context
    from ..schema import FunctionInfo
    from ..sync_exec import SyncPolicy

JSONDict = dict[str, Any]
ERROR_BODY_CHARS = 2_000
"""How much of a failed answer's body an ``isError`` result quotes."""
_MAX_ISSUES = 5


def _validator(schema: JSONDict) -> Any:
    import jsonschema_rs

    return jsonschema_rs.validator_for(schema, validate_formats=True)


def _issues(validator: Any, instance: Any) -> str | None:
    """What is wrong with ``instance`` (None when it is valid)."""
    if validator.is_valid(instance):
        return None
    found = []
    for error in validator.iter_errors(instance):
        path = "/".join(str(p) for p in error.instance_path)
        found.append(f"{path or '(top)'}: {error.message}")
        if len(found) == _MAX_ISSUES:
            break
    return "; ".join(found)


def describe(op: Operation) -> str:
    """The component's description: the operation's summary and description."""
    parts = [p for p in (op.summary, op.description) if p]
    if len(parts) == 2 and parts[1].startswith(parts[0]):
        parts = parts[1:]
    text = "\n\n".join(parts) or op.label
    return text + ("\n\n(deprecated)" if op.deprecated else "")


def _annotations(op: Operation) -> JSONDict:
    method = op.method
    read_only = method in ("get", "head", "options")
    out: JSONDict = {"readOnlyHint": read_only, "openWorldHint": True}
    if not read_only:
        out["destructiveHint"] = method == "delete"
        out["idempotentHint"] = method in ("put", "delete")
    else:
        out["idempotentHint"] = True
    return out


class OpenAPITool(SchemaTool):
    """A tool that calls one operation of an HTTP API (a :meth:`~mcpkit.server.tools.Tool.from_schema` tool: its
    arguments are checked against the operation's input schema before the request is sent)."""

    def __init__(self, op: Operation, caller: Caller, *, validate_output: bool = True) -> None:
        self.operation = op
        self.api = caller
        # (the answer is checked against the documented schema here, with a message that blames the API)
        self._answers = _validator(op.output_schema) if op.output_schema is not None and validate_output else None
        super().__init__(
            op.name,
            op.input_schema,
            self._call,
            output_schema=op.output_schema,
            description=describe(op),
            annotations=_annotations(op),
            validate_output=False,
        )

    async def _call(self, arguments: JSONDict, ctx: Context) -> JSONDict:
        try:
            answer = await self.api.call(self.operation, arguments)
        except APIError as exc:
            return error_result(str(exc))
        return self._result(answer)

    def _result(self, answer: Answer) -> JSONDict:
        op = self.operation
        if not answer.ok:
            return error_result(_failure(op, answer))
        if answer.is_json and op.output_schema is not None:
            try:
                value = answer.json()
            except APIError as exc:
                return error_result(f"{op.label}: {exc}")
            structured = {"result": value} if op.wrap_result else value
            if self._answers is not None:
                issues = _issues(self._answers, structured)
                if issues is not None:
                    return error_result(f"{op.label}: the API's answer does not match its documented schema: {issues}")
            text = answer.text()
            return {"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": False}
        if op.output_schema is not None:
            return error_result(f"{op.label} answered {answer.content_type or 'no body'} where JSON was documented")
        return {"content": _content(answer), "isError": False}


def _failure(op: Operation, answer: Answer) -> str:
    if 300 <= answer.status < 400:
        where = f" to {answer.location}" if answer.location else ""
        return f"{op.label} answered HTTP {answer.status} (a redirect{where}, not followed)"
    body = answer.text(ERROR_BODY_CHARS).strip()
    return f"{op.label} answered HTTP {answer.status} {answer.reason}".rstrip() + (f": {body}" if body else "")


def _content(answer: Answer) -> list[JSONDict]:
    media = answer.content_type.split(";")[0].strip().lower()
    if not answer.body:
        return [{"type": "text", "text": f"HTTP {answer.status} {answer.reason}".rstrip()}]
    if answer.is_json or media.startswith("text/") or media in ("application/xml", "application/yaml", ""):
        return [{"type": "text", "text": answer.text()}]
    data = base64.b64encode(answer.body).decode("ascii")
    if media.startswith("image/"):
        return [{"type": "image", "data": data, "mimeType": media}]
    if media.startswith("audio/"):
        return [{"type": "audio", "data": data, "mimeType": media}]
    uri = "openapi://answer"
    return [{"type": "resource", "resource": {"uri": uri, "mimeType": media, "blob": data}}]


def _contents(answer: Answer, uri: str, op: Operation) -> list[JSONDict]:
    if answer.status == 404:
        raise ResourceNotFound(uri)
    if not answer.ok:
        raise InternalError(_failure(op, answer))
    media = answer.content_type.split(";")[0].strip().lower() or "application/octet-stream"
    if answer.is_json or media.startswith("text/"):
        return [{"uri": uri, "mimeType": media, "text": answer.text()}]
    return [{"uri": uri, "mimeType": media, "blob": base64.b64encode(answer.body).decode("ascii")}]


class OpenAPIResource(Resource):
    """A static resource read with one ``GET`` operation (without arguments)."""

    def __init__(self, op: Operation, caller: Caller, uri: str) -> None:
        self.operation = op
        self.caller = caller
        self.uri = uri
        self.fn: Callable[..., Any] | None = None
        self.content: str | bytes | None = None
        self.info: FunctionInfo | None = None
        self.sync: SyncPolicy | None = None
        self.size: int | None = None
        _describe_as(self, op)

    async def read(self, ctx: Context | None) -> list[JSONDict]:
        try:
            answer = await self.caller.call(self.operation, {})
        except APIError as exc:
            raise InternalError(str(exc)) from None
        return _contents(answer, self.uri, self.operation)


def _describe_as(component: ResourceBase, op: Operation) -> None:
    """Name and describe a resource or template after its operation (no title, icons or annotations)."""
    ResourceBase.__init__(
        component,
        name=op.name,
        title=None,
        description=describe(op),
        mime_type=op.media,
        annotations=None,
        icons=None,
        meta=None,
    )


class OpenAPITemplate(ResourceTemplate):
    """A resource template read with one ``GET`` operation: its path parameters are the template's variables,
    its query parameters optional ``{?...}`` ones."""

    def __init__(self, op: Operation, caller: Caller, uri_template: str, variables: dict[str, str]) -> None:
        self.operation = op
        self.caller = caller
        self.template: UriTemplate = UriTemplate(uri_template)
        self.uri_template = uri_template
        self.variables = variables  # template variable -> argument
        self.fn: Callable[..., Any] = None  # type: ignore[assignment]
        self.info: FunctionInfo = None  # type: ignore[assignment]
        self.sync: SyncPolicy | None = None
        self.completions: dict[str, Completer] = {}
        self._inputs = _validator(op.input_schema)
        self._kinds = {p.arg: p.kind for p in op.params}
        _describe_as(self, op)

    def _arguments(self, variables: dict[str, str]) -> JSONDict | None:
        """The operation's arguments from the URI's variables; None when a value does not fit its parameter."""
        arguments: JSONDict = {}
        for var, text in variables.items():
            arg = self.variables.get(var)
            if arg is None or text == "":
                continue
            value = _typed(text, self._kinds.get(arg))
            if value is None:
                return None
            arguments[arg] = value
        return None if _issues(self._inputs, arguments) is not None else arguments

    def accepts(self, variables: dict[str, str]) -> bool:
        return self._arguments(variables) is not None

    async def read(self, uri: str, variables: dict[str, str], ctx: Context | None) -> list[JSONDict]:
        arguments = self._arguments(variables)
        if arguments is None:
            raise ResourceNotFound(uri)  # (the URI has the template's shape, not a valid value: no such resource)
        try:
            answer = await self.caller.call(self.operation, arguments)
        except APIError as exc:
            raise InternalError(str(exc)) from None
        return _contents(answer, uri, self.operation)


def _typed(text: str, kind: str | None) -> Any:
    """A template variable's text as its parameter's JSON type (None when it is not one)."""
    try:
        if kind == "integer":
            return int(text)
        if kind == "number":
            return float(text)
        if kind == "boolean":
            return {"true": True, "false": False}.get(text.lower())
        if kind == "array":
            return text.split(",")
    except ValueError:
        return None
    return text


__all__ = ["ERROR_BODY_CHARS", "OpenAPIResource", "OpenAPITemplate", "OpenAPITool", "describe"]
