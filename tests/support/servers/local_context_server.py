"""A server whose tool's ``Context`` is imported inside a function, under ``from __future__ import annotations``:
its annotation cannot be resolved from the module's globals (tests/server/test_app.py)."""

from __future__ import annotations

from mcpkit import MCPKit


def build() -> MCPKit:
    from mcpkit import Context

    app = MCPKit("hints")

    @app.tool
    async def t(ctx: Context, n: int) -> str:
        """Repeat "a" ``n`` times."""
        return "a" * n

    return app
