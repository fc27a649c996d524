"""Contender: ``mcpkit.proxy`` in front of ``mcpkit_server.py`` (a stdio subprocess): every call makes one more hop.

    app = mcpkit.proxy([sys.executable, "mcpkit_server.py"])

For ``bench/ab.py`` against ``mcpkit_server.py``: the cost of the proxy hop. The CPU ab.py reports is the proxy's
own (the upstream process's is not counted: it is about a direct call's); the rate shows the whole hop."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from _serve import main

import mcpkit

app = mcpkit.proxy([sys.executable, str(Path(__file__).resolve().parent / "mcpkit_server.py")], pool_size=4)


def make_asgi(stateless: bool) -> Any:
    from mcpkit.transports.http import create_app

    return create_app(app, stateless=stateless, json_response=True)


if __name__ == "__main__":
    main(app.run, make_asgi, None)
