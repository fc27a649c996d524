"""The inspector as an MCP Apps host, its server side: :class:`ViewTable`, the views the page shows and what they
may ask of the server.

A tool whose definition links to a view (``_meta.ui.resourceUri``) is shown, when called, in a sandboxed frame on
a separate origin (:mod:`.sandbox`). The page opens the view here (:meth:`ViewTable.open`: the document is read
through the client and checked by :func:`mcpkit.client.apps.check_view_contents`, its CSP reduced to what a host can
enforce) and forwards the view's requests here (:meth:`ViewTable.forward`), which sends them through the client:
the server's authorization and limits apply, and each one is in the message log like any other request.

What a view may ask: :data:`FORWARDED` (``tools/call`` only for a tool whose visibility includes ``"app"``; the
Apps spec: "Host MUST reject tools/call requests from apps for tools that don't include 'app' in visibility").
Everything else is refused with -32601 and counted. A view's ``_meta.progressToken`` is never sent as it is (it
could equal the token of one of the inspector's own requests, and their progress would mix): the client asks for
progress under a token of its own, and the page passes it to the view under the view's token.

Bounds (each view): :data:`MAX_IN_FLIGHT` forwarded requests at
once, :data:`RATE` per second (bursts of :data:`BURST`), params of :data:`MAX_PARAMS_BYTES`; at most
:data:`MAX_VIEWS` views are open (the oldest is closed for a new one). A view closed (or forgotten) has its requests
still waiting for the server cancelled. A view opened on an earlier connection is refused (it would speak to another
server).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlencode

import orjson

from ..client.apps import ViewError, check_view_contents, view_uri_of
from ..engine import ProgressCallback
from ..protocol.apps import CSP_LISTS, content_security_policy, permission_policy, visible_to
from ..protocol.errors import MCPError
from .asks import InspectorError
from .events import EventHub


class _Host(Protocol):
    """What the table needs of its :class:`~.session.Inspector`."""

    _generation: int

    def _require(self) -> Any: ...

    @property
    def hub(self) -> EventHub: ...

    async def request(
        self, method: str, params: dict[str, Any] | None = None, *, on_progress: ProgressCallback | None = None
    ) -> dict[str, Any]: ...


__all__ = ["BURST", "FORWARDED", "MAX_IN_FLIGHT", "MAX_PARAMS_BYTES", "MAX_VIEWS", "RATE", "ViewTable"]

#: The requests a view may make of the server (through the inspector's client).
FORWARDED = frozenset(("tools/call", "tools/list", "resources/read", "resources/list", "resources/templates/list"))
MAX_VIEWS = 32
MAX_IN_FLIGHT = 8
RATE = 20.0
BURST = 40
MAX_PARAMS_BYTES = 1024 * 1024
#: The largest view document the inspector renders.
MAX_VIEW_BYTES = 8 * 1024 * 1024
NOT_ALLOWED = -32601
TOO_MANY = -32000


@dataclass
class _View:
    id: str
    uri: str
    tool: str | None
    generation: int
    opened: float
    tokens: float = float(BURST)
    stamp: float = field(default_factory=time.monotonic)
    in_flight: int = 0
    forwarded: int = 0
    refused: int = 0
    waiting: set[asyncio.Task[dict[str, Any]]] = field(default_factory=set)
    closed: bool = False

    def drop(self) -> None:
        """The view is gone: its requests still waiting for the server are cancelled (the client sends
        ``notifications/cancelled``); nobody is left to read their answers."""
        self.closed = True
        for task in self.waiting:
            task.cancel()

    def take(self) -> bool:
        """One request's worth of the rate bound (a token bucket)."""
        now = time.monotonic()
        self.tokens = min(float(BURST), self.tokens + (now - self.stamp) * RATE)
        self.stamp = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True

    def public(self) -> dict[str, Any]:
        return {"id": self.id, "uri": self.uri, "tool": self.tool, "forwarded": self.forwarded, "refused": self.refused}


def refusal(code: int, message: str) -> MCPError:
    return MCPError(message, code=code)


