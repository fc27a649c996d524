"""The transports and eras a test runs on, by name (light: the pytest plugin imports it at start-up)."""

from __future__ import annotations

from typing import Final

from ..protocol.versions import ALL_VERSIONS, LATEST_HANDSHAKE, V2026_07_28

TRANSPORTS: Final = ("memory", "stdio", "http", "sse", "ws")
"""Every transport a test can run on: in memory, stdio (a subprocess), Streamable HTTP, legacy HTTP+SSE, WebSocket."""
ERAS: Final = (LATEST_HANDSHAKE, V2026_07_28)
"""The two protocol eras, each by the revision a test pins: the latest handshake revision and 2026-07-28."""
ERA_ALIASES: Final = {"handshake": LATEST_HANDSHAKE, "modern": V2026_07_28, "stateless": V2026_07_28}
"""Names accepted for an era besides its revisions."""


def era_revision(era: str) -> str:
    """The protocol revision an era name stands for: a revision itself, or ``handshake`` (the latest handshake
    revision) / ``modern`` (2026-07-28). A ``ValueError`` names the choices otherwise."""
    revision = ERA_ALIASES.get(era, era)
    if revision not in ALL_VERSIONS:
        choices = ", ".join((*ALL_VERSIONS, *ERA_ALIASES))
        raise ValueError(f"unknown era {era!r}: one of {choices}")
    return revision


def check_transport(transport: str) -> str:
    """``transport`` when it is one of :data:`TRANSPORTS`; a ``ValueError`` naming them otherwise."""
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown transport {transport!r}: one of {', '.join(TRANSPORTS)}")
    return transport


__all__ = ["ERAS", "ERA_ALIASES", "TRANSPORTS", "check_transport", "era_revision"]
