#!/usr/bin/env bash
# THE main job of mcpkit: set up on a fresh machine and run the example MCP server (examples/everything.py)
# with embedded defaults and no external service. Default: Streamable HTTP on http://127.0.0.1:8000/mcp
# (both protocol eras on one endpoint). Any arguments replace the defaults, e.g.:
#   bash scripts/run-example.sh --transport stdio
#   bash scripts/run-example.sh --transport ws --port 9000
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --disable-pip-version-check -q -e '.[all]'
if [ "$#" -eq 0 ]; then
  set -- --transport http --host 127.0.0.1 --port 8000
fi
echo "mcpkit: serving examples/everything.py ($*)" >&2
exec .venv/bin/mcpkit run examples/everything.py "$@"
