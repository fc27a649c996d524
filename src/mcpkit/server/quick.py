"""``tools/call`` on the quick path: a plain ``def`` tool that runs inline, from the request's params to its
shaped result in one frame.

The generic path of a ``tools/call`` goes through the engine's request context, the dispatcher
(``Server.dispatch``: the lifespan gate, the authorization check, ``requestState``, the handler table, the
server's request context), ``MCPKit._call_tool``, ``Tool.call`` and ``shape_result``: seven frames and two
context objects for what is, with a plain ``def`` tool that runs inline (declared ``thread=False``, or learned:
see :mod:`.sync_exec`), a dictionary lookup, an argument check, one call and one dictionary. Under load the size
of that path, more than its instruction count, is what costs (the kernel's socket work between requests pushes
it out of the caches). :func:`quick_call` takes such a call the short way, deciding on the way what the generic
path decides (the cheapest questions first: the order changes no outcome, since nothing runs before every answer
is yes):

- the lifespan gate, the ``tools/call`` handler (MCPKit's own, not one set with ``set_handler``), the tool (a
  plain :class:`~.tools.Tool` without a Context parameter whose policy is inline now, that never runs as a task,
  called without ``params.task`` on a server with tasks), ``requestState`` /
  ``inputResponses`` (none), the arguments (the tool's quick check passes), the authorization (its ``check``
  passes): when any of these says otherwise, nothing was run and the caller takes the generic path, which
  decides the same and answers (an error, a refusal, a validation message, a worker-thread call);
- the call itself, guarded and timed by the tool's :class:`~.sync_exec.SyncPolicy` as on the generic path
  (``try_inline``; a policy that says "not inline" at that moment: nothing was run);
- its outcome: a result (shaped for the revision as ``shape_result`` does) or, when the tool raised what the
  dispatcher settles (``InputRequired``, a protocol error) or returned an awaitable, a :class:`Resume` that
  :func:`resume` finishes exactly as the dispatcher would have.

Both eras use it: the 2026-07-28 HTTP endpoint (JSON answers; it encodes the result itself) and a handshake-era
session (``ServerSession``, in place of ``Server.dispatch``). tests/test_quick_call.py checks that the two paths
give the same bytes for every outcome.
"""

from __future__ import annotations

import inspect
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from .._aio import running_loop
from ..engine import RequestContext
from ..protocol.jsonrpc import JSONDict
from ..protocol.shaping import shape_result
from ..protocol.versions import META_SERVER_INFO
from .lowlevel import ServerRequestContext, _current_authorization
from .schema import fast_validate
from .sync_exec import EAGER, INLINE, ON_THREAD, PLAIN_TYPES
from .tools import Tool, text_result

if TYPE_CHECKING:
    from ..hosting import HostedSession, ModernContext

MCPKit = Any  # (server/app.py imports this module: the app is typed loosely here rather than imported)

_METHOD = "tools/call"


class Resume:
    """A quick call's tool ran, and its outcome needs the dispatcher's handling: ``raised`` (what it raised that
    is not an ``isError`` result) or ``pending`` (the awaitable it returned, to await and convert)."""

    __slots__ = ("pending", "raised")

    def __init__(self, raised: Exception | None, pending: Coroutine[Any, Any, JSONDict] | None) -> None:
        self.raised = raised
        self.pending = pending

    def close(self) -> None:
        """Drop what is left without running it (the request was cancelled meanwhile)."""
        if self.pending is not None:
            self.pending.close()


