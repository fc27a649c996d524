"""The inspector's web side: :class:`InspectorApp`, a plain ASGI app serving the page and its API on loopback.

Routes: ``GET /`` (the page), ``GET /static/<file>`` (its script and style, from the package), ``GET /api/events``
(a Server-Sent Events stream of what happens) and ``POST /api/<action>`` (JSON in, JSON out: list, call, cancel,
read, subscribe, prompt, complete, answer, roots, connect, ...). No WebSocket.

Who may use it, checked on every route, the event stream included, before anything else:

1. the DNS-rebinding policy of the MCP endpoints (:mod:`mcpkit.transports.http.security`): a localhost
   ``Host`` and, when there is one, a localhost ``Origin``;
2. stricter than that, an ``Origin`` (and a ``Sec-Fetch-Site``) that is the page's own: a page served by another
   local program on another port is another origin and gets 403;
3. on ``/api/``: the run's token as ``Authorization: Bearer <token>`` (compared in constant time; the page reads
   it once from the fragment of the URL it was opened with, which is never sent to any server, and keeps it in
   the tab's session storage), so neither another local user nor a page elsewhere can call tools or answer the
   server's requests; and a JSON ``Content-Type`` on every POST.

Every response forbids framing and sniffing; the page's Content-Security-Policy allows only its own script and
style (no inline script), images and media from ``data:``/``blob:`` URLs, and connections to itself, so even a
server string that reached the page as markup could not run. The page itself never treats a server string as
markup (``textContent`` only), and opens a link only on a click, and only an http(s) one.

Request bodies are bounded (``max_body``, 8 MiB: 413 beyond).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

import orjson

from .._asgi import ASGIApp, BodyTooLarge, Disconnected, Receive, Scope, Send, not_http, read_body
from ..protocol.errors import CapabilityNotSupported, ConnectionClosed, MCPError, RequestTimeout
from ..transports.http.security import make_request_check
from .events import TooManySubscribers, frame
from .failures import describe_failure
from .session import Inspector, InspectorError

__all__ = ["CSP", "DEFAULT_MAX_BODY", "InspectorApp", "load_static"]

DEFAULT_MAX_BODY = 8 * 1024 * 1024
KEEPALIVE_SECONDS = 15.0

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "media-src 'self' data: blob:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
_COMMON_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
_TYPES = {
    ".html": b"text/html; charset=utf-8",
    ".js": b"text/javascript; charset=utf-8",
    ".css": b"text/css; charset=utf-8",
    ".svg": b"image/svg+xml",
    ".png": b"image/png",
}


def load_static() -> dict[str, tuple[bytes, bytes]]:
    """The page's files shipped in the package: ``{name: (content, content type)}`` (read once)."""
    out: dict[str, tuple[bytes, bytes]] = {}
    folder = resources.files("mcpkit.inspector") / "static"
    for item in folder.iterdir():
        name = item.name
        suffix = name[name.rfind(".") :] if "." in name else ""
        if item.is_file() and suffix in _TYPES:
            out[name] = (item.read_bytes(), _TYPES[suffix])
    return out


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


