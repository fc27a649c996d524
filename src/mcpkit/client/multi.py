"""Several servers behind one namespace: ``MultiClient({"fs": "npx server-fs /tmp", "web": "https://..."})``.

Tools and prompts are exposed as ``<server><separator><name>`` (default separator ``"__"``, which is valid in every
LLM tool-name alphabet; ``"."`` also works). Resources keep their URIs; the client remembers which server listed
each one and reads a URI only from that server (or from the one named with ``server=``); a URI that no server
listed goes to the server whose resource template has the longest literal prefix of it (``file:///{path}`` routes
``file:///a/b``). A URI listed (or templated) by two servers is a :class:`ResourceCollision` naming both, and a
URI no server claims is an :class:`UnknownResource`: it is never sent to every member (one server must not
answer for another, nor learn what was asked of it). The first read of an unknown URI lists resources and
templates once to learn the owners.

Isolation: servers connect concurrently; one that fails to start, times out, or dies later is recorded in
:attr:`MultiClient.errors` and skipped, and every call that fans out (``list_tools``...) reports per-server errors
instead of failing as a whole. A call routed to a broken server raises :class:`ServerUnavailable`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any, TypeVar, overload

from ..protocol.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND, ConnectionClosed, MCPError
from ..protocol.types import GetPromptResult, Prompt, ReadResourceResult, Resource, ResourceTemplate, Tool
from .client import Client, ResultType, ToolResult
from .targets import load_config

T = TypeVar("T")

__all__ = ["MultiClient", "ResourceCollision", "ServerUnavailable", "UnknownResource"]


class ServerUnavailable(ConnectionError):
    """The named server is not connected (it failed to start or died); ``.cause`` is the original error."""

    def __init__(self, name: str, cause: BaseException | None) -> None:
        self.name = name
        self.cause = cause
        super().__init__(f"server {name!r} is unavailable" + (f": {cause}" if cause is not None else ""))


class ResourceCollision(MCPError):
    """Several servers listed the same resource URI: name the one to read with ``read_resource(uri, server=...)``."""

    def __init__(self, uri: str, servers: list[str]) -> None:
        self.uri = uri
        self.servers = servers
        super().__init__(
            f"the resource {uri!r} is listed by several servers ({', '.join(repr(s) for s in servers)}): "
            f"say which one to read with read_resource({uri!r}, server=NAME)",
            {"uri": uri, "servers": servers},
            code=INVALID_PARAMS,
        )


class UnknownResource(MCPError):
    """No connected server listed this URI (it is not sent to every server to find out)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        super().__init__(
            f"no server listed the resource {uri!r}: call list_resources() first, or name the server with "
            f"read_resource({uri!r}, server=NAME)",
            {"uri": uri},
            code=RESOURCE_NOT_FOUND,
        )


def _fatal(exc: BaseException) -> bool:
    """Errors after which the server's connection is considered dead (not a mere MCP error answer)."""
    return isinstance(exc, (ConnectionError, OSError)) and not isinstance(exc, MCPError)


