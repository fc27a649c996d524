"""What the high-level client does with what the server asks of it or tells it: the answers of the sampling and
elicitation handlers checked and shaped for the wire, and :class:`Watch`, the stream of list changes and resource
updates that ``Client.watch`` yields (re-exported by :mod:`mcpkit.client.client`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

from pydantic import BaseModel

from ..protocol.errors import InternalError
from ..protocol.jsonrpc import JSONDict
from .results import (
    ElicitationContentError,
    SchemaError,
    _first_error,
    _validator,
    apply_schema_defaults,
)
from .subscription import Subscription

logger = logging.getLogger("mcpkit.client")


async def _maybe_await(value: Any) -> Any:
    """A callback's value, awaited if it is awaitable (handlers may be sync or async)."""
    if inspect.isawaitable(value):
        return await value
    return value


def _as_dict(value: Any) -> JSONDict:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_none=True, mode="json")
    if isinstance(value, dict):
        return value
    raise TypeError(f"handler returned {type(value).__name__}, expected a dict or an MCP model")


def _validated(model: Any, result: JSONDict, what: str) -> JSONDict:
    """Check a handler's answer; a bad one becomes an error the server can read (not a bare -32603)."""
    from pydantic import ValidationError

    try:
        dumped: JSONDict = model.model_validate(result).dump()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "result"
        msg = f"the client's {what} handler returned an invalid result: {where}: {first['msg']}"
        raise InternalError(msg) from None
    return dumped


def _sampling_result(value: Any) -> Any:
    """Let a sampling handler return a plain string (an assistant text message)."""
    if isinstance(value, str):
        return {
            "role": "assistant",
            "content": {"type": "text", "text": value},
            "model": "unknown",
            "stopReason": "endTurn",
        }
    return value


def _elicitation_result(value: Any, params: JSONDict) -> JSONDict:
    """Normalize what an elicitation handler returned and finish it: schema defaults applied, content validated.

    Accepted returns: an ``ElicitResult`` (model or dict with ``action``), a dict of content (means accept),
    ``None`` (means decline).
    """
    from pydantic import BaseModel

    if value is None:
        return {"action": "decline"}
    if isinstance(value, BaseModel):
        value = value.model_dump(by_alias=True, exclude_none=True, mode="json")
    if not isinstance(value, dict):
        raise TypeError(f"elicitation handler returned {type(value).__name__}; expected a dict, ElicitResult or None")
    result: JSONDict = dict(value) if "action" in value else {"action": "accept", "content": dict(value)}
    mode = params.get("mode", "form")
    if result["action"] != "accept":
        result.pop("content", None)
        return result
    if mode == "url":
        result.pop("content", None)  # URL mode: the answer is only the user's consent
        return result
    schema = params.get("requestedSchema")
    given = result.get("content")
    content = apply_schema_defaults(
        schema if isinstance(schema, dict) else None, given if isinstance(given, dict) else None
    )
    if isinstance(schema, dict):
        full = {"type": "object", **schema}
        try:
            e = _first_error(_validator(full), content)
        except SchemaError as exc:
            raise ElicitationContentError(f"the server's requestedSchema is {exc}") from None
        if e is not None:
            where = ".".join(str(p) for p in e.instance_path) or "content"
            raise ElicitationContentError(
                f"elicitation content does not match the requested schema at {where}: {e.message}"
            )
    result["content"] = content
    return result


_LIST_CHANGED = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
}


class Watch:
    """Server change notifications, the same way in both eras (see :meth:`Client.watch`).

    ``async for method, params in watch`` or ``await watch.next(timeout)``; ``method`` is one of
    ``notifications/{tools,prompts,resources}/list_changed`` or ``notifications/resources/updated``.
    """

    def __init__(
        self,
        queue: asyncio.Queue[tuple[str, JSONDict]],
        methods: frozenset[str],
        uris: frozenset[str],
        subscription: Subscription | None = None,
    ) -> None:
        self._queue = queue
        self.methods = methods
        self.uris = uris
        self.subscription = subscription

    def offer(self, method: str, params: JSONDict | None) -> None:
        if method in self.methods or (
            method == "notifications/resources/updated" and isinstance(params, dict) and params.get("uri") in self.uris
        ):
            try:
                self._queue.put_nowait((method, params or {}))
            except asyncio.QueueFull:
                logger.warning("watch: slow consumer, dropped %s", method)

    async def next(self, timeout: float | None = None) -> tuple[str, JSONDict]:
        """The next change ``(method, params)``; ``timeout`` in seconds (``TimeoutError`` when it passes)."""
        if self.subscription is not None:
            return await self.subscription.next(timeout)
        return await asyncio.wait_for(self._queue.get(), timeout)

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> tuple[str, JSONDict]:
        if self.subscription is not None:
            return await self.subscription.__anext__()
        return await self._queue.get()
