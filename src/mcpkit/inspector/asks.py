"""The requests the server makes of the person at the page (sampling, elicitation), the calls that run, and how
an answer becomes the reply the client sends: :func:`settle` checks what the page sent (an elicitation's content
against the requested schema) before it resolves the waiting request; the roots the page sets are checked here
too (:func:`checked_roots`)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from ..protocol.errors import MCPError

__all__ = ["MAX_ROOTS", "MAX_ROOT_URI", "SAMPLING_REJECTED", "InspectorError", "checked_roots", "settle"]

SAMPLING_REJECTED = -1  # the code the sampling specification's example uses for a request the user rejected


class InspectorError(Exception):
    """A request of the page that cannot be done (bad input, not connected, a bound reached): ``status`` is the
    HTTP status the page gets."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Call:
    """A tool call the inspector made: what it called, when, and how it ended."""

    id: str
    name: str
    arguments: dict[str, Any]
    started: float
    task: asyncio.Task[None] | None = None
    status: str = "running"  # running, done, failed, cancelled
    progress: dict[str, Any] | None = None
    outcome: dict[str, Any] = field(default_factory=dict)
    size: int = 0
    tool: dict[str, Any] | None = None  # the tool's definition when known at the start (its _meta: an Apps view)
    as_task: bool = False
    task_state: dict[str, Any] | None = None  # the server's task, while it runs as one
    request_id: Any = None  # the JSON-RPC id of its (first) tools/call request, once sent

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "arguments": self.arguments,
            "started": self.started,
            "status": self.status,
            "progress": self.progress,
            **({"tool": self.tool} if self.tool is not None else {}),
            "asTask": self.as_task,
            "taskState": self.task_state,
            "requestId": self.request_id,
            **self.outcome,
        }


async def run_as_task(client: Any, call: Call, on_progress: Any, on_status: Any) -> Any:
    """Run ``call`` as a task of the server (``Client.call_tool_as_task``) and return its result; cancelled (the
    person cancelled), the server's task is cancelled too."""
    handle = await client.call_tool_as_task(call.name, call.arguments, on_progress=on_progress, on_status=on_status)
    on_status(handle.task)
    try:
        return await handle.result()
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(handle.cancel()), 5)
            await asyncio.wait_for(asyncio.shield(handle.status()), 5)  # (its state is shown)
        raise


def validation(result: Any) -> dict[str, Any]:
    """What the page says of a result's structured output: valid, unchecked, or no schema to check."""
    if result.validated:
        return {"state": "valid", "message": "structuredContent matches the tool's outputSchema"}
    schema = result.tool.output_schema if result.tool is not None else None
    if schema is None:
        return {"state": "none", "message": "the tool declares no outputSchema"}
    return {"state": "unchecked", "message": "not checked"}


@dataclass
class HumanRequest:
    """A server's sampling or elicitation request waiting for the person at the inspector to answer it."""

    id: str
    kind: str  # "sampling" or "elicitation"
    params: dict[str, Any]
    created: float
    future: asyncio.Future[Any]

    def public(self, server: str) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "params": self.params, "created": self.created, "server": server}


def settle(req: HumanRequest, answer: Any) -> None:
    """Resolve ``req`` with what the person chose.

    Elicitation: ``{"action": "accept", "content": {...}}`` (the content checked against the requested
    schema), ``{"action": "decline"}`` or ``{"action": "cancel"}``. Sampling: ``{"action": "accept", "text",
    "model"?, "stopReason"?}`` or ``{"action": "reject"}``."""
    if not isinstance(answer, dict):
        raise InspectorError("the answer must be an object")
    action = answer.get("action")
    if req.kind == "elicitation":
        if action not in ("accept", "decline", "cancel"):
            raise InspectorError("action must be accept, decline or cancel")
        if action == "accept" and req.params.get("mode") != "url":
            content = answer.get("content")
            if not isinstance(content, dict):
                raise InspectorError("content must be an object")
            problem = _check_content(req.params.get("requestedSchema"), content)
            if problem is not None:
                raise InspectorError(problem, 422)
            req.future.set_result({"action": "accept", "content": content})
        else:
            req.future.set_result({"action": action})
        return
    if action == "reject":
        req.future.set_exception(MCPError("User rejected sampling request", code=SAMPLING_REJECTED))
        return
    if action != "accept":
        raise InspectorError("action must be accept or reject")
    text = answer.get("text")
    if not isinstance(text, str):
        raise InspectorError("text must be a string")
    model = answer.get("model") or "mcpkit-inspector (a person)"
    stop = answer.get("stopReason") or "endTurn"
    if not isinstance(model, str) or not isinstance(stop, str):
        raise InspectorError("model and stopReason must be strings")
    req.future.set_result(
        {"role": "assistant", "content": {"type": "text", "text": text}, "model": model, "stopReason": stop}
    )


def _check_content(schema: Any, content: dict[str, Any]) -> str | None:
    """Why ``content`` does not fit the requested schema (None when it does)."""
    if not isinstance(schema, dict):
        return None
    import jsonschema_rs

    try:
        validator = jsonschema_rs.validator_for({"type": "object", **schema})
    except Exception as exc:  # the server's schema itself is broken
        return f"the server's requestedSchema cannot be used: {exc}"
    for error in validator.iter_errors(content):
        where = "/".join(str(p) for p in error.instance_path) or "the answer"
        return f"{where}: {error.message}"
    return None


MAX_ROOTS = 256
MAX_ROOT_URI = 4_096


def checked_roots(roots: list[Any]) -> list[dict[str, Any]]:
    """The roots the page set, checked: each a ``uri`` (a string, or ``{"uri", "name"?}``), at most
    :data:`MAX_ROOTS` of them."""
    if len(roots) > MAX_ROOTS:
        raise InspectorError(f"at most {MAX_ROOTS} roots")
    out: list[dict[str, Any]] = []
    for root in roots:
        if isinstance(root, str):
            root = {"uri": root}
        if not isinstance(root, dict) or not isinstance(root.get("uri"), str) or not root["uri"].strip():
            raise InspectorError("each root needs a uri (a string)")
        uri = root["uri"].strip()
        if len(uri) > MAX_ROOT_URI:
            raise InspectorError(f"a root uri is longer than {MAX_ROOT_URI} characters")
        entry: dict[str, Any] = {"uri": uri}
        name = root.get("name")
        if isinstance(name, str) and name.strip():
            entry["name"] = name.strip()
        out.append(entry)
    return out
