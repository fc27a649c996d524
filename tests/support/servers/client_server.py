"""A low-level mcpkit server for the high-level client tests (no tests in here: it is imported and run as a script).

``python tests/support/servers/client_server.py`` serves it over stdio. ``build_server()`` gives a fresh instance for
the in-memory tests. Everything is paginated with a small page size so the client's auto-pagination is exercised.

Tools: echo (read-only), add (outputSchema), bad_output / no_structured (break their outputSchema), wrapped
(x-mcpkit-wrap-result), fail (isError), slow (progress; records cancellation), status, counter (not idempotent),
ask (form elicitation), ask_url (URL elicitation), sample (sampling, optionally with tools), roots, log,
needs_url (-32042 until a URL flow completed), t00..t11 (27 tools in all); and, unlisted, exit (the process exits
with code 3 without answering).
Resources: mcpkit://text/0..5, mcpkit://blob (binary), template mcpkit://item/{id}. Prompts: greet, plain.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from typing import Any

from mcpkit.protocol.errors import CapabilityNotSupported, InvalidParams, ResourceNotFound, URLElicitationRequired
from mcpkit.server.lowlevel import Server, ServerRequestContext

PAGE = 4

ADD_SCHEMA = {"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}
NAME_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name"},
        "color": {"type": "string", "enum": ["red", "green", "blue"], "default": "green"},
        "size": {
            "type": "string",
            "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
            "default": "s",
        },
        "count": {"type": "integer", "minimum": 1, "default": 3},
    },
    "required": ["name"],
}


def _obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def _tool(name: str, description: str, schema: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": schema or {"type": "object"}, **extra}


RO = {"readOnlyHint": True}
TOOLS: list[dict[str, Any]] = [
    _tool("echo", "Echo text", _obj(text={"type": "string"}), annotations=RO),
    _tool(
        "add",
        "Add two numbers",
        _obj(a={"type": "number"}, b={"type": "number"}),
        outputSchema=ADD_SCHEMA,
        annotations={"idempotentHint": True},
    ),
    _tool("bad_output", "Breaks its output schema", outputSchema=ADD_SCHEMA),
    _tool("no_structured", "Declares an output schema, returns none", outputSchema=ADD_SCHEMA),
    _tool(
        "wrapped",
        "Returns a wrapped list",
        outputSchema={"type": "object", "properties": {"result": {"type": "array"}}, "x-mcpkit-wrap-result": True},
    ),
    _tool("fail", "Always fails", _obj(why={"type": "string"})),
    _tool("slow", "Sleeps in steps with progress", _obj(steps={"type": "integer"}, delay={"type": "number"})),
    _tool("status", "What slow calls saw", annotations=RO),
    _tool("counter", "Increments a counter (not idempotent)"),
    _tool("ask", "Asks the user for their name (form elicitation)"),
    _tool("ask_url", "Sends the user to a URL (URL elicitation)"),
    _tool("sample", "Asks the client's LLM", _obj(prompt={"type": "string"}, tools={"type": "boolean"})),
    _tool("roots", "Lists the client's roots", annotations=RO),
    _tool("log", "Emits log messages at every level"),
    _tool("needs_url", "Needs a URL elicitation first (-32042)"),
    *[_tool(f"t{i:02d}", f"filler tool {i}", annotations=RO) for i in range(12)],
]
TEXTS = [f"text number {i}" for i in range(6)]
BLOB = bytes(range(16))
RESOURCES = [
    *[{"uri": f"mcpkit://text/{i}", "name": f"text{i}", "mimeType": "text/plain"} for i in range(6)],
    {"uri": "mcpkit://blob", "name": "blob", "mimeType": "application/octet-stream"},
]
PROMPTS = [
    {
        "name": "greet",
        "description": "Greets someone",
        "arguments": [{"name": "name", "required": True}, {"name": "style", "required": False}],
    },
    {"name": "plain", "description": "No arguments"},
]

state: dict[str, Any] = {"cancelled": [], "finished": [], "counter": 0, "roots_changed": 0}


def text(t: str, *, error: bool = False, structured: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"content": [{"type": "text", "text": t}], "isError": error}
    if structured is not None:
        out["structuredContent"] = structured
    return out


def _page(items: list[dict[str, Any]], key: str, params: dict[str, Any]) -> dict[str, Any]:
    cursor = params.get("cursor")
    try:
        start = int(cursor) if cursor else 0
    except ValueError:
        raise InvalidParams(f"bad cursor {cursor!r}") from None
    out: dict[str, Any] = {key: items[start : start + PAGE]}
    if start + PAGE < len(items):
        out["nextCursor"] = str(start + PAGE)
    return out


def build_server() -> Server:
    server = Server("client-test", "2.0.0", instructions="a server for the client tests")

    @server.handler("tools/list")
    async def list_tools(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return _page(TOOLS, "tools", params)

    @server.handler("tools/call")
    async def call_tool(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        args = params.get("arguments") or {}
        if name == "exit":
            import os

            os._exit(3)
        if name == "echo":
            return text(str(args.get("text", "")))
        if name == "add":
            total = args["a"] + args["b"]
            return text(str(total), structured={"sum": total})
        if name == "bad_output":
            return text("oops", structured={"sum": "not a number"})
        if name == "no_structured":
            return text("no structured content")
        if name == "wrapped":
            return text("[1, 2]", structured={"result": [1, 2]})
        if name == "fail":
            return text(f"failed: {args.get('why', 'no reason')}", error=True)
        if name == "slow":
            steps = int(args.get("steps", 5))
            delay = float(args.get("delay", 0.05))
            state.setdefault("started", []).append(ctx.request_id)
            try:
                for i in range(steps):
                    await asyncio.sleep(delay)
                    await ctx.report_progress(i + 1, steps, f"step {i + 1}")
            except asyncio.CancelledError:
                state["cancelled"].append(ctx.request_id)
                raise
            state["finished"].append(ctx.request_id)
            return text(f"done after {steps} steps")
        if name == "status":
            shown = ("cancelled", "finished", "counter", "roots_changed", "started")
            return text(json.dumps({k: state.get(k, []) for k in shown}))
        if name == "counter":
            state["counter"] += 1
            return text(str(state["counter"]))
        if name == "ask":
            answer = await ctx.elicit("What is your name?", NAME_SCHEMA)
            return text(json.dumps(answer, sort_keys=True))
        if name == "ask_url":
            answer = await ctx.ask(
                "elicitation/create",
                {
                    "mode": "url",
                    "message": "Please sign in",
                    "url": "https://example.com/login",
                    "elicitationId": "e-1",
                },
            )
            return text(json.dumps(answer, sort_keys=True))
        if name == "sample":
            req: dict[str, Any] = {
                "messages": [{"role": "user", "content": {"type": "text", "text": args.get("prompt", "hi")}}],
                "maxTokens": 50,
            }
            if args.get("tools"):
                req["tools"] = [{"name": "lookup", "inputSchema": {"type": "object"}}]
                req["toolChoice"] = {"mode": "auto"}
            try:
                answer = await ctx.sample(req)
            except CapabilityNotSupported as exc:
                return text(f"cannot sample: {exc}", error=True)
            return text(json.dumps(answer, sort_keys=True))
        if name == "roots":
            answer = await ctx.list_roots()
            return text(json.dumps(answer, sort_keys=True))
        if name == "log":
            sent = [lvl for lvl in ("debug", "info", "warning", "error") if await ctx.log(lvl, {"level": lvl})]
            return text(json.dumps(sent))
        if name == "needs_url":
            # 2025-11-25: refuse with -32042 until the user went through a URL flow; the completion notification
            # follows shortly after (on the session, like a real out-of-band flow would)
            if not state.get("url_done"):
                state["url_done"] = True
                eid = "url-1"
                session = ctx.session

                async def complete() -> None:
                    await asyncio.sleep(0.1)
                    assert session is not None
                    await session.notify("notifications/elicitation/complete", {"elicitationId": eid})

                state["url_task"] = asyncio.get_running_loop().create_task(complete())
                raise URLElicitationRequired(
                    "Sign in first",
                    {
                        "elicitations": [
                            {
                                "mode": "url",
                                "elicitationId": eid,
                                "url": "https://example.com/auth",
                                "message": "Sign in",
                            }
                        ]
                    },
                )
            return text("authorized")
        if isinstance(name, str) and name.startswith("t") and name[1:].isdigit():
            return text(name)
        return text(f"unknown tool {name!r}", error=True)

    @server.handler("resources/list")
    async def list_resources(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return _page(RESOURCES, "resources", params)

    @server.handler("resources/templates/list")
    async def list_templates(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return {"resourceTemplates": [{"uriTemplate": "mcpkit://item/{id}", "name": "item"}]}

    @server.handler("resources/read")
    async def read(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        uri = params.get("uri", "")
        if uri.startswith("mcpkit://text/") and uri.rsplit("/", 1)[1].isdigit():
            i = int(uri.rsplit("/", 1)[1])
            if i < len(TEXTS):
                return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": TEXTS[i]}]}
        if uri == "mcpkit://blob":
            blob = base64.b64encode(BLOB).decode()
            return {"contents": [{"uri": uri, "mimeType": "application/octet-stream", "blob": blob}]}
        if uri.startswith("mcpkit://item/"):
            return {"contents": [{"uri": uri, "text": f"item {uri.rsplit('/', 1)[1]}"}]}
        raise ResourceNotFound(uri)

    @server.handler("prompts/list")
    async def list_prompts(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return _page(PROMPTS, "prompts", params)

    @server.handler("prompts/get")
    async def get_prompt(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        args = params.get("arguments") or {}
        if name == "greet":
            if "name" not in args:
                raise InvalidParams("missing argument 'name'")
            style = args.get("style", "friendly")
            msg = f"Say hello to {args['name']} in a {style} way."
            messages = [{"role": "user", "content": {"type": "text", "text": msg}}]
            return {"description": "a greeting", "messages": messages}
        if name == "plain":
            return {"messages": [{"role": "user", "content": {"type": "text", "text": "plain prompt"}}]}
        raise InvalidParams(f"unknown prompt {name!r}")

    @server.handler("completion/complete")
    async def complete(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        value = (params.get("argument") or {}).get("value", "")
        names = [n for n in ("alice", "albert", "bob") if n.startswith(value)]
        return {"completion": {"values": names, "total": len(names), "hasMore": False}}

    @server.notification_handler("notifications/roots/list_changed")
    async def roots_changed(session: Any, params: dict[str, Any] | None) -> None:
        state["roots_changed"] += 1

    return server


if __name__ == "__main__":
    if "--crash" in sys.argv:
        print("fatal: the test server was told to crash", file=sys.stderr)
        sys.exit(3)
    if "--hang" in sys.argv:
        print("hanging on purpose", file=sys.stderr, flush=True)
        import time

        time.sleep(60)
        sys.exit(0)
    build_server().run()
