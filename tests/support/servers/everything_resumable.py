"""``examples/everything.py`` over Streamable HTTP with an in-memory event store, so its SSE events carry ids and
``Last-Event-ID`` replays them (what ``mcpkit run`` does not configure). Serves on 127.0.0.1, port 0 by default;
the URL is announced on stderr (``mcpkit: serving http on http://127.0.0.1:PORT/mcp``).

    python tests/support/servers/everything_resumable.py [PORT]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))

from everything import create_app

from mcpkit.stores import InMemoryEventStore
from mcpkit.transports.http import serve

if __name__ == "__main__":
    serve(create_app(), "http", port=int(sys.argv[1]) if len(sys.argv) > 1 else 0, event_store=InMemoryEventStore())
