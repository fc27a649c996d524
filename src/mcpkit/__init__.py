"""mcpkit: a fast, complete, dual-era Python SDK for the Model Context Protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public names load lazily so `import mcpkit` stays cheap (cold start of a stdio server is benchmarked).
_LAZY: dict[str, tuple[str, str]] = {
    "MCPKit": ("mcpkit.server.app", "MCPKit"),
    "Context": ("mcpkit.server.context", "Context"),
    "ToolError": ("mcpkit.server.app", "ToolError"),
    "Server": ("mcpkit.server.lowlevel", "Server"),
    "Client": ("mcpkit.client.client", "Client"),
    "MultiClient": ("mcpkit.client.multi", "MultiClient"),
    "ToolResult": ("mcpkit.client.client", "ToolResult"),
    "ClientSession": ("mcpkit.client.lowlevel", "ClientSession"),
    "MCPError": ("mcpkit.protocol.errors", "MCPError"),
}

if TYPE_CHECKING:
    from .client.client import Client, ToolResult
    from .client.lowlevel import ClientSession
    from .client.multi import MultiClient
    from .protocol.errors import MCPError
    from .server.app import MCPKit, ToolError
    from .server.context import Context
    from .server.lowlevel import Server


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'mcpkit' has no attribute {name!r}") from None
    import importlib

    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


__all__ = [
    "Client",
    "ClientSession",
    "Context",
    "MCPError",
    "MCPKit",
    "MultiClient",
    "Server",
    "ToolError",
    "ToolResult",
    "__version__",
]
