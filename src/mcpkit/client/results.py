"""What the high-level client hands back from a call and how it checks it: :class:`ToolResult` (typed, validated
``structuredContent``), the errors a call raises, and the JSON Schema helpers behind them (re-exported by
:mod:`mcpkit.client.client`, their public import path).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import ValidationError

from ..protocol.errors import (
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MCPError,
)
from ..protocol.jsonrpc import JSONDict
from ..protocol.types import (
    CallToolResult,
    ContentBlock,
    MCPModel,
    TextContent,
    Tool,
)

logger: logging.Logger = logging.getLogger("mcpkit.client")

T = TypeVar("T")
M = TypeVar("M", bound=MCPModel)


class ResultType(Generic[T]):
    """``call_tool(..., result_type=ResultType[X])``: ``X`` for the type checker where ``X`` is not a class, so
    ``result.data`` is typed ``X``: ``ResultType[int | None]``, ``ResultType[Literal["a", "b"]]``,
    ``ResultType[Annotated[int, Field(gt=0)]]``. A class (``Seat``, ``list[Seat]``, ``int``) needs no wrapper:
    ``result_type=Seat`` is typed already. At run time ``ResultType[X]`` is ``X`` itself (nothing to unwrap on a
    call), and it is never instantiated."""

    if not TYPE_CHECKING:

        def __class_getitem__(cls, item):
            return item


class InvalidServerResult(MCPError):
    """The server answered with a result that does not fit the protocol's types (an ``InitializeResult`` without
    ``capabilities``, a content block of an unknown ``type``, a tool whose name is not a string...): a server bug.
    ``.method`` is the request it answered, ``.field`` the first invalid field (a dotted path into the result, e.g.
    ``content.0``); the pydantic ``ValidationError`` with every problem is the ``__cause__``."""

    def __init__(self, method: str, field: str, problem: str, more: int = 0) -> None:
        where = f"at {field!r}" if field else "at its top level"
        also = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        super().__init__(f"the server's {method} result is invalid {where}: {problem}{also}")
        self.method = method
        self.field = field


class ModernEraRefused(MCPError):
    """A connection forced to 2026-07-28 (``mode="modern"`` or ``protocol_version="2026-07-28"``) was refused in a
    way that says the server speaks only the handshake era: its answer to ``server/discover`` was an error such as
    "Mcp-Session-Id header is required" or "Method not found", or an HTTP 4xx. The code and ``data`` are the
    server's, ``.server_message`` its words; the server's error is the ``__cause__``. Connect with
    ``mode="auto"`` (which falls back to the handshake era) or ``mode="handshake"`` (the message says so, or, for a
    pinned revision, to pin a handshake one)."""

    def __init__(self, error: MCPError, *, pinned: bool = False) -> None:
        how = (
            "drop protocol_version='2026-07-28' (mode='auto' falls back to the handshake era) or pin a handshake "
            "revision, e.g. protocol_version='2025-11-25'"
            if pinned
            else "connect with mode='auto', which falls back to the handshake era, or mode='handshake'"
        )
        super().__init__(
            "the server does not seem to speak protocol 2026-07-28: it answered server/discover with error "
            f"{error.code} ({error.message}); {how}",
            error.data,
            code=error.code,
        )
        self.server_message: str = error.message
        #: the HTTP status of a bare HTTP error (the legacy HTTP+SSE fallback of a URL keys on it), else None
        self.status: int | None = getattr(error, "status", None)


# A handshake-era server refuses server/discover with "Invalid Request" (a Streamable HTTP request without
# Mcp-Session-Id, e.g. mcpkit and the official Python SDK), -32000 (the TypeScript SDK's "Server not
# initialized"), "Method not found" (stdio), or a bare HTTP 4xx. Authorization and rate limits are not that.
_HANDSHAKE_REFUSALS = frozenset((INVALID_REQUEST, METHOD_NOT_FOUND, -32000))


def refuses_the_modern_era(exc: MCPError) -> bool:
    """Whether ``exc``, the answer to a forced ``server/discover``, says the server speaks only the handshake era."""
    status = exc.data.get("status") if isinstance(exc.data, dict) else None
    if isinstance(status, int):  # an HTTP error without a JSON-RPC answer
        return 400 <= status < 500 and status not in (401, 403, 407, 429)
    return exc.code in _HANDSHAKE_REFUSALS


class InputHandlerError(MCPError):
    """2026-07-28: a handler of this client (sampling, elicitation, roots) raised while answering an input request
    the server made in answer to a call. That era has no error form for an input response (in the handshake era the
    server would get -32603 and decide), so the call fails here instead of being retried. ``.handler`` is the input
    request's method (``sampling/createMessage``, ``elicitation/create``, ``roots/list``), ``.method`` and ``.name``
    the call's (``tools/call`` and the tool's name; ``name`` is None when the call names nothing); the handler's
    exception is the ``__cause__``."""

    def __init__(self, handler: str, method: str, params: JSONDict | None, error: BaseException) -> None:
        named = (params or {}).get("name", (params or {}).get("uri", (params or {}).get("taskId")))
        name = named if isinstance(named, str) else None
        call = f"{method} {name!r}" if name is not None else method
        reason = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        super().__init__(
            f"the client's {handler} handler failed while answering the server's input request for {call}: {reason}"
            " (2026-07-28 has no error answer for an input request, so the call was not retried)"
        )
        self.handler = handler
        self.method = method
        self.name = name


def _invalid(method: str, exc: ValidationError, prefix: str) -> InvalidServerResult:
    errors = exc.errors(include_url=False)
    first = errors[0] if errors else {"loc": (), "msg": str(exc)}
    loc = ".".join(str(part) for part in first.get("loc", ()))
    field = f"{prefix}.{loc}" if prefix and loc else prefix or loc
    return InvalidServerResult(method, field, str(first.get("msg", "invalid")), len(errors) - 1)


def checked(model: type[M], raw: Any, method: str, where: str = "") -> M:
    """``model.model_validate(raw)`` for the result of ``method``; a result that does not fit raises
    :class:`InvalidServerResult` (``where``: the path of ``raw`` inside the result, prefixed to the field)."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise _invalid(method, exc, where) from exc


