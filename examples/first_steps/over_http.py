"""A server and a client over HTTP: ``python over_http.py serve PORT`` serves Streamable HTTP (both protocol eras on
one URL); without arguments this program starts that server as a separate process on a free port, talks to it in
both eras, and stops it.

    python examples/first_steps/over_http.py
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time

from mcpkit import Client, Context, MCPKit

app = MCPKit("greeter", "1.0.0")


@app.tool
def greet(name: str, ctx: Context) -> str:
    """Greet someone, and say which client asked (from the HTTP request's headers).

    Args:
        name: who to greet.
    """
    headers = ctx.headers  # None over stdio; the HTTP request's headers here
    caller = headers.get("x-client-name", "someone") if headers is not None else "a local client"
    return f"Hello, {name}! (asked by {caller})"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until_listening(port: int, server: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with code {server.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"the server did not listen on port {port} within {timeout} s")


async def talk(url: str) -> None:
    for mode in ("modern", "handshake"):
        async with Client(url, mode=mode, headers={"X-Client-Name": "over_http.py"}) as client:
            greeting = (await client.call_tool("greet", {"name": "Ada"})).data
            print(f"{mode} ({client.protocol_version}): {greeting}")
            assert greeting == "Hello, Ada! (asked by over_http.py)"


def main() -> None:
    port = free_port()
    server = subprocess.Popen([sys.executable, __file__, "serve", str(port)])
    try:
        wait_until_listening(port, server)
        asyncio.run(talk(f"http://127.0.0.1:{port}/mcp"))
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        if len(sys.argv) != 3 or not sys.argv[2].isdigit():
            print("usage: python over_http.py serve PORT   (no arguments: serve and talk)", file=sys.stderr)
            sys.exit(2)
        app.run("http", port=int(sys.argv[2]))
    else:
        main()
