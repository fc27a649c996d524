"""A server whose changes come in bursts, for the tests of a ``subscriptions/listen`` stream that falls behind
(2026-07-28, stdio):

    python listen_server.py <listen_queue_size>

Resources ``note://0`` .. ``note://9``; the tool ``burst`` reports, one after another and with nothing awaited in
between but the notifications themselves, an update of each URI it is given (in that order, repeats included) and
then, if asked, a change of the tools list: faster than any stream can write them (unless asked to pause after
each, for a client's own queue).
"""

from __future__ import annotations

import asyncio
import sys

from mcpkit import Context, MCPKit

app = MCPKit("listen", listen_queue_size=int(sys.argv[1]) if len(sys.argv) > 1 else 256)

for _n in range(10):
    app.add_resource(f"note://{_n}", f"note {_n}")


@app.tool
async def burst(ctx: Context, uris: list[str], tools_changed: bool = False, pause: float = 0) -> str:
    """Report the updates of ``uris`` in a burst (then a tools list change), ``pause`` seconds after each."""
    for uri in uris:
        await ctx.app.notify_resource_updated(uri)
        if pause:
            await asyncio.sleep(pause)
    if tools_changed:
        await ctx.app.notify_list_changed("tools")
    return "ok"


if __name__ == "__main__":
    app.run()
