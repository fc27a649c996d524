"""Sampling handlers backed by a model provider: a server's ``sampling/createMessage`` answered by OpenAI's Chat
Completions API or Anthropic's Messages API, through the provider's own SDK.

    from anthropic import AsyncAnthropic
    from mcpkit.client.sampling import AnthropicSampler

    sampler = AnthropicSampler(AsyncAnthropic(), model="claude-sonnet-4-5", max_tokens=2048)
    async with Client(target, sampling_handler=sampler, sampling_tools=True) as client: ...

What the handlers do with the server's request, in the words of the specification (``client/sampling``):

- **maxTokens** is respected: the model gets the lower of the server's ``maxTokens`` and the handler's own
  ``max_tokens`` cap (a server cannot spend more of the user's tokens than the user allows).
- **Model preferences**: the server's hints are substrings tried in order against the models the user allows
  (``models=``); the first allowed model a hint matches is used, else ``model``. A hint never selects a model the
  user did not list (:func:`choose_model`).
- **Human in the loop**: ``approve`` (sync or async) sees each request first; a False answer refuses it with the
  specification's ``-1`` "User rejected sampling request", and nothing reaches the provider.
- **Tools** (2025-11-25 on, with ``sampling_tools=True``): the server's tools and ``toolChoice`` become the
  provider's; a model asking for tools answers with ``tool_use`` blocks and ``stopReason: "toolUse"``; the
  server's ``tool_result`` blocks go back as the provider's tool results. A conversation that breaks the tool loop
  is refused ``-32602`` before anything is sent, as the specification asks: a ``tool_use`` with no matching
  ``tool_result`` ("Tool result missing in request"), or a message with tool results "mixed with other content".
- **Content** the provider cannot take (audio for Anthropic, images in an assistant turn for OpenAI, anything but
  text in a tool result for OpenAI, anything but text and images there for Anthropic) is refused ``-32602``
  naming it, before anything is sent; a provider's failure (rate limit, bad key, outage) is a ``-32603`` whose
  message carries the provider's status and message (never the key: the SDK client's ``api_key`` /
  ``auth_token`` is cut out of it, even when the provider or a proxy quotes it back).

The SDKs are the user's: pass a configured client (``AsyncOpenAI(...)``, ``AsyncAnthropic(...)``: keys, base URL,
retries and timeouts are set there), or none to have one made from the environment (``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY``), which needs the ``openai`` or ``anthropic`` extra.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar

from .._extras import require
from ..protocol.errors import InternalError, InvalidParams, MCPError
from ..protocol.jsonrpc import JSONDict

__all__ = ["MAX_ERROR_CHARS", "AnthropicSampler", "OpenAISampler", "SamplingRejected", "choose_model"]

#: the characters of a provider's error message kept in the error the server gets
MAX_ERROR_CHARS = 500

Approve = Callable[[Any], "bool | Awaitable[bool]"]


class SamplingRejected(MCPError):
    """``-1``: the user (the ``approve`` callback) refused the server's sampling request."""

    code = -1
    default_message = "User rejected sampling request"


def choose_model(preferences: Mapping[str, Any] | None, default: str, models: Sequence[str]) -> str:
    """The model for a request: the first of ``models`` that a hint of ``preferences`` names (hints in the
    server's order, each a case-insensitive substring of a model's name), else ``default``."""
    hints = preferences.get("hints") if isinstance(preferences, Mapping) else None
    if not isinstance(hints, list) or not models:
        return default
    for hint in hints:
        name = hint.get("name") if isinstance(hint, Mapping) else None
        if isinstance(name, str) and name:
            wanted = name.lower()
            for model in models:
                if wanted in model.lower():
                    return model
    return default


