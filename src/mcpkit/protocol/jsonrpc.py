"""JSON-RPC 2.0 envelope: parse bytes into messages and encode messages into bytes (orjson, no I/O).

The classes are deliberately plain (``__slots__``, no validation beyond the envelope): this is the hot path.
MCP-level validation of ``params`` happens once, in the handler that owns the method.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeAlias

import orjson

from .errors import INVALID_REQUEST, PARSE_ERROR

RequestId: TypeAlias = str | int
JSONDict: TypeAlias = dict[str, Any]

_dumps = orjson.dumps
_loads = orjson.loads


class Request:
    """A request: has an ``id`` and expects exactly one response."""

    __slots__ = ("id", "method", "params")

    def __init__(self, id: RequestId, method: str, params: JSONDict | None = None) -> None:
        self.id: RequestId = id
        self.method: str = method
        self.params: JSONDict | None = params

    def to_dict(self) -> JSONDict:
        d: JSONDict = {"jsonrpc": "2.0", "id": self.id, "method": self.method}
        if self.params is not None:
            d["params"] = self.params
        return d

    def __repr__(self) -> str:
        return f"Request(id={self.id!r}, method={self.method!r}, params={self.params!r})"


class Notification:
    """A one-way message: no ``id``, never answered."""

    __slots__ = ("method", "params")

    def __init__(self, method: str, params: JSONDict | None = None) -> None:
        self.method: str = method
        self.params: JSONDict | None = params

    def to_dict(self) -> JSONDict:
        d: JSONDict = {"jsonrpc": "2.0", "method": self.method}
        if self.params is not None:
            d["params"] = self.params
        return d

    def __repr__(self) -> str:
        return f"Notification(method={self.method!r}, params={self.params!r})"


class Response:
    """A successful response."""

    __slots__ = ("id", "result")

    def __init__(self, id: RequestId, result: JSONDict) -> None:
        self.id: RequestId = id
        self.result: JSONDict = result

    def to_dict(self) -> JSONDict:
        return {"jsonrpc": "2.0", "id": self.id, "result": self.result}

    def __repr__(self) -> str:
        return f"Response(id={self.id!r}, result={self.result!r})"


class ErrorResponse:
    """An error response; ``id`` is None when the request's id could not be read."""

    __slots__ = ("error", "id")

    def __init__(self, id: RequestId | None, error: JSONDict) -> None:
        self.id: RequestId | None = id
        self.error: JSONDict = error

    def to_dict(self) -> JSONDict:
        return {"jsonrpc": "2.0", "id": self.id, "error": self.error}

    def __repr__(self) -> str:
        return f"ErrorResponse(id={self.id!r}, error={self.error!r})"


class Invalid:
    """Valid JSON that is not a valid JSON-RPC message. ``id`` is the request id when one could be read."""

    __slots__ = ("id", "is_response", "reason")

    def __init__(self, id: RequestId | None, reason: str, is_response: bool = False) -> None:
        self.id: RequestId | None = id
        self.reason: str = reason
        self.is_response: bool = is_response

    def error(self) -> JSONDict:
        return {"code": INVALID_REQUEST, "message": f"Invalid Request: {self.reason}"}

    def __repr__(self) -> str:
        return f"Invalid(id={self.id!r}, reason={self.reason!r})"


Message: TypeAlias = "Request | Notification | Response | ErrorResponse"
Parsed: TypeAlias = "Message | Invalid"


class Batch(list[Parsed]):
    """The items of a JSON-RPC batch, in order."""


def _valid_id(value: object) -> bool:
    t = type(value)
    if t is int or t is str:
        return True
    if t is float:  # (orjson reads an integer beyond 64 bits as a float: parse reads such a message again, exactly)
        raise _WideNumber
    return False


class _WideNumber(Exception):
    """Raised by :func:`_classify` when a message's id is a float: see :func:`parse`."""


def _json_kind(value: object) -> str:
    """What a JSON value is, for an error message: ``null``, ``true``, ``a number (1.5)``, ``an array``..."""
    if value is None or type(value) is bool:
        return orjson.dumps(value).decode()
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    return "an array" if isinstance(value, list) else "an object" if isinstance(value, dict) else type(value).__name__


def classify(obj: object) -> Parsed:
    """Turn one decoded JSON value into a message, or an :class:`Invalid` saying what is wrong."""
    try:
        return _classify(obj)
    except _WideNumber:
        return _float_id(obj)


def _float_id(obj: Any) -> Invalid:
    rid = obj.get("id")
    answer = "method" not in obj and ("result" in obj or "error" in obj)
    return Invalid(None, f'"id" must be a string or an integer, not {_json_kind(rid)}', answer)


def _classify(obj: object) -> Parsed:
    """:func:`classify`, raising :class:`_WideNumber` when the id is a float."""
    if type(obj) is not dict:
        return Invalid(None, "a message must be a JSON object")
    rid = obj.get("id")
    if obj.get("jsonrpc") != "2.0":
        answer = "method" not in obj and ("result" in obj or "error" in obj)  # (a response is never answered)
        return Invalid(rid if _valid_id(rid) else None, 'missing or wrong "jsonrpc": must be "2.0"', answer)
    method = obj.get("method")
    params = obj.get("params")
    if method is not None or ("result" not in obj and "error" not in obj):
        tr = type(rid)
        if type(method) is str and (params is None or type(params) is dict):
            if tr is int or tr is str:
                return Request(rid, method, params)  # type: ignore[arg-type]
            if "id" not in obj:
                return Notification(method, params)
            _valid_id(rid)  # (raises for a float)
            return Invalid(None, f'"id" must be a string or an integer, not {_json_kind(rid)}')
        if type(method) is not str:
            return Invalid(rid if _valid_id(rid) else None, '"method" must be a string')
        return Invalid(rid if _valid_id(rid) else None, '"params" must be an object')
    has_result = "result" in obj
    has_error = "error" in obj
    if has_result and has_error:
        return Invalid(rid if _valid_id(rid) else None, "a response has either result or error", True)
    if has_result:
        if not _valid_id(rid):
            return Invalid(None, '"id" must be a string or an integer', True)
        result = obj["result"]
        if type(result) is not dict:
            return Invalid(rid, '"result" must be an object', True)
        return Response(rid, result)  # type: ignore[arg-type]
    error = obj["error"]
    if type(error) is not dict or type(error.get("code")) is not int or type(error.get("message")) is not str:
        return Invalid(rid if _valid_id(rid) else None, '"error" needs an integer code and a string message', True)
    return ErrorResponse(rid if _valid_id(rid) else None, error)  # type: ignore[arg-type]


