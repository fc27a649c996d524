"""The testing kit's traffic recorder (:class:`mcpkit.testing.Traffic`, on the client engine's message tap), plus a
check of every message it saw against the official wire types (tests/support/oracle.py)."""

from __future__ import annotations

from typing import Any

from mcpkit.testing import Traffic
from support.oracle import validate_message


class WireRecorder(Traffic):
    """Give it as a client's ``tap=``; ``validate(revision)`` checks every recorded message."""

    def validate(self, revision: str, *, skip_probe: bool = True) -> int:
        """Validate each message; returns how many were checked. The era probe (server/discover and its
        answer, sent before the revision is known) is skipped for handshake revisions."""
        methods: dict[tuple[str, Any], str] = {}
        checked = 0
        for event, msg in self.entries():
            assert event.peer == "client", "a WireRecorder records a client's traffic"
            sender = "client" if event.direction == "out" else "server"
            items = msg if isinstance(msg, list) else [msg]
            for item in items:
                if "method" in item and "id" in item:
                    methods[(sender, item["id"])] = item["method"]
            first = items[0] if items else {}
            if "method" in first:
                method = first["method"]
                request_method = None
            else:
                other = "server" if sender == "client" else "client"
                request_method = methods.get((other, first.get("id")))
                method = request_method
            if skip_probe and method == "server/discover" and revision != "2026-07-28":
                continue
            validate_message(msg, revision, sender=sender, request_method=request_method)  # type: ignore[arg-type]
            checked += 1
        return checked
