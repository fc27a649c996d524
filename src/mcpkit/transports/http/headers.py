"""The ``Mcp-*`` header values of Streamable HTTP: moved to :mod:`mcpkit.protocol.headers` (what a tool's
``x-mcp-header`` annotations mean is protocol, read by the server too); the names stay importable from here."""

from __future__ import annotations

from ...protocol.headers import (
    MAX_SAFE_INTEGER,
    NAME_FIELD,
    check_param_headers,
    decode_header_value,
    encode_header_value,
    header_text,
    param_headers_from_schema,
)

__all__ = [
    "MAX_SAFE_INTEGER",
    "NAME_FIELD",
    "check_param_headers",
    "decode_header_value",
    "encode_header_value",
    "header_text",
    "param_headers_from_schema",
]
