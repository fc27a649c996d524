"""The interface between transports and the engine.

``Connection`` (and ``BaseConnection``, its optional capabilities with their defaults), ``NullOutbox`` and
``NULL_OUTBOX`` (and ``DEFAULT_MAX_MESSAGE_SIZE``) are defined in :mod:`mcpkit.engine` (so that ``server/`` needs
nothing of ``transports/``) and re-exported here for the transports.
"""

from __future__ import annotations

from ..engine import DEFAULT_MAX_MESSAGE_SIZE, NULL_OUTBOX, BaseConnection, Connection, NullOutbox

#: The bytes an outgoing queue of one connection (an SSE stream, a WebSocket) holds before it counts as full: four
#: max-size messages. A server's own messages have no size limit, so a bound in messages alone is not one in memory.
DEFAULT_QUEUE_BYTES = 16 * 1024 * 1024

__all__ = ["DEFAULT_MAX_MESSAGE_SIZE", "NULL_OUTBOX", "BaseConnection", "Connection", "NullOutbox"]
