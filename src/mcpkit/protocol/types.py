"""MCP data types of every revision (pydantic v2).

One model per concept, covering the union of all revisions: fields a revision lacks are simply absent (None) on
the wire for that revision. Attribute names are snake_case; the wire names (camelCase) are the aliases, so
``model_dump(by_alias=True, exclude_none=True)`` (see :func:`dump`) yields the wire form. Unknown fields are kept
(``extra="allow"``): no revision forbids them, and a newer peer's fields must survive a round trip.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

Role: TypeAlias = Literal["user", "assistant"]
from .apps import tool_ui  # noqa: E402
from .versions import LOG_LEVELS as LOG_LEVELS  # noqa: E402
from .versions import LogLevel as LoggingLevel  # noqa: E402


class MCPModel(BaseModel):
    """Base of every MCP type: camelCase on the wire, snake_case in Python, unknown fields preserved."""

    model_config: ClassVar[ConfigDict] = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow", serialize_by_alias=True
    )

    def dump(self) -> dict[str, Any]:
        """The wire form: camelCase keys, None fields omitted."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


Meta = Annotated[dict[str, Any] | None, Field(alias="_meta")]


def _text_of(blocks: list[Any], sep: str) -> str:
    """The text of the text blocks among ``blocks``, joined by ``sep``."""
    return sep.join(b.text for b in blocks if isinstance(b, TextContent))


def dump(model: BaseModel | dict[str, Any]) -> dict[str, Any]:
    """Wire form of a model (dicts pass through unchanged)."""
    if isinstance(model, dict):
        return model
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


# ---------------------------------------------------------------------------------------------- basics


class Icon(MCPModel):
    src: str
    mime_type: str | None = None
    sizes: list[str] | None = None
    theme: Literal["light", "dark"] | None = None


class Implementation(MCPModel):
    name: str
    version: str
    title: str | None = None
    description: str | None = None
    website_url: str | None = None
    icons: list[Icon] | None = None


class Annotations(MCPModel):
    audience: list[Role] | None = None
    priority: float | None = None
    last_modified: str | None = None


# ---------------------------------------------------------------------------------------------- content


class TextContent(MCPModel):
    type: Literal["text"] = "text"
    text: str
    annotations: Annotations | None = None
    meta: Meta = None


class ImageContent(MCPModel):
    type: Literal["image"] = "image"
    data: str
    mime_type: str
    annotations: Annotations | None = None
    meta: Meta = None


class AudioContent(MCPModel):
    type: Literal["audio"] = "audio"
    data: str
    mime_type: str
    annotations: Annotations | None = None
    meta: Meta = None


class TextResourceContents(MCPModel):
    uri: str
    mime_type: str | None = None
    text: str
    meta: Meta = None


class BlobResourceContents(MCPModel):
    uri: str
    mime_type: str | None = None
    blob: str
    meta: Meta = None


ResourceContents: TypeAlias = TextResourceContents | BlobResourceContents


class EmbeddedResource(MCPModel):
    type: Literal["resource"] = "resource"
    resource: TextResourceContents | BlobResourceContents
    annotations: Annotations | None = None
    meta: Meta = None


class ResourceLink(MCPModel):
    type: Literal["resource_link"] = "resource_link"
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    icons: list[Icon] | None = None
    annotations: Annotations | None = None
    meta: Meta = None


class ToolUseContent(MCPModel):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]
    meta: Meta = None


class ToolResultContent(MCPModel):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: list[ContentBlock] = Field(default_factory=list)
    structured_content: Any = None
    is_error: bool | None = None
    meta: Meta = None


ContentBlock: TypeAlias = Annotated[
    TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource, Field(discriminator="type")
]
SamplingContent: TypeAlias = Annotated[
    TextContent | ImageContent | AudioContent | ToolUseContent | ToolResultContent, Field(discriminator="type")
]

# ---------------------------------------------------------------------------------------------- tools


class ToolAnnotations(MCPModel):
    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None


class ToolUI(MCPModel):
    """A tool's MCP Apps metadata (``_meta.ui``): the view that renders its results and who may call it."""

    resource_uri: str | None = None
    visibility: list[Literal["model", "app"]] | None = None

    @property
    def model_visible(self) -> bool:
        """Offered to the model (``visibility`` absent or naming ``"model"``)."""
        return self.visibility is None or "model" in self.visibility

    @property
    def app_visible(self) -> bool:
        """Callable by the view (``visibility`` absent or naming ``"app"``)."""
        return self.visibility is None or "app" in self.visibility


