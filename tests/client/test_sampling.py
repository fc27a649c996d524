"""The model-provider sampling handlers (:mod:`mcpkit.client.sampling`): a server's ``sampling/createMessage``
answered by the real ``openai`` and ``anthropic`` SDKs, which talk HTTP to a scripted provider on 127.0.0.1
(tests/support/servers/llm_api.py). The server side is a real mcpkit app whose tools call ``ctx.sample``."""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from mcpkit import MCPKit
from mcpkit.client.client import Client, InputHandlerError
from mcpkit.client.sampling import MAX_ERROR_CHARS, AnthropicSampler, OpenAISampler, choose_model
from mcpkit.protocol.errors import MCPError
from mcpkit.server.context import Context
from support.paths import SERVERS
from support.servers.llm_api import (
    ScriptedLLM,
    anthropic_blocks,
    anthropic_text,
    openai_text,
    openai_tool_calls,
    scripted_llm,
)

ERAS = ["handshake", "modern"]
WEATHER = {
    "name": "weather",
    "description": "The weather in a city",
    "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()


def sampling_server() -> MCPKit:
    app = MCPKit("asks-the-model")

    @app.tool
    async def ask(ctx: Context, question: str, hint: str = "", image: bool = False) -> str:
        content: Any = {"type": "text", "text": question}
        if image:
            content = [content, {"type": "image", "data": PNG, "mimeType": "image/png"}]
        prefs = {"hints": [{"name": hint}]} if hint else None
        try:
            r = await ctx.sample(
                [{"role": "user", "content": content}],
                max_tokens=50,
                system_prompt="Answer in one word.",
                temperature=0.2,
                stop_sequences=["END"],
                model_preferences=prefs,
            )
        except Exception as exc:  # what the client answered, for the test to read
            return json.dumps({"error": str(exc), "code": getattr(exc, "code", None)})
        return json.dumps(r.model_dump(by_alias=True, exclude_none=True, mode="json"))

    @app.tool
    async def weather_loop(ctx: Context, messages: list[dict[str, Any]]) -> str:
        try:
            r = await ctx.sample(messages, max_tokens=200, tools=[WEATHER], tool_choice={"mode": "required"})
        except Exception as exc:
            return json.dumps({"error": str(exc), "code": getattr(exc, "code", None)})
        return json.dumps(r.model_dump(by_alias=True, exclude_none=True, mode="json"))

    return app


def openai_client(llm: ScriptedLLM) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=llm.base + "/v1", api_key="sk-test", max_retries=0)


def anthropic_client(llm: ScriptedLLM) -> AsyncAnthropic:
    return AsyncAnthropic(base_url=llm.base, api_key="sk-ant-test", max_retries=0)


