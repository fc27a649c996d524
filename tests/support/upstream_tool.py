"""A tool of another MCP server offered by this one: ``UpstreamTool(client, definition)`` sends each call to the
upstream server through a connected :class:`~mcpkit.Client`, its arguments as they are (the upstream checks them
against its own schema), as a user writes one to offer, or derive a tool from, a tool served elsewhere."""

from __future__ import annotations

from typing import Any

from mcpkit import Client
from mcpkit.protocol.versions import Features
from mcpkit.server.pagination import Listed
from mcpkit.server.tools import Tool


class _Info:
    def __init__(self, input_schema: dict[str, Any], description: str) -> None:
        self.input_schema = input_schema
        self.context_param: str | None = None
        self.is_async = True
        self.fast_plan = None
        self.description = description
        self.params: list[Any] = []


class UpstreamTool(Tool):
    """The upstream's tool ``definition`` (from ``client.list_tools()``), called through ``client``."""

    def __init__(self, client: Client, definition: Any) -> None:  # (no Python function to read: no Tool.__init__)
        self.client = client
        self.name = definition.name
        self.title = None
        self.description = definition.description or ""
        self.annotations = None
        self.icons = None
        self.meta = None
        self.thread = None
        self.sync = None
        self.fn = None  # type: ignore[assignment]
        self._structured_output = None
        self._returns = None
        self.info = _Info(definition.input_schema, self.description)  # type: ignore[assignment]
        Listed.__init__(self)

    @property
    def output_schema(self) -> dict[str, Any] | None:
        return None

    def call(self, arguments: dict[str, Any], ctx: Any, feats: Features) -> Any:
        return self.client.session.request("tools/call", {"name": self.name, "arguments": arguments})
