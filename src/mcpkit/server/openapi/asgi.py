"""An API served in the same process: what ``MCPKit.from_fastapi`` and ``MCPKit.from_asgi`` call, without a socket.

:class:`InProcessTransport` is an ``httpx`` transport that hands each request to an ASGI app as a server would,
and streams its answer back: the app's body chunks pass through a queue of at most :data:`STREAM_CHUNKS` of them
(the app waits while the reader is behind), so a large or endless answer stops at the reader's bound
(``max_response_bytes``) and the app is cancelled there, rather than being gathered whole in memory first (as
``httpx.ASGITransport`` does). An exception in the app before it answered is a 500 answer (and a log record), as
uvicorn gives; one after the answer started breaks the answer off. What the app does after its answer (FastAPI's
background tasks run in the same ASGI call, after the last body chunk) runs to its end, as under a server: at most
:data:`BACKGROUND_LIMIT` such calls at once, waited for at shutdown within :data:`SHUTDOWN_GRACE`.

:class:`AppLifespan` runs the app's ASGI lifespan (startup, shutdown) inside the MCP app's: a failed startup is
raised from the MCP server's start, and so is one that does not complete within ``startup_timeout`` seconds
(:data:`STARTUP_TIMEOUT` unless ``from_asgi(..., startup_timeout=)`` says otherwise); the state the lifespan sets
(Starlette's ``yield {...}``) is in every request's ``scope["state"]``, as uvicorn gives it.

A ``client=`` of the caller's own is checked at that startup to send its requests through this app's
:class:`InProcessTransport`: one request through it, addressed to :data:`INTERNAL_ORIGIN` and marked as the
check, which an :class:`InProcessTransport` answers itself (the app never sees it) with itself in the answer's
``extensions``; any other answer, or none within :data:`PROBE_TIMEOUT` seconds, refuses the client.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx

from ..._asgi import ASGIApp, Message

logger: logging.Logger = logging.getLogger("mcpkit.server.openapi")


INTERNAL_ORIGIN = "http://asgi.internal"
"""The origin requests to an in-process API are addressed to (``.internal`` is reserved for private use: no
request can reach a real host through it, and none leaves the process)."""
STREAM_CHUNKS = 8
"""Body chunks of an in-process answer held between the API app and the reader (the app waits for room)."""
SHUTDOWN_GRACE = 5.0
"""Seconds the API app's lifespan may take to shut down before it is cancelled (and, before that, as long for the
work the app still does after its answers)."""
STARTUP_TIMEOUT = 60.0
"""Seconds the API app's lifespan startup may take (``from_asgi(..., startup_timeout=)``): past it, the MCP
server's start fails with an error naming the app, and the app's lifespan is cancelled."""
PROBE_TIMEOUT = 5.0
"""Seconds the check of a ``client=`` (the answer to its request through its transport) may take."""
BACKGROUND_LIMIT = 64
"""Calls of the API app still running after their answer was read whole (FastAPI's background tasks): past it,
the newest such work is cancelled (and a warning logged)."""

_PROBE_HEADER = "x-mcpkit-in-process-check"
_PROBE = secrets.token_hex(16)  # (the check's mark: no request mcpkit builds for a tool carries it)
_END = b""
_BROKEN = None  # (queue markers: the answer ended; the app broke off)


class _Exchange:
    """One request handed to the app: its ``receive``/``send``, and the answer as the app sends it."""

    def __init__(self, request: httpx.Request) -> None:
        stream: Any = request.stream
        self._body: AsyncIterator[bytes] = stream.__aiter__()
        self._request_done = False
        self._head = request.method == "HEAD"
        self.start: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] = asyncio.get_running_loop().create_future()
        self.chunks: asyncio.Queue[bytes | None] = asyncio.Queue(STREAM_CHUNKS)
        self.finished = False
        self.closed = asyncio.Event()  # the reader is done with the answer

    async def receive(self) -> Message:
        if not self._request_done:
            try:
                chunk = await self._body.__anext__()
            except StopAsyncIteration:
                self._request_done = True
                return {"type": "http.request", "body": b"", "more_body": False}
            return {"type": "http.request", "body": chunk, "more_body": True}
        await self.closed.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            if self.start.done():
                raise RuntimeError("the app started its answer twice")
            headers = [(bytes(k), bytes(v)) for k, v in message.get("headers", ())]
            self.start.set_result((int(message["status"]), headers))
        elif kind == "http.response.body":
            if not self.start.done() or self.finished:
                raise RuntimeError("the app sent a body outside its answer")
            if self.closed.is_set():
                return  # (the reader stopped reading: what follows goes nowhere)
            body = bytes(message.get("body", b""))
            if body and not self._head:
                await self.chunks.put(body)  # (waits while the reader is STREAM_CHUNKS behind)
            if not message.get("more_body", False):
                self.finished = True
                await self.chunks.put(_END)
        else:
            raise RuntimeError(f"an in-process answer cannot carry {kind!r}")

    async def run(self, app: ASGIApp, scope: Message) -> None:
        try:
            await app(scope, self.receive, self.send)
        except Exception:
            logger.exception("openapi: the in-process API failed on %s %s", scope["method"], scope["path"])
        finally:
            if not self.start.done():  # (no answer at all: a 500, as a server gives)
                self.start.set_result((500, [(b"content-type", b"text/plain; charset=utf-8")]))
                self.chunks.put_nowait(b"Internal Server Error")
                self.chunks.put_nowait(_END)


class _Answer(httpx.AsyncByteStream):
    """The body of an in-process answer, chunk by chunk as the app sends it; closing it before the app finished
    its answer cancels the app (one that finished goes on with what it does after its answer)."""

    def __init__(self, exchange: _Exchange, task: asyncio.Task[None], transport: InProcessTransport) -> None:
        self._exchange = exchange
        self._task = task
        self._transport = transport

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            chunk = await self._next()
            if chunk is None:  # (_BROKEN)
                raise httpx.ReadError("the in-process API broke off its answer")
            if chunk == _END:
                return
            yield chunk

    async def _next(self) -> bytes | None:
        """The next chunk: ``_END`` after the last, ``_BROKEN`` when the app ended without finishing."""
        chunks = self._exchange.chunks
        if not chunks.empty():
            return chunks.get_nowait()
        getter = asyncio.ensure_future(chunks.get())
        try:
            await asyncio.wait({getter, self._task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not getter.done():
                getter.cancel()
        if getter.done() and not getter.cancelled():
            return getter.result()
        if not chunks.empty():
            return chunks.get_nowait()
        return _END if self._exchange.finished else _BROKEN

    async def aclose(self) -> None:
        self._exchange.closed.set()
        if self._exchange.finished and not self._task.done():
            self._transport.after_answer(self._task)
        else:
            self._task.cancel()


class InProcessTransport(httpx.AsyncBaseTransport):
    """An ``httpx`` transport that serves each request with the ASGI ``app`` in this process (see the module
    docstring): ``httpx.AsyncClient(transport=InProcessTransport(api), headers=...)`` is the ``client=`` of
    ``MCPKit.from_fastapi(api, client=...)`` when the API's requests need headers or auth of their own."""

    def __init__(self, app: ASGIApp) -> None:
        self.app: ASGIApp = app
        self.state: dict[str, Any] = {}  # (what the app's lifespan put in its scope's "state": each request a copy)
        self._after: set[asyncio.Task[None]] = set()  # (calls still running after their answer: BACKGROUND_LIMIT)
        self.root_path: str = ""
        """The path the app is served under (``from_asgi`` sets it from the document's server URL, e.g. ``/api``):
        a request under it carries it as the scope's ``root_path``, its ``path`` whole, as a server behind a proxy
        gives (``uvicorn --root-path``), so the app routes the rest."""

    def after_answer(self, task: asyncio.Task[None]) -> None:
        """Let ``task``, a call of the app whose answer was read whole, run to its end (at most
        :data:`BACKGROUND_LIMIT` at once: past it, this one is cancelled)."""
        if len(self._after) >= BACKGROUND_LIMIT:
            logger.warning(
                "openapi: %d calls of the in-process API are already running after their answers; the work of "
                "this one is cancelled",
                len(self._after),
            )
            task.cancel()
            return
        self._after.add(task)
        task.add_done_callback(self._after.discard)

    async def drain(self) -> None:
        """Wait for the calls still running after their answers, at most :data:`SHUTDOWN_GRACE` seconds, then
        cancel them."""
        if not self._after:
            return
        running = set(self._after)
        try:
            _, pending = await asyncio.wait(running, timeout=SHUTDOWN_GRACE)
        except BaseException:  # (this shutdown cancelled: the work does not outlive it)
            for task in running:
                task.cancel()
            raise
        if pending:
            logger.warning(
                "openapi: %d calls of the in-process API were still running after their answers %g s into the "
                "shutdown; cancelled",
                len(pending),
                SHUTDOWN_GRACE,
            )
            for task in pending:
                task.cancel()
            await asyncio.wait(pending, timeout=1.0)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Hand ``request`` to the app; the answer as soon as the app starts it (its body streams). The check of a
        ``client=`` (:func:`transport_of`) is answered here, with this transport, and never reaches the app."""
        if request.headers.get(_PROBE_HEADER) == _PROBE:
            return httpx.Response(204, extensions={_PROBE_HEADER: self}, request=request)
        url = request.url
        root = self.root_path
        scope: Message = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": request.method,
            "scheme": url.scheme,
            "path": url.path,
            "raw_path": url.raw_path.split(b"?")[0],
            "query_string": url.query,
            "root_path": root if url.path == root or url.path.startswith(root + "/") else "",
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "server": (url.host, url.port or 80),
            "client": ("127.0.0.1", 0),
            "state": dict(self.state),
        }
        exchange = _Exchange(request)
        task = asyncio.ensure_future(exchange.run(self.app, scope))
        try:
            status, headers = await exchange.start
        except BaseException:
            exchange.closed.set()
            task.cancel()
            raise
        return httpx.Response(status, headers=headers, stream=_Answer(exchange, task, self), request=request)


class AppLifespan:
    """Runs the ASGI lifespan of ``transport``'s app: :meth:`startup` and :meth:`shutdown`, as a server would
    (an app that does not speak the lifespan protocol is served without one). ``name`` names the app in errors;
    ``startup_timeout``: seconds its startup may take. With a ``client`` of the caller's own, the transport is
    the one that client sends through, found (and checked to be ``app``'s) at each startup: :func:`transport_of`."""

    # (one run's exchange with the app: made anew by each startup)
    _inbox: asyncio.Queue[Message]
    _outbox: asyncio.Queue[Message | None]
    _received: bool
    _error: BaseException | None

    def __init__(
        self,
        transport: InProcessTransport,
        *,
        name: str,
        startup_timeout: float = STARTUP_TIMEOUT,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.transport: InProcessTransport = transport
        self.name = name
        self.startup_timeout = startup_timeout
        self._client = client
        self._task: asyncio.Task[None] | None = None

    async def _receive(self) -> Message:
        self._received = True
        return await self._inbox.get()

    async def _send(self, message: Message) -> None:
        await self._outbox.put(message)

    async def _run(self) -> None:
        state = self.transport.state
        state.clear()
        scope: Message = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": state}
        try:
            await self.transport.app(scope, self._receive, self._send)
        except Exception as exc:
            self._error = exc
        finally:
            self._outbox.put_nowait(None)

    async def startup(self) -> None:
        """Start the app: its lifespan's startup has completed when this returns; its failure is raised here, and
        so is a startup that did not complete within ``startup_timeout`` seconds (the lifespan cancelled)."""
        if self._client is not None:
            root = self.transport.root_path
            self.transport = await transport_of(self._client, self.transport.app)
            self.transport.root_path = root
        self._inbox, self._outbox = asyncio.Queue(), asyncio.Queue()
        self._received, self._error = False, None
        self._task = task = asyncio.ensure_future(self._run())
        await self._inbox.put({"type": "lifespan.startup"})
        try:
            async with asyncio.timeout(self.startup_timeout):
                message = await self._outbox.get()
        except TimeoutError:
            self._task = None
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)  # (its cleanup runs now; one that ignores cancelling is left)
            raise TimeoutError(
                f"the API app {self.name}: its startup did not complete within {self.startup_timeout:g} s "
                "(from_asgi(..., startup_timeout=) allows longer)"
            ) from None
        except BaseException:  # (this startup cancelled: the app's lifespan does not outlive it)
            self._task = None
            task.cancel()
            raise
        if message is None:  # (the app ended without answering)
            self._task = None
            if self._error is not None and self._received:
                raise self._error
            if self._error is not None:
                logger.info("openapi: the API app does not run a lifespan (%r); served without one", self._error)
            return
        if message["type"] == "lifespan.startup.complete":
            return
        task, self._task = self._task, None
        done, _ = await asyncio.wait({task}, timeout=1.0)  # (Starlette raises its error right after saying so)
        if not done:
            task.cancel()
        if self._error is not None:
            raise self._error
        raise RuntimeError(f"the API app's startup failed: {message.get('message') or message['type']}")

    async def shutdown(self) -> None:
        """Shut the app down (its failure to do so is logged: the MCP server stops all the same), once the work
        it still does after its answers ended (or was cancelled after :data:`SHUTDOWN_GRACE`)."""
        await self.transport.drain()
        task, self._task = self._task, None
        if task is None:
            return
        try:
            async with asyncio.timeout(SHUTDOWN_GRACE):
                if not task.done():
                    await self._inbox.put({"type": "lifespan.shutdown"})
                    message = await self._outbox.get()
                    if message is not None and message["type"] == "lifespan.shutdown.failed":
                        logger.error("openapi: the API app's shutdown failed: %s", message.get("message", ""))
                await asyncio.wait({task})
        except TimeoutError:
            logger.warning("openapi: the API app's lifespan did not end within %g s; cancelled", SHUTDOWN_GRACE)
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)  # (its cleanup runs now; one that ignores cancelling is left)
        except BaseException:  # (this shutdown cancelled: the app's lifespan does not outlive it)
            task.cancel()
            raise
        self.transport.state.clear()


async def transport_of(client: httpx.AsyncClient, app: Any) -> InProcessTransport:
    """The :class:`InProcessTransport` of ``app`` that ``client`` sends :data:`INTERNAL_ORIGIN` requests through
    (a ``ValueError`` saying what to do when it sends them anywhere else): asked with one request through
    ``client``, marked as the check, that only an :class:`InProcessTransport` answers (with itself), within
    :data:`PROBE_TIMEOUT` seconds."""
    used: object = None
    probe = client.build_request("GET", INTERNAL_ORIGIN + "/")
    for name in list(probe.headers):  # (none of the client's headers, cookies or credentials: the check's mark only,
        del probe.headers[name]  # should a client that sends elsewhere reach a host by that name)
    probe.headers.update({"Host": probe.url.netloc.decode("ascii"), _PROBE_HEADER: _PROBE})
    try:
        async with asyncio.timeout(PROBE_TIMEOUT):
            answer = await client.send(probe, auth=None, follow_redirects=False)
            await answer.aclose()
        used = answer.extensions.get(_PROBE_HEADER)
    except (httpx.HTTPError, OSError, TimeoutError) as exc:  # (another transport: it could not reach the origin)
        logger.debug("openapi: the check of client= got no answer from an in-process transport: %r", exc)
    if not isinstance(used, InProcessTransport) or used.app is not app:
        raise ValueError(
            "client= must send its requests to the app itself: build it with "
            "httpx.AsyncClient(transport=InProcessTransport(app), ...) "
            "(from mcpkit.server.openapi import InProcessTransport), with this same app"
        )
    return used


def in_process(cls: Any, app: Any, spec: Any, client: httpx.AsyncClient | None, options: dict[str, Any]) -> Any:
    """What ``MCPKit.from_asgi`` builds (see it): the MCP app, its client on ``app``'s transport, ``app``'s
    lifespan one of the MCP app's."""
    from .build import joined
    from .document import Document, load

    asgi_app: ASGIApp = app
    if not callable(asgi_app):
        raise TypeError(f"from_asgi needs an ASGI app (a callable), not a {type(app).__name__}")
    for option in ("base_url", "allowed_origins"):
        if option in options:
            raise TypeError(f"from_asgi takes no {option}=: every request goes to the app itself")
    startup_timeout = float(options.pop("startup_timeout", STARTUP_TIMEOUT))
    if not startup_timeout > 0:
        raise ValueError(f"startup_timeout must be more than 0 seconds, not {startup_timeout:g}")
    own = client  # (checked at startup to send through this app's transport: AppLifespan, transport_of)
    transport = InProcessTransport(asgi_app)
    if client is None:
        client = httpx.AsyncClient(transport=transport, base_url=INTERNAL_ORIGIN)
    doc = Document(load(spec))
    base_url = joined(INTERNAL_ORIGIN, doc.server_url())
    transport.root_path = urlsplit(base_url).path.rstrip("/")
    built = cls.from_openapi(doc.raw, client=client, base_url=base_url, **options)
    title = doc.raw.get("info", {}).get("title") if isinstance(doc.raw.get("info"), dict) else None
    name = f"{type(app).__name__} {title!r}" if isinstance(title, str) and title else type(app).__name__
    built._lifespan.add_child(AppLifespan(transport, name=name, startup_timeout=startup_timeout, client=own))
    built._lazy_lifespan = built._lifespan  # (a transport that never says it starts: the first request starts it)
    return built


__all__ = [
    "BACKGROUND_LIMIT",
    "INTERNAL_ORIGIN",
    "PROBE_TIMEOUT",
    "SHUTDOWN_GRACE",
    "STARTUP_TIMEOUT",
    "STREAM_CHUNKS",
    "AppLifespan",
    "InProcessTransport",
    "in_process",
    "transport_of",
]