async def call(mode: str, handler: Any, tool: str, args: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """The tool's answer; an error the handler raised as ``{"error", "code"}``, read where each era puts it: the
    server's ``ctx.sample`` gets it as a JSON-RPC error in the handshake era, while 2026-07-28 has no error answer
    for an input request, so the client's call fails with it (the handler's exception is the cause)."""
    async with Client(sampling_server(), mode=mode, sampling_handler=handler, **kw) as c:
        try:
            r = await c.call_tool(tool, args)
        except InputHandlerError as exc:
            assert mode == "modern" and exc.handler == "sampling/createMessage"
            cause = exc.__cause__
            assert isinstance(cause, MCPError)
            return {"error": cause.message, "code": cause.code}
    result: dict[str, Any] = json.loads(r.text)
    return result


async def tool_loop(sampler: Any, use_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The spec's tool loop (2025-11-25): the server asks with its tools, the model asks for ``weather``
    (``stopReason: "toolUse"``), and the server asks again with the tool's result for ``use_id``. Both answers."""
    first_turn = [{"role": "user", "content": {"type": "text", "text": "Weather in Paris?"}}]
    first = await call("handshake", sampler, "weather_loop", {"messages": first_turn}, sampling_tools=True)
    assert first["stopReason"] == "toolUse"
    result = {"type": "tool_result", "toolUseId": use_id, "content": [{"type": "text", "text": "sunny"}]}
    second_turn = [
        *first_turn,
        {"role": "assistant", "content": first["content"]},
        {"role": "user", "content": [result]},
    ]
    second = await call("handshake", sampler, "weather_loop", {"messages": second_turn}, sampling_tools=True)
    return first, second


# ---------------------------------------------------------------------------------------------- OpenAI


@pytest.mark.req("M076", "M077")
@pytest.mark.parametrize("mode", ERAS)
async def test_openai_answers_a_servers_question_with_its_parameters_mapped(mode: str) -> None:
    async with scripted_llm() as llm:
        llm.replies.append(openai_text("Four", model="gpt-answered"))
        sampler = OpenAISampler(openai_client(llm), model="gpt-default", max_tokens=40)
        result = await call(mode, sampler, "ask", {"question": "What is 2+2?"})
    assert result == {
        "role": "assistant",
        "content": {"type": "text", "text": "Four"},
        "model": "gpt-answered",
        "stopReason": "endTurn",
    }
    path, headers, body = llm.requests[0]
    assert path == "/v1/chat/completions" and headers["authorization"] == "Bearer sk-test"
    assert body["model"] == "gpt-default"
    assert body["messages"] == [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": [{"type": "text", "text": "What is 2+2?"}]},
    ]
    # the server asked for 50 tokens; the client's own cap (40) is lower: the lower bound is what the model gets
    assert body["max_completion_tokens"] == 40
    assert body["temperature"] == 0.2 and body["stop"] == ["END"]


@pytest.mark.parametrize("mode", ERAS)
async def test_openai_stop_reasons_map_to_the_specs_names(mode: str) -> None:
    async with scripted_llm() as llm:
        llm.replies.append(openai_text("Fo", finish="length"))
        result = await call(mode, OpenAISampler(openai_client(llm), model="m"), "ask", {"question": "q"})
    assert result["stopReason"] == "maxTokens"


@pytest.mark.parametrize("mode", ERAS)
async def test_openai_images_go_as_data_urls(mode: str) -> None:
    async with scripted_llm() as llm:
        await call(mode, OpenAISampler(openai_client(llm), model="m"), "ask", {"question": "q", "image": True})
    assert llm.bodies[0]["messages"][1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{PNG}"},
    }


async def test_openai_tool_use_round_trip_follows_the_specs_tool_loop() -> None:
    """2025-11-25: the model asks for a tool (stopReason toolUse, tool_use blocks); the server runs it and samples
    again with the tool_result, which the provider gets as its own tool message."""
    async with scripted_llm() as llm:
        llm.replies.append(openai_tool_calls([("call_1", "weather", {"city": "Paris"})]))
        llm.replies.append(openai_text("Sunny in Paris"))
        first, second = await tool_loop(OpenAISampler(openai_client(llm), model="m"), "call_1")
    assert first["content"] == [{"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Paris"}}]
    assert second["content"] == {"type": "text", "text": "Sunny in Paris"}
    asked = llm.bodies[0]
    assert asked["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "The weather in a city",
                "parameters": WEATHER["inputSchema"],
            },
        }
    ]
    assert asked["tool_choice"] == "required"
    followed = llm.bodies[1]["messages"]
    assert followed[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}
        ],
    }
    assert followed[2] == {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}


# ---------------------------------------------------------------------------------------------- Anthropic


@pytest.mark.req("M076", "M077")
@pytest.mark.parametrize("mode", ERAS)
async def test_anthropic_answers_a_servers_question_with_its_parameters_mapped(mode: str) -> None:
    async with scripted_llm() as llm:
        llm.replies.append(anthropic_text("Four", stop="stop_sequence", model="claude-answered"))
        sampler = AnthropicSampler(anthropic_client(llm), model="claude-default")
        result = await call(mode, sampler, "ask", {"question": "What is 2+2?", "image": True})
    assert result == {
        "role": "assistant",
        "content": {"type": "text", "text": "Four"},
        "model": "claude-answered",
        "stopReason": "stopSequence",
    }
    path, headers, body = llm.requests[0]
    assert path == "/v1/messages"
    assert "sk-ant-test" in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "))
    assert body["model"] == "claude-default" and body["max_tokens"] == 50
    assert body["system"] == "Answer in one word."
    assert body["temperature"] == 0.2 and body["stop_sequences"] == ["END"]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is 2+2?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            ],
        }
    ]


async def test_anthropic_tool_use_round_trip_follows_the_specs_tool_loop() -> None:
    async with scripted_llm() as llm:
        llm.replies.append(
            anthropic_blocks(
                [
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
                ],
                stop="tool_use",
            )
        )
        llm.replies.append(anthropic_text("Sunny"))
        first, second = await tool_loop(AnthropicSampler(anthropic_client(llm), model="m"), "toolu_1")
    assert first["content"] == [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
    ]
    assert second["content"] == {"type": "text", "text": "Sunny"}
    assert llm.bodies[0]["tools"] == [
        {"name": "weather", "description": "The weather in a city", "input_schema": WEATHER["inputSchema"]}
    ]
    assert llm.bodies[0]["tool_choice"] == {"type": "any"}
    assert llm.bodies[1]["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]}],
    }