class MultiClient:
    """A client for many servers at once.

    Args:
        servers: ``{name: target}`` (any :class:`Client` target), an ``{"mcpServers": {...}}`` document, or the
            path of an ``mcp.json`` file.
        separator: joins server and tool/prompt names (default ``"__"``).
        connect_timeout: per-server bound on connecting.
        **client_options: passed to every :class:`Client` (handlers, timeout, ...).
    """

    def __init__(
        self,
        servers: Mapping[str, Any] | str,
        *,
        separator: str = "__",
        connect_timeout: float | None = 30.0,
        **client_options: Any,
    ) -> None:
        if isinstance(servers, str):
            servers = load_config(servers)
        elif "mcpServers" in servers and isinstance(servers["mcpServers"], Mapping):
            servers = servers["mcpServers"]
        if not separator:
            raise ValueError("separator must not be empty")
        for name in servers:
            if separator in name:
                raise ValueError(f"server name {name!r} contains the separator {separator!r}")
        self.targets: dict[str, Any] = dict(servers)
        self.separator = separator
        self.connect_timeout = connect_timeout
        self.client_options = client_options
        self.clients: dict[str, Client] = {}
        self.errors: dict[str, BaseException] = {}
        self._resource_owners: dict[str, set[str]] = {}  # uri -> the servers that listed it
        self._template_prefixes: dict[str, set[str]] = {}  # literal prefix of a template -> its servers
        self._listed = False

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> MultiClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def connect(self) -> None:
        """Connect every server concurrently; failures go to :attr:`errors`."""
        await asyncio.gather(*(self._connect_one(name) for name in self.targets if name not in self.clients))

    async def _connect_one(self, name: str) -> None:
        opts = {"connect_timeout": self.connect_timeout, **self.client_options}
        try:
            client = Client(self.targets[name], **opts)
            await client.connect()
        except Exception as exc:
            self.errors[name] = exc
            return
        self.errors.pop(name, None)
        self.clients[name] = client

    async def reconnect(self, name: str) -> bool:
        """Try to (re)connect one server; True when it is connected afterwards."""
        old = self.clients.pop(name, None)
        if old is not None:
            with contextlib.suppress(Exception):
                await old.aclose()
        await self._connect_one(name)
        return name in self.clients

    async def aclose(self) -> None:
        clients = list(self.clients.values())
        self.clients.clear()
        await asyncio.gather(*(c.aclose() for c in clients), return_exceptions=True)

    @property
    def names(self) -> list[str]:
        return list(self.targets)

    def client(self, name: str) -> Client:
        """The :class:`Client` of one server (raises :class:`ServerUnavailable` when it is not connected)."""
        c = self.clients.get(name)
        if c is None:
            if name not in self.targets:
                raise KeyError(f"no server named {name!r} (have: {', '.join(self.targets)})")
            raise ServerUnavailable(name, self.errors.get(name))
        return c

    def _mark_dead(self, name: str, exc: BaseException) -> None:
        self.errors[name] = exc
        client = self.clients.pop(name, None)
        if client is not None:
            task = asyncio.get_running_loop().create_task(client.aclose())
            task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)

    # ------------------------------------------------------------------ names

    def qualify(self, server: str, name: str) -> str:
        return f"{server}{self.separator}{name}"

    def split(self, qualified: str) -> tuple[str, str]:
        """``"a__tool"`` -> ``("a", "tool")`` (the longest matching server name wins)."""
        best: str | None = None
        for name in self.targets:
            prefix = name + self.separator
            if qualified.startswith(prefix) and (best is None or len(name) > len(best)):
                best = name
        if best is None:
            raise KeyError(f"{qualified!r} does not start with a server name and {self.separator!r}")
        return best, qualified[len(best) + len(self.separator) :]

    # ------------------------------------------------------------------ fan-out

    async def _fan_out(self, op: Any) -> dict[str, Any]:
        names = list(self.clients)

        async def one(name: str) -> Any:
            return await op(self.clients[name])

        results = await asyncio.gather(*(one(n) for n in names), return_exceptions=True)
        out: dict[str, Any] = {}
        for name, res in zip(names, results, strict=True):
            if isinstance(res, BaseException):
                if isinstance(res, asyncio.CancelledError):
                    raise res
                if _fatal(res):
                    self._mark_dead(name, res)
                else:
                    self.errors[name] = res
                continue
            if name in self.errors and name in self.clients:
                self.errors.pop(name, None)
            out[name] = res
        return out

    async def list_tools(self) -> list[Tool]:
        """Every tool of every reachable server, names qualified; per-server failures land in :attr:`errors`."""
        per = await self._fan_out(lambda c: c.list_tools())
        tools: list[Tool] = []
        for server, items in per.items():
            for t in items:
                tools.append(t.model_copy(update={"name": self.qualify(server, t.name)}))
        return tools

    @overload
    async def call_tool(
        self, qualified: str, arguments: Mapping[str, Any] | None = None, *, result_type: type[ResultType[T]], **kw: Any
    ) -> ToolResult[T]: ...

    @overload
    async def call_tool(
        self, qualified: str, arguments: Mapping[str, Any] | None = None, *, result_type: type[T], **kw: Any
    ) -> ToolResult[T]: ...

    @overload
    async def call_tool(
        self, qualified: str, arguments: Mapping[str, Any] | None = None, *, result_type: Any = None, **kw: Any
    ) -> ToolResult[Any]: ...

    async def call_tool(
        self, qualified: str, arguments: Mapping[str, Any] | None = None, *, result_type: Any = None, **kw: Any
    ) -> ToolResult[Any]:
        """Call ``server__tool`` on its server: :meth:`Client.call_tool`, its options included (``result_type=T``
        gives a ``ToolResult[T]``); a server that stopped answering is :class:`ServerUnavailable`."""
        server, name = self.split(qualified)
        client = self.client(server)
        try:
            return await client.call_tool(name, arguments, result_type=result_type, **kw)
        except Exception as exc:
            if _fatal(exc):
                self._mark_dead(server, exc)
                raise ServerUnavailable(server, exc) from exc
            raise

    async def list_prompts(self) -> list[Prompt]:
        per = await self._fan_out(lambda c: c.list_prompts())
        return [p.model_copy(update={"name": self.qualify(s, p.name)}) for s, items in per.items() for p in items]

    async def get_prompt(self, qualified: str, arguments: Mapping[str, Any] | None = None) -> GetPromptResult:
        server, name = self.split(qualified)
        return await self.client(server).get_prompt(name, arguments)

    async def list_resources(self) -> list[tuple[str, Resource]]:
        """``(server, resource)`` pairs; the owner of each URI is remembered for :meth:`read_resource`."""
        per = await self._fan_out(lambda c: c.list_resources())
        owners = self._resource_owners
        for uri in list(owners):  # forget what the servers that answered now no longer list
            owners[uri].difference_update(per)
            if not owners[uri]:
                del owners[uri]
        out: list[tuple[str, Resource]] = []
        for server, items in per.items():
            for r in items:
                owners.setdefault(r.uri, set()).add(server)
                out.append((server, r))
        return out

    async def list_resource_templates(self) -> list[tuple[str, ResourceTemplate]]:
        """``(server, template)`` pairs; each template's literal prefix routes the URIs it produces."""
        per = await self._fan_out(lambda c: c.list_resource_templates())
        prefixes = self._template_prefixes
        for prefix in list(prefixes):
            prefixes[prefix].difference_update(per)
            if not prefixes[prefix]:
                del prefixes[prefix]
        out: list[tuple[str, ResourceTemplate]] = []
        for server, items in per.items():
            for t in items:
                prefix = t.uri_template.split("{", 1)[0]
                if ":" in prefix:  # at least a scheme: a bare "{uri}" claims nothing
                    prefixes.setdefault(prefix, set()).add(server)
                out.append((server, t))
        return out

    def resource_owner(self, uri: str) -> str:
        """The one server that listed ``uri`` (else whose template has the longest literal prefix of it); raises
        :class:`ResourceCollision` when several servers claim it and :class:`UnknownResource` when none does."""
        owners = self._resource_owners.get(uri)
        if not owners:
            best = max((p for p in self._template_prefixes if uri.startswith(p)), key=len, default=None)
            owners = self._template_prefixes[best] if best is not None else None
        if not owners:
            raise UnknownResource(uri)
        if len(owners) > 1:
            raise ResourceCollision(uri, sorted(owners))
        return next(iter(owners))

    async def read_resource(self, uri: str, *, server: str | None = None) -> ReadResourceResult:
        """Read ``uri`` from ``server`` (the namespace), else from the one server that listed it.

        Raises :class:`ResourceCollision` when several servers listed it, :class:`UnknownResource` when none did
        (the URI is never broadcast to every server)."""
        if server is None:
            try:
                server = self.resource_owner(uri)
            except UnknownResource:
                if self._listed:
                    raise
                self._listed = True  # learn the owners once (listing sends no URI to anyone)
                await self.list_resources()
                await self.list_resource_templates()
                server = self.resource_owner(uri)
        return await self.client(server).read_resource(uri)

    async def ping(self) -> dict[str, float | BaseException]:
        """Round-trip time per server, or the error that server gave (never raises for one server)."""
        out: dict[str, float | BaseException] = {}
        per = await self._fan_out(lambda c: c.ping())
        for name in self.targets:
            out[name] = per[name] if name in per else self.errors.get(name, ConnectionClosed("not connected"))
        return out