def checked_items(model: type[M], items: Iterable[Any], method: str, key: str) -> list[M]:
    """Each of ``items`` (the ``key`` list of ``method``'s results, e.g. the tools of ``tools/list``) validated as
    ``model``; the first that does not fit raises :class:`InvalidServerResult` naming ``key.<index>.<field>``."""
    out: list[M] = []
    for i, item in enumerate(items):
        try:
            out.append(model.model_validate(item))
        except ValidationError as exc:
            raise _invalid(method, exc, f"{key}.{i}") from exc
    return out


class ToolCallError(MCPError):
    """The tool reported a failure (a result with ``isError: true``): raised by ``result.data`` and by
    ``call_tool(..., raise_on_error=True)``. ``.result`` is the :class:`ToolResult`, its ``text`` the tool's
    message."""

    def __init__(self, message: str, result: ToolResult[Any]) -> None:
        super().__init__(message)
        self.result = result


class ToolOutputError(MCPError):
    """The server's structured tool output does not match the tool's ``outputSchema`` (or is missing)."""

    def __init__(self, message: str, result: ToolResult[Any]) -> None:
        super().__init__(message)
        self.result = result


class ElicitationContentError(MCPError):
    """The elicitation handler's content does not match the requested schema (sent to the server as -32603 with
    this message instead of invalid data)."""


class PaginationLimitExceeded(MCPError):
    """A list call walked more pages or items than allowed; ``.items`` holds what was collected."""

    def __init__(self, message: str, items: list[Any]) -> None:
        super().__init__(message)
        self.items = items