class ToolExecution(MCPModel):
    """How a tool may be run (2025-11-25): ``task_support`` is "forbidden" (the default), "optional" or
    "required" (task-augmented ``tools/call``)."""

    task_support: Literal["forbidden", "optional", "required"] | None = None


class Tool(MCPModel):
    name: str
    title: str | None = None
    description: str | None = None
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    output_schema: dict[str, Any] | None = None
    annotations: ToolAnnotations | None = None
    icons: list[Icon] | None = None
    execution: ToolExecution | None = None
    meta: Meta = None

    @property
    def ui(self) -> ToolUI | None:
        """Its MCP Apps metadata (``_meta.ui``, or the deprecated flat ``ui/resourceUri``), typed; None when the
        tool has none."""
        found = tool_ui(self.meta)
        return ToolUI.model_validate(found) if found is not None else None


class CallToolResult(MCPModel):
    content: list[ContentBlock] = Field(default_factory=list)
    structured_content: Any = None
    is_error: bool = False
    meta: Meta = None

    @property
    def text(self) -> str:
        """The text of its text blocks, joined by newlines."""
        return _text_of(self.content, "\n")


class ListToolsResult(MCPModel):
    tools: list[Tool]
    next_cursor: str | None = None
    meta: Meta = None


# ---------------------------------------------------------------------------------------------- resources


class Resource(MCPModel):
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: Annotations | None = None
    icons: list[Icon] | None = None
    meta: Meta = None


class ResourceTemplate(MCPModel):
    uri_template: str
    name: str = ""
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    annotations: Annotations | None = None
    icons: list[Icon] | None = None
    meta: Meta = None


class ListResourcesResult(MCPModel):
    resources: list[Resource]
    next_cursor: str | None = None
    meta: Meta = None


class ListResourceTemplatesResult(MCPModel):
    resource_templates: list[ResourceTemplate]
    next_cursor: str | None = None
    meta: Meta = None


class ReadResourceResult(MCPModel):
    contents: list[TextResourceContents | BlobResourceContents]
    meta: Meta = None

    @property
    def text(self) -> str:
        """The text of its text contents, joined (blobs left out)."""
        return "".join(c.text for c in self.contents if isinstance(c, TextResourceContents))


# ---------------------------------------------------------------------------------------------- prompts


class PromptArgument(MCPModel):
    name: str
    title: str | None = None
    description: str | None = None
    required: bool | None = None


class Prompt(MCPModel):
    name: str
    title: str | None = None
    description: str | None = None
    arguments: list[PromptArgument] | None = None
    icons: list[Icon] | None = None
    meta: Meta = None


class PromptMessage(MCPModel):
    role: Role
    content: ContentBlock

    @property
    def text(self) -> str:
        """The message's text ("" when its content is not text)."""
        return _text_of([self.content], "")


class GetPromptResult(MCPModel):
    description: str | None = None
    messages: list[PromptMessage]
    meta: Meta = None

    @property
    def text(self) -> str:
        """The text of its messages, joined by blank lines (a one-message prompt: that message's text)."""
        return "\n\n".join(m.text for m in self.messages if m.text)


class ListPromptsResult(MCPModel):
    prompts: list[Prompt]
    next_cursor: str | None = None
    meta: Meta = None


# ---------------------------------------------------------------------------------------------- completion


class Completion(MCPModel):
    values: list[str]
    total: int | None = None
    has_more: bool | None = None


class CompleteResult(MCPModel):
    completion: Completion
    meta: Meta = None


class PromptReference(MCPModel):
    type: Literal["ref/prompt"] = "ref/prompt"
    name: str
    title: str | None = None


class ResourceTemplateReference(MCPModel):
    type: Literal["ref/resource"] = "ref/resource"
    uri: str


# ---------------------------------------------------------------------------------------------- client features


class Root(MCPModel):
    uri: str
    name: str | None = None
    meta: Meta = None


class ListRootsResult(MCPModel):
    roots: list[Root]
    meta: Meta = None


class ModelHint(MCPModel):
    name: str | None = None


class ModelPreferences(MCPModel):
    hints: list[ModelHint] | None = None
    cost_priority: float | None = None
    speed_priority: float | None = None
    intelligence_priority: float | None = None


