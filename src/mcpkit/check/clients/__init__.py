"""``mcpkit check-client``: judge an MCP client by playing scripted servers to it.

mcpkit runs the client once per scenario (:data:`SCENARIOS`), as the server it connects to: over stdio the client
launches a relay to the scripted server (:mod:`.relay`), over Streamable HTTP it connects to one served on
127.0.0.1. Every message the client sends is recorded and judged against the client's requirements (initialize
and version handling, ``initialized``, roots/sampling/elicitation answered as declared, ids, pagination,
cancellation and progress, the session rules of HTTP, resumption, the 2026-07-28 rules of input requests and
headers)::

    from mcpkit.check.clients import run_client_checks
    report = await run_client_checks("node client.js --stdio {server}")
    report = await run_client_checks(["python", "client.py", "{url}"], transport="http")
"""

from __future__ import annotations

from .runner import run_client_checks
from .scripted import SCENARIOS, Scenario

__all__ = ["SCENARIOS", "Scenario", "run_client_checks"]
