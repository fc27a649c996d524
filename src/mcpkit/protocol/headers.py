"""The Streamable HTTP request-metadata headers of 2026-07-28, shared by server and client.

``Mcp-Name`` mirrors ``params.name`` (or ``params.uri``; ``params.taskId`` for the tasks extension's
``tasks/get``, ``tasks/update`` and ``tasks/cancel``, so a load balancer can route every request of a task alike);
``Mcp-Param-{Name}`` mirrors a ``tools/call`` argument whose ``inputSchema`` property carries
``x-mcp-header: Name``. Values that are not plain visible ASCII (or that look like the sentinel) travel as
``=?base64?…?=``. The server rejects any disagreement with the body (-32020).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

NAME_FIELD = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_SENTINEL_PREFIX = "=?base64?"
_SENTINEL_SUFFIX = "?="
MAX_SAFE_INTEGER = 2**53 - 1


def encode_header_value(value: str) -> str:
    """A header-safe form of ``value``: as is when plain visible ASCII, else the ``=?base64?…?=`` sentinel."""
    plain = (
        value
        and value == value.strip(" \t")
        and all(0x20 <= ord(c) <= 0x7E for c in value)
        and not (value.startswith(_SENTINEL_PREFIX) and value.endswith(_SENTINEL_SUFFIX))
    )
    if plain:
        return value
    return _SENTINEL_PREFIX + base64.b64encode(value.encode("utf-8")).decode("ascii") + _SENTINEL_SUFFIX


def decode_header_value(raw: str) -> str:
    """Inverse of :func:`encode_header_value`; ValueError for characters a header value may not carry or a
    malformed sentinel."""
    if not (raw.isascii() and raw.isprintable()) and any(not (0x20 <= ord(c) <= 0x7E or c == "\t") for c in raw):
        raise ValueError("header value contains characters outside visible ASCII")
    if raw.startswith(_SENTINEL_PREFIX) and raw.endswith(_SENTINEL_SUFFIX) and len(raw) >= 11:
        try:
            return base64.b64decode(raw[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise ValueError("malformed base64 header value") from None
    return raw


def _unsafe_integer(value: Any) -> bool:
    """Whether ``value`` is an integer (or an integral float) outside ±(2^53-1): one that must not be mirrored
    into an ``Mcp-Param-*`` header (an intermediary reading it as an IEEE 754 double sees another number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and not value.is_integer():
        return False
    return abs(value) > MAX_SAFE_INTEGER


def header_text(value: Any) -> str | None:
    """The header form (before encoding) of a mirrored argument value; None when it is not mirrorable.
    ValueError for an integer outside ±(2^53-1), which the 2026-07-28 spec forbids in a header."""
    if value is None:
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    if _unsafe_integer(value):
        raise ValueError(f"the integer {value!r} is outside the range an Mcp-Param header may carry (±(2^53-1))")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return value
    return None


_BOUNDS = {"minimum": 0, "maximum": 0, "exclusiveMinimum": 1, "exclusiveMaximum": 1}  # bound -> slack past the range


def _unsafe_declared_integer(node: Mapping[str, Any]) -> str | None:
    """What of an integer property's schema admits an integer outside ±(2^53-1) by declaring it (a bound beyond
    the range, or such a value in ``enum``/``const``); None when nothing does (unbounded is fine: each value is
    checked when called)."""
    for key, slack in _BOUNDS.items():
        bound = node.get(key)
        if isinstance(bound, (int, float)) and not isinstance(bound, bool) and abs(bound) > MAX_SAFE_INTEGER + slack:
            return f"its {key} {bound!r}"
    listed = node.get("enum")
    values: list[Any] = [*listed] if isinstance(listed, list) else []
    if "const" in node:
        values.append(node["const"])
    for value in values:
        if _unsafe_integer(value):
            return f"the value {value!r} it lists"
    return None


def param_headers_from_schema(schema: Any, *, declared_range: bool = False) -> dict[str, tuple[str, ...]]:
    """The ``x-mcp-header`` annotations of a tool ``inputSchema``: lower-cased header name part → property path.

    Raises ValueError when an annotation breaks a rule of the spec (empty or non-token name, duplicate
    case-insensitively, non-primitive or ``number`` type, or not statically reachable through ``properties``).
    ``declared_range=True`` (a server registering a tool) also refuses an integer property whose schema admits a
    value outside ±(2^53-1) by name (a ``minimum``/``maximum`` beyond it, such a value in ``enum``/``const``): no
    call could carry that value in its header. A client keeps such a tool (the rule is on values, which it checks
    per call).
    """
    found: dict[str, tuple[str, ...]] = {}
    # An explicit stack, not recursion: a server's schema may nest a thousand levels deep (issue 15.6).
    stack: list[tuple[Any, tuple[str, ...], bool]] = [(schema, (), True)]
    while stack:
        node, path, reachable = stack.pop()
        if isinstance(node, list):
            stack.extend((item, path, False) for item in reversed(node))
            continue
        if not isinstance(node, dict):
            continue
        if "x-mcp-header" in node:
            name = node["x-mcp-header"]
            if not reachable or not path:
                raise ValueError("x-mcp-header is only allowed on properties reachable through 'properties'")
            if not isinstance(name, str) or not name or not _TOKEN.match(name):
                raise ValueError(f"x-mcp-header {name!r} is not a valid header name token")
            if node.get("type") not in ("string", "integer", "boolean"):
                raise ValueError(f"x-mcp-header {name!r} must annotate a string, integer or boolean property")
            if declared_range and node["type"] == "integer" and (what := _unsafe_declared_integer(node)):
                raise ValueError(
                    f"x-mcp-header {name!r}: {what} lies outside ±(2^53-1), the integers an Mcp-Param header "
                    "carries exactly; bound the property within that range"
                )
            key = name.lower()
            if key in found:
                raise ValueError(f"x-mcp-header {name!r} is used twice")
            found[key] = path
        children: list[tuple[Any, tuple[str, ...], bool]] = []
        for k, v in node.items():
            if k == "properties" and isinstance(v, dict):
                children.extend((sub, (*path, str(pname)), reachable) for pname, sub in v.items())
            elif isinstance(v, (dict, list)):
                children.append((v, path, False))
        stack.extend(reversed(children))  # visit in document order, like the recursive walk did
    return found


def _dig(arguments: Any, path: Sequence[str]) -> Any:
    node = arguments
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_MAX_NUMBER_TEXT = 64  # characters of a number header read (a safe integer has 16 digits; reading costs per digit)


def _same_number(text: str, value: float) -> bool:
    """Whether header ``text`` is the number ``value``: plain decimal digits (an optional sign and fraction: "42",
    "42.0") of exactly that number. Not float(): it reads "4_2", "4.2e1", "+42" and non-ASCII digits as 42, and
    rounds 9007199254740993 to 9007199254740992, so a header an intermediary reads as another value would pass.
    A header longer than 64 characters is no number."""
    if len(text) > _MAX_NUMBER_TEXT or _DECIMAL.fullmatch(text) is None:
        return False
    try:
        return Decimal(text) == Decimal(value if isinstance(value, int) else repr(value))
    except ArithmeticError:
        return False


def check_param_headers(
    spec: Mapping[str, Sequence[str]], arguments: Any, given: Mapping[str, str], *, required: bool = True
) -> str | None:
    """What is wrong with the ``Mcp-Param-*`` headers ``given`` (lower-cased names) of a call with ``arguments``,
    for a tool whose annotations are ``spec``; None when they mirror the body. An integer argument outside
    ±(2^53-1) is wrong whatever its header says (the spec forbids mirroring it). ``required=False``: a header
    not sent is no problem (the tool is called through another whose definition declares none, so a client
    mirrors nothing), one sent must still match."""
    for name, path in spec.items():
        key = name.lower()
        value = _dig(arguments, path)
        raw = given.get(key)
        if value is None:
            if raw is not None:
                return f"Mcp-Param-{name} header sent but the argument is absent"
            continue
        if raw is None and not required:
            continue
        if _unsafe_integer(value):
            return f"Mcp-Param-{name}: argument {'.'.join(path)!r} is outside the integer range ±(2^53-1)"
        if raw is None:
            return f"the Mcp-Param-{name} header is required (argument {'.'.join(path)!r} is present)"
        try:
            text = decode_header_value(raw)
        except ValueError as exc:
            return f"Mcp-Param-{name}: {exc}"
        if isinstance(value, bool):
            ok = text == ("true" if value else "false")
        elif isinstance(value, (int, float)):
            ok = _same_number(text, value)
        else:
            ok = text == value
        if not ok:
            return f"Mcp-Param-{name} header value {text!r} does not match body value {value!r}"
    return None


__all__ = [
    "NAME_FIELD",
    "check_param_headers",
    "decode_header_value",
    "encode_header_value",
    "header_text",
    "param_headers_from_schema",
]
