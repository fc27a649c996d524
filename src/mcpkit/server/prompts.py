"""Prompts: a function whose arguments are the prompt's arguments and whose return value is its messages.

Return a ``str`` (one user message), a :class:`Message` (``Message.user(...)``, ``Message.assistant(...)``), a
dict, or a list of those. A message's content may be a string, an :class:`~mcpkit.server.content.Image` /
:class:`~mcpkit.server.content.Audio`, resource contents (embedded), a resource link or any content block.
Arguments arrive as strings on the wire; annotate them (``int``, ``Literal[...]``) and they are converted and
checked. A ``Literal``/``Enum`` argument completes automatically.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from ..protocol.errors import InvalidParams
from ..protocol.versions import Features
from .completions import Completer, gather_completions
from .content import downgrade_content, dump_model, loaded_types, to_content
from .pagination import Listed
from .schema import FunctionInfo, format_validation_error, function_name
from .sync_exec import SyncPolicy
from .typehints import title_of

if TYPE_CHECKING:
    from ..protocol import types as t
    from .context import Context

JSONDict = dict[str, Any]


class Message:
    """One prompt message: ``Message.user("text")``, ``Message.assistant(Image(png))``."""

    __slots__ = ("content", "role")

    def __init__(self, role: str, content: Any) -> None:
        if role not in ("user", "assistant"):
            raise ValueError("role must be 'user' or 'assistant'")
        self.role = role
        self.content: Any = content

    @classmethod
    def user(cls, content: Any) -> Message:
        """A message from the user."""
        return cls("user", content)

    @classmethod
    def assistant(cls, content: Any) -> Message:
        """A message from the assistant (e.g. the start of an answer, or a few-shot example)."""
        return cls("assistant", content)

    def to_wire(self) -> list[JSONDict]:
        blocks = to_content(self.content)
        return [{"role": self.role, "content": b} for b in blocks]


def to_messages(value: Any) -> list[JSONDict]:
    """Convert a prompt function's return value into ``messages`` (wire form)."""
    if isinstance(value, Message):
        return value.to_wire()
    types_ = loaded_types()
    if types_ is not None and isinstance(value, types_.PromptMessage):
        return [dump_model(value)]
    if isinstance(value, dict) and "role" in value and "content" in value:
        content = value["content"]
        if isinstance(content, dict):
            return [value]
        return Message(value["role"], content).to_wire()
    if isinstance(value, (list, tuple)):
        out: list[JSONDict] = []
        for v in value:
            is_message = isinstance(v, (Message, dict)) or (types_ is not None and isinstance(v, types_.PromptMessage))
            out.extend(to_messages(v) if is_message else Message.user(v).to_wire())
        return out
    return Message.user(value).to_wire()


class Prompt(Listed):
    """A registered prompt."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: Sequence[JSONDict | t.Icon] | None = None,
        meta: JSONDict | None = None,
        completions: dict[str, Completer] | None = None,
        thread: bool | None = None,
    ) -> None:
        self.name: str = name or function_name(fn, kind="prompt")
        self.info: FunctionInfo = FunctionInfo(fn, name=self.name)
        self.fn: Callable[..., Any] = self.info.fn  # (what fills in its dependencies, when it declares any)
        fn = self.fn
        # where a sync prompt function runs (see sync_exec): learned by default, thread=True/False to declare
        self.sync: SyncPolicy | None = None
        if not self.info.is_async:
            self.sync = SyncPolicy(fn, f"prompt {self.name!r}", thread, learnable=self.info.context_param is None)
        self.title = title
        self.description: str | None = description if description is not None else self.info.description
        self.icons: list[Any] | None = [dump_model(i) for i in icons] if icons else None
        self.meta = meta
        names = {p.name for p in self.info.params}
        unknown = f"prompt {self.name!r}: completions for unknown arguments"
        self.completions: dict[str, Completer] = gather_completions(self.info.params, completions, names, unknown)
        Listed.__init__(self)

    def definition(self, feats: Features) -> JSONDict:
        cached = self._defs.get(feats.version)
        if cached is not None:
            return cached
        d: JSONDict = {"name": self.name}
        if self.title and feats.titles:
            d["title"] = self.title
        if self.description:
            d["description"] = self.description
        args: list[JSONDict] = []
        for p in self.info.params:
            a: JSONDict = {"name": p.name, "required": p.required}
            if feats.titles and (title := title_of(p.annotation) or (p.field and p.field.title)):
                a["title"] = title  # (PromptArgument is BaseMetadata from 2025-06-18 on)
            if p.description:
                a["description"] = p.description
            args.append(a)
        if args:
            d["arguments"] = args
        if self.icons and feats.icons:
            d["icons"] = self.icons
        if self.meta:  # (every revision: no schema forbids a member it does not name)
            d["_meta"] = self.meta
        self._defs[feats.version] = d
        return d

    async def render(self, arguments: dict[str, Any], ctx: Context | None, feats: Features) -> JSONDict:
        """``prompts/get``: check the arguments (-32602 when required ones are missing), run, convert."""
        from pydantic import ValidationError

        missing = [p.name for p in self.info.params if p.required and p.name not in arguments]
        if missing:
            raise InvalidParams(f"prompt {self.name!r}: missing required arguments: {', '.join(missing)}")
        try:
            kwargs = self.info.validate(arguments)
        except ValidationError as exc:
            # a list, dict or model argument comes as JSON text (the wire carries strings only)
            decoded = _json_arguments(arguments)
            read: dict[str, Any] | None = None
            if decoded is not None:
                with contextlib.suppress(ValidationError):
                    read = self.info.validate(decoded)
            if read is None:
                raise InvalidParams(format_validation_error(exc, f"prompt {self.name!r}")) from None
            kwargs = read
        if self.info.context_param is not None:
            kwargs[self.info.context_param] = ctx
        value = await self.fn(**kwargs) if self.sync is None else await self.sync(**kwargs)
        messages = to_messages(value)
        for m in messages:
            m["content"] = downgrade_content([m["content"]], feats)[0]
        result: JSONDict = {"messages": messages}
        if self.description:
            result["description"] = self.description
        return result


def _json_arguments(arguments: dict[str, Any]) -> dict[str, Any] | None:
    """``arguments`` with every string that holds a JSON array or object read as JSON (prompt arguments are strings
    on the wire, so a client sends a list, dict or model argument as JSON text); None when there is none."""
    decoded: dict[str, Any] | None = None
    for name, value in arguments.items():
        if isinstance(value, str) and value[:1] in ("[", "{"):
            try:
                parsed = orjson.loads(value)
            except orjson.JSONDecodeError:
                continue
            if decoded is None:
                decoded = dict(arguments)
            decoded[name] = parsed
    return decoded


__all__ = ["Message", "Prompt", "to_messages"]