def quick_call(app: MCPKit, params: JSONDict, feats: Any) -> JSONDict | Resume | None:
    """The shaped result of ``tools/call`` with ``params`` for the revision ``feats``, when the quick path takes
    it (see the module's docstring); None when it does not (nothing was run: take the generic path); a
    :class:`Resume` to finish with :func:`resume` when the tool ran but its outcome needs the dispatcher."""
    name = params.get("name")
    tool = app._tools.get(name) if type(name) is str else None  # type: ignore[arg-type]
    if tool is None or type(tool) is not Tool or tool.task_support is not None:
        return None  # (a tool that may run as a task takes the dispatcher's path: the task entry decides)
    if app.tasks is not None and "task" in params:
        return None  # asked for as a task (2025-11-25): the dispatcher answers -32601 or ignores it, not this
    sync = tool.sync
    if sync is None or sync.mode != INLINE:  # (first: an async def tool is asked twice on some paths)
        return None
    lazy = app._lazy_lifespan
    if (lazy is not None and lazy.users == 0) or "requestState" in params or "inputResponses" in params:
        return None
    if app._quick_for != app.handlers_version:
        _refresh(app)
    info = tool.info
    fast = info.fast_plan
    if not app._quick_ok or fast is None or info.context_param is not None:
        return None
    arguments = params.get("arguments")
    if arguments is None:
        arguments = {}
    elif type(arguments) is not dict:
        return None
    kwargs = fast_validate(fast, arguments)
    if kwargs is None:
        return None
    authz = _current_authorization()
    if authz is not None:
        try:
            authz.check(_METHOD, params)
        except Exception:
            return None  # refused: the generic path refuses it the same way
    try:
        value = sync.try_inline((), kwargs)
    except Exception as exc:
        try:
            result = tool._failed(exc)  # an isError result
        except Exception as raised:  # a protocol signal (InputRequired, a missing client capability)
            return Resume(raised, None)
    else:
        if value is ON_THREAD or value is EAGER:
            return None  # not called: the policy wants the worker thread (or a loop turn) now
        if type(value) is str and (returns := tool._returns) is not None and not returns.structured:
            result = text_result(value)  # Tool.result's first case
            if feats.result_type:  # shaped for 2026-07-28 as shape_result does
                result["resultType"] = "complete"
                result["_meta"] = {META_SERVER_INFO: app.info}
                return result
            if not feats.always_structured_content:
                return result  # (what shape_result would leave as it is)
        elif type(value) not in PLAIN_TYPES and inspect.isawaitable(value):
            app._serving_loop = running_loop()  # (as MCPKit._call_tool does for a sync tool that did not end at once)
            return Resume(None, tool._finish(value, feats))
        else:
            result = tool.result(value, feats)
    return shape_result(_METHOD, result, feats, app.info if feats.modern else None)


def resume(
    app: MCPKit, rc: RequestContext, params: JSONDict, read: ModernContext, session: HostedSession | None, r: Resume
) -> JSONDict | Coroutine[Any, Any, JSONDict]:
    """What ``Server.dispatch`` returns (or raises) for a quick call that ended in ``r``: an ``InputRequired``
    settled into its result, another error raised for the engine to answer, an awaitable finished by the
    dispatcher's own coroutine. ``rc``: the engine's context of the request (made now if the caller had none)."""
    feats = read[0]
    sctx = ServerRequestContext(app, session, rc, *read)
    authz = _current_authorization()
    if authz is not None:
        sctx.principal = authz.principal
    if r.pending is not None:
        rest: Coroutine[Any, Any, JSONDict] = app._dispatched(r.pending, sctx, _METHOD, params, feats)
        return rest
    assert r.raised is not None
    result = app._settle(r.raised, sctx, _METHOD, params, feats)  # (raises what it does not settle)
    return shape_result(_METHOD, result, feats, app.info if feats.modern else None)


def _refresh(app: MCPKit) -> None:
    """Whether ``tools/call`` may take the quick path on ``app``: its handler is MCPKit's own ``_call_tool`` (not
    one set with ``set_handler``, nor a subclass's override: ``_quick_own`` is MCPKit's). Read again when the
    handlers change."""
    handler = app._handlers.get(_METHOD)
    app._quick_ok = (
        type(app)._call_tool is type(app)._quick_own and handler == app._call_tool and app._visibility is None
    )
    app._quick_for = app.handlers_version
