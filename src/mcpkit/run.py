"""Running a server on a transport: the one place that chooses a transport by name.

``Server.run()`` and ``MCPKit.run()`` delegate here. This module and the transports hold a server only through the
protocols of :mod:`mcpkit.hosting`, so the arrows run server -> run -> transports -> hosting -> engine -> protocol
and none comes back up: no import circle.

    from mcpkit.run import run
    run(server)                       # stdio
    run(server, "http", port=8000)    # Streamable HTTP (needs mcpkit[http]); also "sse", "ws"

Every option is checked before anything is served: a misspelled one (``port=`` given to stdio, ``prot=`` to
HTTP) is a ``TypeError`` naming the closest valid option, raised by ``run`` itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict, Unpack, overload

from ._options import check_choice, check_options
from ._runtime import DEFAULT_WORKER_GRACE, install_pool, pool_of

if TYPE_CHECKING:
    from .hosting import HostedServer
    from .transports.http.options import RunHTTPOptions as RunHTTPOptions

__all__ = ["TRANSPORTS", "StdioOptions", "TransportName", "run", "run_stdio_async"]

#: The transports a server runs on by name: ``"stdio"``, or one of the HTTP ones (``"http"`` is Streamable HTTP;
#: ``"streamable-http"`` is the same; legacy ``"sse"``; ``"ws"``), which one ASGI app serves together.
TransportName: TypeAlias = Literal["stdio", "http", "streamable-http", "sse", "ws"]
TRANSPORTS: tuple[str, ...] = ("stdio", "http", "streamable-http", "sse", "ws")


class StdioOptions(TypedDict, total=False):
    """What ``app.run()`` (stdio) takes: the options of :class:`~mcpkit.transports.stdio.StdioServerTransport`."""

    max_message_size: int
    """Longest line accepted, bytes (default 4 MiB): a longer one is answered with an error, not read."""
    guard_stdout: bool
    """Move the real stdout aside so a stray ``print`` goes to stderr, not into the protocol (default True)."""
    stdin: IO[bytes] | None
    """Read from this binary stream instead of the process's stdin."""
    stdout: IO[bytes] | None
    """Write to this binary stream instead of the process's stdout."""
    worker_grace: float
    """Seconds the calls in flight get at SIGTERM to finish and be answered, and the sync functions still running
    on worker threads once serving has ended (one span, begun at the SIGTERM), before the process exits without
    waiting for them (default 1; see the transports guide)."""
    drain_timeout: float
    """Seconds the requests already received get to finish and be answered once stdin ends, before they are
    cancelled (default 30; a SIGTERM meanwhile leaves them ``worker_grace`` from then; see the transports guide)."""


_STDIO_KEYS = StdioOptions.__optional_keys__
DEFAULT_STDIO_DRAIN = 30.0
"""Seconds the requests in flight when stdin ends get to be answered (``drain_timeout``; a patient client that
closed stdin gets its answers, and a client that follows the spec sends SIGTERM 2 s later, which cuts it short)."""
_HTTP_ONLY_HINT = "an option of the HTTP transports (app.run('http', {name}=...)), not of stdio"


async def run_stdio_async(server: HostedServer, **transport_options: Unpack[StdioOptions]) -> None:
    """Serve ``server`` on stdin/stdout until the input ends, then shut it down (``close_listeners``: the tasks
    still running get their drain time); ``transport_options`` go to
    :class:`~mcpkit.transports.stdio.StdioServerTransport`.

    ``worker_grace=``: make a :class:`~mcpkit._runtime.WorkerPool` with that grace the running loop's default
    executor (``run()`` always does, with 1 s by default): at the end of ``asyncio.run`` the sync functions still
    running on worker threads are waited for that long at most, instead of until they return.
    ``drain_timeout=``: seconds the requests in flight when stdin ends get to be answered (30 by default)."""
    from .transports.stdio import StdioServerTransport

    check_options("the stdio transport", transport_options, _STDIO_KEYS, _stdio_hints(transport_options))
    options: dict[str, Any] = dict(transport_options)
    grace = options.pop("worker_grace", None)
    drain = options.pop("drain_timeout", DEFAULT_STDIO_DRAIN)
    if not isinstance(drain, (int, float)) or isinstance(drain, bool) or not drain >= 0:
        raise ValueError(f"drain_timeout must be a number of seconds, 0 or more, not {drain!r}")
    if grace is not None:
        install_pool(grace)
    stop_grace = DEFAULT_WORKER_GRACE if grace is None else float(grace)
    transport = StdioServerTransport(**options)
    await transport.start()
    terminated = _TerminateOnSigterm()
    try:
        await server.serve(transport, drain_timeout=float(drain), stop_grace=stop_grace)
    except asyncio.CancelledError:
        if not terminated.stopped():  # (a cancellation of our own caller's: it goes on)
            raise
    finally:
        terminated.remove()
        await server.close_listeners()