class _Sampler:
    """What both providers' handlers share: the approval, the checks, the model and token choice.

    Args:
        client: the provider SDK's async client; None makes one from the environment (the provider's extra).
        model: the model used when no hint of the server names one of ``models``.
        models: the models a server's hints may pick (see :func:`choose_model`).
        max_tokens: the most tokens any request may use, whatever the server asks.
        approve: ``(params) -> bool`` (sync or async), asked before each request; False refuses it (``-1``).
    """

    provider: ClassVar[str] = ""

    def __init__(
        self,
        client: Any = None,
        *,
        model: str,
        models: Sequence[str] = (),
        max_tokens: int | None = None,
        approve: Approve | None = None,
    ) -> None:
        if max_tokens is not None and max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        self.client: Any = client if client is not None else self._default_client()
        self.model: str = model
        self.models: tuple[str, ...] = tuple(models)
        self.max_tokens: int | None = max_tokens
        self.approve: Approve | None = approve

    def _default_client(self) -> Any:
        raise NotImplementedError

    async def __call__(self, params: Any) -> JSONDict:
        """Answer one ``sampling/createMessage`` (``params``: its params, a dict or :class:`.SamplingParams`)."""
        if self.approve is not None:
            verdict = self.approve(params)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            if not verdict:
                raise SamplingRejected()
        messages = params.get("messages")
        if not isinstance(messages, list) or not messages:
            raise InvalidParams("sampling needs at least one message")
        turns = [_turn(m) for m in messages]
        _check_tool_loop(turns)
        asked = params.get("maxTokens")
        tokens = asked if type(asked) is int and asked > 0 else 1024
        if self.max_tokens is not None:
            tokens = min(tokens, self.max_tokens)
        model = choose_model(params.get("modelPreferences"), self.model, self.models)
        request = self._request(params, turns, model, tokens)
        try:
            answer = await self._send(request)
        except Exception as exc:
            said = f"{type(exc).__name__}: {exc}"
            for secret in self._secrets():  # (before cutting: a cut could keep half of one)
                said = said.replace(secret, "[the key]")
            said = "".join(c if c.isprintable() else " " for c in said[: MAX_ERROR_CHARS * 2])
            text = " ".join(said.split())  # (one line, no control characters)
            raise InternalError(f"the {self.provider} request failed: {text[:MAX_ERROR_CHARS]}") from None
        return self._result(answer, model)

    def _secrets(self) -> list[str]:
        """The credentials the SDK client sends, which a provider's (or a proxy's) error may quote back: never
        passed on to the server. (Read as the SDKs name them; a client without them has none to hide.)"""
        found = (getattr(self.client, name, None) for name in ("api_key", "auth_token"))
        return [v for v in found if isinstance(v, str) and len(v) >= 4]

    def _request(self, params: Any, turns: list[tuple[str, list[JSONDict]]], model: str, tokens: int) -> JSONDict:
        raise NotImplementedError

    async def _send(self, request: JSONDict) -> JSONDict:
        raise NotImplementedError

    def _result(self, answer: JSONDict, model: str) -> JSONDict:
        raise NotImplementedError


class OpenAISampler(_Sampler):
    """A sampling handler that asks an OpenAI Chat Completions model (``client.chat.completions.create``):
    ``OpenAISampler(client=None, *, model, models=(), max_tokens=None, approve=None)``.

    ``client``: an ``openai.AsyncOpenAI`` (or a compatible client: Azure, a local server with the same API); None
    makes ``AsyncOpenAI()`` from the environment (the ``openai`` extra). ``model``: the model used when no hint of
    the server names one of ``models``, the models a server's hints may pick (:func:`choose_model`).
    ``max_tokens``: the most tokens any request may use, whatever the server asks. ``approve``: ``(params) ->
    bool`` (sync or async), asked before each request; False refuses it (``-1``)."""

    provider: ClassVar[str] = "OpenAI"

    def _default_client(self) -> Any:
        return require("openai", "OpenAISampler without a client").AsyncOpenAI()

    def _request(self, params: Any, turns: list[tuple[str, list[JSONDict]]], model: str, tokens: int) -> JSONDict:
        messages: list[JSONDict] = []
        system = params.get("systemPrompt")
        if isinstance(system, str) and system:
            messages.append({"role": "system", "content": system})
        for role, blocks in turns:
            messages.extend(_openai_messages(role, blocks))
        request: JSONDict = {"model": model, "messages": messages, "max_completion_tokens": tokens}
        _common(params, request, "stop")
        tools = params.get("tools")
        if isinstance(tools, list) and tools:
            request["tools"] = [
                {"type": "function", "function": _described(t, "parameters")} for t in tools if isinstance(t, Mapping)
            ]
        mode = _tool_mode(params)
        if mode is not None:
            request["tool_choice"] = mode
        return request

    async def _send(self, request: JSONDict) -> JSONDict:
        answer = await self.client.chat.completions.create(**request)
        dumped: JSONDict = answer.model_dump()
        return dumped

    def _result(self, answer: JSONDict, model: str) -> JSONDict:
        choices = answer.get("choices") or []
        if not choices:
            raise InternalError("the OpenAI answer has no choice")
        message = choices[0].get("message") or {}
        blocks: list[JSONDict] = []
        text = message.get("content")
        refusal = message.get("refusal")
        if isinstance(text, str) and text:
            blocks.append({"type": "text", "text": text})
        elif isinstance(refusal, str) and refusal:  # (the model declined: its words, not an empty answer)
            blocks.append({"type": "text", "text": refusal})
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = None
            if not isinstance(arguments, dict):  # (a tool_use input is an object)
                name = function.get("name")
                raise InternalError(f"the model called {name!r} with arguments that are not a JSON object")
            blocks.append({"type": "tool_use", "id": call.get("id"), "name": function.get("name"), "input": arguments})
        reason = choices[0].get("finish_reason")
        stop = _OPENAI_STOPS.get(reason, reason) if reason else None
        if refusal and not text and not blocks[1:]:
            stop = "refusal"  # (Anthropic's stop reason for the same, which its handler passes on as it is)
        return _answer(blocks, answer.get("model") or model, stop)


