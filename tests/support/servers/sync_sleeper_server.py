"""An MCPKit server with a plain ``def`` tool that sleeps on a worker thread: the shutdown tests stop it mid-call.

``nap(seconds)`` writes ``<MARKS>.started``, sleeps, then writes ``<MARKS>.tool``. The file's ``atexit`` handler
writes ``<MARKS>.atexit``; run as a script (``python sync_sleeper_server.py [http]``), the code after
``app.run()`` writes ``<MARKS>.after``. ``MARKS`` comes from the environment variable ``SLEEPER_MARKS``;
``SLEEPER_GRACE`` (seconds), when set, is passed to ``app.run()`` as ``worker_grace``; ``SLEEPER_DRAIN`` as
``drain_timeout``.

The server's lifespan opens an SQLite database and closes it at its end: ``nap_then_write(seconds)`` sleeps, then
writes to it and leaves ``<MARKS>.wrote`` (or ``<MARKS>.write-failed`` with the error, the database being closed
under it). ``anap(seconds)`` is an ``async def`` tool that sleeps, then leaves ``<MARKS>.atool``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcpkit import MCPKit

MARKS = os.environ["SLEEPER_MARKS"]
db: sqlite3.Connection | None = None


@contextlib.asynccontextmanager
async def database(_: Any) -> AsyncIterator[None]:
    global db
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.execute("create table naps (seconds real)")
    try:
        yield
    finally:
        db.close()


app = MCPKit("sleeper", lifespan=database)
atexit.register(lambda: Path(MARKS + ".atexit").write_text("atexit ran"))


@app.tool()
def nap(seconds: float) -> str:
    """Sleep, then leave a mark."""
    Path(MARKS + ".started").write_text("napping")
    time.sleep(seconds)
    Path(MARKS + ".tool").write_text("nap done")
    return "rested"


@app.tool()
def nap_then_write(seconds: float) -> str:
    """Sleep, then write to the lifespan's database."""
    Path(MARKS + ".started").write_text("napping")
    time.sleep(seconds)
    assert db is not None
    try:
        db.execute("insert into naps values (?)", (seconds,))
    except sqlite3.Error as exc:
        Path(MARKS + ".write-failed").write_text(repr(exc))
        raise
    Path(MARKS + ".wrote").write_text("wrote")
    return "written"


@app.tool()
async def anap(seconds: float) -> str:
    """Sleep on the event loop, then leave a mark."""
    Path(MARKS + ".started").write_text("napping")
    await asyncio.sleep(seconds)
    Path(MARKS + ".atool").write_text("anap done")
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
