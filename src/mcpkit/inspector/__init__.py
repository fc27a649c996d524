"""The mcpkit inspector: a local web page to see and try any MCP server, without Node.

``mcpkit inspect TARGET`` serves it on loopback; in code::

    from mcpkit.inspector import Inspector, start_inspector

    running = await start_inspector(Inspector("python server.py"))
    print(running.url)          # http://127.0.0.1:PORT/#token=...

:class:`Inspector` is the connection and what the page does with it, :class:`InspectorApp` the ASGI app (the page,
its API, its security), :class:`MessageLog` the bounded log of every JSON-RPC message. Needs ``mcpkit[http]``
(uvicorn serves the page). A face of mcpkit: it uses the public client API only.
"""

from __future__ import annotations

from .events import EventHub
from .log import LogEntry, MessageLog
from .serve import RunningInspector, inspect, start_inspector
from .session import Inspector, InspectorError
from .web import InspectorApp

__all__ = [
    "EventHub",
    "Inspector",
    "InspectorApp",
    "InspectorError",
    "LogEntry",
    "MessageLog",
    "RunningInspector",
    "inspect",
    "start_inspector",
]
