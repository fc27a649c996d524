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
from itertools import islice
from typing import TYPE_CHECKING, Any

from ..protocol.errors import (
    CapabilityNotSupported,
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
    _json_text,
    downgrade_content,
    dump_model,
    is_content_value,
    is_model,
    loaded_types,
    sniff_mime,
    to_content,
)
from .lowlevel import InputRequired
from .pagination import Listed
from .schema import (
    ArgumentProblem,
    FunctionInfo,
    ReturnInfo,
    fast_validate,
    format_validation_error,
    function_name,
    validation_problems,
)
from .sync_exec import EAGER, ON_THREAD, PLAIN_TYPES, SyncPolicy

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

    from ..protocol import types as t
    from .context import Context

logger = logging.getLogger("mcpkit.server.tools")
_UNREAD: Any = object()  # (Tool.param_headers not read yet)
JSONDict = dict[str, Any]


class ToolError(Exception):
    """Raise it in a tool to return ``isError: true`` with this message, sent to the client verbatim."""


def _dump_annotations(value: JSONDict | BaseModel | None) -> JSONDict | None:
    if value is None:
        return None
    dumped: JSONDict = dump_model(value)
    return dumped


_TASK_SUPPORT = {None: None, False: None, True: "optional", "optional": "optional", "required": "required"}


