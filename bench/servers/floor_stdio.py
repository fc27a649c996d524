"""Floor for stdio: raw asyncio + orjson, newline-delimited JSON-RPC, one handler call per line.
Usage: python floor_stdio.py"""

from __future__ import annotations

import asyncio
import sys

import orjson
from _floor_core import handle


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    dumps, loads = orjson.dumps, orjson.loads
    while line := await reader.readline():
        try:
            msg = loads(line)
        except orjson.JSONDecodeError:
            writer.write(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n')
            continue
        resp = handle(msg)
        if resp is not None:
            writer.write(dumps(resp) + b"\n")
            await writer.drain()


if __name__ == "__main__":
    asyncio.run(main())
