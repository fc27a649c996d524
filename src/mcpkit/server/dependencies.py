"""Dependency injection for tools, prompts and resources: :class:`Depends`.

    async def database(ctx: Context) -> Database:           # may take the request's Context
        return pool.for_user(ctx.access_token)

    def settings() -> Settings: ...

    async def connection(db: Annotated[Database, Depends(database)]):   # may depend on others
        conn = await db.connect()
        try:
            yield conn                                       # a generator: the code after yield runs when the
        finally:                                             # call is over (it sees the tool's exception)
            await conn.close()

    @app.tool
    async def query(sql: str, conn: Annotated[Connection, Depends(connection)], cfg: Settings = Depends(settings)):
        ...

A parameter whose default is ``Depends(fn)`` or whose annotation is ``Annotated[T, Depends(fn)]`` is not an
argument of the tool: it is left out of the input schema, and ``fn``'s result is passed for it on each call. A
dependency takes the request's :class:`~mcpkit.server.context.Context` (a parameter annotated with it) and other
dependencies, nothing else; ``fn`` may be a plain function, an ``async def``, or a generator (sync or async) that
yields its value once and cleans up after the call, even a failed one.

Within one call each dependency runs once, however many parameters ask for it (``Depends(fn, cache=False)`` runs
it for each); results are never kept across calls (a pool or client shared by every call belongs in the app's
lifespan). A dependency that raises fails the call as the function itself would (an ``isError`` result for a
tool). What is wrong with a declaration (a parameter a dependency cannot be given, a cycle, dependencies deeper than
:data:`MAX_DEPTH`) is a ``TypeError`` where the function is registered, not on a call.

Where they run: an ``async def`` function's dependencies run on the event loop (a plain ``def`` dependency too:
make one that waits on I/O ``async def``); a plain ``def`` function whose dependencies are all plain ``def`` runs
with them where the function's ``thread=`` policy says; a plain ``def`` function with an ``async def`` dependency
runs on a worker thread after its dependencies ran on the loop (cancelled, the call's cleanup of its dependencies
waits for the thread, which cannot be stopped, to return).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import typing
from collections.abc import Awaitable, Callable
from typing import Any

from .typehints import is_async_callable, is_context, type_hints

__all__ = ["MAX_DEPTH", "Depends"]

#: how deep dependencies may depend on each other (a longer chain is refused where the function is registered)
MAX_DEPTH = 32

_CTX = "_mcpkit_dependency_context"  # the wrapper's own Context parameter (no argument can be named so: '_')


class Depends:
    """Mark a parameter as a dependency: ``x: T = Depends(fn)`` or ``x: Annotated[T, Depends(fn)]`` (see the
    module documentation). ``cache=False``: run ``fn`` for each parameter that asks for it, not once per call."""

    __slots__ = ("cache", "fn")

    def __init__(self, fn: Callable[..., Any], *, cache: bool = True) -> None:
        if not callable(fn):
            raise TypeError(f"Depends() takes a function, not {type(fn).__name__}")
        self.fn: Callable[..., Any] = fn
        self.cache: bool = cache

    def __repr__(self) -> str:
        return f"Depends({getattr(self.fn, '__qualname__', self.fn)!r})"


def dependency_of(default: Any, annotation: Any, where: str = "") -> Depends | None:
    """The :class:`Depends` a parameter declares (its default, or its ``Annotated`` metadata), or None. An
    annotation left as text that names ``Depends(`` (it could not be resolved) is a ``TypeError`` naming
    ``where``: taken for an argument, the parameter would silently be asked of the client."""
    if type(default) is Depends:
        return default
    if type(annotation) is str and "Depends(" in annotation:
        raise TypeError(
            f"{where}: its annotation {annotation!r} cannot be resolved (with `from __future__ import annotations` "
            "an annotation is text, looked up in the module's globals, so a dependency defined inside a function is "
            "not found): define the dependency at module level, or write the parameter as `x: T = Depends(fn)`"
        )
    if typing.get_origin(annotation) is typing.Annotated:
        for meta in typing.get_args(annotation)[1:]:
            if type(meta) is Depends:
                return meta
    return None


class _Plan:
    """How to make one dependency's value: its function and, for each of its parameters, the Context or another
    dependency's plan (shared by every plan that takes the same dependency)."""

    __slots__ = ("cache", "context", "fn", "is_sync", "kind", "needs", "wants_context")

    def __init__(self, dep: Depends, context: str | None, needs: list[tuple[str, _Plan]]) -> None:
        self.fn = dep.fn
        self.cache = dep.cache
        self.context = context  # the parameter that takes the Context, if any
        self.needs = needs
        fn = dep.fn
        if inspect.isasyncgenfunction(fn):
            self.kind = "agen"
        elif inspect.isgeneratorfunction(fn):
            self.kind = "gen"
        elif is_async_callable(fn):
            self.kind = "async"
        else:
            self.kind = "sync"
        # (known from the plans it needs, which are complete: asking them again would walk a diamond once per path)
        self.is_sync: bool = self.kind in ("sync", "gen") and all(p.is_sync for _, p in needs)
        self.wants_context: bool = context is not None or any(p.wants_context for _, p in needs)


_Planned = dict[tuple[Callable[..., Any], bool], tuple[_Plan, int]]


def _plan(dep: Depends, what: str, path: tuple[Callable[..., Any], ...], planned: _Planned) -> tuple[_Plan, int]:
    """``dep``'s plan and its height (1 for a dependency that takes no other), reached through ``path``. A function
    is planned once per registration (``planned``), however many others take it: its height then tells whether it
    still fits under :data:`MAX_DEPTH` here, and a cycle through it was found when it was first planned."""
    fn = dep.fn
    if fn in path:
        chain = " -> ".join(getattr(f, "__qualname__", repr(f)) for f in (*path, fn))
        raise TypeError(f"{what}: its dependencies form a cycle ({chain})")
    done = planned.get((fn, dep.cache))
    if done is None:
        done = planned[fn, dep.cache] = _plan_new(dep, what, path, planned)
    if len(path) + done[1] > MAX_DEPTH:
        raise TypeError(f"{what}: its dependencies are more than {MAX_DEPTH} deep")
    return done


def _plan_new(dep: Depends, what: str, path: tuple[Callable[..., Any], ...], planned: _Planned) -> tuple[_Plan, int]:
    fn = dep.fn
    label = getattr(fn, "__qualname__", repr(fn))
    if len(path) >= MAX_DEPTH:
        raise TypeError(f"{what}: its dependencies are more than {MAX_DEPTH} deep")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what}: dependency {label} has no signature to read ({exc})") from None
    hints = type_hints(fn, sig)
    context: str | None = None
    needs: list[tuple[str, _Plan]] = []
    height = 1
    for p in sig.parameters.values():
        ann = hints.get(p.name, p.annotation)
        sub = dependency_of(p.default, ann, f"{what}: dependency {label}, parameter {p.name!r}")
        if sub is not None:
            plan, below = _plan(sub, what, (*path, fn), planned)
            needs.append((p.name, plan))
            height = max(height, below + 1)
        elif is_context(ann):
            context = p.name
        elif p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(
                f"{what}: dependency {label} takes {p.name!r}, which is neither the Context nor a Depends(...): a "
                "dependency gets only those (give it a default, or make it a dependency)"
            )
        elif p.kind is p.POSITIONAL_ONLY:
            raise TypeError(f"{what}: dependency {label} takes {p.name!r} positional-only; dependencies get names")
    return _Plan(dep, context, needs), height


