"""How a :class:`~mcpkit.client.lowlevel.ClientSession` answers what the server asks of it, by one set of handlers
in both eras: the handshake era's server→client requests (``roots/list``, ``sampling/createMessage``,
``elicitation/create``) and the input requests of a 2026-07-28 ``InputRequiredResult`` (at most
``max_input_requests`` of them, their encoded answers at most ``max_input_reply_size`` bytes, each answered in one
of the peer's ``max_concurrency`` slots). A request for a capability the client did not declare is refused with
-32601 (Method not found); the handlers' results are checked against the schema unless ``relay_answers``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from ..engine import Peer
from ..protocol.errors import InvalidParams, MCPError, MethodNotFound
from ..protocol.jsonrpc import JSONDict
from ..protocol.types import CreateMessageResult, ElicitResult, Root
from ..protocol.versions import Features
from . import handlers as h
from .forms import check_form
from .handlers import as_dict, maybe_await, validated_answer
from .results import InputHandlerError

RootsProvider = Sequence[Root | JSONDict | str] | Callable[[], Any]


class RequestAnswering:
    """The answering half of :class:`~mcpkit.client.lowlevel.ClientSession`, its base class (the attributes below
    are the session's, set by its constructor)."""

    _roots: RootsProvider | None
    sampling_handler: h.SamplingHandler | None
    sampling_tools: bool
    elicitation_handler: h.ElicitationHandler | None
    elicitation_url: bool
    relay_answers: bool
    max_input_requests: int
    max_input_reply_size: int
    input_tracer: h.InputTracer | None
    features: Features | None
    peer: Peer

    async def _answer_input_requests(self, requests: JSONDict, call: str, about: JSONDict | None) -> JSONDict:
        if len(requests) > self.max_input_requests:
            raise MCPError(
                f"the server asked for {len(requests)} inputs in one round, more than the limit of "
                f"{self.max_input_requests} (the max_input_requests option of the client session)"
            )
        limit = self.max_input_reply_size
        size = 0

        async def answer(key: str, req: Any) -> tuple[str, JSONDict]:
            nonlocal size
            if not isinstance(req, dict) or not isinstance(req.get("method"), str):
                raise MCPError(f"malformed input request {key!r}")
            method, params = req["method"], req.get("params") or {}
            tracer, version = self.input_tracer, self.features.version if self.features else None
            async with self.peer.slot():  # the same bound as server->client requests
                try:  # (a handler that raises: no error form for an input response, the call fails; its span says why)
                    with (
                        tracer.serve_input(method, params, key, version, self.peer.channel)
                        if tracer
                        else contextlib.nullcontext()
                    ):
                        result = await self._serve_client_request(method, params)
                except Exception as exc:
                    raise InputHandlerError(method, call, about, exc) from exc
            size += len(key) + len(orjson.dumps(result))
            if size > limit:
                raise MCPError(
                    f"the answers to one round of input requests exceed the limit of {limit} bytes "
                    "(the max_input_reply_size option of the client session)"
                )
            return key, result

        pairs = await asyncio.gather(*(answer(k, v) for k, v in requests.items()))
        return dict(pairs)

    async def _serve_client_request(self, method: str, params: JSONDict) -> JSONDict:
        if method == "roots/list":
            if self._roots is None:
                raise MethodNotFound("Method not found: roots/list (this client has no roots)")
            return {"roots": await h.roots_list(self._roots)}
        if method == "sampling/createMessage":
            if self.sampling_handler is None:
                raise MethodNotFound("Method not found: sampling/createMessage (sampling not supported)")
            if ("tools" in params or "toolChoice" in params) and not self.sampling_tools:
                raise InvalidParams("sampling with tools was requested, but this client did not declare sampling.tools")
            asked: Any = params if self.relay_answers else h.SamplingParams.from_wire(params)
            result = as_dict(await maybe_await(self.sampling_handler(asked)))
            checked = validated_answer(CreateMessageResult, result, "sampling")
            return result if self.relay_answers else checked
        if method == "elicitation/create":
            if self.elicitation_handler is None:
                raise MethodNotFound("Method not found: elicitation/create (elicitation not supported)")
            mode = params.get("mode", "form")
            if mode == "url" and not self.elicitation_url:
                raise InvalidParams("URL-mode elicitation is not supported by this client")
            if mode != "url" and not self.relay_answers and "requestedSchema" in params:
                check_form(params["requestedSchema"])  # (-32602 naming the field: never shown to the handler)
            wanted: Any = params if self.relay_answers else h.ElicitationParams.from_wire(params)
            result = as_dict(await maybe_await(self.elicitation_handler(wanted)))
            checked = validated_answer(ElicitResult, result, "elicitation")
            return result if self.relay_answers else checked
        raise MethodNotFound(f"Method not found: {method}")
