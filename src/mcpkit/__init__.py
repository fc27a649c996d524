"""mcpkit: a fast, complete, dual-era Python SDK for the Model Context Protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_getattr
from ._version import __version__

# Public names load lazily so `import mcpkit` stays cheap (cold start of a stdio server is benchmarked).
_LAZY: dict[str, str] = {
    "MCPKit": "server.app",
    "Context": "server.context",
    "Depends": "server.dependencies",
    "ToolError": "server.app",
    "ConfigurationError": "server.request_context",
    "Server": "server.lowlevel",
    "Client": "client.client",
    "MultiClient": "client.multi",
    "ToolResult": "client.client",
    "ResultType": "client.client",
    "ClientSession": "client.lowlevel",
    "MCPError": "protocol.errors",
    # what servers and examples use most, so nobody has to know the module layout
    "Image": "server.content",
    "Audio": "server.content",
    "File": "server.content",
    "Tool": "server.tools",
    "Message": "server.prompts",
    "InputRequired": "server.lowlevel",
    "ResourceNotFound": "protocol.errors",
    "InvalidParams": "protocol.errors",
    "ResourceLink": "protocol.types",
    "ToolCallError": "client.client",
    "ToolOutputError": "client.client",
    "InvalidServerResult": "client.client",
    "InputHandlerError": "client.client",
    "ModernEraRefused": "client.client",
    "StdioServer": "transports.stdio",
    "MissingExtra": "_extras",
    "proxy": "proxies",
    "ProxyServer": "proxies",
    "TaskFailed": "protocol.errors",
    "TaskHandle": "client.tasks",
    "Call": "server.interceptors",
    "CallNext": "server.interceptors",
    "ToolCall": "server.interceptors",
    "TapEvent": "engine.tap",
    "TapRecorder": "engine.tap",
    "ServerStartError": "client.targets",
    # the client's handlers: what they receive, and the protocols they follow
    "SamplingParams": "client.handlers",
    "ElicitationParams": "client.handlers",
    "LogMessage": "client.handlers",
    "SamplingHandler": "client.handlers",
    "ElicitationHandler": "client.handlers",
    "LoggingHandler": "client.handlers",
    # what ctx.elicit returns
    "ElicitationResult": "server.elicitation",
    "AcceptedElicitation": "server.elicitation",
    "DeclinedElicitation": "server.elicitation",
    "CancelledElicitation": "server.elicitation",
}

if TYPE_CHECKING:
    from ._extras import MissingExtra
    from .client.client import (
        Client,
        InputHandlerError,
        InvalidServerResult,
        ModernEraRefused,
        ResultType,
        ToolCallError,
        ToolOutputError,
        ToolResult,
    )
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
    from .server.content import Audio, File, Image
    from .server.context import Context
    from .server.dependencies import Depends
    from .server.elicitation import (
        AcceptedElicitation,
        CancelledElicitation,
        DeclinedElicitation,
        ElicitationResult,
    )
    from .server.interceptors import Call, CallNext, ToolCall
    from .server.lowlevel import InputRequired, Server
    from .server.prompts import Message
    from .server.request_context import ConfigurationError
    from .server.tools import Tool
    from .transports.stdio import StdioServer


if not TYPE_CHECKING:  # (a type checker reads the imports above: a misspelled name is an error there)
    __getattr__ = lazy_getattr(__name__, _LAZY)


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
    "Depends",
    "ElicitationHandler",
    "ElicitationParams",
    "ElicitationResult",
    "File",
    "Image",
    "InputHandlerError",
    "InputRequired",
    "InvalidParams",
    "InvalidServerResult",
    "LogMessage",
    "LoggingHandler",
    "MCPError",
    "MCPKit",
    "Message",
    "MissingExtra",
    "ModernEraRefused",
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
    "ConfigurationError",
    "ToolOutputError",
    "ResultType",
    "ToolResult",
    "__version__",
    "proxy",
]