class AnthropicSampler(_Sampler):
    """A sampling handler that asks an Anthropic model (``client.messages.create``):
    ``AnthropicSampler(client=None, *, model, models=(), max_tokens=None, approve=None)``.

    ``client``: an ``anthropic.AsyncAnthropic`` (or ``AsyncAnthropicBedrock``, ``AsyncAnthropicVertex``); None
    makes ``AsyncAnthropic()`` from the environment (the ``anthropic`` extra). The other arguments are
    :class:`OpenAISampler`'s."""

    provider: ClassVar[str] = "Anthropic"

    def _default_client(self) -> Any:
        return require("anthropic", "AnthropicSampler without a client").AsyncAnthropic()

    def _request(self, params: Any, turns: list[tuple[str, list[JSONDict]]], model: str, tokens: int) -> JSONDict:
        messages = [{"role": role, "content": [_anthropic_block(b) for b in blocks]} for role, blocks in turns]
        request: JSONDict = {"model": model, "messages": messages, "max_tokens": tokens}
        system = params.get("systemPrompt")
        if isinstance(system, str) and system:
            request["system"] = system
        _common(params, request, "stop_sequences")
        if "temperature" in request:  # (newer SDKs dropped the argument; the API still reads it where a model takes it)
            request["extra_body"] = {"temperature": request.pop("temperature")}
        tools = params.get("tools")
        if isinstance(tools, list) and tools:
            request["tools"] = [_described(t, "input_schema") for t in tools if isinstance(t, Mapping)]
        mode = _tool_mode(params)
        if mode is not None:
            request["tool_choice"] = {"type": _ANTHROPIC_CHOICES[mode]}
        return request

    async def _send(self, request: JSONDict) -> JSONDict:
        answer = await self.client.messages.create(**request)
        dumped: JSONDict = answer.model_dump()
        return dumped

    def _result(self, answer: JSONDict, model: str) -> JSONDict:
        blocks: list[JSONDict] = []
        for block in answer.get("content") or []:
            kind = block.get("type")
            if kind == "text":
                blocks.append({"type": "text", "text": block.get("text", "")})
            elif kind == "tool_use":
                blocks.append(
                    {"type": "tool_use", "id": block.get("id"), "name": block.get("name"), "input": block.get("input")}
                )
            # (thinking and server-tool blocks have no MCP form: left out)
        reason = answer.get("stop_reason")
        return _answer(blocks, answer.get("model") or model, _ANTHROPIC_STOPS.get(reason, reason) if reason else None)


# ---------------------------------------------------------------------------------------------- shared


_OPENAI_STOPS = {"stop": "endTurn", "length": "maxTokens", "tool_calls": "toolUse", "function_call": "toolUse"}
_ANTHROPIC_STOPS = {
    "end_turn": "endTurn",
    "max_tokens": "maxTokens",
    "stop_sequence": "stopSequence",
    "tool_use": "toolUse",
}
_ANTHROPIC_CHOICES = {"auto": "auto", "required": "any", "none": "none"}
_OPENAI_AUDIO = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


def _turn(message: Any) -> tuple[str, list[JSONDict]]:
    """A sampling message as (role, its content blocks as a list)."""
    if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant"):
        raise InvalidParams("a sampling message needs a role of 'user' or 'assistant'")
    content = message.get("content")
    blocks: list[JSONDict] = []
    for block in content if isinstance(content, list) else [content]:
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            raise InvalidParams("a sampling message's content must be content blocks with a type")
        blocks.append(dict(block))
    return message["role"], blocks


def _check_tool_loop(turns: list[tuple[str, list[JSONDict]]]) -> None:
    """The specification's rules for tool use in sampling: a message with tool results holds nothing else, and
    each ``tool_use`` is answered by a ``tool_result`` of the same id in the next (user) message."""
    for i, (role, blocks) in enumerate(turns):
        results = [b for b in blocks if b["type"] == "tool_result"]
        if results and len(results) != len(blocks):
            raise InvalidParams("Tool results mixed with other content: a message with tool results holds only them")
        uses = [b.get("id") for b in blocks if b["type"] == "tool_use"]
        if role != "assistant" or not uses:
            continue
        answered = (
            {b.get("toolUseId") for b in turns[i + 1][1] if b["type"] == "tool_result"} if i + 1 < len(turns) else set()
        )
        missing = [u for u in uses if u not in answered]
        if missing:
            raise InvalidParams(f"Tool result missing in request: tool_use {missing[0]!r} has no tool_result after it")


