"""A notes MCP server (see server.py)."""