class ToolResult(Generic[T]):
    """The outcome of ``tools/call``: ``ToolResult[T]`` when called with ``result_type=T`` (``data`` is then a
    ``T``), ``ToolResult[Any]`` otherwise.

    Attributes:
        content: the content blocks (typed models).
        structured: ``structuredContent`` as sent (validated against the tool's ``outputSchema`` when it has one).
        is_error: the tool reported an error (``isError``): the content then describes it, and :attr:`data`
            raises :class:`ToolCallError`.
        meta: the result's ``_meta``.
        raw: the :class:`~mcpkit.protocol.types.CallToolResult` model.
        validated: True when ``structured`` was checked against an output schema.
        name: the tool's name.
    """

    __slots__ = ("content", "is_error", "meta", "name", "raw", "structured", "tool", "typed", "validated")

    def __init__(
        self, raw: CallToolResult, tool: Tool | None = None, validated: bool = False, name: str | None = None
    ) -> None:
        self.name: str = name if name is not None else (tool.name if tool is not None else "")
        self.typed: Any = _UNTYPED
        self.raw: CallToolResult = raw
        self.content: list[ContentBlock] = raw.content
        self.structured: Any = raw.structured_content
        self.is_error: bool = raw.is_error
        self.meta: dict[str, Any] | None = raw.meta
        self.tool: Tool | None = tool
        self.validated: bool = validated

    @property
    def text(self) -> str:
        """The text of every text content block, joined by newlines."""
        return "\n".join(c.text for c in self.content if isinstance(c, TextContent))

    @property
    def data(self) -> T:
        """The most useful value: the structured output (unwrapped from ``{"result": x}`` when the output
        schema is the wrapper of a non-object return value, whatever that value is: ``-> int``, ``-> list[Model]``
        alike), else the text content; with ``call_tool(..., result_type=T)``, that value validated into ``T``.
        ``structured`` stays raw.

        A failed call has no value: ``data`` raises :class:`ToolCallError` (its message is the tool's; the result
        stays readable: ``is_error``, ``text``, ``content``)."""
        if self.is_error:
            raise ToolCallError(f"tool {self.name!r} failed: {self.text or '(no message)'}", self)
        value: T = self.typed if self.typed is not _UNTYPED else self._value()
        return value

    def _value(self) -> Any:
        """``data`` before ``result_type`` (and whether the call failed) is applied."""
        s = self.structured
        if s is not None and not (s == {} and self.tool is not None and self.tool.output_schema is None):
            schema = self.tool.output_schema if self.tool is not None else None
            if isinstance(schema, dict) and isinstance(s, dict) and set(s) == {"result"} and is_wrapped(schema):
                return s["result"]
            return s
        return self.text

    def dump(self) -> JSONDict:
        """The wire form of the result."""
        return self.raw.dump()

    def __repr__(self) -> str:
        return f"ToolResult(is_error={self.is_error}, structured={self.structured!r}, text={self.text[:60]!r})"


# "$defs": ``-> list[Model]`` is wrapped too, with the model's schema in the wrapper's root $defs (so $refs resolve)
_WRAPPER_KEYS = frozenset(
    ("type", "properties", "required", "$schema", "$defs", "title", "description", "additionalProperties")
)


def is_wrapped(schema: JSONDict) -> bool:
    """Did the server wrap a non-object return value as ``{"result": value}``? Yes when the schema says so with a
    marker (``x-mcpkit-wrap-result``, ``x-fastmcp-wrap-result``), or when it has exactly the wrapper shape that
    mcpkit, the official SDKs and fastmcp generate: one required property ``result`` and nothing else."""
    if any(schema.get(key) for key in ("x-mcpkit-wrap-result", "x-fastmcp-wrap-result")):
        return True
    props = schema.get("properties")
    return (
        set(schema) <= _WRAPPER_KEYS
        and isinstance(props, dict)
        and set(props) == {"result"}
        and schema.get("required") == ["result"]
    )


class SchemaError(ValueError):
    """A schema the server sent is not a valid JSON Schema (it cannot be used to validate anything)."""


_UNTYPED: Any = object()


def typed_data(name: str, result: ToolResult[Any], result_type: Any) -> Any:
    """``result.data`` validated into ``result_type`` (pydantic), or :class:`ToolOutputError` saying why not."""
    from pydantic import ValidationError

    value = result._value()
    if isinstance(value, str) and result.structured is None and result_type is not str:
        import orjson

        try:
            value = orjson.loads(value)  # a server without structured output: its text may still be JSON
        except orjson.JSONDecodeError:
            pass
    try:
        adapter = _adapter(result_type)
    except TypeError:  # unhashable: not cached
        adapter = _make_adapter(result_type)
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "/".join(str(p) for p in first["loc"]) or "(root)"
        kind = getattr(result_type, "__name__", repr(result_type))
        raise ToolOutputError(
            f"tool {name!r}: its result does not fit result_type={kind} at {where}: {first['msg']}", result
        ) from None


RESULT_TYPE_CACHE_SIZE = 128
"""How many ``call_tool(..., result_type=T)`` validators (pydantic TypeAdapters) the client keeps (LRU)."""


