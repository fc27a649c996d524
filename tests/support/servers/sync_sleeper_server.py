"""An MCPKit server with a plain ``def`` tool that sleeps on a worker thread: the shutdown tests stop it mid-call.

``nap(seconds)`` writes ``<MARKS>.started``, sleeps, then writes ``<MARKS>.tool``. The file's ``atexit`` handler
writes ``<MARKS>.atexit``; run as a script (``python sync_sleeper_server.py [http]``), the code after
``app.run()`` writes ``<MARKS>.after``. ``MARKS`` comes from the environment variable ``SLEEPER_MARKS``;
``SLEEPER_GRACE`` (seconds), when set, is passed to ``app.run()`` as ``worker_grace``; ``SLEEPER_DRAIN`` as
``drain_timeout``.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from pathlib import Path

from mcpkit import MCPKit

MARKS = os.environ["SLEEPER_MARKS"]
app = MCPKit("sleeper")
atexit.register(lambda: Path(MARKS + ".atexit").write_text("atexit ran"))


@app.tool()
def nap(seconds: float) -> str:
    """Sleep, then leave a mark."""
    Path(MARKS + ".started").write_text("napping")
    time.sleep(seconds)
    Path(MARKS + ".tool").write_text("nap done")
    return "rested"


if __name__ == "__main__":
    grace = {"worker_grace": float(os.environ["SLEEPER_GRACE"])} if os.environ.get("SLEEPER_GRACE") else {}
    if os.environ.get("SLEEPER_DRAIN"):
        grace["drain_timeout"] = float(os.environ["SLEEPER_DRAIN"])
    if sys.argv[1:] == ["http"]:
        app.run("http", port=0, **grace)
    else:
        app.run(**grace)
    Path(MARKS + ".after").write_text("after run")
