"""``mcpkit check`` and ``mcpkit check-client``: black-box checks of the MCP specification's requirements.

Each requirement is one MUST (IDs M001...), SHOULD (S001...) or MAY (A001...) statement of the specification
(``requirements.csv``), or a rule of the official specification that list does not name (MX/SX,
``requirements-extra.csv``). :func:`run_checks` judges a server from outside; :func:`run_client_checks` judges a
client by playing scripted servers to it::

    from mcpkit.check import render, run_checks, run_client_checks
    report = await run_checks("python server.py")          # stdio: a command line
    report = await run_checks("http://127.0.0.1:8000/mcp")  # Streamable HTTP (/sse: legacy SSE; ws://: WebSocket)
    report = await run_client_checks("node client.js {server}")
    print(render(report, "text")); report.failed_musts(); report.exit_code("should")
"""

from __future__ import annotations

from .checks import Checker, run_checks
from .clients import SCENARIOS, run_client_checks
from .report import FAIL, FORMATS, PASS, SKIP, WARN, Report, render

__all__ = [
    "FAIL",
    "FORMATS",
    "PASS",
    "SCENARIOS",
    "SKIP",
    "WARN",
    "Checker",
    "Report",
    "render",
    "run_checks",
    "run_client_checks",
]
