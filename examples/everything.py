"""The mcpkit "everything" server: every feature of MCP in one file.

Tests, the compliance checker, interop runs and benchmarks drive it over every transport::

    mcpkit run examples/everything.py                        # stdio
    mcpkit run examples/everything.py --transport http --port 8000
    python examples/everything.py                            # stdio, too

Tools: echo, add, slow, sample, ask_name, roots, touch, add_tool, log, fail, image.
Resources: mcpkit://static/1 .. /100 (10 a page; odd = text, even = binary), the template mcpkit://items/{id},
and mcpkit://counter (subscribable, changed by ``touch``).
Prompts: simple, greet(name, style?), with_resource(n), with_image.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Literal

from mcpkit import Context, Image, MCPKit, Message, ToolError

# A 1x1 red PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
COUNTER_URI = "mcpkit://counter"
LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


def static_text(n: int) -> str:
    return f"Static resource {n}"


def static_blob(n: int) -> bytes:
    return bytes([n % 256]) * 16 + f"static {n}".encode()


def create_app() -> MCPKit:
    """A fresh everything server (tests build one per test; run() uses the module-level ``app``)."""
    app = MCPKit(
        "mcpkit-everything",
        version="1.0.0",
        instructions="A test server exercising every MCP feature.",
        page_size={"resources": 10},
    )
    counter = {"value": 0}

    # ------------------------------------------------------------------ tools

    @app.tool
    def echo(text: str) -> str:
        """Echo the text back.

        Args:
            text: Text to echo back.
        """
        return text

    @app.tool(title="Add two integers", annotations={"readOnlyHint": True, "idempotentHint": True})
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first addend.
            b: The second addend.
        """
        return a + b

    @app.tool
    async def slow(ctx: Context, steps: int = 5, delay_ms: int = 100) -> str:
        """Work for ``steps`` x ``delay_ms``, reporting progress; stops when cancelled.

        Args:
            steps: How many steps to take.
            delay_ms: Milliseconds per step.
        """
        for i in range(steps):
            await asyncio.sleep(delay_ms / 1000)
            await ctx.report_progress(i + 1, steps, f"step {i + 1} of {steps}")
        return f"done after {steps} steps"

    @app.tool
    async def sample(prompt: str, ctx: Context) -> str:
        """Ask the client's LLM to answer ``prompt`` (sampling).

        Args:
            prompt: What to ask the model.
        """
        result = await ctx.sample(prompt, max_tokens=200)
        content = result.content
        text = getattr(content, "text", None)
        return text if isinstance(text, str) else json.dumps(result.dump().get("content"))

    @app.tool
    async def ask_name(ctx: Context) -> str:
        """Ask the user for their name (elicitation)."""
        schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        answer = await ctx.elicit("What is your name?", schema)
        if answer.action == "accept" and answer.content is not None:
            return f"Hello, {answer.content.get('name')}!"
        return f"No name given ({answer.action})"

    @app.tool
    async def roots(ctx: Context) -> str:
        """List the client's roots."""
        found = await ctx.list_roots()
        return json.dumps([r.dump() for r in found])

    @app.tool
    async def touch(uri: str = COUNTER_URI) -> str:
        """Change a subscribable resource (mcpkit://counter), notifying its subscribers.

        Args:
            uri: The resource to change.
        """
        if uri != COUNTER_URI:
            raise ToolError(f"only {COUNTER_URI} can be touched")
        counter["value"] += 1
        await app.notify_resource_updated(uri)
        return f"counter is now {counter['value']}"

    @app.tool(name="add_tool")
    def add_tool_(name: str) -> str:
        """Register a new tool at run time (clients get tools/list_changed).

        Args:
            name: The new tool's name; it echoes its ``text`` argument.
        """

        def dynamic(text: str = "") -> str:
            return f"{name}: {text}"

        app.add_tool(dynamic, name=name, description=f"A tool added at run time ({name}).")
        return f"added tool {name}"

    @app.tool
    async def log(level: LogLevel, message: str, ctx: Context) -> str:
        """Send a log message to the client at ``level``.

        Args:
            level: The syslog severity.
            message: The message.
        """
        sent = await ctx.log(level, message, logger="everything")
        return "sent" if sent else "filtered"

    @app.tool
    def fail() -> str:
        """Always fails (returns isError: true)."""
        raise ToolError("This tool always fails.")

    @app.tool
    def image() -> Image:
        """Return a small PNG image."""
        return Image(PNG, mime_type="image/png")

    # ------------------------------------------------------------------ resources

    for n in range(1, 101):
        if n % 2:
            app.add_resource(f"mcpkit://static/{n}", static_text(n), name=f"static-{n}", mime_type="text/plain")
        else:
            app.add_resource(
                f"mcpkit://static/{n}", static_blob(n), name=f"static-{n}", mime_type="application/octet-stream"
            )

    @app.resource(
        "mcpkit://items/{id}",
        name="item",
        mime_type="application/json",
        completions={"id": [str(i) for i in range(1, 101)]},
    )
    def item(id: int) -> dict[str, object]:
        """An item by id (1..100), as JSON."""
        if not 1 <= id <= 100:
            from mcpkit import ResourceNotFound

            raise ResourceNotFound(f"mcpkit://items/{id}")
        return {"id": id, "name": f"Item {id}"}

    @app.resource(COUNTER_URI, name="counter", mime_type="text/plain")
    def counter_resource() -> str:
        """A counter incremented by the ``touch`` tool (subscribe to it)."""
        return str(counter["value"])

    # ------------------------------------------------------------------ prompts

    @app.prompt
    def simple() -> str:
        """A prompt without arguments."""
        return "This is a simple prompt without arguments."

    @app.prompt(completions={"style": ["formal", "friendly", "funny"]})
    def greet(name: str, style: str = "friendly") -> list[Message]:
        """Greet someone.

        Args:
            name: Who to greet.
            style: formal, friendly or funny.
        """
        return [
            Message.user(f"Please greet {name} in a {style} style."),
            Message.assistant(f"Sure, here is a {style} greeting for {name}."),
        ]

    @app.prompt
    async def with_resource(n: int, ctx: Context) -> list[Message]:
        """A prompt embedding mcpkit://static/{n}.

        Args:
            n: Which static resource (1..100) to embed.
        """
        contents = await ctx.read_resource(f"mcpkit://static/{n}")
        return [Message.user({"type": "resource", "resource": contents[0]}), Message.user("Describe this resource.")]

    @app.prompt
    def with_image() -> list[Message]:
        """A prompt with an image."""
        return [Message.user(Image(PNG, mime_type="image/png")), Message.user("What is in this image?")]

    return app


app = create_app()

if __name__ == "__main__":
    app.run()
