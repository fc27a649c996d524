"""The task tools of tests/support/tasks.py as a server file (stdio: ``python tests/support/servers/tasks_server.py``,
HTTP: ``mcpkit run tests/support/servers/tasks_server.py -t http --port N``), for peers in other processes."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from support.tasks import make_app

app, probe = make_app()
probe.release.set()  # (hold ends at once here)

if __name__ == "__main__":
    app.run()
