"""Tools: a Python function, its schemas, and the conversion of whatever it returns into a ``CallToolResult``.

Return values: see :func:`~mcpkit.server.content.to_content` (the leaf module :mod:`mcpkit.server.content` holds
the content helpers, :class:`Image`/:class:`Audio` among them; they are re-exported here). A ``CallToolResult``
(model or dict) is sent as is; a structured return annotation adds ``structuredContent`` (see
:class:`~mcpkit.server.schema.ReturnInfo`).

Errors: invalid or unknown arguments and exceptions come back as ``isError: true`` results (the model can read
them and retry); a :class:`ToolError` message reaches the client verbatim; any other exception is logged here
with an error id and the client sees only that id.
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, get_args, get_origin

from .._runtime import run_inline
from ..protocol.errors import (
    CapabilityNotSupported,
    ConnectionClosed,
    MCPError,
    MissingRequiredClientCapability,
    TaskFailed,
    URLElicitationRequired,
)
from ..protocol.headers import param_headers_from_schema
from ..protocol.versions import Features
from .content import (  # the content helpers live in the leaf module; imported from here as before
    Audio,
    Image,
    downgrade_content,
    dump_model,
    is_content_value,
    is_model,
    json_text,
    loaded_types,
    sniff_mime,
    to_content,
)
from .lowlevel import InputRequired
from .pagination import Listed
from .request_context import ConfigurationError
from .schema import (
    ArgumentProblem,
    FunctionInfo,
    ReturnInfo,
    fast_validate,
    format_argument_problems,
    format_validation_error,
    function_name,
    validation_problems,
)
from .schema_tools import SchemaInfo, schema_problems, schema_validator
from .sync_exec import EAGER, INLINE, ON_THREAD, PLAIN_TYPES, SyncPolicy
from .typehints import is_field_info as _is_field_info

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

    from ..protocol import types as t
    from .context import Context
    from .request_context import ServerRequestContext

logger: logging.Logger = logging.getLogger("mcpkit.server.tools")
_UNSTRUCTURED = ReturnInfo(inspect.Signature.empty)
_UNREAD: Any = object()  # (Tool.param_headers not read yet)
JSONDict = dict[str, Any]


class ToolError(Exception):
    """Raise it in a tool to return ``isError: true`` with this message, sent to the client verbatim."""


class CallRefused(MCPError):
    """The dispatcher's refusal of a tool call (an unknown or hidden tool, a missing scope) met by a tool that runs
    another one (tool search's caller tool run through ``forward()``): answered as the JSON-RPC error the direct
    call gets, never as an ``isError`` result."""

    def __init__(self, refusal: MCPError) -> None:
        super().__init__(refusal.message, refusal.data, code=refusal.code)


def _dump_annotations(value: JSONDict | BaseModel | None) -> JSONDict | None:
    if value is None:
        return None
    dumped: JSONDict = dump_model(value)
    return dumped


_TASK_SUPPORT = {None: None, False: None, True: "optional", "optional": "optional", "required": "required"}


def task_and_thread(task: bool | str | None, thread: bool | None) -> tuple[str | None, bool | None]:
    """A tool's ``task_support`` ("optional", "required" or None) and ``thread`` for its ``task=`` and ``thread=``
    options: a tool that may run as a task never runs inline on the event loop."""
    if task not in _TASK_SUPPORT:
        raise ValueError(f"task must be True, False, 'optional' or 'required', not {task!r}")
    support = _TASK_SUPPORT[task]
    if support is not None:
        if thread is False:
            raise ValueError(
                "a tool that runs as a task never runs inline on the event loop: drop thread=False "
                "(a plain def runs on a worker thread)"
            )
        thread = True
    return support, thread


class Tool(Listed):
    """A registered tool: the function, its definition and how to call it."""

    debug = False  # development mode: exception messages reach the client (MCPKit sets it from its own)
    _param_headers: Any = _UNREAD  # (param_headers, read once: a tool built another way reads it too)
    #: "optional" or "required" when the tool may (must) run as a task, None when it never does
    task_support: str | None = None

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: JSONDict | t.ToolAnnotations | None = None,
        icons: Sequence[JSONDict | t.Icon] | None = None,
        meta: JSONDict | None = None,
        structured_output: bool | None = None,
        thread: bool | None = None,
        task: bool | str | None = None,
    ) -> None:
        self.name: str = name or function_name(fn)
        self.task_support, thread = task_and_thread(task, thread)
        # Where a sync function runs (see sync_exec): thread=True always on a worker thread, False always inline,
        # None (default) learned: inline once its calls prove fast and non-blocking, back to the thread for good
        # the first time an inline call runs long.
        self.thread = thread
        if not self.name:
            raise ValueError("a tool needs a name")
        self.info: FunctionInfo = FunctionInfo(fn, name=self.name)
        self.fn: Callable[..., Any] = self.info.fn  # (what fills in its dependencies, when it declares any)
        fn = self.fn
        self.sync: SyncPolicy | None = None
        if not self.info.is_async:
            learnable = self.info.context_param is None
            self.sync = SyncPolicy(fn, f"tool {self.name!r}", thread, learnable=learnable)
        self.title = title
        self.description: str = description if description is not None else (self.info.description or "")
        self.annotations: JSONDict | None = _dump_annotations(annotations)
        self.icons: list[Any] | None = [dump_model(i) for i in icons] if icons else None
        self.meta = meta
        self._structured_output = structured_output
        self._returns: ReturnInfo | None = None
        Listed.__init__(self)
        self.info.check_schema(f"tool {self.name!r}")  # a parameter type without a JSON Schema fails here
        if _declares_param_header(self.info):  # (only then: a plain signature's schema waits for tools/list)
            self._check_param_headers()

    @classmethod
    def from_schema(
        cls,
        name: str,
        input_schema: JSONDict,
        caller: Callable[[JSONDict, Context], Any],
        *,
        output_schema: JSONDict | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: JSONDict | t.ToolAnnotations | None = None,
        icons: Sequence[JSONDict | t.Icon] | None = None,
        meta: JSONDict | None = None,
        thread: bool | None = None,
        task: bool | str | None = None,
        validate_output: bool = True,
    ) -> Tool:
        """A tool with no Python signature to read: its name, its JSON Schemas as they are, and a caller.

        Register it with ``app.add_tool(tool, tags=..., ...)`` as any tool. ``caller(arguments, ctx)`` gets the
        arguments dict, already checked against ``input_schema`` (bad arguments are refused with the
        ``isError`` result a decorated tool gives, and never reach it), and the request's
        :class:`~mcpkit.server.context.Context` (progress, logging, elicitation, sampling, ``ctx.become_task()``).
        An ``async def`` runs on the event loop; a plain ``def`` on a worker thread (``thread=False``: inline,
        for one that never blocks). It returns what a tool may: a ``CallToolResult`` (model, or a dict with a
        ``content`` list) sent as it is; with ``output_schema``, any other value that is not content (a dict, a
        pydantic model) is the structured content; else text, content blocks, ``Image``... as a decorated tool.
        Structured content that does not match ``output_schema`` is an error result, as a decorated tool's
        return that does not match its annotation (``validate_output=False``: the caller vouches for it).

        Both schemas must be JSON Schema objects (``"type": "object"``), else ``ValueError``; ``tools/list``
        shows them exactly as given. ``title``, ``description``, ``annotations``, ``icons``, ``meta`` and
        ``task`` are as for :meth:`MCPKit.tool <mcpkit.server.app.MCPKit.tool>`.
        """
        return SchemaTool(
            name,
            input_schema,
            caller,
            output_schema=output_schema,
            title=title,
            description=description,
            annotations=annotations,
            icons=icons,
            meta=meta,
            thread=thread,
            task=task,
            validate_output=validate_output,
        )

    @property
    def returns(self) -> ReturnInfo:
        if self._returns is None:
            self._returns = ReturnInfo(self.info.return_annotation, structured=self._structured_output)
        return self._returns

    def _check_param_headers(self) -> None:
        """Read its ``x-mcp-header`` declarations now, refusing one that breaks a rule of the spec (or admits an
        integer outside ±(2^53-1)): ValueError naming the tool, where it is registered."""
        try:
            self._param_headers = param_headers_from_schema(self.input_schema, declared_range=True) or None
        except ValueError as exc:
            raise ValueError(f"tool {self.name!r}: {exc}") from None

    @property
    def param_headers(self) -> Mapping[str, Sequence[str]] | None:
        """The ``Mcp-Param-*`` headers its input schema declares (``x-mcp-header``): header name -> argument path;
        None when none (or an invalid annotation registration could not see, e.g. on a nested model's field:
        clients drop such a tool, nothing is checked, a warning is logged). Read once."""
        if self._param_headers is _UNREAD:
            try:
                self._param_headers = param_headers_from_schema(self.input_schema) or None
            except ValueError as exc:
                logger.warning("tool %r: invalid x-mcp-header annotation, clients drop the tool: %s", self.name, exc)
                self._param_headers = None
        headers: Mapping[str, Sequence[str]] | None = self._param_headers
        return headers

    @property
    def input_schema(self) -> JSONDict:
        return self.info.input_schema

    @property
    def output_schema(self) -> JSONDict | None:
        return self.returns.output_schema

    def definition(self, feats: Features) -> JSONDict:
        """The ``Tool`` object for ``tools/list``, shaped for the revision (cached per revision)."""
        cached = self._defs.get(feats.version)
        if cached is not None:
            return cached
        try:
            schema = self.input_schema
        except Exception:  # an argument type pydantic cannot describe: keep the rest of the list working
            logger.exception("tool %r: cannot build its input schema; advertising a permissive one", self.name)
            schema = {"type": "object"}
        d: JSONDict = {"name": self.name, "description": self.description, "inputSchema": schema}
        annotations = dict(self.annotations) if self.annotations else {}
        if self.title:
            if feats.titles:
                d["title"] = self.title
            else:
                annotations.setdefault("title", self.title)
        if feats.structured_output and self.output_schema is not None:
            d["outputSchema"] = self.output_schema
        if annotations and feats.tool_annotations:
            d["annotations"] = annotations
        if self.icons and feats.icons:
            d["icons"] = self.icons
        if self.meta:  # (every revision: no schema forbids a member it does not name)
            d["_meta"] = self.meta
        if self.task_support is not None and feats.tasks:
            d["execution"] = {"taskSupport": self.task_support}
        self._defs[feats.version] = d
        return d

    def call(
        self, arguments: JSONDict, ctx: Context | None, feats: Features, name: str | None = None
    ) -> JSONDict | Coroutine[Any, Any, JSONDict]:
        """Run the tool and build its ``CallToolResult`` (wire form); failures become ``isError`` results, naming
        the tool ``name``: the name the client called it by, when that is not its own (a mounted server's tool).

        Returns the result itself when the call is over at once (a plain ``def`` that runs inline, arguments that
        do not validate), otherwise the coroutine that finishes it (an ``async def``, a worker-thread call): no
        coroutine frame for a sync tool that runs inline. The dispatcher awaits what is not a dict."""
        info = self.info
        try:
            # the arguments (FunctionInfo.validate, its fast path inline), then the function where its policy says
            fast = info.fast_plan
            kwargs = fast_validate(fast, arguments) if fast is not None else None
            if kwargs is None:
                kwargs = info.validate_model(arguments)
            if info.context_param is not None:
                kwargs[info.context_param] = ctx
            sync = self.sync
            if sync is None:
                return self._finish(self.fn(**kwargs), feats, None, ctx, name)
            # inline (timed, guarded) or not called: SyncPolicy.try_inline without its frame (hot path:
            # docs/architecture.md)
            value = run_inline(sync.inline_fn, (), kwargs, sync) if sync.mode == INLINE else ON_THREAD
            if type(value) is str:
                if (returns := self._returns) is not None and not returns.structured:
                    return text_result(value)  # self.result's first case
            elif (
                value is ON_THREAD or value is EAGER or (type(value) not in PLAIN_TYPES and inspect.isawaitable(value))
            ):
                return self._finish(value, feats, kwargs, ctx, name)
        except Exception as exc:
            return self._failed(exc, feats, ctx, name)
        return self.result(value, feats)

    async def _finish(
        self,
        value: Any,
        feats: Features,
        kwargs: JSONDict | None = None,
        ctx: Context | None = None,
        name: str | None = None,
    ) -> JSONDict:
        """The rest of a call that does not end at once: await the ``async def``'s coroutine (or what a sync
        function returned), or run a sync function where its policy says (``value`` is the policy's ON_THREAD or
        EAGER: it was not called; :meth:`SyncPolicy.__call__` yields out of an eager step and asks again)."""
        try:
            if value is ON_THREAD or value is EAGER:  # a sync function, not called yet: where its policy says
                assert self.sync is not None and kwargs is not None
                value = await self.sync(**kwargs)
            else:  # an async function's coroutine, or an awaitable a sync function returned
                value = await value
        except Exception as exc:
            return self._failed(exc, feats, ctx, name)
        return self.result(value, feats)

    def needed_scopes(self, arguments: Any) -> tuple[str, ...]:
        """The OAuth scopes a call of it with ``arguments`` needs (:attr:`MCPKit.scope_rule
        <mcpkit.server.visibility.Rules.scope_rule>`): its ``scopes``; a tool that runs another (a mounted one, tool
        search's caller tool) adds that one's."""
        return self.scopes

    def argument_problems(self, arguments: JSONDict) -> list[ArgumentProblem]:
        """What is wrong with ``arguments`` for this tool (empty: nothing), as :meth:`call` would refuse them, for
        a tool derived from this one to say in its own names (not used by :meth:`call` itself). A tool made
        :meth:`from_schema` checks them against its input schema, so a tool derived from one that sends its
        arguments elsewhere (e.g. to another server) refuses bad arguments before they are sent."""
        try:
            self.info.validate(arguments)
        except _validation_error() as exc:
            return validation_problems(exc)
        return []

    def _failed(self, exc: Exception, feats: Features, ctx: Context | None = None, name: str | None = None) -> JSONDict:
        """The ``isError`` result of a call that raised ``exc`` (protocol signals are raised again); ``ctx``: the
        call's Context, if it has one (a tool without one cannot wait on its session); ``name``: the tool's name
        as the client called it (None: its own)."""
        if isinstance(exc, (InputRequired, MissingRequiredClientCapability, TaskFailed, CallRefused)):
            raise exc  # protocol signals: an InputRequiredResult / -32021 / a task's / a refused call's JSON-RPC error
        if isinstance(exc, URLElicitationRequired) and feats.url_elicitation_required:
            raise exc  # -32042: the client has the user finish the URL elicitations it lists, then retries
        if isinstance(exc, ToolError):
            return error_result(str(exc))
        if isinstance(exc, MCPError):
            return error_result(exc.message)
        name = name or self.name
        if isinstance(exc, CapabilityNotSupported):  # the client cannot do what the tool asked (sampling, roots...)
            return error_result(f"Tool {name!r} needs something this client does not support: {exc}")
        if isinstance(exc, _validation_error()):
            return error_result(format_validation_error(exc, f"tool {name!r}"))
        if isinstance(exc, ConnectionClosed) and ctx is not None and session_ended(exc, ctx.request_context):
            logger.info("tool %r stopped: its session ended while it waited on the client (%s)", name, exc)
            return error_result(f"Tool {name!r} stopped: the session ended while it waited on the client")
        return error_result(internal_error_message(f"tool {name!r}", exc, self.debug))

    def result(self, value: Any, feats: Features) -> JSONDict:
        """The ``CallToolResult`` of a return value; a failing conversion becomes an ``isError`` result."""
        if type(value) is str and not (self._returns or self.returns).structured:
            return text_result(value)  # the common case, directly
        try:
            return self.build_result(value, feats)
        except Exception as exc:
            return error_result(internal_error_message(f"tool {self.name!r} (result conversion)", exc, self.debug))

    def build_result(self, value: Any, feats: Features) -> JSONDict:
        """The ``CallToolResult`` for a tool's return value (:meth:`call` answers a plain string itself)."""
        result: JSONDict
        types_ = loaded_types()
        if types_ is not None and isinstance(value, types_.CallToolResult):
            result = dump_model(value)
        elif isinstance(value, dict) and isinstance(value.get("content"), list) and not self.returns.structured:
            result = dict(value)
        else:
            returns = self.returns
            if returns.structured and not is_content_value(value):
                structured = returns.structure(value)
                content = [{"type": "text", "text": json_text(structured)}]
                result = {"content": content, "structuredContent": structured, "isError": False}
            else:
                result = {"content": to_content(value, blob_uri=f"mcpkit://tools/{self.name}/result"), "isError": False}
        result["content"] = downgrade_content(result.get("content") or [], feats)
        return result


class SchemaTool(Tool):
    """A tool defined by its JSON Schemas and a caller (see :meth:`Tool.from_schema`, which makes one): listed with
    exactly the schemas given, a call's arguments checked against the input schema (in the words a decorated tool's
    refusal uses) before the caller sees them, the caller given the request's Context, and what it returns made the
    result as a decorated tool's return value is, its structured content checked against the output schema.
    Tools imported from OpenAPI are ones."""

    def __init__(
        self,
        name: str,
        input_schema: JSONDict,
        caller: Callable[[JSONDict, Context], Any],
        *,
        output_schema: JSONDict | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: JSONDict | t.ToolAnnotations | None = None,
        icons: Sequence[JSONDict | t.Icon] | None = None,
        meta: JSONDict | None = None,
        thread: bool | None = None,
        task: bool | str | None = None,
        validate_output: bool = True,
    ) -> None:  # (Tool.__init__ is not run: there is no Python function to read)
        if not name:
            raise ValueError("a tool needs a name")
        if not callable(caller):
            raise TypeError(f"tool {name!r}: the caller must be a function of (arguments, ctx), not {caller!r:.100}")
        self.name = name
        self.task_support: str | None
        self.thread: bool | None
        self.task_support, self.thread = task_and_thread(task, thread)
        self._inputs = schema_validator(input_schema, f"tool {name!r}: the input schema")
        self._outputs = schema_validator(output_schema, f"tool {name!r}: the output schema") if output_schema else None
        self._output_schema = output_schema
        self._check_output = validate_output and self._outputs is not None
        self.caller = caller
        self.fn = caller
        is_async = inspect.iscoroutinefunction(caller) or inspect.iscoroutinefunction(
            getattr(caller, "__call__", None)  # noqa: B004 - an instance whose __call__ is async
        )
        self.sync: SyncPolicy | None = (
            None if is_async else SyncPolicy(caller, f"tool {name!r}", self.thread, learnable=False)
        )
        self.title = title
        self.description: str = description or ""
        self.annotations: JSONDict | None = _dump_annotations(annotations)
        self.icons: list[Any] | None = [dump_model(i) for i in icons] if icons else None
        self.meta = meta
        self._structured_output = None
        self._returns = _UNSTRUCTURED
        self.info: SchemaInfo = SchemaInfo(input_schema, self.description, is_async)  # type: ignore[assignment]
        Listed.__init__(self)
        self._check_param_headers()

    @property
    def returns(self) -> ReturnInfo:
        return _UNSTRUCTURED  # (no return annotation: the output schema is the one given)

    @property
    def input_schema(self) -> JSONDict:
        return self.info.input_schema

    @property
    def output_schema(self) -> JSONDict | None:
        return self._output_schema

    def argument_problems(self, arguments: JSONDict) -> list[ArgumentProblem]:
        return schema_problems(self._inputs, arguments)

    def call(self, arguments: JSONDict, ctx: Context | None, feats: Features, name: str | None = None) -> Any:
        if not self._inputs.is_valid(arguments):
            problems = schema_problems(self._inputs, arguments)
            return error_result(format_argument_problems(problems, f"tool {name or self.name!r}"))
        if self.sync is not None:
            return self._call_sync(arguments, ctx, feats, name)
        try:
            running = self.caller(arguments, ctx)  # type: ignore[arg-type]
        except Exception as exc:
            return self._failed(exc, feats, ctx, name)
        return self._finish(running, feats, None, ctx, name)

    async def _call_sync(
        self, arguments: JSONDict, ctx: Context | None, feats: Features, name: str | None = None
    ) -> JSONDict:
        assert self.sync is not None
        try:
            value = await self.sync(arguments, ctx)
        except Exception as exc:
            return self._failed(exc, feats, ctx, name)
        return self.result(value, feats)

    def result(self, value: Any, feats: Features) -> JSONDict:
        try:
            return self.build_result(value, feats)
        except Exception as exc:
            return error_result(internal_error_message(f"tool {self.name!r} (result conversion)", exc, self.debug))

    def build_result(self, value: Any, feats: Features) -> JSONDict:
        """The ``CallToolResult`` of what the caller returned: a ``CallToolResult`` (model, or a dict with a
        ``content`` list) as it is; with an output schema, any other value that is not content is the structured
        content (its JSON text the content); without, content as a decorated tool's return value becomes. The
        structured content of a result that is not an error must match the output schema."""
        result: JSONDict
        types_ = loaded_types()
        if types_ is not None and isinstance(value, types_.CallToolResult):
            result = dump_model(value)
        elif isinstance(value, dict) and isinstance(value.get("content"), list):
            result = dict(value)
        elif self._output_schema is not None and not is_content_value(value):
            structured = dump_model(value) if is_model(value) else value
            result = {"content": [{"type": "text", "text": json_text(structured)}], "structuredContent": structured}
            result["isError"] = False
        else:
            result = {"content": to_content(value, blob_uri=f"mcpkit://tools/{self.name}/result"), "isError": False}
        if self._check_output and not result.get("isError"):
            if "structuredContent" not in result:
                raise ValueError("the tool has an output schema, but its result has no structured content")
            problems = schema_problems(self._outputs, result["structuredContent"])
            if problems:
                said = "; ".join(f"{'.'.join(map(str, p)) or '(top)'}: {d or k}" for p, k, d in problems)
                raise ValueError(f"the structured content does not match the output schema: {said}")
        result["content"] = downgrade_content(result.get("content") or [], feats)
        return result


def _declares_param_header(info: FunctionInfo) -> bool:
    """Whether a parameter's own ``Field`` (its default or ``Annotated`` metadata) carries ``x-mcp-header``: the
    declarations registration reads without building every tool's schema."""
    for p in info.params:
        fields = [p.field, *(get_args(p.annotation)[1:] if get_origin(p.annotation) is Annotated else ())]
        for field in fields:
            extra = field.json_schema_extra if _is_field_info(field) else None
            if isinstance(extra, dict) and "x-mcp-header" in extra:
                return True
    return False


def tool_param_headers(self: Any, name: str) -> Mapping[str, Sequence[str]] | None:
    """``MCPKit.tool_param_headers`` (the method, defined here): the ``Mcp-Param-*`` headers of the tool
    ``self.get_tool(name)`` (None: none, or no such tool), which the Streamable HTTP endpoint checks on 2026-07-28
    calls."""
    tool = self.get_tool(name)
    return tool.param_headers if tool is not None else None


def _validation_error() -> type[ValidationError]:
    from pydantic import ValidationError

    return ValidationError


def text_result(text: str) -> JSONDict:
    """The ``CallToolResult`` of a tool that returned the plain string ``text`` (not structured output)."""
    return {"content": [{"type": "text", "text": text}], "isError": False}


def error_result(message: str) -> JSONDict:
    """An ``isError`` ``CallToolResult`` saying ``message``."""
    return {"content": [{"type": "text", "text": message}], "isError": True}


def session_ended(exc: ConnectionClosed, request: ServerRequestContext) -> bool:
    """Whether ``exc`` is the end of the session serving ``request`` (normal: no error to log), not a connection
    the handler opened itself failing: told by the connection that raised it, never by its message."""
    return exc.connection is not None and exc.connection is request.rc.peer


def internal_error_message(what: str, exc: BaseException, debug: bool = False) -> str:
    """Log ``exc`` with a fresh error id; return the message the client may see: only the error id in
    production (and that the server is misconfigured, for a :class:`ConfigurationError`), the exception's type and
    message too in development (``debug``: ``MCPKit(debug=True)`` or ``MCPKIT_DEBUG=1``)."""
    error_id = uuid.uuid4().hex[:12]
    if isinstance(exc, ConfigurationError):
        logger.error("%s failed: the server is misconfigured (error id %s): %s", what, error_id, exc, exc_info=exc)
        if not debug:
            return (
                f"Error in {what}: the server is misconfigured for it (error id {error_id}). Its operator finds "
                "what to fix in the server log."
            )
    else:
        logger.error("%s failed (error id %s)", what, error_id, exc_info=exc)
    if debug:
        return (
            f"Error in {what}: {type(exc).__name__}: {exc} (error id {error_id}; shown because the server runs in "
            "development mode, MCPKit(debug=True) or MCPKIT_DEBUG=1; in production the client sees only the id)"
        )
    return f"Error in {what}: an internal error occurred (error id {error_id}). The details are in the server log."


__all__ = [
    "Audio",
    "Image",
    "SchemaTool",
    "Tool",
    "ToolError",
    "downgrade_content",
    "dump_model",
    "error_result",
    "is_content_value",
    "is_model",
    "loaded_types",
    "sniff_mime",
    "to_content",
]