def _common(params: Any, request: JSONDict, stop_name: str) -> None:
    temperature = params.get("temperature")
    if isinstance(temperature, (int, float)) and not isinstance(temperature, bool):
        request["temperature"] = temperature
    stops = params.get("stopSequences")
    if isinstance(stops, list) and stops:
        request[stop_name] = stops


def _described(tool: Mapping[str, Any], schema_name: str) -> JSONDict:
    out: JSONDict = {"name": tool.get("name")}
    if isinstance(tool.get("description"), str):
        out["description"] = tool["description"]
    out[schema_name] = tool.get("inputSchema") or {"type": "object"}
    return out


def _tool_mode(params: Any) -> str | None:
    choice = params.get("toolChoice")
    mode = choice.get("mode") if isinstance(choice, Mapping) else None
    return mode if mode in _ANTHROPIC_CHOICES else None


def _answer(blocks: list[JSONDict], model: str, stop: Any) -> JSONDict:
    """A ``CreateMessageResult``: one text block as an object (what every revision reads); tool use, and several
    blocks, as a list (2025-11-25 on, the only revisions where a model's tool use is possible at all)."""
    if not blocks:
        blocks = [{"type": "text", "text": ""}]
    one = len(blocks) == 1 and blocks[0]["type"] == "text"
    result: JSONDict = {"role": "assistant", "content": blocks[0] if one else blocks, "model": model}
    if isinstance(stop, str):
        result["stopReason"] = stop
    return result


def _result_text(block: Mapping[str, Any]) -> str:
    """A ``tool_result``'s content as text (its text blocks; its structured content when it has no text): any
    other content is refused (OpenAI's tool messages hold text only), not dropped unseen."""
    content = [c for c in block.get("content") or [] if isinstance(c, Mapping)]
    for c in content:
        if c.get("type") != "text":
            raise InvalidParams(f"OpenAI takes only text in a tool result, not {c.get('type')} content")
    parts = [c.get("text", "") for c in content]
    if not parts and block.get("structuredContent") is not None:
        parts = [json.dumps(block["structuredContent"])]
    return "\n".join(parts)


def _openai_messages(role: str, blocks: list[JSONDict]) -> list[JSONDict]:
    if blocks and blocks[0]["type"] == "tool_result":  # (only tool results: _check_tool_loop)
        return [
            {
                "role": "tool",
                "tool_call_id": b.get("toolUseId"),
                "content": ("Error: " if b.get("isError") else "") + _result_text(b),
            }
            for b in blocks
        ]
    if role == "assistant":
        text = "".join(b.get("text", "") for b in blocks if b["type"] == "text")
        calls = [
            {
                "id": b.get("id"),
                "type": "function",
                "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input") or {})},
            }
            for b in blocks
            if b["type"] == "tool_use"
        ]
        other = [b["type"] for b in blocks if b["type"] not in ("text", "tool_use")]
        if other:
            raise InvalidParams(f"OpenAI takes no {other[0]} content in an assistant message")
        message: JSONDict = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = calls
        return [message]
    return [{"role": "user", "content": [_openai_part(b) for b in blocks]}]


def _openai_part(block: JSONDict) -> JSONDict:
    kind = block["type"]
    if kind == "text":
        return {"type": "text", "text": block.get("text", "")}
    if kind == "image":
        return {"type": "image_url", "image_url": {"url": f"data:{block.get('mimeType')};base64,{block.get('data')}"}}
    if kind == "audio":
        fmt = _OPENAI_AUDIO.get(str(block.get("mimeType")).lower())
        if fmt is None:
            raise InvalidParams(f"OpenAI takes audio as WAV or MP3, not {block.get('mimeType')}")
        return {"type": "input_audio", "input_audio": {"data": block.get("data"), "format": fmt}}
    raise InvalidParams(f"OpenAI takes no {kind} content in a user message")


def _anthropic_block(block: JSONDict) -> JSONDict:
    kind = block["type"]
    if kind == "text":
        return {"type": "text", "text": block.get("text", "")}
    if kind == "image":
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": block.get("mimeType"), "data": block.get("data")},
        }
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.get("id"), "name": block.get("name"), "input": block.get("input") or {}}
    if kind == "tool_result":
        content = []
        for c in block.get("content") or []:
            if not isinstance(c, Mapping):
                continue
            if c.get("type") not in ("text", "image"):  # (refused, not dropped unseen)
                raise InvalidParams(f"Anthropic takes text and images in a tool result, not {c.get('type')} content")
            content.append(_anthropic_block(dict(c)))
        if not content and block.get("structuredContent") is not None:
            content = [{"type": "text", "text": json.dumps(block["structuredContent"])}]
        out: JSONDict = {"type": "tool_result", "tool_use_id": block.get("toolUseId"), "content": content}
        if block.get("isError"):
            out["is_error"] = True
        return out
    raise InvalidParams(f"Anthropic takes no {kind} content (text, images, tool use and tool results only)")
