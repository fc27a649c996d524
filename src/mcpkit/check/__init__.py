"""``mcpkit check``: black-box checks of the seed requirements (M/S/A IDs) against any MCP server.

from mcpkit.check import run_checks
report = await run_checks("python server.py")          # stdio: a command line
report = await run_checks("http://127.0.0.1:8000/mcp")  # Streamable HTTP
print(report.render_text()); report.failed_musts()
"""

from __future__ import annotations

from .checks import Checker, run_checks
from .report import FAIL, PASS, SKIP, WARN, Report

__all__ = ["FAIL", "PASS", "SKIP", "WARN", "Checker", "Report", "run_checks"]
