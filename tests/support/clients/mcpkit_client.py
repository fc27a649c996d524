"""mcpkit's own client doing what ``mcpkit check-client`` expects of a client: connect, list the tools (every
page), call each one (asking for progress), close. It declares roots, sampling and elicitation and answers them.

    python tests/support/clients/mcpkit_client.py "<server command line>" | http://127.0.0.1:PORT/mcp [--oauth]

With ``--oauth`` it authorizes with mcpkit's OAuth client (a headless browser follows the authorization page).
With ``--slow-sampling`` its sampling handler takes 60 s (a cancellation from the server ends it).
"""

from __future__ import annotations

import asyncio
import sys

from mcpkit import Client

SLOW = "--slow-sampling" in sys.argv


async def sample(params: dict) -> dict:
    if SLOW:
        await asyncio.sleep(60)
    return {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "test", "stopReason": "endTurn"}


async def elicit(params: dict) -> dict:
    return {"action": "accept", "content": {"name": "Ada"}}


async def main(target: str, oauth: bool) -> None:
    auth = None
    if oauth:
        from mcpkit.auth import HeadlessBrowser, OAuthClient

        browser = HeadlessBrowser()
        auth = OAuthClient(
            target,
            client_metadata={"client_name": "mcpkit test client", "redirect_uris": ["http://127.0.0.1:1/callback"]},
            redirect_handler=browser.redirect_handler,
            callback_handler=browser.callback_handler,
        )
    client = Client(
        target,
        roots=[{"uri": "file:///tmp/project", "name": "project"}],
        sampling_handler=sample,
        elicitation_handler=elicit,
        timeout=20,
        transport_options={"auth": auth} if auth is not None else None,
    )
    try:
        async with client:
            tools = await client.list_tools()
            for tool in tools:
                await client.call_tool(tool.name, {}, on_progress=lambda *a: None)
    finally:
        if auth is not None:
            await auth.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], "--oauth" in sys.argv))
