"""``Server.run`` and ``Server.run_stdio_async``: serving a server on a transport chosen by name.

A base class of :class:`~mcpkit.server.lowlevel.Server`. Both methods hand the server to :mod:`mcpkit.run`, the face
that owns the transports, through an import inside the method: the one place ``server/`` names a module above
it, and it closes no circle (``mcpkit.run`` and the transports hold the server only through the protocols of
:mod:`mcpkit.hosting`). The overloads give each transport its own typed options, so a type checker knows that
``port`` belongs to ``run("http", ...)`` and not to ``run()``; ``mcpkit.run`` checks the same names at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Unpack, overload

if TYPE_CHECKING:
    from ..hosting import HostedServer
    from ..run import RunHTTPOptions, StdioOptions, TransportName

__all__ = ["Runnable"]


class Runnable:
    """What serves a server by transport name (a base of ``Server``)."""

    def component_names(self) -> list[str]:
        """What it serves, by name, for the app's fingerprint under a shared Redis prefix (see
        :class:`~mcpkit.hosting.HostedServer`): none here (a low-level server's components are its handlers');
        ``MCPKit`` lists its registries."""
        return []

    async def run_stdio_async(self: HostedServer, **transport_options: Unpack[StdioOptions]) -> None:
        """Serve stdin/stdout until the input ends (``transport_options`` go to the stdio transport)."""
        from ..run import run_stdio_async  # the face that owns the transports: server/ imports none of them

        await run_stdio_async(self, **transport_options)

    @overload
    def run(self: HostedServer, transport: Literal["stdio"] = "stdio", **options: Unpack[StdioOptions]) -> None: ...

    @overload
    def run(
        self: HostedServer,
        transport: Literal["http", "streamable-http", "sse", "ws"],
        **options: Unpack[RunHTTPOptions],
    ) -> None: ...

    def run(self: HostedServer, transport: TransportName = "stdio", **options: Any) -> None:
        """Run the server (blocking). ``transport``: "stdio" (default), or "http", "sse", "ws" (needs mcpkit[http];
        without it the program exits with one line naming ``pip install 'mcpkit[http]'``); ``options`` go to the
        transport (stdio: :class:`~mcpkit.run.StdioOptions`; HTTP: ``host``, ``port`` and the rest of
        :class:`~mcpkit.transports.http.options.RunHTTPOptions`). A misspelled option is a ``TypeError`` naming
        the closest valid one, raised here, before anything is served. Delegates to :func:`mcpkit.run.run`."""
        from ..run import run

        run(self, transport, **options)