class SamplingMessage(MCPModel):
    role: Role
    content: SamplingContent | list[SamplingContent]
    meta: Meta = None

    @property
    def text(self) -> str:
        """The message's text (its text blocks, joined by newlines)."""
        return _text_of(self.content if isinstance(self.content, list) else [self.content], "\n")


class CreateMessageRequestParams(MCPModel):
    messages: list[SamplingMessage]
    model_preferences: ModelPreferences | None = None
    system_prompt: str | None = None
    include_context: Literal["none", "thisServer", "allServers"] | None = None
    temperature: float | None = None
    max_tokens: int
    stop_sequences: list[str] | None = None
    metadata: dict[str, Any] | None = None
    tools: list[Tool] | None = None
    tool_choice: dict[str, Any] | None = None
    meta: Meta = None


class CreateMessageResult(MCPModel):
    role: Role = "assistant"
    content: SamplingContent | list[SamplingContent]
    model: str
    stop_reason: str | None = "endTurn"
    meta: Meta = None

    @property
    def text(self) -> str:
        """The model's answer as text (its text blocks, joined by newlines)."""
        return _text_of(self.content if isinstance(self.content, list) else [self.content], "\n")


class ElicitRequestParams(MCPModel):
    mode: Literal["form", "url"] | None = None
    message: str
    requested_schema: dict[str, Any] | None = None
    url: str | None = None
    elicitation_id: str | None = None
    meta: Meta = None


class ElicitResult(MCPModel):
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None
    meta: Meta = None


# ---------------------------------------------------------------------------------------------- lifecycle


class InitializeResult(MCPModel):
    protocol_version: str
    capabilities: dict[str, Any]
    server_info: Implementation
    instructions: str | None = None
    meta: Meta = None


class DiscoverResult(MCPModel):
    supported_versions: list[str]
    capabilities: dict[str, Any]
    instructions: str | None = None
    ttl_ms: int | None = None
    cache_scope: str | None = None
    meta: Meta = None


# ---------------------------------------------------------------------------------------------- tasks

TaskStatus: TypeAlias = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL_STATUSES: frozenset[str] = frozenset(("completed", "failed", "cancelled"))


class Task(MCPModel):
    """A task's state, read from either wire form: 2025-11-25 (``ttl``, ``pollInterval``) or the 2026-07-28
    extension (``ttlMs``, ``pollIntervalMs``; a ``tasks/get`` answer also inlines ``result``, ``error`` or
    ``inputRequests``). ``ttl`` and ``poll_interval`` (milliseconds; ``ttl`` None: unlimited) hold what the peer
    sent under either name, as do :attr:`ttl_ms` and :attr:`poll_interval_ms`."""

    task_id: str
    status: TaskStatus
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl: int | None = None
    poll_interval: int | None = None
    ttl_ms_: int | None = Field(default=None, alias="ttlMs")
    poll_interval_ms_: int | None = Field(default=None, alias="pollIntervalMs")
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None
    meta: Meta = None

    @model_validator(mode="after")
    def _one_name_per_field(self) -> Task:
        """The 2026-07-28 names fill the fields both eras read (``ttl``, ``poll_interval``)."""
        if self.ttl is None and self.ttl_ms_ is not None:
            self.ttl = self.ttl_ms_
        if self.poll_interval is None and self.poll_interval_ms_ is not None:
            self.poll_interval = self.poll_interval_ms_
        return self

    @property
    def ttl_ms(self) -> int | None:
        """How long the server keeps the task from its creation, in milliseconds (None: unlimited or unsaid)."""
        return self.ttl_ms_ if self.ttl_ms_ is not None else self.ttl

    @property
    def poll_interval_ms(self) -> int | None:
        """The polling interval the server suggests, in milliseconds (None: none given)."""
        return self.poll_interval_ms_ if self.poll_interval_ms_ is not None else self.poll_interval

    @property
    def terminal(self) -> bool:
        """True once the task is ``completed``, ``failed`` or ``cancelled`` (its state no longer changes)."""
        return self.status in TERMINAL_STATUSES


class ListTasksResult(MCPModel):
    tasks: list[Task]
    next_cursor: str | None = None
    meta: Meta = None


class LoggingMessageParams(MCPModel):
    level: LoggingLevel
    logger: str | None = None
    data: Any = None
