"""The rounds of one 2026-07-28 request: a server that needs input answers ``input_required`` with its input
requests, the client's handlers answer them, and the request goes again with ``inputResponses`` (and the server's
``requestState``), up to :attr:`ClientSession.max_input_rounds` times; a ``tools/call`` answered with a task is
followed to its end. The handshake era has no rounds: its server asks the client with requests of its own."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from ..protocol.errors import MCPError, RequestTimeout
from ..protocol.jsonrpc import JSONDict
from ..protocol.types import Task
from ..protocol.versions import INPUT_REQUIRED_METHODS
from .results import checked
from .tasks import ProgressCallback, SeenProgress, follow
from .tasks import Session as _TaskSession


class Session(_TaskSession, Protocol):
    """What the rounds need of their client session (a :class:`~mcpkit.client.lowlevel.ClientSession`): what a
    task handle needs (a call may become a task), and a round and the answers to input requests."""

    max_input_rounds: int

    async def _round(
        self, method: str, params: JSONDict | None, timeout: Any, on_progress: ProgressCallback | None, reset: bool
    ) -> JSONDict: ...


async def input_rounds(
    session: Session,
    method: str,
    base: JSONDict,
    timeout: Any,
    on_progress: ProgressCallback | None,
    reset: bool,
    answer_input: bool,
    raw_task: bool,
    seen: SeenProgress | None,
) -> JSONDict:
    """The rounds of one 2026-07-28 request of ``session`` (see :meth:`ClientSession.request`). The timeout is one
    deadline for them all and for the input handlers answering between them, as it is for a handshake-era request
    whose server asks the client in the middle (unless ``reset``: each round then has it whole, restarted by
    progress)."""
    limit = session.peer.default_timeout if timeout is ... else timeout
    seconds = 0.0 if limit is None else float(limit)
    loop = asyncio.get_running_loop()
    deadline = None if limit is None or reset else loop.time() + seconds
    for _ in range(session.max_input_rounds + 1):
        if deadline is not None:
            timeout = deadline - loop.time()
            if timeout <= 0:
                raise RequestTimeout(method, seconds)
        result = await session._round(method, base, timeout, seen or on_progress, reset)
        rtype = result.get("resultType", "complete")
        if rtype == "input_required":
            refused = _invalid_input_required(method, result)
            if refused is not None:
                raise MCPError(refused)  # (its handlers not run: a list call never turns into a prompt)
        if rtype == "complete" or (rtype == "input_required" and not answer_input):
            return result
        if rtype == "task" and method == "tools/call":
            if raw_task:
                return result
            return await follow(session, checked(Task, result, "tools/call"), timeout, on_progress, seen)
        if rtype != "input_required":
            raise MCPError(f"unrecognized resultType {rtype!r} in the answer to {method!r}")
        base = dict(base)
        base.pop("inputResponses", None)
        base.pop("requestState", None)
        requests = result.get("inputRequests")
        if isinstance(requests, dict) and requests:
            answering = session._answer_input_requests(requests, method, base)
            if deadline is None:
                base["inputResponses"] = await answering
            else:
                try:  # (past the deadline the handlers are cancelled, as a handshake server's cancel does)
                    base["inputResponses"] = await asyncio.wait_for(answering, max(deadline - loop.time(), 0))
                except TimeoutError:
                    raise RequestTimeout(method, seconds) from None
        if "requestState" in result:
            base["requestState"] = result["requestState"]
    raise MCPError(f"{method!r} still required input after {session.max_input_rounds} rounds")


def _invalid_input_required(method: str, result: JSONDict) -> str | None:
    """Why an ``input_required`` answer to ``method`` breaks the spec (None when it does not): only tools/call,
    prompts/get and resources/read may ask, and an answer asks for something (``inputRequests``) or carries
    ``requestState``."""
    if method not in INPUT_REQUIRED_METHODS:
        return (
            f"the server answered {method!r} with input_required, which only "
            f"{', '.join(sorted(INPUT_REQUIRED_METHODS))} may (2026-07-28): not answered"
        )
    if not result.get("inputRequests") and "requestState" not in result:
        return f"the server answered {method!r} with input_required carrying neither inputRequests nor requestState"
    return None
