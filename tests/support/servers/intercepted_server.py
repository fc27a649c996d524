"""tests/support/intercepted.py's app served over stdio (``python intercepted_server.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.intercepted import make_app

app, _, _ = make_app()

if __name__ == "__main__":
    app.run()
