"""``mcpkit check``: black-box checks of the MCP specification's requirements against any MCP server.

Each requirement is one MUST (IDs M001...), SHOULD (S001...) or MAY (A001...) statement of the specification that
can be observed from outside a server (the list ships as ``requirements.csv``).

from mcpkit.check import run_checks
report = await run_checks("python server.py")          # stdio: a command line
report = await run_checks("http://127.0.0.1:8000/mcp")  # Streamable HTTP
print(report.render_text()); report.failed_musts()
"""

from __future__ import annotations

from .checks import Checker, run_checks
from .report import FAIL, PASS, SKIP, WARN, Report

__all__ = ["FAIL", "PASS", "SKIP", "WARN", "Checker", "Report", "run_checks"]