class ViewTable:
    """The open views of one :class:`~.session.Inspector` (see the module docstring)."""

    def __init__(self, inspector: _Host) -> None:
        self._inspector = inspector
        self._views: OrderedDict[str, _View] = OrderedDict()
        self._ids = itertools.count(1)
        #: the sandbox's origin (``http://127.0.0.1:PORT``), set when it listens; None: views cannot be shown
        self.sandbox_origin: str | None = None

    def __len__(self) -> int:
        return len(self._views)

    async def open(self, tool: Any = None, uri: Any = None, host_origin: str | None = None) -> dict[str, Any]:
        """Read and check the view of ``tool`` (a name or a definition) or at ``uri``; returns what the page needs
        to show it: ``viewId``, ``html``, the honoured ``csp``/``permissions``/``prefersBorder``/``domain``, the
        ``policy`` and ``allow`` the sandbox applies, ``problems`` and the ``sandboxUrl``."""
        client = self._inspector._require()
        if self.sandbox_origin is None:
            raise InspectorError("this inspector has no sandbox to show views in", 409)
        target = uri if isinstance(uri, str) else tool
        if not isinstance(target, (str, dict)):
            raise InspectorError("give the tool (a name or its definition) or the view's uri")
        try:
            view_uri = await view_uri_of(client, target)
            result = await client.read_resource(view_uri)
            view = check_view_contents(view_uri, [c.dump() for c in result.contents], MAX_VIEW_BYTES)
        except ViewError as exc:
            raise InspectorError(str(exc), 422) from None
        while len(self._views) >= MAX_VIEWS:
            self._views.popitem(last=False)[1].drop()
        name = tool if isinstance(tool, str) else tool.get("name") if isinstance(tool, dict) else None
        entry = _View(f"view-{next(self._ids)}", view_uri, name, self._inspector._generation, time.time())
        self._views[entry.id] = entry
        query: dict[str, str] = {"host": host_origin or ""}
        for key in CSP_LISTS:
            if view.csp.get(key):
                query[key] = " ".join(view.csp[key])
        return {
            "viewId": entry.id,
            "uri": view_uri,
            "html": view.html,
            "size": view.size,
            "csp": view.csp,
            "permissions": view.permissions,
            "domain": view.domain,
            "prefersBorder": view.prefers_border,
            "problems": view.problems,
            "policy": content_security_policy(view.csp),
            "allow": permission_policy(view.permissions),
            "sandboxUrl": f"{self.sandbox_origin}/view?{urlencode(query)}",
        }

    def close(self, view_id: Any) -> bool:
        """Forget a view (the page tore it down) and cancel its requests still waiting for the server; False when
        it was not open."""
        view = self._views.pop(view_id, None) if isinstance(view_id, str) else None
        if view is None:
            return False
        view.drop()
        return True

    def close_all(self) -> None:
        for view in self._views.values():
            view.drop()
        self._views.clear()

    def views(self) -> list[dict[str, Any]]:
        """The open views, oldest first."""
        return [v.public() for v in self._views.values()]

    async def forward(self, view_id: Any, method: Any, params: Any) -> dict[str, Any]:
        """Send a view's request to the server through the client and return its result; an :class:`MCPError`
        (-32601 for a request a view may not make, -32000 beyond a bound) is the answer the view gets."""
        view = self._views.get(view_id) if isinstance(view_id, str) else None
        if view is None:
            raise InspectorError("no such view is open (it was closed, or the page reconnected)", 404)
        if view.generation != self._inspector._generation:
            view.refused += 1
            raise refusal(TOO_MANY, "the view belongs to an earlier connection: it cannot reach this server")
        if not isinstance(method, str) or method not in FORWARDED:
            view.refused += 1
            raise refusal(NOT_ALLOWED, f"a view may not send {str(method)[:100]!r} to the server")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            view.refused += 1
            raise refusal(-32602, "params must be an object")
        if len(orjson.dumps(params)) > MAX_PARAMS_BYTES:
            view.refused += 1
            raise refusal(TOO_MANY, f"the request is larger than {MAX_PARAMS_BYTES} bytes")
        if view.in_flight >= MAX_IN_FLIGHT:
            view.refused += 1
            raise refusal(TOO_MANY, f"{MAX_IN_FLIGHT} requests of this view already wait for the server")
        if not view.take():
            view.refused += 1
            raise refusal(TOO_MANY, f"the view sends more than {RATE:g} requests a second")
        params = {k: v for k, v in params.items() if k != "_meta" or isinstance(v, dict)}
        on_progress = None
        if "progressToken" in params.get("_meta", {}):  # (never sent as is: it could be one of the inspector's)
            meta = dict(params["_meta"])
            token = meta.pop("progressToken")
            params = {**params, "_meta": meta}
            on_progress = self._progress_to(view, token) if type(token) in (str, int) else None
        if method == "tools/call":
            await self._check_app_tool(view, params)
        view.in_flight += 1
        task = asyncio.ensure_future(self._inspector.request(method, params, on_progress=on_progress))
        view.waiting.add(task)
        try:
            result = await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not view.closed or (current is not None and current.cancelling()):
                raise
            raise refusal(TOO_MANY, "the view was closed: its request was cancelled") from None
        finally:
            view.waiting.discard(task)
            view.in_flight -= 1
        view.forwarded += 1
        return result

    def _progress_to(self, view: _View, token: str | int) -> ProgressCallback:
        """The progress of a view's request, which the client asked for under a token of its own: passed to the
        page (``view-progress``), which tells the view under the view's ``token``; at most ~20 a second, the last
        one always."""
        last = 0.0

        def on_progress(done: float, total: float | None, message: str | None) -> None:
            nonlocal last
            now = time.monotonic()
            if view.closed or (now - last < 0.05 and (total is None or done < total)):
                return
            last = now
            update = {"progressToken": token, "progress": done, "total": total, "message": message}
            self._inspector.hub.publish("view-progress", viewId=view.id, params=update)

        return on_progress

    async def _check_app_tool(self, view: _View, params: dict[str, Any]) -> None:
        name = params.get("name")
        if not isinstance(name, str):
            view.refused += 1
            raise refusal(-32602, "tools/call: name must be a string")
        client = self._inspector._require()
        tool = await client.get_tool(name)
        if tool is None:
            view.refused += 1
            raise refusal(-32602, f"the server has no tool {name[:100]!r}")
        if not visible_to(tool.meta, "app"):
            view.refused += 1
            raise refusal(NOT_ALLOWED, f"the tool {name!r} is not callable by views (its visibility lacks 'app')")