class _TerminateOnSigterm:
    """SIGTERM, the step after closing stdin in the stdio shutdown sequence (and what process managers send), ends
    serving: the serving task is cancelled, the calls in flight get the worker grace to finish and be answered
    (the grace starts now, for the worker threads too: :meth:`~mcpkit._runtime.WorkerPool.begin_grace`), then
    those still running are cancelled and the server's lifespan is left as at the end of the input (its cleanup
    runs). Installed only where it can be (the main thread of a POSIX process) and only over the default
    disposition (a handler of the program's own is left alone); a second SIGTERM while the first is being
    handled kills the process as usual."""

    def __init__(self) -> None:
        import signal
        import threading

        self._task = asyncio.current_task()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._signalled = False
        if threading.current_thread() is not threading.main_thread() or self._task is None:
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGTERM, self._terminate)
        except (NotImplementedError, RuntimeError, ValueError):  # (Windows, or no signals on this loop)
            return
        self._loop = loop

    def _terminate(self) -> None:
        self._signalled = True
        loop = self._loop
        self.remove()  # the next SIGTERM is the default one: the process ends on the spot
        pool = pool_of(loop) if loop is not None else None
        if pool is not None:
            pool.begin_grace()
        assert self._task is not None
        self._task.cancel()

    def stopped(self) -> bool:
        """Whether SIGTERM ended serving (the cancellation is then taken back: the caller returns normally)."""
        if self._signalled and self._task is not None:
            self._task.uncancel()
        return self._signalled

    def remove(self) -> None:
        """Put the default SIGTERM disposition back."""
        if self._loop is not None:
            import signal

            self._loop.remove_signal_handler(signal.SIGTERM)
            self._loop = None


@overload
def run(server: HostedServer, transport: Literal["stdio"] = "stdio", **options: Unpack[StdioOptions]) -> None: ...


@overload
def run(
    server: HostedServer,
    transport: Literal["http", "streamable-http", "sse", "ws"],
    **options: Unpack[RunHTTPOptions],
) -> None: ...


def run(server: HostedServer, transport: TransportName = "stdio", **options: Any) -> None:
    """Run ``server`` (blocking). ``transport``: "stdio" (default), or "http", "sse", "ws" (needs mcpkit[http];
    without it the program exits with one line naming ``pip install 'mcpkit[http]'``); ``options`` go to the
    transport (stdio: :class:`StdioOptions`; HTTP: ``host``, ``port`` and the rest of
    :class:`~mcpkit.transports.http.options.RunHTTPOptions`), checked before anything is served.

    Ctrl-C ends serving (the server's lifespan is left, its cleanup runs) and the program with exit code 130, as a
    shell reports an interrupted program, without a traceback (``SystemExit(130)``). SIGTERM ends serving and
    ``run`` returns (the code after it and the ``atexit`` handlers run); on stdio the calls in flight get
    ``worker_grace`` seconds (1 by default) to finish and be answered first. Either way the lifespan's cleanup
    waits for the sync functions still running on worker threads within that grace, and the process then exits
    without waiting for them, with one warning naming them."""
    try:
        _run(server, transport, **options)
    except KeyboardInterrupt:
        raise SystemExit(130) from None


def _run(server: HostedServer, transport: TransportName, **options: Any) -> None:
    check_choice("transport", transport, TRANSPORTS)
    if transport == "stdio":
        check_options("the stdio transport", options, _STDIO_KEYS, _stdio_hints(options))
        options.setdefault("worker_grace", DEFAULT_WORKER_GRACE)
        asyncio.run(run_stdio_async(server, **options))
        return
    from .transports.http.options import RunHTTPOptions, keys

    check_options(f"the {transport!r} transport", options, keys(RunHTTPOptions), see="mcpkit.transports.http.options")
    from ._extras import MissingExtra, require

    try:
        require("uvicorn", f"serving over {transport!r}")
        from .transports.http import serve  # type: ignore[attr-defined,import-not-found,unused-ignore]

        serve(server, transport, **options)
    except MissingExtra as exc:
        raise SystemExit(f"mcpkit: {exc}") from None


def _stdio_hints(options: Mapping[str, Any]) -> dict[str, str]:
    """For an option of the HTTP transports given to stdio (``app.run(port=8000)``): which call takes it."""
    if all(name in _STDIO_KEYS for name in options):
        return {}
    from .transports.http.options import RunHTTPOptions, keys

    http = keys(RunHTTPOptions)
    return {name: _HTTP_ONLY_HINT.format(name=name) for name in options if name in http}