@pytest.mark.parametrize("mode", ERAS)
async def test_audio_is_refused_with_a_clear_error_by_a_provider_that_takes_none(mode: str) -> None:
    audio = {"type": "audio", "data": base64.b64encode(b"RIFF").decode(), "mimeType": "audio/wav"}
    async with scripted_llm() as llm:
        result = await call(
            mode,
            AnthropicSampler(anthropic_client(llm), model="m"),
            "weather_loop",
            {"messages": [{"role": "user", "content": audio}]},
            sampling_tools=True,
        )
    assert result["code"] == -32602 and "audio" in result["error"]
    assert llm.requests == []  # refused before anything was sent (and paid for)


# ---------------------------------------------------------------------------------------------- both


@pytest.mark.parametrize("mode", ERAS)
async def test_a_request_the_user_rejects_gets_the_specs_error_and_reaches_no_provider(mode: str) -> None:
    seen: list[str] = []

    def approve(params: Any) -> bool:
        seen.append(params.text)
        return False

    async with scripted_llm() as llm:
        sampler = OpenAISampler(openai_client(llm), model="m", approve=approve)
        result = await call(mode, sampler, "ask", {"question": "Spend my money?"})
    assert seen == ["Spend my money?"]
    assert result["code"] == -1 and "rejected" in result["error"]
    assert llm.requests == []


@pytest.mark.parametrize(
    ("messages", "why"),
    [
        (
            [
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "weather", "input": {}}]},
                {"role": "user", "content": [{"type": "text", "text": "and?"}]},
            ],
            "Tool result missing",
        ),
        (
            [
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "weather", "input": {}}]},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "toolUseId": "t1", "content": []},
                        {"type": "text", "text": "x"},
                    ],
                },
            ],
            "mixed with other content",
        ),
    ],
)
@pytest.mark.parametrize("sampler", ["openai", "anthropic"])
async def test_a_broken_tool_loop_is_refused_invalid_params(messages: Any, why: str, sampler: str) -> None:
    async with scripted_llm() as llm:
        handler = (
            OpenAISampler(openai_client(llm), model="m")
            if sampler == "openai"
            else AnthropicSampler(anthropic_client(llm), model="m")
        )
        result = await call("handshake", handler, "weather_loop", {"messages": messages}, sampling_tools=True)
    assert result["code"] == -32602 and why in result["error"]
    assert llm.requests == []


@pytest.mark.parametrize("mode", ERAS)
async def test_a_provider_failure_is_an_error_the_server_reads_without_the_key(mode: str) -> None:
    async with scripted_llm() as llm:
        llm.replies.append((429, {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}))
        result = await call(mode, AnthropicSampler(anthropic_client(llm), model="m"), "ask", {"question": "q"})
    assert result["code"] == -32603 and "429" in result["error"] and "Rate limit reached" in result["error"]
    assert "sk-ant-test" not in result["error"]


@pytest.mark.parametrize("mode", ERAS)
async def test_the_servers_model_hint_picks_among_the_models_the_user_allows(mode: str) -> None:
    async with scripted_llm() as llm:
        sampler = AnthropicSampler(
            anthropic_client(llm), model="claude-default", models=["claude-haiku-9", "claude-sonnet-9-1"]
        )
        await call(mode, sampler, "ask", {"question": "q", "hint": "SONNET"})
        await call(mode, sampler, "ask", {"question": "q", "hint": "gpt-4o"})  # no allowed model matches
    assert [b["model"] for b in llm.bodies] == ["claude-sonnet-9-1", "claude-default"]


def test_choose_model_takes_hints_in_order_and_never_a_model_the_user_did_not_allow() -> None:
    allowed = ["claude-haiku-9", "claude-sonnet-9-1"]
    assert choose_model({"hints": [{"name": "opus"}, {"name": "haiku"}]}, "d", allowed) == "claude-haiku-9"
    assert choose_model({"hints": [{"name": "claude-opus-5"}]}, "d", allowed) == "d"
    assert choose_model(None, "d", allowed) == "d"
    assert choose_model({"hints": [{"name": ""}], "costPriority": 1}, "d", allowed) == "d"


def test_a_sampler_made_without_a_client_names_the_extra_when_the_sdk_is_missing() -> None:
    code = (
        "import sys; sys.modules['openai'] = None\n"
        "from mcpkit.client.sampling import OpenAISampler\n"
        "try:\n    OpenAISampler(model='m')\nexcept ImportError as e:\n    print(e)\n"
    )
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "pip install 'mcpkit[openai]'" in out.stdout