async def _respond(
    send: Send, status: int, body: bytes, content_type: bytes = b"text/plain; charset=utf-8", csp: str | None = None
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *_COMMON_HEADERS]
    if csp:
        headers.append((b"content-security-policy", csp.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _json(send: Send, status: int, value: Any) -> None:
    await _respond(send, status, orjson.dumps(value), b"application/json")


Handler = Callable[[dict[str, Any]], Awaitable[Any]]


class InspectorApp:
    """The ASGI app (see the module docstring). ``bind(port)`` tells it its own origin once it listens."""

    def __init__(
        self,
        inspector: Inspector,
        *,
        token: str,
        max_body: int = DEFAULT_MAX_BODY,
        static: dict[str, tuple[bytes, bytes]] | None = None,
        connect_on_startup: bool = True,
    ) -> None:
        if len(token) < 16:
            raise ValueError("the token must be at least 16 characters")
        self.inspector = inspector
        self._token = token.encode()
        self.max_body = max_body
        self.static: dict[str, tuple[bytes, bytes]] = static if static is not None else load_static()
        self.connect_on_startup = connect_on_startup
        self._policy = make_request_check(None, None)  # localhost Host, localhost Origin
        self._origins: frozenset[str] = frozenset()
        self.startup_hooks: list[Callable[[], Awaitable[None]]] = []
        self.shutdown_hooks: list[Callable[[], Awaitable[None]]] = []
        self.handlers: dict[str, Handler] = {
            "state": self._state,
            "connect": self._connect,
            "disconnect": self._disconnect,
            "list": self._list,
            "call": self._call,
            "cancel": self._cancel,
            "forget-calls": self._forget_calls,
            "read": self._read,
            "subscribe": self._subscribe,
            "unsubscribe": self._unsubscribe,
            "prompt": self._prompt,
            "complete": self._complete,
            "answer": self._answer,
            "roots": self._roots,
            "log-level": self._log_level,
            "ping": self._ping,
            "probe": self._probe,
            "tasks": self._tasks,
            "log": self._log,
            "log-entry": self._log_entry,
            "log-clear": self._log_clear,
            "view-open": self._view_open,
            "view-request": self._view_request,
            "view-close": self._view_close,
        }

    def bind(self, port: int, host: str = "127.0.0.1") -> None:
        """The page's own origins, once the port is known."""
        names = {"127.0.0.1", "localhost", "[::1]"}
        if host not in ("0.0.0.0", "::", ""):
            names.add(f"[{host}]" if ":" in host and not host.startswith("[") else host)
        self._origins = frozenset(f"http://{name}:{port}" for name in names)

    @property
    def csp(self) -> str:
        """The page's Content-Security-Policy: :data:`CSP`, with frames from the MCP Apps sandbox's origin only
        (when there is one)."""
        sandbox = self.inspector.views.sandbox_origin
        return CSP if sandbox is None else f"{CSP}; frame-src {sandbox}"

    @property
    def origins(self) -> frozenset[str]:
        """The origins the page may be served from (see :meth:`bind`)."""
        return self._origins

    # ------------------------------------------------------------------ ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http":
            await not_http(kind, receive, send, self._shutdown, self._startup)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await _respond(send, refusal[0], refusal[1].encode())
            return
        path: str = scope.get("path", "/")
        method: str = scope.get("method", "GET")
        if path.startswith("/api/"):
            if not self._authorized(scope):
                await _json(send, 401, {"error": {"message": "missing or wrong token: open the URL mcpkit printed"}})
                return
            if path == "/api/events" and method == "GET":
                await self._events(scope, receive, send)
                return
            if method != "POST":
                await _json(send, 405, {"error": {"message": "POST only"}})
                return
            await self._api(path[len("/api/") :], scope, receive, send)
            return
        if method not in ("GET", "HEAD"):
            await _respond(send, 405, b"Method Not Allowed")
            return
        if path in ("/", "/index.html"):
            name = "index.html"
        else:
            name = path[len("/static/") :] if path.startswith("/static/") else ""
        found = self.static.get(name) if name and "/" not in name else None
        if found is None:
            await _respond(send, 404, b"Not Found")
            return
        await _respond(send, 200, found[0], found[1], csp=self.csp if name.endswith(".html") else None)

    async def _startup(self) -> None:
        for hook in self.startup_hooks:
            await hook()
        if self.connect_on_startup:
            asyncio.get_running_loop().create_task(self.inspector.connect())

    async def _shutdown(self) -> None:
        for hook in self.shutdown_hooks:
            with contextlib.suppress(Exception):
                await hook()
        await self.inspector.aclose()

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        verdict = self._policy(scope)
        if verdict is not None:
            return verdict
        origin = _header(scope, b"origin")
        if origin is not None and origin.strip().rstrip("/").lower() not in self._origins:
            return 403, "Origin not allowed"
        site = _header(scope, b"sec-fetch-site")
        if site is not None and site.strip().lower() not in ("same-origin", "none"):
            return 403, "cross-site request refused"
        return None

    def _authorized(self, scope: Scope) -> bool:
        value = _header(scope, b"authorization") or ""
        scheme, _, token = value.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self._token)

    # ------------------------------------------------------------------ the event stream

    async def _events(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            sub = self.inspector.hub.subscribe()
        except TooManySubscribers as exc:
            await _json(send, 429, {"error": {"message": str(exc)}})
            return
        try:
            # The hello is read as the page subscribes, before anything yields: an event published after it is in
            # the queue only (read after the response's start was sent, a line was in both and a call's event could
            # be applied over a newer state).
            hello = {
                "type": "hello",
                "state": self.inspector.snapshot(),
                "log": [e.summary() for e in self.inspector.log.entries()],
            }
            headers = [
                (b"content-type", b"text/event-stream; charset=utf-8"),
                (b"x-accel-buffering", b"no"),
                *_COMMON_HEADERS,
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": frame(hello), "more_body": True})

            async def disconnected() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass

            gone = asyncio.ensure_future(disconnected())
            try:
                while not gone.done():
                    nxt = asyncio.ensure_future(sub.next())
                    done, _ = await asyncio.wait({nxt, gone}, timeout=KEEPALIVE_SECONDS, return_when="FIRST_COMPLETED")
                    if nxt in done:
                        body = nxt.result()
                    else:
                        nxt.cancel()
                        if gone in done:
                            break
                        body = b": keepalive\n\n"
                    await send({"type": "http.response.body", "body": body, "more_body": True})
            finally:
                gone.cancel()
        except (OSError, ConnectionError):
            pass
        finally:
            sub.close()
        with contextlib.suppress(Exception):
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    # ------------------------------------------------------------------ the API

    async def _api(self, action: str, scope: Scope, receive: Receive, send: Send) -> None:
        handler = self.handlers.get(action)
        if handler is None:
            await _json(send, 404, {"error": {"message": f"no action {action!r}"}})
            return
        ctype = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            await _json(send, 415, {"error": {"message": "Content-Type must be application/json"}})
            return
        try:
            raw = await read_body(receive, self.max_body)
        except BodyTooLarge:
            await _json(send, 413, {"error": {"message": f"request body larger than {self.max_body} bytes"}})
            return
        except Disconnected:
            return
        try:
            body = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            await _json(send, 400, {"error": {"message": "the body is not JSON"}})
            return
        if not isinstance(body, dict):
            await _json(send, 400, {"error": {"message": "the body must be a JSON object"}})
            return
        try:
            result = await handler(body)
        except InspectorError as exc:
            await _json(send, exc.status, {"error": {"message": str(exc)}})
            return
        except (MCPError, CapabilityNotSupported, ConnectionClosed, RequestTimeout, TimeoutError, OSError) as exc:
            await _json(send, 200, {"error": describe_failure(exc)})
            return
        except Exception as exc:  # a server answer the client could not read (a validation error, ...)
            await _json(send, 200, {"error": describe_failure(exc)})
            return
        await _json(send, 200, {"result": result})

    async def _state(self, body: dict[str, Any]) -> Any:
        return self.inspector.snapshot()

    async def _connect(self, body: dict[str, Any]) -> Any:
        mode = body.get("mode")
        version = body.get("protocolVersion")
        if mode is not None and not isinstance(mode, str):
            raise InspectorError("mode must be a string")
        if version is not None and not isinstance(version, str):
            raise InspectorError("protocolVersion must be a string")
        if version:
            from ..protocol import versions

            if not versions.is_supported(version):
                raise InspectorError(f"unsupported protocol version {version!r}")
        await self.inspector.connect(mode=mode, protocol_version=version)
        return self.inspector.snapshot()

    async def _disconnect(self, body: dict[str, Any]) -> Any:
        await self.inspector.disconnect()
        return self.inspector.snapshot()

    async def _list(self, body: dict[str, Any]) -> Any:
        return await self.inspector.list_page(str(body.get("kind")), body.get("cursor"))

    async def _call(self, body: dict[str, Any]) -> Any:
        arguments = body.get("arguments", {})
        as_task = body.get("task", False) is True
        return {"id": await self.inspector.start_call(body.get("name"), arguments, as_task=as_task)}  # type: ignore[arg-type]

    async def _cancel(self, body: dict[str, Any]) -> Any:
        return {"cancelled": self.inspector.cancel_call(str(body.get("id")))}

    async def _forget_calls(self, body: dict[str, Any]) -> Any:
        self.inspector.forget_calls()
        return {}

    async def _read(self, body: dict[str, Any]) -> Any:
        return await self.inspector.read(body.get("uri"))  # type: ignore[arg-type]

    async def _subscribe(self, body: dict[str, Any]) -> Any:
        await self.inspector.subscribe(body.get("uri"))  # type: ignore[arg-type]
        return {}

    async def _unsubscribe(self, body: dict[str, Any]) -> Any:
        await self.inspector.unsubscribe(body.get("uri"))  # type: ignore[arg-type]
        return {}

    async def _prompt(self, body: dict[str, Any]) -> Any:
        return await self.inspector.get_prompt(body.get("name"), body.get("arguments") or {})  # type: ignore[arg-type]

    async def _complete(self, body: dict[str, Any]) -> Any:
        context = body.get("context")
        if context is not None and not (
            isinstance(context, dict) and all(isinstance(v, str) for v in context.values())
        ):
            raise InspectorError("context must map argument names to strings")
        return await self.inspector.complete(
            body.get("ref"),  # type: ignore[arg-type]
            body.get("argument"),  # type: ignore[arg-type]
            body.get("value", ""),
            context,
        )

    async def _answer(self, body: dict[str, Any]) -> Any:
        self.inspector.answer(str(body.get("id")), body.get("answer"))  # type: ignore[arg-type]
        return {}

    async def _roots(self, body: dict[str, Any]) -> Any:
        await self.inspector.set_roots(body.get("roots"))  # type: ignore[arg-type]
        return {"roots": self.inspector.roots}

    async def _log_level(self, body: dict[str, Any]) -> Any:
        level = body.get("level")
        levels = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
        if level not in levels:
            raise InspectorError(f"level must be one of {', '.join(levels)}")
        await self.inspector.set_log_level(level)
        return {}

    async def _ping(self, body: dict[str, Any]) -> Any:
        return {"seconds": await self.inspector.ping()}

    async def _probe(self, body: dict[str, Any]) -> Any:
        return {"status": await self.inspector.probe()}

    async def _tasks(self, body: dict[str, Any]) -> Any:
        task_id = body.get("taskId")
        return await self.inspector.tasks(str(body.get("op")), task_id if isinstance(task_id, str) else None)

    async def _log(self, body: dict[str, Any]) -> Any:
        since = body.get("since", 0)
        if not isinstance(since, int):
            raise InspectorError("since must be an integer")
        log = self.inspector.log
        return {"entries": [e.summary() for e in log.entries(since)], "stats": log.stats()}

    async def _log_entry(self, body: dict[str, Any]) -> Any:
        seq = body.get("seq")
        entry = self.inspector.log.get(seq) if isinstance(seq, int) else None
        if entry is None:
            raise InspectorError("that message is no longer in the log", 404)
        return entry.full()

    async def _log_clear(self, body: dict[str, Any]) -> Any:
        self.inspector.log.clear()
        return {}

    # MCP Apps: the views the page shows (inspector/views.py, the sandbox in inspector/sandbox.py)

    async def _view_open(self, body: dict[str, Any]) -> Any:
        origin = body.get("origin")
        host = origin if isinstance(origin, str) and origin in self._origins else min(self._origins, default="")
        return await self.inspector.views.open(body.get("tool"), body.get("uri"), host)

    async def _view_request(self, body: dict[str, Any]) -> Any:
        return await self.inspector.views.forward(body.get("viewId"), body.get("method"), body.get("params"))

    async def _view_close(self, body: dict[str, Any]) -> Any:
        return {"closed": self.inspector.views.close(body.get("viewId"))}


def as_asgi(app: InspectorApp) -> ASGIApp:
    """``app`` typed as a plain ASGI callable."""
    return app
