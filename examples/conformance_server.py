"""The server the official MCP conformance suite (``@modelcontextprotocol/conformance``) tests.

It exposes exactly the tools, resources and prompts the suite's server scenarios call, in both protocol eras
(2025-06-18/2025-11-25 with sessions, 2026-07-28 stateless), on one endpoint::

    mcpkit run examples/conformance_server.py --transport http --port 3001     # http://localhost:3001/mcp
    bash tests/conformance/run.sh                                               # runs every suite against it

The names and values follow the suite's scenario descriptions (see tests/conformance/README.md).
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from mcpkit import Audio, Context, Image, InputRequired, MCPKit, Message, TaskFailed, Tool, ToolError
from mcpkit.protocol.jsonrpc import JSONDict

PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV_B64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
PNG = base64.b64decode(PNG_B64)
WAV = base64.b64decode(WAV_B64)
WATCHED = "test://watched-resource"

JSON_SCHEMA_2020_12: JSONDict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


class RawSchemaTool(Tool):
    """A tool whose inputSchema is given verbatim (the suite checks the exact JSON Schema 2020-12 keywords)."""

    def __init__(self, fn: Any, schema: JSONDict, **options: Any) -> None:
        super().__init__(fn, **options)
        self._schema = schema

    @property
    def input_schema(self) -> JSONDict:
        return self._schema

    async def run(self, arguments: JSONDict, ctx: Context | None) -> Any:
        return await self.fn(arguments)


def _answers(ctx: Context) -> dict[str, Any]:
    """The ``inputResponses`` of this round (2026-07-28 multi-round tool calls)."""
    responses = ctx.request_context.params.get("inputResponses")
    return responses if isinstance(responses, dict) else {}


def _accepted(answer: Any) -> dict[str, Any] | None:
    if isinstance(answer, dict) and answer.get("action") == "accept" and isinstance(answer.get("content"), dict):
        content: dict[str, Any] = answer["content"]
        return content
    return None


def _elicit(message: str, properties: JSONDict, required: list[str]) -> JSONDict:
    return {
        "method": "elicitation/create",
        "params": {
            "message": message,
            "requestedSchema": {"type": "object", "properties": properties, "required": required},
        },
    }


def _sampling(text: str, max_tokens: int) -> JSONDict:
    return {
        "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": max_tokens},
    }


ROOTS_REQUEST: JSONDict = {"method": "roots/list", "params": {}}


class ConformanceServer(MCPKit):
    """Served over HTTP with resumable SSE streams (an in-memory event store, ``retry: 100``), which the
    suite's SSE polling scenario exercises; ``mcpkit run`` calls :meth:`run` with the command line's options."""

    def run(self, transport: str = "stdio", **options: Any) -> None:
        if transport == "http":
            from mcpkit.stores.memory import InMemoryEventStore

            options.setdefault("event_store", InMemoryEventStore())
            options.setdefault("retry_interval", 100)
        super().run(transport, **options)

    def tool_param_headers(self, name: str) -> dict[str, tuple[str, ...]]:
        """The ``x-mcp-header`` parameters of tool ``name`` (the HTTP endpoint validates ``Mcp-Param-*``)."""
        from mcpkit.transports.http.streamable import param_headers_from_schema

        tool = self.get_tool(name)
        return param_headers_from_schema(tool.input_schema) if tool is not None else {}


def create_app() -> MCPKit:
    app = ConformanceServer("mcpkit-conformance-server", version="1.0.0")

    # ------------------------------------------------------------------ content tools

    @app.tool
    def test_simple_text() -> str:
        """Tests simple text content response."""
        return "This is a simple text response for testing."

    @app.tool
    def test_image_content() -> Image:
        """Tests image content response."""
        return Image(PNG, mime_type="image/png")

    @app.tool
    def test_audio_content() -> Audio:
        """Tests audio content response."""
        return Audio(WAV, mime_type="audio/wav")

    @app.tool
    def test_embedded_resource() -> JSONDict:
        """Tests embedded resource content response."""
        return {
            "type": "resource",
            "resource": {
                "uri": "test://embedded-resource",
                "mimeType": "text/plain",
                "text": "This is an embedded resource content.",
            },
        }

    @app.tool
    def test_multiple_content_types() -> list[Any]:
        """Tests response with multiple content types (text, image, resource)."""
        return [
            {"type": "text", "text": "Multiple content types test:"},
            Image(PNG, mime_type="image/png"),
            {
                "type": "resource",
                "resource": {
                    "uri": "test://mixed-content-resource",
                    "mimeType": "application/json",
                    "text": json.dumps({"test": "data", "value": 123}),
                },
            },
        ]

    @app.tool
    def test_error_handling() -> str:
        """Tests error response handling (returns isError: true)."""
        raise ToolError("This tool intentionally returns an error for testing")

    # ------------------------------------------------------------------ notifications during a call

    @app.tool
    async def test_tool_with_logging(ctx: Context) -> str:
        """Tests tool that emits log messages during execution."""
        for i, text in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
            if i:
                await asyncio.sleep(0.05)
            await ctx.info(text)
        return "Tool with logging executed successfully"

    @app.tool
    async def test_tool_with_progress(ctx: Context) -> str:
        """Tests tool that reports progress notifications."""
        for step in (0, 50, 100):
            await ctx.report_progress(step, 100, f"Completed step {step} of 100")
            await asyncio.sleep(0.05)
        return str(ctx.progress_token)

    # ------------------------------------------------------------------ server-to-client requests (handshake era)

    @app.tool
    async def test_sampling(prompt: Annotated[str, Field(description="The prompt to send")], ctx: Context) -> str:
        """Tests server-initiated sampling (LLM completion request)."""
        result = await ctx.sample(prompt, max_tokens=100)
        text = getattr(result.content, "text", None)
        return f"LLM response: {text if isinstance(text, str) else json.dumps(result.dump().get('content'))}"

    @app.tool
    async def test_elicitation(
        message: Annotated[str, Field(description="The message to show the user")], ctx: Context
    ) -> str:
        """Tests server-initiated elicitation (user input request)."""
        schema = {
            "type": "object",
            "properties": {"response": {"type": "string", "description": "User's response"}},
            "required": ["response"],
        }
        answer = await ctx.elicit(message, schema)
        return f"User response: action={answer.action}, content={json.dumps(answer.content)}"

    @app.tool
    async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
        """Tests elicitation with default values for all primitive types (SEP-1034)."""
        schema = {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "description": "Verification status", "default": True},
            },
            "required": [],
        }
        answer = await ctx.elicit("Please review and update the form fields with defaults", schema)
        return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"

    @app.tool
    async def test_elicitation_sep1330_enums(ctx: Context) -> str:
        """Tests elicitation with enum schema variants (SEP-1330)."""
        options = ["option1", "option2", "option3"]
        titled = [{"const": f"value{i}", "title": f"Option {i}"} for i in (1, 2, 3)]
        schema = {
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "description": "Untitled single select", "enum": options},
                "titledSingle": {"type": "string", "description": "Titled single select", "oneOf": titled},
                "legacyEnum": {
                    "type": "string",
                    "description": "Legacy titled enum",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Untitled multi select",
                    "items": {"type": "string", "enum": options},
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Titled multi select",
                    "items": {"anyOf": titled},
                },
            },
            "required": [],
        }
        answer = await ctx.elicit("Please select options", schema)
        return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"

    async def schema_tool(arguments: JSONDict) -> str:
        return f"Received: {json.dumps(arguments)}"

    app.add_tool(
        RawSchemaTool(
            schema_tool,
            JSON_SCHEMA_2020_12,
            name="json_schema_2020_12_tool",
            description="A tool whose inputSchema uses JSON Schema 2020-12 ($defs, $ref, allOf, if/then/else).",
        )
    )

    @app.tool
    async def test_reconnection(ctx: Context) -> str:
        """Tests SSE polling: closes the SSE stream mid-call; the client resumes with Last-Event-ID."""
        from mcpkit.transports.http import close_sse_stream

        await ctx.info("Before closing the stream")
        await close_sse_stream(ctx.request_context, retry_ms=100)
        await asyncio.sleep(0.2)
        return "Reconnection test completed"

    # ------------------------------------------------------------------ 2026-07-28 diagnostics

    @app.tool
    async def test_missing_capability(ctx: Context) -> str:
        """Needs the client's sampling capability (answers -32021 when the request does not declare it)."""
        result = await ctx.sample("Say hello", max_tokens=20)
        return f"Sampled: {getattr(result.content, 'text', '')}"

    @app.tool
    async def test_streaming_elicitation(ctx: Context) -> str:
        """Streams a progress notification, then the result (never an independent request on the stream)."""
        await ctx.report_progress(1, 2, "Working")
        return "Streaming completed without independent requests"

    @app.tool
    async def test_logging_tool(ctx: Context) -> str:
        """Logs a message (sent only when the request asks for logs with _meta logLevel)."""
        await ctx.info("test_logging_tool ran")
        return "Logged (if requested)"

    @app.tool
    async def test_trigger_tool_change() -> str:
        """Sends notifications/tools/list_changed to subscribers."""
        await app.notify_list_changed("tools")
        return "Tool list change notified"

    @app.tool
    async def test_trigger_prompt_change() -> str:
        """Sends notifications/prompts/list_changed to subscribers."""
        await app.notify_list_changed("prompts")
        return "Prompt list change notified"

    @app.tool
    def test_x_mcp_header(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})] = "<none>",
    ) -> str:
        """Echoes a parameter that is mirrored into the Mcp-Param-Region header (SEP-2243)."""
        return f"region={region}"

    # ------------------------------------------------------------------ multi-round (input required) tools

    @app.tool
    async def test_input_required_result_elicitation(ctx: Context) -> str:
        """Asks for the user's name with an input-required result (SEP-2322)."""
        content = _accepted(_answers(ctx).get("user_name"))
        if content is None or not isinstance(content.get("name"), str):
            raise InputRequired({"user_name": _elicit("What is your name?", {"name": {"type": "string"}}, ["name"])})
        return f"Hello, {content['name']}!"

    @app.tool
    async def test_input_required_result_sampling(ctx: Context) -> str:
        """Asks the client's LLM a question with an input-required result (SEP-2322)."""
        answer = _answers(ctx).get("capital_question")
        if not isinstance(answer, dict) or "content" not in answer:
            raise InputRequired({"capital_question": _sampling("What is the capital of France?", 100)})
        text = answer["content"].get("text") if isinstance(answer["content"], dict) else None
        return f"The model said: {text}"

    @app.tool
    async def test_input_required_result_list_roots(ctx: Context) -> str:
        """Asks for the client's roots with an input-required result (SEP-2322)."""
        answer = _answers(ctx).get("client_roots")
        if not isinstance(answer, dict) or not isinstance(answer.get("roots"), list):
            raise InputRequired({"client_roots": ROOTS_REQUEST})
        return f"Roots: {json.dumps(answer['roots'])}"

    @app.tool
    async def test_input_required_result_request_state(ctx: Context) -> str:
        """Asks for confirmation; the second round carries requestState back (SEP-2322)."""
        content = _accepted(_answers(ctx).get("confirm"))
        if content is None:
            raise InputRequired({"confirm": _elicit("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])})
        has_state = isinstance(ctx.request_context.params.get("requestState"), str)
        return f"Confirmed ok={content.get('ok')}; {'state-ok' if has_state else 'state-missing'}"

    @app.tool
    async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
        """Asks for an elicitation, a sampling and the roots in one input-required result (SEP-2322)."""
        answers = _answers(ctx)
        if not all(k in answers for k in ("user_name", "greeting", "client_roots")):
            raise InputRequired(
                {
                    "user_name": _elicit("What is your name?", {"name": {"type": "string"}}, ["name"]),
                    "greeting": _sampling("Generate a greeting", 50),
                    "client_roots": ROOTS_REQUEST,
                }
            )
        name = (_accepted(answers["user_name"]) or {}).get("name")
        return f"All inputs received (name={name})"

    @app.tool
    async def test_input_required_result_multi_round(ctx: Context) -> str:
        """Two rounds of input: name, then favorite color (a new requestState each round) (SEP-2322)."""
        answers = _answers(ctx)
        color = _accepted(answers.get("step2"))
        if color is not None:
            return f"Your favorite color is {color.get('color')}"
        if _accepted(answers.get("step1")) is not None:
            raise InputRequired(
                {"step2": _elicit("Step 2: What is your favorite color?", {"color": {"type": "string"}}, ["color"])}
            )
        raise InputRequired({"step1": _elicit("Step 1: What is your name?", {"name": {"type": "string"}}, ["name"])})

    @app.tool
    async def test_input_required_result_tampered_state(ctx: Context) -> str:
        """Asks for confirmation; a tampered requestState is rejected (integrity-protected state) (SEP-2322)."""
        content = _accepted(_answers(ctx).get("confirm"))
        if content is None or not isinstance(ctx.request_context.params.get("requestState"), str):
            raise InputRequired({"confirm": _elicit("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])})
        return "Confirmed with untampered state"

    @app.tool
    async def test_input_required_result_capabilities(ctx: Context) -> str:
        """Asks only for what the request's client capabilities allow (SEP-2322)."""
        caps = ctx.client_capabilities
        answers = _answers(ctx)
        if answers:
            return f"Received {sorted(answers)}"
        requests: dict[str, JSONDict] = {}
        if isinstance(caps.get("sampling"), dict):
            requests["sample_input"] = _sampling("Say hello", 20)
        if isinstance(caps.get("elicitation"), dict):
            requests["ask_input"] = _elicit("Your name?", {"name": {"type": "string"}}, ["name"])
        if not requests:
            return "The client declared neither sampling nor elicitation"
        raise InputRequired(requests)

    # ------------------------------------------------------------------ resources

    app.add_resource(
        "test://static-text",
        "This is the content of the static text resource.",
        name="static_text_resource",
        description="A static text resource for testing",
        mime_type="text/plain",
    )
    app.add_resource(
        "test://static-binary",
        PNG,
        name="static_binary_resource",
        description="A static binary resource (image) for testing",
        mime_type="image/png",
    )

    @app.resource("test://template/{id}/data", name="template_resource", mime_type="application/json")
    def template_resource(id: str) -> str:
        """A resource template with a parameter."""
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @app.resource(WATCHED, name="watched_resource", mime_type="text/plain")
    def watched_resource() -> str:
        """A resource that can be subscribed to."""
        return "Watched resource content"

    # ------------------------------------------------------------------ prompts

    @app.prompt
    def test_simple_prompt() -> str:
        """A simple prompt without arguments."""
        return "This is a simple prompt for testing."

    @app.prompt
    def test_prompt_with_arguments(
        arg1: Annotated[str, Field(description="First test argument")],
        arg2: Annotated[str, Field(description="Second test argument")],
    ) -> str:
        """A prompt with required arguments."""
        return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"

    @app.prompt
    def test_prompt_with_embedded_resource(
        resourceUri: Annotated[str, Field(description="URI of the resource to embed")],
    ) -> list[Message]:
        """A prompt that includes an embedded resource."""
        return [
            Message.user(
                {
                    "type": "resource",
                    "resource": {
                        "uri": resourceUri,
                        "mimeType": "text/plain",
                        "text": "Embedded resource content for testing.",
                    },
                }
            ),
            Message.user("Please process the embedded resource above."),
        ]

    @app.prompt
    def test_prompt_with_image() -> list[Message]:
        """A prompt that includes image content."""
        return [Message.user(Image(PNG, mime_type="image/png")), Message.user("Please analyze the image above.")]

    @app.prompt
    async def test_input_required_result_prompt(ctx: Context) -> str:
        """A prompt that asks the client for context first (input-required result, SEP-2322)."""
        content = _accepted(_answers(ctx).get("user_context"))
        if content is None:
            raise InputRequired(
                {
                    "user_context": _elicit(
                        "What context should the prompt use?", {"context": {"type": "string"}}, ["context"]
                    )
                }
            )
        return f"Prompt using context: {content.get('context')}"

    # ------------------------------------------------------------------ completion

    @app.completion(prompt="test_prompt_with_arguments", argument="arg1")
    def complete_arg1(value: str, context: dict[str, str]) -> list[str]:
        return [v for v in ("test", "testValue1", "example") if v.startswith(value)]

    # ------------------------------------------------------------------ tasks (the io.modelcontextprotocol/tasks
    # extension's scenarios; the same tools run as 2025-11-25 tasks when a client sends params.task)

    @app.tool
    def greet(name: str) -> str:
        """Greets synchronously (never a task)."""
        return f"Hello, {name}!"

    @app.tool(task=True)
    async def slow_compute(ctx: Context, seconds: float = 1.0, label: str = "") -> str:
        """Sleeps `seconds`, then answers; a task when the client declares the tasks extension."""
        await ctx.report_status(f"computing {label}".strip())
        await asyncio.sleep(max(0.0, min(seconds, 300.0)))
        return f"computed {label} after {seconds} s".replace("  ", " ")

    @app.tool(task="required")
    async def failing_job() -> str:
        """Fails as a tool (isError) after about a second; runs only as a task."""
        await asyncio.sleep(1.0)
        raise ToolError("the job failed")

    @app.tool(task=True)
    async def protocol_error_job() -> str:
        """Ends with a JSON-RPC error (the task fails) after a short while."""
        await asyncio.sleep(0.2)
        raise TaskFailed("the job hit a protocol-level failure")

    confirm_schema: JSONDict = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}

    @app.tool(task=True)
    async def confirm_delete(ctx: Context, filename: str = "file.txt") -> str:
        """Becomes a task, then asks the user to confirm (the task turns input_required)."""
        await ctx.become_task()
        answer = await ctx.elicit(f"Delete {filename}?", confirm_schema)
        confirmed = answer.accepted and bool((answer.content or {}).get("confirm"))
        return f"{'Deleted' if confirmed else 'Kept'} {filename}"

    @app.tool(task=True)
    async def multi_input(ctx: Context) -> str:
        """Becomes a task, then asks two questions at once (two input requests outstanding)."""
        await ctx.become_task()
        name_schema: JSONDict = {"type": "object", "properties": {"name": {"type": "string"}}}
        first, second = await asyncio.gather(
            ctx.elicit("Your name?", name_schema), ctx.elicit("Confirm?", confirm_schema)
        )
        return f"Got {(first.content or {}).get('name')} and {(second.content or {}).get('confirm')}"

    @app.tool(task="required")
    async def test_tool_with_task(ctx: Context) -> str:
        """Asks for a name before the task exists (an input_required round trip), then finishes as a task."""
        answer = await ctx.elicit(
            "What is your name?", {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        )
        await ctx.become_task()
        return f"Hello, {(answer.content or {}).get('name', 'unknown')}!"

    return app


app = create_app()
# Skills (SEP-2640): the example skills, with resources/directory/read (the sep-2640-* server scenarios)
app.add_skills(Path(__file__).resolve().parent / "skills", directory_read=True)

if __name__ == "__main__":
    app.run()