@pytest.mark.parametrize("mode", ERAS)
async def test_a_server_in_a_subprocess_gets_the_models_answer_over_stdio(mode: str) -> None:
    server = [sys.executable, str(SERVERS / "client_server.py")]
    async with scripted_llm() as llm:
        llm.replies.append(openai_text("Paris"))
        async with Client(server, mode=mode, sampling_handler=OpenAISampler(openai_client(llm), model="m")) as c:
            r = await c.call_tool("sample", {"prompt": "capital of France?"})
    assert json.loads(r.text)["content"] == {"type": "text", "text": "Paris"}
    assert llm.bodies[0]["messages"] == [{"role": "user", "content": [{"type": "text", "text": "capital of France?"}]}]


async def test_a_long_provider_error_reaches_the_server_as_one_bounded_line() -> None:
    async with scripted_llm() as llm:
        llm.replies.append((500, {"error": {"message": "boom\n\x1b[31m" + "x" * 5000, "type": "api_error"}}))
        result = await call("handshake", AnthropicSampler(anthropic_client(llm), model="m"), "ask", {"question": "q"})
    prefix = "the Anthropic request failed: "
    assert result["error"].startswith(prefix) and len(result["error"]) <= len(prefix) + MAX_ERROR_CHARS
    assert "\n" not in result["error"] and "\x1b" not in result["error"]


@pytest.mark.parametrize("sampler", ["openai", "anthropic"])
async def test_a_key_the_provider_echoes_in_its_error_is_not_passed_on(sampler: str) -> None:
    # a proxy or compatible server may say which key it refused: the server asking for the sample never reads it
    async with scripted_llm() as llm:
        handler: Any
        if sampler == "openai":
            handler = OpenAISampler(openai_client(llm), model="m")
            key = "sk-test"
        else:
            handler = AnthropicSampler(anthropic_client(llm), model="m")
            key = "sk-ant-test"
        llm.replies.append((401, {"error": {"message": f"Invalid API key: Bearer {key}", "type": "auth"}}))
        result = await call("handshake", handler, "ask", {"question": "q"})
    assert result["code"] == -32603 and "401" in result["error"] and "Invalid API key" in result["error"]
    assert key not in result["error"]


async def test_openai_tool_arguments_that_are_not_an_object_fail_with_a_clear_error() -> None:
    # the spec's tool_use input is an object: a model's '[1, 2]' is the provider's fault, said as such
    async with scripted_llm() as llm:
        calls = openai_tool_calls([("call_1", "weather", {})])
        calls[1]["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = "[1, 2]"
        llm.replies.append(calls)
        turn = [{"role": "user", "content": {"type": "text", "text": "Weather?"}}]
        sampler = OpenAISampler(openai_client(llm), model="m")
        result = await call("handshake", sampler, "weather_loop", {"messages": turn}, sampling_tools=True)
    assert result["code"] == -32603
    assert "the model called 'weather' with arguments that are not a JSON object" in result["error"]


@pytest.mark.parametrize("mode", ERAS)
async def test_an_openai_refusal_reaches_the_server_as_its_text(mode: str) -> None:
    async with scripted_llm() as llm:
        status, body = openai_text("")
        body["choices"][0]["message"] = {"role": "assistant", "content": None, "refusal": "I cannot help with that."}
        llm.replies.append((status, body))
        result = await call(mode, OpenAISampler(openai_client(llm), model="m"), "ask", {"question": "q"})
    assert result["content"] == {"type": "text", "text": "I cannot help with that."}
    assert result["stopReason"] == "refusal"  # (Anthropic's own stop reason for the same, passed on as it is)


@pytest.mark.parametrize(
    ("sampler", "block", "named"),
    [
        ("openai", {"type": "image", "data": PNG, "mimeType": "image/png"}, "image"),
        ("anthropic", {"type": "audio", "data": PNG, "mimeType": "audio/wav"}, "audio"),
        ("anthropic", {"type": "resource_link", "uri": "file:///x", "name": "x"}, "resource_link"),
    ],
)
async def test_tool_result_content_a_provider_cannot_take_is_refused_not_dropped(
    sampler: str, block: dict[str, Any], named: str
) -> None:
    # the model would otherwise see the tool's answer without what the server put in it, and answer from less
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "weather", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "toolUseId": "t1", "content": [block]}]},
    ]
    async with scripted_llm() as llm:
        handler = (
            OpenAISampler(openai_client(llm), model="m")
            if sampler == "openai"
            else AnthropicSampler(anthropic_client(llm), model="m")
        )
        result = await call("handshake", handler, "weather_loop", {"messages": messages}, sampling_tools=True)
    assert result["code"] == -32602 and named in result["error"] and "tool result" in result["error"]
    assert llm.requests == []
