"""Client side: the low-level :class:`ClientSession` and the high-level :class:`Client`; :func:`watch_sent` shows
the JSON-RPC id of each request a block sends (a ``tools/call``'s, for an MCP Apps host's ``toolInfo.id``)."""

from ..engine.outgoing import SentWatcher, watch_sent

__all__ = ["SentWatcher", "watch_sent"]
