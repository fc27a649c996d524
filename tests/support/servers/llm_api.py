"""A scripted model provider on 127.0.0.1 for the sampling handlers' tests: the routes of the OpenAI Chat
Completions API (``POST /v1/chat/completions``) and of the Anthropic Messages API (``POST /v1/messages``), so the
real ``openai`` and ``anthropic`` SDKs talk HTTP to it as they would to the providers.

    async with scripted_llm() as llm:
        llm.replies.append(anthropic_text("4"))          # the next answers, in order (a default text when empty)
        sampler = AnthropicSampler(AsyncAnthropic(base_url=llm.base, api_key="k", max_retries=0), model="m")
        ...
        llm.bodies[-1]                                    # what the SDK sent, as JSON

A reply is ``(status, body)``; every request is recorded (path, headers, JSON body) in order.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from support.asgi import read_body, serve_asgi

Reply = tuple[int, Any]


def openai_text(text: str, *, finish: str = "stop", model: str = "gpt-scripted") -> Reply:
    """A chat completion whose one choice says ``text``."""
    message = {"role": "assistant", "content": text}
    return 200, _completion(message, finish, model)


def openai_tool_calls(calls: list[tuple[str, str, dict[str, Any]]], *, text: str | None = None) -> Reply:
    """A chat completion asking for tool calls ``(id, name, arguments)``."""
    message = {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in calls
        ],
    }
    return 200, _completion(message, "tool_calls", "gpt-scripted")


def _completion(message: dict[str, Any], finish: str, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def anthropic_blocks(blocks: list[dict[str, Any]], *, stop: str = "end_turn", model: str = "claude-scripted") -> Reply:
    """A message made of content ``blocks``."""
    return 200, {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


def anthropic_text(text: str, *, stop: str = "end_turn", model: str = "claude-scripted") -> Reply:
    """A message that says ``text``."""
    return anthropic_blocks([{"type": "text", "text": text}], stop=stop, model=model)


class ScriptedLLM:
    """The app (see the module docstring); ``base`` is set once it listens."""

    def __init__(self) -> None:
        self.base = ""
        self.replies: list[Reply] = []
        self.requests: list[tuple[str, dict[str, str], Any]] = []

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies received, in order."""
        return [body for _, _, body in self.requests]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        body = json.loads(await read_body(receive) or b"null")
        path = scope["path"]
        self.requests.append((path, headers, body))
        if self.replies:
            status, answer = self.replies.pop(0)
        elif path.endswith("/messages"):
            status, answer = anthropic_text("scripted")
        else:
            status, answer = openai_text("scripted")
        data = json.dumps(answer).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": data})


@contextlib.asynccontextmanager
async def scripted_llm() -> AsyncIterator[ScriptedLLM]:
    """Serve a :class:`ScriptedLLM` on 127.0.0.1; ``base`` is its URL (``/v1`` for OpenAI's SDK)."""
    llm = ScriptedLLM()
    async with serve_asgi(llm) as port:
        llm.base = f"http://127.0.0.1:{port}"
        yield llm