def parse(data: bytes | bytearray | memoryview | str) -> Parsed | Batch:
    """Parse one framed message (or batch). Raises :class:`~mcpkit.protocol.errors.ParseError` on bad JSON.

    Numbers are read exactly in a message whose id is an integer beyond 64 bits (orjson reads those as floats: the
    message is read again by the standard library, so its answer carries the very same id). In any other message an
    integer beyond 64 bits reads as the nearest float (see docs/guides/tools.md, "Integers of any size")."""
    try:
        obj = _loads(data)
    except orjson.JSONDecodeError as exc:
        from .errors import ParseError

        raise ParseError(f"Parse error: {exc}") from None
    try:
        if type(obj) is list:
            if not obj:
                return Invalid(None, "an empty batch")
            return Batch(_classify(item) for item in obj)
        return _classify(obj)
    except _WideNumber:  # (zero cost until raised: only a message with a float id comes here)
        return _parse_exact(data, obj)


def _parse_exact(data: bytes | bytearray | memoryview | str, loose: Any) -> Parsed | Batch:
    """``data`` (that orjson read as ``loose``, with a float id) read again with exact integers. orjson accepted
    it, so the standard library reads it too, the same but for the numbers; if it cannot (an integer of more
    than 4300 digits, nesting past its recursion limit), the float id is refused as before."""
    import json

    try:
        obj = json.loads(bytes(data) if isinstance(data, memoryview) else data)
    except (ValueError, RecursionError):
        obj = loose
    if type(obj) is list:
        return Batch(classify(item) for item in obj)
    return classify(obj)


def encode(msg: Message | JSONDict | list[Any]) -> bytes:
    """Serialize a message (or a raw dict / batch list) to compact UTF-8 JSON with no newlines."""
    obj = msg if isinstance(msg, (dict, list)) else msg.to_dict()
    try:
        return _dumps(obj)
    except TypeError as exc:
        return dumps_wide(obj, exc)


def encode_request(id: RequestId, method: str, params: JSONDict | None) -> bytes:
    if params is None:
        return _dumps({"jsonrpc": "2.0", "id": id, "method": method})
    try:
        return _dumps({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    except TypeError as exc:
        return dumps_wide({"jsonrpc": "2.0", "id": id, "method": method, "params": params}, exc)


def encode_notification(method: str, params: JSONDict | None) -> bytes:
    if params is None:
        return _dumps({"jsonrpc": "2.0", "method": method})
    try:
        return _dumps({"jsonrpc": "2.0", "method": method, "params": params})
    except TypeError as exc:
        return dumps_wide({"jsonrpc": "2.0", "method": method, "params": params}, exc)


def encode_result(id: RequestId, result: JSONDict) -> bytes:
    try:
        return _dumps({"jsonrpc": "2.0", "id": id, "result": result})
    except TypeError as exc:  # (zero cost until raised: the usual message never comes here)
        return dumps_wide({"jsonrpc": "2.0", "id": id, "result": result}, exc)


def encode_error(id: RequestId | None, error: JSONDict) -> bytes:
    try:
        return _dumps({"jsonrpc": "2.0", "id": id, "error": error})
    except TypeError as exc:
        return dumps_wide({"jsonrpc": "2.0", "id": id, "error": error}, exc)


_WIDE_INT = "Integer exceeds 64-bit range"


def dumps_wide(value: Any, exc: TypeError, default: Callable[[Any], Any] | None = None) -> bytes:
    """``value`` as compact JSON by the standard library, after orjson refused it with ``exc``: JSON numbers have
    no size limit, but orjson writes no integer beyond 64 bits. Anything else orjson refused (or that the standard
    library cannot write either) raises ``exc`` again. Only ever called on orjson's error branch."""
    if str(exc) != _WIDE_INT:
        raise exc
    import dataclasses
    import datetime
    import enum
    import json
    import uuid

    def fallback(obj: Any) -> Any:  # what orjson writes natively and the standard library does not
        if type(obj) is orjson.Fragment:  # JSON encoded already (a result's server_meta, a cached page)
            return json.loads(orjson.dumps(obj))
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        if isinstance(obj, (datetime.datetime, datetime.date, datetime.time)):
            return obj.isoformat()
        if isinstance(obj, uuid.UUID):
            return str(obj)
        if isinstance(obj, enum.Enum):
            return obj.value
        if default is not None:
            return default(obj)
        raise TypeError(f"Type is not JSON serializable: {type(obj).__name__}")

    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=fallback).encode()
    except (TypeError, ValueError):  # (ValueError: NaN, a lone surrogate, a circular reference)
        raise exc from None


PARSE_ERROR_OBJECT: Final[JSONDict] = {"code": PARSE_ERROR, "message": "Parse error"}