def with_dependencies(
    fn: Callable[..., Any], deps: dict[str, Depends], context_param: str | None, is_async: bool, what: str
) -> tuple[Callable[..., Any], str | None, bool]:
    """``fn`` wrapped so its dependency parameters ``deps`` are filled in on each call: (the wrapper, the name of
    the wrapper's Context parameter or None, whether the wrapper is async). The wrapper takes ``fn``'s other
    parameters by name, plus the Context when ``fn`` or a dependency wants it."""
    planned: _Planned = {}  # (each function planned once, however many others take it)
    plans = {name: _plan(dep, what, (), planned)[0] for name, dep in deps.items()}
    wants_context = context_param is not None or any(p.wants_context for p in plans.values())
    ctx_name = (context_param or _CTX) if wants_context else None
    own_context = context_param  # fn's own Context parameter, passed through

    if not is_async and all(p.is_sync for p in plans.values()):

        def call_sync(**kwargs: Any) -> Any:
            ctx = kwargs.pop(_CTX) if ctx_name == _CTX else kwargs.get(ctx_name) if ctx_name else None
            with contextlib.ExitStack() as stack:
                made: dict[Callable[..., Any], Any] = {}
                for name, plan in plans.items():
                    kwargs[name] = _make_sync(plan, ctx, made, stack)
                if own_context is None:
                    kwargs.pop(ctx_name or "", None)
                return fn(**kwargs)

        return _named(call_sync, fn), ctx_name, False

    worker = None
    if not is_async:
        from .sync_exec import SyncPolicy

        worker = SyncPolicy(fn, what, True)  # (a plain def after async dependencies: on a worker thread)

    async def call_async(**kwargs: Any) -> Any:
        ctx = kwargs.pop(_CTX) if ctx_name == _CTX else kwargs.get(ctx_name) if ctx_name else None
        async with contextlib.AsyncExitStack() as stack:
            made: dict[Callable[..., Any], Any] = {}
            for name, plan in plans.items():
                kwargs[name] = await _make(plan, ctx, made, stack)
            if worker is not None:
                return await _until_thread_done(worker(**kwargs))
            return await fn(**kwargs)

    return _named(call_async, fn), ctx_name, True


