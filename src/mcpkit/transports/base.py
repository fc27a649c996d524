"""The interface between transports and the engine.

``Connection`` (and ``BaseConnection``, its optional capabilities with their defaults), ``NullOutbox`` and
``NULL_OUTBOX`` are defined in :mod:`mcpkit.engine` (so that ``server/`` needs
nothing of ``transports/``) and re-exported here for the transports.
"""

from __future__ import annotations

from ..engine import NULL_OUTBOX, BaseConnection, Connection, NullOutbox

DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024

__all__ = ["DEFAULT_MAX_MESSAGE_SIZE", "NULL_OUTBOX", "BaseConnection", "Connection", "NullOutbox"]