@functools.lru_cache(maxsize=RESULT_TYPE_CACHE_SIZE)
def _adapter(result_type: Any) -> Any:
    return _make_adapter(result_type)


def _make_adapter(result_type: Any) -> Any:
    from pydantic import TypeAdapter

    from ..server.schema import portable_type  # (a typing.TypedDict, which pydantic refuses before Python 3.12)

    return TypeAdapter(portable_type(result_type))


def schema_validator(schema: JSONDict) -> Any:
    """A compiled JSON Schema validator (jsonschema-rs: 2020-12 unless ``$schema`` names another draft; formats
    checked). ``iter_errors(x)`` yields errors with ``.message`` and ``.instance_path``."""
    try:
        import jsonschema_rs
    except ModuleNotFoundError:  # a dependency of mcpkit: only an environment installed before it was added lacks it
        raise ModuleNotFoundError(
            "validating tool output needs jsonschema-rs, a dependency of mcpkit that this environment lacks: "
            "pip install jsonschema-rs (or reinstall mcpkit, e.g. pip install -e '.[dev]' in a checkout)",
            name="jsonschema_rs",
        ) from None
    try:
        return jsonschema_rs.validator_for(schema, validate_formats=True)
    except (ValueError, TypeError) as exc:
        raise SchemaError(f"not a valid JSON Schema: {exc}") from None


def first_error(validator: Any, instance: Any) -> Any:
    """The first validation error (the one with the shortest instance path), or None when ``instance`` is valid."""
    if validator.is_valid(instance):  # the common case: one native call, no error objects
        return None
    return min(validator.iter_errors(instance), key=lambda e: len(e.instance_path), default=None)


def check_output(tool: Tool, result: ToolResult[Any], validators: dict[str, Any]) -> None:
    """Check ``result``'s ``structuredContent`` against ``tool``'s ``outputSchema`` (``validators``: the compiled
    schemas by tool name, a cache the client keeps); :class:`ToolOutputError` names where it does not match."""
    assert tool.output_schema is not None
    if result.structured is None:
        raise ToolOutputError(f"tool {tool.name!r} declares an outputSchema but returned no structuredContent", result)
    validator = validators.get(tool.name)
    if validator is None:
        try:
            validator = validators[tool.name] = schema_validator(tool.output_schema)
        except SchemaError as exc:
            raise ToolOutputError(
                f"tool {tool.name!r}: its outputSchema is {exc} (call_tool(..., validate=False) skips the check)",
                result,
            ) from None
    e = first_error(validator, result.structured)
    if e is not None:
        where = "/".join(str(p) for p in e.instance_path) or "(root)"
        raise ToolOutputError(
            f"tool {tool.name!r}: structuredContent does not match its outputSchema at {where}: {e.message}", result
        )
    result.validated = True


def apply_schema_defaults(schema: JSONDict | None, content: JSONDict | None) -> JSONDict:
    """Fill the properties ``content`` lacks with the ``default`` values of the elicitation ``schema``."""
    out = dict(content or {})
    props = (schema or {}).get("properties")
    if isinstance(props, dict):
        for key, prop in props.items():
            if key not in out and isinstance(prop, dict) and "default" in prop:
                out[key] = prop["default"]
    return out


def json_text(value: Any) -> str:
    """``value`` as the JSON text a tool's text content shows for structured data."""
    import json

    return json.dumps(value, ensure_ascii=False)


def parsed_size(value: Any) -> int:
    """Estimated memory of a parsed JSON value: its encoded size plus ~64 bytes per list/object and ~48 per string
    (close to CPython's real cost; nested empty lists take ~22x their JSON size). A value nested deeper than orjson
    encodes is weighed by an iterative walk, so no recursion limit applies."""
    import orjson

    try:
        encoded = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        pass
    else:
        containers = encoded.count(b"[") + encoded.count(b"{")
        return len(encoded) + 64 * containers + 24 * encoded.count(b'"')
    total = 0
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            total += 64 + 16 * len(v)
            for k, item in v.items():
                total += 50 + len(str(k))
                stack.append(item)
        elif isinstance(v, list):
            total += 64 + 8 * len(v)
            stack.extend(v)
        else:
            total += 50 + len(str(v))
    return total
