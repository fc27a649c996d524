"""Argument completion: a completer is a list of choices or a function ``(value, context_arguments) -> values``.

Choices are filtered by what the user typed (prefix matches first, then substring matches, both
case-insensitive: the most relevant first), and every answer is cut to 100 values with ``total`` and ``hasMore``
saying how many there were.
"""

from __future__ import annotations

import contextlib
import inspect
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..protocol.errors import InternalError, InvalidParams, MCPError
from .content import dump_model
from .schema import Param, literal_choices
from .sync_exec import SyncPolicy

JSONDict = dict[str, Any]
Completer = Sequence[str] | Callable[..., Any]
if TYPE_CHECKING:
    from .request_context import ServerRequestContext
MAX_VALUES = 100


def rank(choices: Iterable[str], value: str) -> list[str]:
    """Choices matching ``value``: prefix matches first, then other substring matches, order otherwise kept."""
    v = value.casefold()
    if not v:
        return list(choices)
    prefix: list[str] = []
    inner: list[str] = []
    for c in choices:
        folded = str(c).casefold()
        if folded.startswith(v):
            prefix.append(str(c))
        elif v in folded:
            inner.append(str(c))
    return prefix + inner


# completer function -> (its sync policy, None when async; whether it takes the context arguments)
_PLANS: weakref.WeakKeyDictionary[Callable[..., Any], tuple[SyncPolicy | None, bool]] = weakref.WeakKeyDictionary()


def completer_plan(completer: Callable[..., Any], thread: bool | None = None) -> tuple[SyncPolicy | None, bool]:
    """How a completer function is called (inspected once, cached per function): its
    :class:`~mcpkit.server.sync_exec.SyncPolicy` (None for an async one) and whether it takes the context
    arguments. ``thread`` declares where a sync one runs (see sync_exec); the first call records it."""
    try:
        plan = _PLANS.get(completer)
    except TypeError:  # unhashable callable: inspected every time
        plan = None
    if plan is None:
        takes_context = len(inspect.signature(completer).parameters) >= 2
        policy = None
        if not inspect.iscoroutinefunction(completer):
            name = getattr(completer, "__qualname__", None) or type(completer).__name__
            policy = SyncPolicy(completer, f"completer {name!r}", thread)
        plan = (policy, takes_context)
        with contextlib.suppress(TypeError):
            _PLANS[completer] = plan
    return plan


def gather_completions(
    params: Iterable[Param], given: dict[str, Completer] | None, allowed: set[str], unknown: str
) -> dict[str, Completer]:
    """The completers of a prompt's arguments or a resource template's variables: the choices of each
    ``Literal``-typed parameter, then the ``given`` ones, which may name only ``allowed`` parameters (else a
    ValueError of ``unknown`` followed by the unknown names)."""
    found: dict[str, Completer] = {}
    for p in params:
        choices = literal_choices(p.annotation)
        if choices:
            found[p.name] = choices
    if given:
        extra = sorted(set(given) - allowed)
        if extra:
            raise ValueError(f"{unknown} {extra}")
        found.update(given)
    return found


async def run_completer(completer: Completer, value: str, context: dict[str, str]) -> JSONDict:
    """Evaluate a completer (choices, sync or async function) into the result of ``completion/complete``: the
    ranked choices, or what the function returned, values (all there are) or a ``Completion`` (some values, and
    the ``total``/``hasMore`` of its source)."""
    if not callable(completer):
        return completion_result(rank(completer, value))
    policy, takes_context = completer_plan(completer)
    args: tuple[Any, ...] = (value, context) if takes_context else (value,)
    out = await completer(*args) if policy is None else await policy(*args)
    out = dump_model(out)
    if isinstance(out, dict):
        return _own_count(out)
    return completion_result([str(v) for v in out or ()])


def completion_result(values: list[str], total: int | None = None, has_more: bool = False) -> JSONDict:
    """The ``completion`` member: at most 100 of ``values``. ``total`` and ``has_more`` are what a completer said of
    values it did not return (it pages its source itself); without them ``values`` are all there are. ``total``
    is never below the count of ``values``, and ``hasMore`` is true whenever values are left out."""
    count = len(values)
    known = count if total is None and not has_more else total
    completion: JSONDict = {"values": values[:MAX_VALUES]}
    if known is not None:
        completion["total"] = max(known, count)
    completion["hasMore"] = has_more or count > MAX_VALUES or (known is not None and known > min(count, MAX_VALUES))
    return {"completion": completion}


