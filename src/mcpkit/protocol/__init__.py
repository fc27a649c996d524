"""Sans-IO protocol layer: JSON-RPC envelope, error codes, revisions and feature gates, MCP types, shaping.

Nothing here does I/O or imports asyncio.
"""

from . import errors, jsonrpc, shaping, versions
from .errors import (
    CapabilityNotSupported,
    ConnectionClosed,
    HeaderMismatch,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MCPError,
    MethodNotFound,
    MissingRequiredClientCapability,
    ParseError,
    RequestTimeout,
    ResourceNotFound,
    UnsupportedProtocolVersion,
    URLElicitationRequired,
)
from .versions import (
    ALL_VERSIONS,
    HANDSHAKE_VERSIONS,
    LATEST,
    LATEST_HANDSHAKE,
    MODERN_VERSIONS,
    Era,
    Features,
)

__all__ = [
    "ALL_VERSIONS",
    "HANDSHAKE_VERSIONS",
    "LATEST",
    "LATEST_HANDSHAKE",
    "MODERN_VERSIONS",
    "CapabilityNotSupported",
    "ConnectionClosed",
    "Era",
    "Features",
    "HeaderMismatch",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "MCPError",
    "MethodNotFound",
    "MissingRequiredClientCapability",
    "ParseError",
    "RequestTimeout",
    "ResourceNotFound",
    "URLElicitationRequired",
    "UnsupportedProtocolVersion",
    "errors",
    "jsonrpc",
    "shaping",
    "versions",
]
