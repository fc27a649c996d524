"""`mcpkit check` inside the suite: the server meets every MUST requirement it can be checked for, in both eras,
and a server that breaks one rule fails the test with the requirement named."""

from __future__ import annotations

from typing import Any

import pytest


async def test_the_server_meets_every_must(mcp_conformance: Any) -> None:
    report = await mcp_conformance()
    assert report.failed_musts() == []


async def test_a_server_that_breaks_a_rule_fails_naming_it(mcp_conformance: Any) -> None:
    import broken_server

    with pytest.raises(AssertionError, match=r"M079 \(MUST\) Receiver MUST respond promptly with empty response"):
        await mcp_conformance(broken_server.app)
