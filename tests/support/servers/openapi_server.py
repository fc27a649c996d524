"""An MCP server built with ``MCPKit.from_openapi`` from the test API's document, served over stdio.

    python openapi_server.py http://127.0.0.1:PORT 3.1|3.0 [--resources]

3.1: the API's own ``/openapi.json``; 3.0: ``openapi_api.OPENAPI_30``. The API key goes in the HTTP client's
headers (never a tool argument); ``--resources`` makes GET operations resources and templates.
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from openapi_api import API_KEY, OPENAPI_30

from mcpkit import MCPKit
from mcpkit.server.openapi import RESOURCES_FOR_GET


def build(base: str, version: str, resources: bool) -> MCPKit:
    """The server for the API at ``base``."""
    spec = httpx.get(f"{base}/openapi.json", timeout=10).json() if version == "3.1" else OPENAPI_30
    client = httpx.AsyncClient(base_url=base, headers={"X-API-Key": API_KEY})
    return MCPKit.from_openapi(spec, client=client, routes=RESOURCES_FOR_GET if resources else (), timeout=5)


if __name__ == "__main__":
    build(sys.argv[1], sys.argv[2], "--resources" in sys.argv).run()