async def _until_thread_done(call: Awaitable[Any]) -> Any:
    """What a plain function returned on its worker thread. A cancellation of the call cannot stop the thread, which
    still uses the dependencies it was given: the cancellation waits for it to end before it goes on to their
    cleanup (which sees it); a second cancellation (the server's shutdown, after its drain) goes on at once."""
    task = asyncio.ensure_future(call)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.add_done_callback(_outcome_dropped)
        await asyncio.wait((task,))
        raise


def _outcome_dropped(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # (retrieved: the call was cancelled, what it returned or raised goes nowhere)


def _named(wrapper: Callable[..., Any], fn: Callable[..., Any]) -> Callable[..., Any]:
    """``wrapper`` named and documented as ``fn`` (for warnings and logs), without ``__wrapped__``: its signature
    is its own (it takes the arguments and the Context, never the dependencies)."""
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        with contextlib.suppress(AttributeError, TypeError):
            setattr(wrapper, attr, getattr(fn, attr))
    return wrapper


def _arguments(plan: _Plan, ctx: Any) -> dict[str, Any]:
    return {plan.context: ctx} if plan.context is not None else {}


def _make_sync(plan: _Plan, ctx: Any, made: dict[Callable[..., Any], Any], stack: contextlib.ExitStack) -> Any:
    if plan.cache and plan.fn in made:
        return made[plan.fn]
    kwargs = _arguments(plan, ctx)
    for name, sub in plan.needs:
        kwargs[name] = _make_sync(sub, ctx, made, stack)
    if plan.kind == "gen":
        value = stack.enter_context(contextlib.contextmanager(plan.fn)(**kwargs))
    else:
        value = plan.fn(**kwargs)
    if plan.cache:
        made[plan.fn] = value
    return value


async def _make(plan: _Plan, ctx: Any, made: dict[Callable[..., Any], Any], stack: contextlib.AsyncExitStack) -> Any:
    if plan.cache and plan.fn in made:
        return made[plan.fn]
    kwargs = _arguments(plan, ctx)
    for name, sub in plan.needs:
        kwargs[name] = await _make(sub, ctx, made, stack)
    kind = plan.kind
    if kind == "agen":
        value = await stack.enter_async_context(contextlib.asynccontextmanager(plan.fn)(**kwargs))
    elif kind == "gen":
        value = stack.enter_context(contextlib.contextmanager(plan.fn)(**kwargs))
    elif kind == "async":
        value = await plan.fn(**kwargs)
    else:
        value = plan.fn(**kwargs)
        if inspect.isawaitable(value):  # (a plain def that returns an awaitable: a callable object, a partial)
            value = await value
    if plan.cache:
        made[plan.fn] = value
    return value