class Tool(Listed):
    """A registered tool: the function, its definition and how to call it."""

    debug = False  # development mode: exception messages reach the client (MCPKit sets it from its own)
    _param_headers: Any = _UNREAD  # (param_headers, read once: a tool built another way reads it too)
    #: "optional" or "required" when the tool may (must) run as a task, None when it never does
    task_support: str | None = None
    _input_validator: Any = None  # (argument_problems of a tool without a function: its input schema's, made once)

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
        self.name = name or function_name(fn)
        if task not in _TASK_SUPPORT:
            raise ValueError(f"task must be True, False, 'optional' or 'required', not {task!r}")
        self.task_support = _TASK_SUPPORT[task]
        if self.task_support is not None:
            if thread is False:
                raise ValueError(
                    "a tool that runs as a task never runs inline on the event loop: drop thread=False "
                    "(a plain def runs on a worker thread)"
                )
            thread = True
        # Where a sync function runs (see sync_exec): thread=True always on a worker thread, False always inline,
        # None (default) learned: inline once its calls prove fast and non-blocking, back to the thread for good
        # the first time an inline call runs long.
        self.thread = thread
        if not self.name:
            raise ValueError("a tool needs a name")
        self.fn = fn
        self.info = FunctionInfo(fn, name=self.name)
        self.sync: SyncPolicy | None = None
        if not self.info.is_async:
            learnable = self.info.context_param is None
            self.sync = SyncPolicy(fn, f"tool {self.name!r}", thread, learnable=learnable)
        self.title = title
        self.description = description if description is not None else (self.info.description or "")
        self.annotations = _dump_annotations(annotations)
        self.icons = [dump_model(i) for i in icons] if icons else None
        self.meta = meta
        self._structured_output = structured_output
        self._returns: ReturnInfo | None = None
        Listed.__init__(self)
        self.info.check_schema(f"tool {self.name!r}")  # a parameter type without a JSON Schema fails here

    @property
    def returns(self) -> ReturnInfo:
        if self._returns is None:
            self._returns = ReturnInfo(self.info.return_annotation, structured=self._structured_output)
        return self._returns

    @property
    def param_headers(self) -> Mapping[str, Sequence[str]] | None:
        """The ``Mcp-Param-*`` headers its input schema declares (``x-mcp-header``): header name -> argument path;
        None when none (or an invalid annotation: clients drop such a tool, nothing is checked). Read once."""
        if self._param_headers is _UNREAD:
            try:
                self._param_headers = param_headers_from_schema(self.input_schema) or None
            except ValueError:
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
        self, arguments: JSONDict, ctx: Context | None, feats: Features
    ) -> JSONDict | Coroutine[Any, Any, JSONDict]:
        """Run the tool and build its ``CallToolResult`` (wire form); failures become ``isError`` results.

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
                return self._finish(self.fn(**kwargs), feats)
            value = sync.try_inline((), kwargs)  # inline (timed, guarded), or not called
            if value is ON_THREAD or value is EAGER or (type(value) not in PLAIN_TYPES and inspect.isawaitable(value)):
                return self._finish(value, feats, kwargs)
        except Exception as exc:
            return self._failed(exc, feats)
        if type(value) is str and (returns := self._returns) is not None and not returns.structured:
            return text_result(value)  # self.result's first case
        return self.result(value, feats)

    async def _finish(self, value: Any, feats: Features, kwargs: JSONDict | None = None) -> JSONDict:
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
            return self._failed(exc, feats)
        return self.result(value, feats)

    def argument_problems(self, arguments: JSONDict) -> list[ArgumentProblem]:
        """What is wrong with ``arguments`` for this tool (empty: nothing), as :meth:`call` would refuse them, for
        a tool derived from this one to say in its own names (not used by :meth:`call` itself). A tool with no
        Python function of its own (one that sends its arguments elsewhere, e.g. to another server) is checked
        against its input schema here, so a tool derived from it refuses bad arguments before they are sent."""
        info = self.info
        if not isinstance(info, FunctionInfo):
            validator = self._input_validator
            if validator is None:
                import jsonschema_rs

                validator = self._input_validator = jsonschema_rs.validator_for(self.input_schema)
            if validator.is_valid(arguments):
                return []
            return [(tuple(e.instance_path), "invalid", e.message) for e in islice(validator.iter_errors(arguments), 8)]
        try:
            info.validate(arguments)
        except _validation_error() as exc:
            return validation_problems(exc)
        return []

    def _failed(self, exc: Exception, feats: Features) -> JSONDict:
        """The ``isError`` result of a call that raised ``exc`` (protocol signals are raised again)."""
        if isinstance(exc, (InputRequired, MissingRequiredClientCapability, TaskFailed)):
            raise exc  # protocol signals: an InputRequiredResult / -32021 / a task's JSON-RPC error, not tool failures
        if isinstance(exc, URLElicitationRequired) and feats.url_elicitation_required:
            raise exc  # -32042: the client has the user finish the URL elicitations it lists, then retries
        if isinstance(exc, ToolError):
            return error_result(str(exc))
        if isinstance(exc, MCPError):
            return error_result(exc.message)
        if isinstance(exc, CapabilityNotSupported):  # the client cannot do what the tool asked (sampling, roots...)
            return error_result(f"Tool {self.name!r} needs something this client does not support: {exc}")
        if isinstance(exc, _validation_error()):
            return error_result(format_validation_error(exc, f"tool {self.name!r}"))
        return error_result(internal_error_message(f"tool {self.name!r}", exc, self.debug))

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
                content = [{"type": "text", "text": _json_text(structured)}]
                result = {"content": content, "structuredContent": structured, "isError": False}
            else:
                result = {"content": to_content(value, blob_uri=f"mcpkit://tools/{self.name}/result"), "isError": False}
        result["content"] = downgrade_content(result.get("content") or [], feats)
        return result


def tool_param_headers(app: Any, name: str) -> Mapping[str, Sequence[str]] | None:
    """``MCPKit.tool_param_headers``: the ``Mcp-Param-*`` headers of the tool ``app.get_tool(name)`` (None: none, or
    no such tool), which the Streamable HTTP endpoint checks on 2026-07-28 calls."""
    tool = app.get_tool(name)
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


def internal_error_message(what: str, exc: BaseException, debug: bool = False) -> str:
    """Log ``exc`` with a fresh error id; return the message the client may see: only the error id in
    production, the exception's type and message too in development (``debug``: ``MCPKit(debug=True)`` or
    ``MCPKIT_DEBUG=1``)."""
    error_id = uuid.uuid4().hex[:12]
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
