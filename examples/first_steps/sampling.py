"""Asking the client's language model from a tool (sampling), in both protocol eras, with the server's log messages
shown by the client. The client's "model" here is a small function; a real host calls its LLM.

Sampling and logging are deprecated in the 2026-07-28 revision (SEP-2577) but still work in both eras: see the
"Protocol eras" guide.

    python examples/first_steps/sampling.py
"""

from __future__ import annotations

import asyncio

from mcpkit import Client, Context, LogMessage, MCPKit, SamplingParams

app = MCPKit("blurbs")


@app.tool
async def blurb(title: str, ctx: Context) -> str:
    """Write a one-line blurb for a book with the client's model.

    Args:
        title: the book's title.
    """
    answer = await ctx.sample(
        f"Write a one-line blurb for {title}.", system_prompt="You write short book blurbs.", max_tokens=60
    )
    # (logged after the question: in 2026-07-28 the tool runs again from the start once the client has answered)
    await ctx.info(f"the model wrote a blurb for {title}")
    await ctx.debug(f"{len(answer.text)} characters")
    return answer.text


async def model(params: SamplingParams) -> str:
    """Stands in for the host's LLM: answers from the request's typed parameters."""
    assert params.system_prompt == "You write short book blurbs." and params.max_tokens == 60
    title = params.text.removeprefix("Write a one-line blurb for ").rstrip(".")
    return f"{title}: an adventure you will not put down."


async def main() -> None:
    for mode in ("handshake", "modern"):
        logs: list[LogMessage] = []
        async with Client(app, mode=mode, sampling_handler=model, logging_handler=logs.append) as client:
            text = (await client.call_tool("blurb", {"title": "The Hobbit"})).data
            await asyncio.sleep(0.05)  # (log messages sent with the answer are delivered by now)
        print(f"{mode}: {text}")
        print("  server logs:", [f"{m.level}: {m.data}" for m in logs])
        assert text == "The Hobbit: an adventure you will not put down."
        assert [m.level for m in logs] == ["info", "debug"]


if __name__ == "__main__":
    asyncio.run(main())
