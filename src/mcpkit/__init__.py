"""mcpkit: a fast, complete, dual-era Python SDK for the Model Context Protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__

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
    # what servers and examples use most, so nobody has to know the module layout
    "Image": ("mcpkit.server.content", "Image"),
    "Audio": ("mcpkit.server.content", "Audio"),
    "Tool": ("mcpkit.server.tools", "Tool"),
    "Message": ("mcpkit.server.prompts", "Message"),
    "InputRequired": ("mcpkit.server.lowlevel", "InputRequired"),
    "ResourceNotFound": ("mcpkit.protocol.errors", "ResourceNotFound"),
    "InvalidParams": ("mcpkit.protocol.errors", "InvalidParams"),
    "ResourceLink": ("mcpkit.protocol.types", "ResourceLink"),
    "ToolCallError": ("mcpkit.client.client", "ToolCallError"),
    "ToolOutputError": ("mcpkit.client.client", "ToolOutputError"),
    "StdioServer": ("mcpkit.transports.stdio", "StdioServer"),
    "MissingExtra": ("mcpkit._extras", "MissingExtra"),
    "proxy": ("mcpkit.proxies", "proxy"),
    "ProxyServer": ("mcpkit.proxies", "ProxyServer"),
    "TaskFailed": ("mcpkit.protocol.errors", "TaskFailed"),
    "TaskHandle": ("mcpkit.client.tasks", "TaskHandle"),
    "Call": ("mcpkit.server.interceptors", "Call"),
    "CallNext": ("mcpkit.server.interceptors", "CallNext"),
    "ToolCall": ("mcpkit.server.interceptors", "ToolCall"),
    "TapEvent": ("mcpkit.engine.tap", "TapEvent"),
    "TapRecorder": ("mcpkit.engine.tap", "TapRecorder"),
    "ServerStartError": ("mcpkit.client.targets", "ServerStartError"),
    # the client's handlers: what they receive, and the protocols they follow
    "SamplingParams": ("mcpkit.client.handlers", "SamplingParams"),
    "ElicitationParams": ("mcpkit.client.handlers", "ElicitationParams"),
    "LogMessage": ("mcpkit.client.handlers", "LogMessage"),
    "SamplingHandler": ("mcpkit.client.handlers", "SamplingHandler"),
    "ElicitationHandler": ("mcpkit.client.handlers", "ElicitationHandler"),
    "LoggingHandler": ("mcpkit.client.handlers", "LoggingHandler"),
    # what ctx.elicit returns
    "ElicitationResult": ("mcpkit.server.elicitation", "ElicitationResult"),
    "AcceptedElicitation": ("mcpkit.server.elicitation", "AcceptedElicitation"),
    "DeclinedElicitation": ("mcpkit.server.elicitation", "DeclinedElicitation"),
    "CancelledElicitation": ("mcpkit.server.elicitation", "CancelledElicitation"),
}

if TYPE_CHECKING:
    from ._extras import MissingExtra
    from .client.client import Client, ToolCallError, ToolOutputError, ToolResult
    from .client.handlers import (
        ElicitationHandler,
        ElicitationParams,
        LoggingHandler,
        LogMessage,
        SamplingHandler,
        SamplingParams,
    )
    from .client.lowlevel import ClientSession
    from .client.multi import MultiClient
    from .client.targets import ServerStartError
    from .client.tasks import TaskHandle
    from .engine.tap import TapEvent, TapRecorder
    from .protocol.errors import InvalidParams, MCPError, ResourceNotFound, TaskFailed
    from .protocol.types import ResourceLink
    from .proxies import ProxyServer, proxy
    from .server.app import MCPKit, ToolError
    from .server.content import Audio, Image
    from .server.context import Context
    from .server.elicitation import (
        AcceptedElicitation,
        CancelledElicitation,
        DeclinedElicitation,
        ElicitationResult,
    )
    from .server.interceptors import Call, CallNext, ToolCall
    from .server.lowlevel import InputRequired, Server
    from .server.prompts import Message
    from .server.tools import Tool
    from .transports.stdio import StdioServer


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
    "AcceptedElicitation",
    "Audio",
    "Call",
    "CallNext",
    "CancelledElicitation",
    "Client",
    "ClientSession",
    "Context",
    "DeclinedElicitation",
    "ElicitationHandler",
    "ElicitationParams",
    "ElicitationResult",
    "Image",
    "InputRequired",
    "InvalidParams",
    "LogMessage",
    "LoggingHandler",
    "MCPError",
    "MCPKit",
    "Message",
    "MissingExtra",
    "ProxyServer",
    "MultiClient",
    "ResourceLink",
    "ResourceNotFound",
    "SamplingHandler",
    "SamplingParams",
    "Server",
    "ServerStartError",
    "StdioServer",
    "TaskFailed",
    "TaskHandle",
    "TapEvent",
    "TapRecorder",
    "Tool",
    "ToolCall",
    "ToolCallError",
    "ToolError",
    "ToolOutputError",
    "ToolResult",
    "__version__",
    "proxy",
]
