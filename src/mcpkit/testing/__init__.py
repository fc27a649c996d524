"""The testing kit: test an MCP server on every transport and in both protocol eras, from your own test suite.

``pip install 'mcpkit[testing]'`` brings pytest and pytest-asyncio and registers the pytest plugin
(:mod:`mcpkit.testing.plugin`: the ``mcp_client`` fixture and its friends, parametrized over transports and eras).
The pieces it is made of work without pytest too:

* :func:`connect`: a connected :class:`~mcpkit.Client` for a server (an object, a file, an import path) over
  ``memory``, ``stdio``, ``http`` (Streamable HTTP), ``sse`` (legacy HTTP+SSE) or ``ws`` (WebSocket), in a
  handshake revision or 2026-07-28; :func:`serve` and :func:`serve_asgi` put a server or an ASGI app on
  127.0.0.1 behind the guarded uvicorn server, on a port the system picks;
* :class:`Scripted`: canned sampling and elicitation answers and roots, so tools that ask need no model or person;
* :class:`Traffic`: a recorder on the engine's message tap, with assertions on what crossed the wire;
* :class:`SurfaceSnapshot` and :func:`surface`: the tools, resources and prompts a server lists, compared with a
  recorded snapshot;
* :func:`assert_conformant` and :func:`check_server`: ``mcpkit check`` against a server, failing on the
  requirements it breaks;
* :class:`McpSnapshot` and :class:`McpConformance`: the types of the ``mcp_snapshot`` and ``mcp_conformance``
  fixtures, to annotate a test's parameters with;
* :class:`LeakProbe` and :func:`running_functions`: tasks, child processes and listening sockets left behind;
  :func:`wait_listening` and :func:`stop_process` for a server you start as a process yourself.

See the testing guide (docs/guides/testing.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

# Loaded on first use: the stdio servers the kit starts run ``python -m mcpkit.testing._serve``, which imports this
# package first, and should start as fast as the server alone.
_LAZY: dict[str, str] = {
    "ServerLoadError": "_load",
    "load_server": "_load",
    "stdio_command": "_load",
    "McpConformance": "conformance",
    "NonConformant": "conformance",
    "assert_conformant": "conformance",
    "check_server": "conformance",
    "LeakProbe": "leaks",
    "Leaks": "leaks",
    "running_functions": "leaks",
    "Scripted": "scripted",
    "ScriptExhausted": "scripted",
    "ERAS": "serving",
    "TRANSPORTS": "serving",
    "Served": "serving",
    "connect": "serving",
    "era_revision": "serving",
    "serve": "serving",
    "serve_asgi": "serving",
    "McpSnapshot": "snapshot",
    "SurfaceChanged": "snapshot",
    "SurfaceSnapshot": "snapshot",
    "surface": "snapshot",
    "Traffic": "traffic",
    "ServerDidNotStart": "processes",
    "stop_process": "processes",
    "wait_listening": "processes",
}

if TYPE_CHECKING:
    from ._load import ServerLoadError, load_server, stdio_command
    from .conformance import McpConformance, NonConformant, assert_conformant, check_server
    from .leaks import LeakProbe, Leaks, running_functions
    from .processes import ServerDidNotStart, stop_process, wait_listening
    from .scripted import Scripted, ScriptExhausted
    from .serving import ERAS, TRANSPORTS, Served, connect, era_revision, serve, serve_asgi
    from .snapshot import McpSnapshot, SurfaceChanged, SurfaceSnapshot, surface
    from .traffic import Traffic


if not TYPE_CHECKING:  # (a type checker reads the imports above: a misspelled name is an error there)
    __getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = [
    "ERAS",
    "LeakProbe",
    "Leaks",
    "McpConformance",
    "McpSnapshot",
    "NonConformant",
    "ScriptExhausted",
    "Scripted",
    "Served",
    "ServerDidNotStart",
    "ServerLoadError",
    "SurfaceChanged",
    "SurfaceSnapshot",
    "TRANSPORTS",
    "Traffic",
    "assert_conformant",
    "check_server",
    "connect",
    "era_revision",
    "load_server",
    "running_functions",
    "serve",
    "serve_asgi",
    "stdio_command",
    "stop_process",
    "surface",
    "wait_listening",
]
