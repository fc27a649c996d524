"""Run a client against each scenario's scripted server and judge it (:func:`run_client_checks`).

The client command runs once per scenario, in its own process group through mcpkit's stdio client connection
(``StdioClientTransport``: its output bounded, closed stdin then SIGTERM then SIGKILL, always reaped). Over stdio it
gets the scripted server as a command line (``{server}`` in its arguments, ``$MCPKIT_CHECK_SERVER``); over HTTP as
a URL (``{url}``, ``$MCPKIT_CHECK_URL``). ``$MCPKIT_CHECK_SCENARIO`` names the scenario.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..report import Report
from ..wire import split_command
from .hosts import HttpHost, StdioHost
from .judge import ClientJudge
from .scripted import MAX_ENTRIES, MAX_IN_FLIGHT, MAX_IN_FLIGHT_BYTES, MAX_LOG_BYTES, SCENARIOS, ScriptedServer

SETTLE = 0.5  # seconds given after the client exits for its last messages (a DELETE, a relay's EOF) to land
URL_IDLE = 10.0  # --url without a command: the run ends this long after the client's last message


def _substitute(argv: list[str], key: str, value: str) -> list[str]:
    return [arg.replace("{" + key + "}", value) for arg in argv]


async def _run_client(
    argv: list[str], env: dict[str, str], cwd: str | None, timeout: float, report: Report, scenario: str
) -> None:
    from ...transports.stdio import StdioClientTransport, StdioServer

    client = StdioClientTransport(StdioServer(argv, env=dict(env), cwd=cwd, shutdown_timeout=2.0))
    started = time.monotonic()
    try:
        await client.start()
    except OSError as exc:  # (no such command, not executable): nothing of the client to judge
        raise ValueError(f"cannot start the client command {argv[0]!r}: {exc.strerror or exc}") from None
    assert client.process is not None

    async def drain() -> None:  # its stdout is not ours to judge: read (bounded) and drop
        with contextlib.suppress(Exception):
            while await client.receive() is not None:
                pass

    reader = asyncio.get_running_loop().create_task(drain())
    try:
        await asyncio.wait_for(client.process.wait(), timeout)
        how = f"exited with {client.process.returncode} after {time.monotonic() - started:.1f}s"
    except TimeoutError:
        how = f"still running after {timeout:.0f}s: stopped"
    finally:
        await client.close()
        reader.cancel()
        with contextlib.suppress(BaseException):
            await reader
    tail = " / ".join(list(client.stderr_lines)[-3:])
    report.info[f"{scenario}: client"] = how + (
        f"; stderr: {tail[:300]}" if tail and "exited with 0" not in how else ""
    )


async def run_client_checks(
    command: str | Sequence[str] | None,
    *,
    transport: str = "stdio",
    scenarios: Sequence[str] | None = None,
    timeout: float = 30.0,
    port: int = 0,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    announce: Callable[[str], Any] | None = None,
) -> Report:
    """Judge the MCP client that ``command`` runs (a command line or argv list), playing each scenario's scripted
    server over ``transport`` (``stdio`` or ``http``); returns the report (``Report.side == "client"``).

    ``scenarios`` picks some by name (default: every scenario the transport has: ``handshake``, ``modern``,
    ``version``, ``batch``, ``cancel``, and over HTTP ``expiry`` and ``resume``; ``auth``, for a client set up to
    authorize, only by name). Each run of the client gets ``timeout`` seconds. With ``command=None`` and
    ``transport="http"`` one scripted server is served on 127.0.0.1:``port`` (its URL given to ``announce``) until
    a client has come and gone quiet, or ``timeout`` passes.

    Raises ``ValueError`` for arguments it cannot run with: an unknown transport or scenario, no command over
    stdio, a ``port`` it cannot listen on, a command that cannot be started."""
    if transport not in ("stdio", "http"):
        raise ValueError("transport is 'stdio' or 'http'")
    names = (
        list(scenarios)
        if scenarios
        else [n for n, s in SCENARIOS.items() if transport in s.transports and not s.optional]
    )
    unknown = [n for n in names if n not in SCENARIOS or transport not in SCENARIOS[n].transports]
    if unknown:
        raise ValueError(f"no {transport} scenario {', '.join(unknown)} (have: {', '.join(SCENARIOS)})")
    shown = command if isinstance(command, str) else shlex.join(command) if command else "(any client)"
    report = Report(shown, transport, "client")
    argv = split_command(command) if command is not None else None
    if argv is None and transport == "stdio":
        raise ValueError("over stdio the client command is needed (it launches the scripted server)")
    spoke = False
    try:
        for name in names if argv is not None else ["modern"]:
            spoke = await _one(report, name, argv, transport, timeout, port, env, cwd, announce) or spoke
    finally:
        report.prefix = ""
        report.finish()
    if not spoke and not report.failed("MUST"):  # (nothing of a client to judge: not a pass)
        report.info["aborted"] = "no client connected to the scripted server; nothing was judged"
    return report


async def _one(
    report: Report,
    name: str,
    argv: list[str] | None,
    transport: str,
    timeout: float,
    port: int,
    env: dict[str, str] | None,
    cwd: str | None,
    announce: Callable[[str], Any] | None,
) -> bool:
    """One scenario; True when the client spoke to its scripted server."""
    scenario = SCENARIOS[name]
    server = ScriptedServer(scenario)
    host: StdioHost | HttpHost = StdioHost(server) if transport == "stdio" else HttpHost(server, port)
    await host.start()
    try:
        run_env = dict(os.environ, **(env or {}), MCPKIT_CHECK_SCENARIO=name)
        if isinstance(host, StdioHost):
            value = shlex.join(host.command)
            run_env["MCPKIT_CHECK_SERVER"] = value
            where = value
        else:
            run_env["MCPKIT_CHECK_URL"] = host.url
            where = host.url
            if announce is not None:
                announce(host.url)
        if argv is not None:
            server.started_client = True
            key = "server" if transport == "stdio" else "url"
            await _run_client(_substitute(argv, key, where), run_env, cwd, timeout, report, name)
            await asyncio.sleep(SETTLE)
        else:
            await _wait_for_a_client(server, timeout)
    finally:
        await host.stop()
    report.prefix = f"[{name}] "
    if scenario.auth:
        report.protected = True
    ClientJudge(report, server, transport).judge()
    report.prefix = ""
    connections = [c for c in server.conns if c.incoming()]
    report.info[f"{name}: connections"] = len(connections)
    dropped = sum(c.dropped for c in server.conns)
    if dropped:
        report.info[f"{name}: not kept"] = (
            f"{dropped} message(s) past the {MAX_ENTRIES} messages or {MAX_LOG_BYTES // (1024 * 1024)} MiB a "
            "connection keeps (past it, what the client sends over "
            "stdio is counted, not read nor answered)"
        )
    unanswered = sum(c.unanswered for c in server.conns)
    if unanswered:
        report.info[f"{name}: not answered"] = (
            f"{unanswered} message(s) past the {MAX_IN_FLIGHT} a connection answers at once, or past "
            f"{MAX_IN_FLIGHT_BYTES // (1024 * 1024)} MiB of them (the client did not read its answers)"
        )
    if not connections:
        report.info[f"{name}: note"] = "the client never spoke to the scripted server"
    return bool(connections)


async def _wait_for_a_client(server: ScriptedServer, timeout: float) -> None:
    """--url without a command: wait for a first message, then until the client has been quiet a while."""
    end = time.monotonic() + timeout
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(server.activity.wait(), timeout)
    while time.monotonic() < end:
        server.activity.clear()
        try:
            await asyncio.wait_for(server.activity.wait(), min(URL_IDLE, max(0.1, end - time.monotonic())))
        except TimeoutError:
            return
