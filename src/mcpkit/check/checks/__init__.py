"""The black-box checks of ``mcpkit check``: drive any MCP server over raw JSON-RPC and judge what it sends.

Every check names the MCP requirement it proves (a MUST/SHOULD/MAY of the specification, requirements.csv) and
records the message that proved or broke it. A check that cannot apply (the server offers no prompts, no slow
tool, no sessions, ...) is skipped with the reason. Sessions use the handshake era (initialize); extra short
sessions probe version negotiation and the batch support of 2025-03-26.

The checks are grouped by area, one module each (``lifecycle``, ``tools``, ``resources``, ``prompts``,
``utilities``, ``http``, ``messages``, ``modern``); ``_base`` holds the plumbing they share and ``runner`` the
``Checker`` that combines them and the registry of the order they run in.
"""

from __future__ import annotations

from ._base import sample_arguments, sample_value
from .runner import MODERN_CHECKS, SESSION_CHECKS, Checker, run_checks

__all__ = ["MODERN_CHECKS", "SESSION_CHECKS", "Checker", "run_checks", "sample_arguments", "sample_value"]