def _own_count(out: JSONDict) -> JSONDict:
    """The completion result of a completer that returned a ``Completion`` (``values``, ``total?``, ``hasMore?``)."""
    total = out.get("total")
    has_more = out.get("hasMore", False)
    if total is not None and (isinstance(total, bool) or not isinstance(total, int) or total < 0):
        raise TypeError(f"a completer's total must be an integer >= 0, not {total!r}")
    if not isinstance(has_more, bool):
        raise TypeError(f"a completer's hasMore must be a bool, not {has_more!r}")
    return completion_result([str(v) for v in out.get("values") or ()], total, has_more)


def _context_arguments(context: object) -> dict[str, str]:
    """``context.arguments`` of a request: names to the strings already chosen (CompleteRequest types them so; a
    number or object is refused, not turned into its Python text and handed to the completer)."""
    if context is None:
        return {}
    if not isinstance(context, dict):
        raise InvalidParams("completion/complete: context must be an object")
    arguments = context.get("arguments")
    if arguments is None:
        return {}
    if not isinstance(arguments, dict):
        raise InvalidParams("completion/complete: context.arguments must be an object")
    for name, value in arguments.items():
        if not isinstance(value, str):
            raise InvalidParams(f"completion/complete: context argument {name!r} must be a string")
    return arguments


async def complete(
    app: Any,
    ctx: ServerRequestContext,
    params: JSONDict,
    error_message: Callable[[str, Exception, bool], str],
    through: Callable[[Any, JSONDict, ServerRequestContext], Awaitable[JSONDict] | None] | None = None,
) -> JSONDict:
    """``completion/complete`` for an :class:`~mcpkit.server.app.MCPKit` ``app``: the completer of the prompt
    argument or template variable ``params`` names (one the caller may see), run on what the user typed; a
    completer's exception becomes an internal error saying ``error_message(what, exc, debug)``. ``through(item,
    params, ctx)``, when it returns an awaitable, completes for the prompt or template ``item`` instead (a mounted
    one: through its own server's interceptors)."""
    ref = params.get("ref")
    argument = params.get("argument")
    if not isinstance(ref, dict) or not isinstance(argument, dict):
        raise InvalidParams("completion/complete: ref and argument must be objects")
    arg_name = argument.get("name")
    value = argument.get("value", "")
    if not isinstance(arg_name, str) or not isinstance(value, str):
        raise InvalidParams("completion/complete: argument.name and argument.value must be strings")
    context_args = _context_arguments(params.get("context"))
    kind = ref.get("type")
    completer: Completer | None
    item: Any  # the prompt or the resource template completed
    if kind == "ref/prompt":
        name = ref.get("name")
        prompt = app._prompts.get(name) if isinstance(name, str) else None
        if prompt is None or not app._visible("prompts", str(name), prompt, ctx):
            raise InvalidParams(f"Unknown prompt: {name!r}")
        if arg_name not in {p.name for p in prompt.info.params}:
            raise InvalidParams(f"prompt {name!r} has no argument {arg_name!r}")
        completer = app._completers.get((kind, prompt.name, arg_name)) or prompt.completions.get(arg_name)
        item = prompt
    elif kind == "ref/resource":
        uri = ref.get("uri")
        if not isinstance(uri, str):
            raise InvalidParams("ref/resource needs a uri")
        template = app._templates.get(uri)
        if template is not None and not app._visible("resource_templates", uri, template, ctx):
            template = None
        if template is None:
            if uri in app._resources and app._visible("resources", uri, app._resources[uri], ctx):
                return completion_result([])  # a static resource has nothing to complete
            raise InvalidParams(f"Unknown resource template: {uri!r}")
        if arg_name not in template.template.variables:
            raise InvalidParams(f"resource template {uri!r} has no variable {arg_name!r}")
        completer = app._completers.get((kind, uri, arg_name)) or template.completions.get(arg_name)
        item = template
    else:
        raise InvalidParams(f"unknown completion reference type {kind!r}")
    routed = through(item, params, ctx) if through is not None else None
    if routed is not None:
        return await routed
    if completer is None:
        return completion_result([])
    try:
        return await run_completer(completer, value, context_args)
    except MCPError:
        raise
    except Exception as exc:
        raise InternalError(error_message(f"completion of {arg_name!r}", exc, app.debug)) from None


__all__ = ["MAX_VALUES", "Completer", "complete", "completer_plan", "completion_result", "rank", "run_completer"]
