"""The runner: one ``Checker`` made of every group of checks, and the order (a registry) it runs them in."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ...protocol.versions import (
    LATEST_HANDSHAKE,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    V2026_07_28,
    Features,
    features,
)
from ..report import Report
from ..wire import Wire, WireClosed, server_argv
from ..wire_http import HttpWire
from ._base import (
    CLIENT_INFO,
    JSON,
    error_code,
    result_of,
    shortened,
)
from .auth import AuthChecks
from .envelope import EnvelopeChecks
from .http import HttpChecks
from .http_sessions import HttpSessionChecks
from .lifecycle import LifecycleChecks
from .messages import MessageChecks
from .modern import ModernChecks
from .prompts import PromptChecks
from .resources import ResourceChecks
from .rules import RuleChecks
from .tools import ToolChecks
from .utilities import UtilityChecks

#: One check of a session: called with the checker and an initialized wire; a coroutine is awaited.
SessionCheck = Callable[["Checker", Wire], Awaitable[None] | None]


async def _http_only(checker: Checker, wire: Wire) -> None:
    if isinstance(wire, HttpWire):
        checker.first_session_id = wire.session_id
        await checker.check_http(wire)


class Checker(
    LifecycleChecks,
    ToolChecks,
    ResourceChecks,
    PromptChecks,
    UtilityChecks,
    HttpChecks,
    HttpSessionChecks,
    AuthChecks,
    RuleChecks,
    EnvelopeChecks,
    MessageChecks,
    ModernChecks,
):
    """Runs every check against one target (a command line, or an http(s)/ws(s) URL)."""

    caps: JSON
    feats: Features
    tools: list[Any]
    prompts: list[Any]
    templates: list[Any]
    progress_tokens: dict[str, Any]

    first_session_id: str | None = None

    async def run(self) -> Report:
        """Run every check; the report is also ``self.report``."""
        r = self.report
        r.info["requested protocol version"] = self.version
        try:
            protected = self.transport == "http" and await self.check_auth()
            if protected and "Authorization" not in self.headers and self.auth is None:
                r.info["aborted"] = (
                    "the server requires authorization; its authorization rules were checked, the rest needs a "
                    "token (--token)"
                )
                return r
            try:
                wire = await self.open_wire()
            except (OSError, ValueError) as exc:
                if self.transport != "stdio":  # (legacy SSE, WebSocket) refused, or no stream or handshake there
                    r.info["no MCP endpoint"] = shortened(str(exc), 200)
                    r.info["aborted"] = (
                        f"no MCP endpoint at {self.target}: {shortened(str(exc), 200)}; nothing was checked"
                    )
                    return r
                r.fail("M013", f"could not start the server: {exc}", "launch")
                r.info["aborted"] = "the server could not be started; nothing else was checked"
                return r
            try:
                ok = await self.check_handshake(wire)
                if ok:
                    await self.run_session_checks(wire, SESSION_CHECKS)
            finally:
                await asyncio.sleep(0.2)
                await wire.close()
            if "no MCP endpoint" in r.info:  # what answered is no MCP server: none of it is judged
                return r
            self.check_stdio_mays(wire)
            if ok:
                await self.check_versions()
                await self.check_lifecycle_rules()
                await self.check_capabilities_respected()
                if self.transport == "http":
                    await self.check_http_sessions(self.first_session_id)
            if self.modern_pass and self.transport != "sse":
                await self.check_modern()
            if ok:
                await self.check_with_client()
            self.judge_capabilities()
            self.check_messages()
        finally:
            r.finish()
        return r

    async def run_session_checks(self, wire: Wire, checks: Sequence[tuple[str, SessionCheck]]) -> None:
        """Run ``checks`` in order on ``wire``. A server that ends the session part-way (its process exits on
        malformed input, its connection drops) ends the checks that need it, not the run: the checks that judge
        what was recorded still run, the report says where the session ended, and the later sessions go on."""
        ended_in: str | None = None
        previous = "handshake"
        skipped: list[str] = []
        for area, check in checks:
            if ended_in is None and not wire.alive:
                ended_in = previous
            if ended_in is not None and area not in RECORDED_ONLY:
                skipped.append(area)  # its silence would be judged as the server's answer to each request
                continue
            try:
                pending = check(self, wire)
                if pending is not None:
                    await pending
            except WireClosed:
                ended_in = area
            previous = area
        if ended_in is not None:
            self.report.info.setdefault(
                "session closed",
                f"{self.report.prefix}the server ended the session during the {ended_in} checks; the checks of that "
                f"session after them ({', '.join(skipped) or 'none'}) did not run",
            )

    async def check_with_client(self) -> None:
        """Where no wire control is needed: connect with mcpkit's own high-level client (era negotiation, typed
        and validated results, pagination) and record what it saw. Informational, besides S021 on a failure."""
        from ...client.client import Client

        target: Any
        if self.transport == "stdio":
            target = server_argv(self.target)
        else:
            target = {"type": self.transport, "url": self.target, "headers": self.headers}
        try:
            async with asyncio.timeout(30):
                options = {"auth": self.auth} if self.auth is not None and self.transport == "http" else None
                client = Client(
                    target,
                    env=self.env,
                    cwd=self.cwd,
                    reconnect=False,
                    timeout=self.timeout,
                    transport_options=options,
                )
                async with client:
                    tools = await client.list_tools() if "tools" in client.server_capabilities else []
                    prompts = await client.list_prompts() if "prompts" in client.server_capabilities else []
                    self.report.info["mcpkit client"] = (
                        f"connected at {client.protocol_version}; {len(tools)} tool(s), {len(prompts)} prompt(s)"
                    )
        except Exception as exc:  # report it; the raw checks above are the verdict
            self.report.info["mcpkit client"] = f"failed: {type(exc).__name__}: {shortened(str(exc), 200)}"

    async def check_modern(self) -> None:
        """If the server offers 2026-07-28 (``server/discover``), run the feature checks again in a stateless
        session (per-request ``_meta``; on HTTP the standard headers). Findings carry a ``[2026-07-28]`` prefix."""
        r = self.report
        try:
            wire = await self.open_wire()
        except (OSError, ValueError):
            return
        wire.modern_meta = {
            META_PROTOCOL_VERSION: V2026_07_28,
            META_CLIENT_CAPABILITIES: {},
            META_CLIENT_INFO: CLIENT_INFO,
        }
        saved = (self.caps, self.feats, self.tools, self.prompts, self.templates, self.progress_tokens)
        r.prefix = f"[{V2026_07_28}] "
        try:
            resp = await self.call(wire, "server/discover", {})
            res = result_of(resp)
            versions = res.get("supportedVersions") if res else None
            if res is None or not isinstance(versions, list) or V2026_07_28 not in versions:
                r.info[V2026_07_28] = f"not offered (server/discover -> {resp.short(120) if resp else 'no response'})"
                return
            r.info[V2026_07_28] = f"offered; supportedVersions {versions}"
            self.check_discover(resp, res)
            r.prefix = ""
            self.judge_echo_against_discover(versions)
            r.prefix = f"[{V2026_07_28}] "
            caps = res.get("capabilities")
            self.caps = caps if isinstance(caps, dict) else {}
            self.feats = features(V2026_07_28)
            self.tools, self.prompts, self.templates, self.progress_tokens = [], [], [], {}
            await self.check_modern_version(wire)
            await self.check_modern_http(wire)
            resp = await self.call(wire, "mcpkit-check/no-such-method", {})
            if error_code(resp) == -32601:
                r.ok("S021", "unknown method -> -32601 Method not found", "unknown method")
            else:
                r.fail("S021", f"unknown method not answered with -32601: {resp.short() if resp else 'no response'}")
            await self.run_session_checks(wire, MODERN_CHECKS)
            if self.modern_only and isinstance(wire, HttpWire):  # (else the handshake session judged them)
                await self.check_stateless_http(wire)
        finally:
            r.prefix = ""
            self.caps, self.feats, self.tools, self.prompts, self.templates, self.progress_tokens = saved
            await wire.close()


#: The registry: the checks run, in this order, on the first (handshake-era) session once initialize succeeded.
#: Each entry is (area, check); a new check joins a group's module and gets a line here.
SESSION_CHECKS: tuple[tuple[str, SessionCheck], ...] = (
    ("basics", LifecycleChecks.check_basics),
    ("tools", ToolChecks.check_tools),
    ("resources", ResourceChecks.check_resources),
    ("prompts", PromptChecks.check_prompts),
    ("completion", PromptChecks.check_completion),
    ("logging", PromptChecks.check_logging),
    ("cancellation", UtilityChecks.check_cancellation),
    ("client_requests", RuleChecks.check_client_requests),
    ("malformed", LifecycleChecks.check_malformed),
    ("http", _http_only),
    ("envelope", EnvelopeChecks.check_envelope),
    ("progress", UtilityChecks.check_progress),
    ("list_changed", UtilityChecks.check_list_changed),
)

#: The areas that only judge what the session recorded: they still run after the server ended the session.
RECORDED_ONLY = frozenset(("progress", "list_changed"))

#: The feature checks run again in a stateless (2026-07-28) session when the server offers that era.
MODERN_CHECKS: tuple[tuple[str, SessionCheck], ...] = (
    ("tools", ToolChecks.check_tools),
    ("client_requests", RuleChecks.check_client_requests),
    ("resources", lambda checker, wire: checker.check_resources(wire, subscribe=False)),
    ("prompts", PromptChecks.check_prompts),
    ("completion", PromptChecks.check_completion),
    ("malformed", LifecycleChecks.check_malformed),
    ("progress", UtilityChecks.check_progress),
)


async def run_checks(
    target: str | Sequence[str],
    *,
    protocol_version: str = LATEST_HANDSHAKE,
    timeout: float = 10.0,
    env: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    cwd: str | None = None,
    modern: bool = True,
    transport: str | None = None,
    token: str | None = None,
    auth: Any = None,
) -> Report:
    """Run every check against ``target`` and return the report.

    Args:
        target: a command line (or argv list) run over stdio, or a URL: ``http(s)://`` Streamable HTTP (legacy
            HTTP+SSE when its path ends in ``/sse``), ``ws(s)://`` WebSocket.
        protocol_version: the revision the handshake-era session asks for.
        timeout: seconds to wait for each answer.
        env: the environment of a stdio server (default: this process's).
        headers: HTTP headers sent to the target's own origin only.
        cwd: the working directory of a stdio server.
        modern: also check, in a stateless session, a server that offers 2026-07-28.
        transport: ``stdio``, ``http``, ``sse`` or ``ws``, overriding the guess from ``target``.
        token: sent as ``Authorization: Bearer`` to the target's own origin.
        auth: an ``httpx.Auth`` (such as :class:`mcpkit.auth.OAuthClient`) authorizing the Streamable HTTP sessions.

    The parameters are those of :class:`Checker`; ``run_checks(...)`` is ``await Checker(...).run()``.
    """
    return await Checker(
        target,
        protocol_version=protocol_version,
        timeout=timeout,
        env=env,
        headers=headers,
        cwd=cwd,
        modern=modern,
        transport=transport,
        token=token,
        auth=auth,
    ).run()
