"""The protocol revisions and their differences: the ONE place that knows what each revision allows.

Everything else asks :func:`features` (or the :class:`Features` of a session) instead of comparing version
strings, so adding a revision means editing this file only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, TypeAlias, TypeGuard

V2024_11_05 = "2024-11-05"
V2025_03_26 = "2025-03-26"
V2025_06_18 = "2025-06-18"
V2025_11_25 = "2025-11-25"
V2026_07_28 = "2026-07-28"

HANDSHAKE_VERSIONS: tuple[str, ...] = (V2024_11_05, V2025_03_26, V2025_06_18, V2025_11_25)
MODERN_VERSIONS: tuple[str, ...] = (V2026_07_28,)
ALL_VERSIONS: tuple[str, ...] = HANDSHAKE_VERSIONS + MODERN_VERSIONS
LATEST_HANDSHAKE = V2025_11_25
LATEST = V2026_07_28

# Reserved _meta keys of the modern era.
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
# Tasks: the 2025-11-25 core utility (experimental) and the 2026-07-28 extension (SEP-2663).
META_RELATED_TASK = "io.modelcontextprotocol/related-task"
META_MODEL_IMMEDIATE_RESPONSE = "io.modelcontextprotocol/model-immediate-response"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"


# Methods that exist in one era only: the other era answers them -32601 Method not found.
HANDSHAKE_ONLY = frozenset(
    (
        *("initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"),
        *("tasks/result", "tasks/list"),  # 2025-11-25 tasks; the 2026-07-28 extension dropped them
    )
)
MODERN_ONLY = frozenset(("server/discover", "subscriptions/listen", "tasks/update"))
#: the requests a 2026-07-28 server may answer with ``resultType: "input_required"`` (MRTR; any other MUST NOT)
INPUT_REQUIRED_METHODS = frozenset(("tools/call", "prompts/get", "resources/read"))

#: The server capability (and its sub-flag) each client-to-server method needs: a client does not send one the
#: server did not declare (see :func:`undeclared_capability`).
SERVER_CAPABILITY_FOR: dict[str, tuple[str, str | None]] = {
    "tools/list": ("tools", None),
    "tools/call": ("tools", None),
    "resources/list": ("resources", None),
    "resources/templates/list": ("resources", None),
    "resources/read": ("resources", None),
    "resources/subscribe": ("resources", "subscribe"),
    "resources/unsubscribe": ("resources", "subscribe"),
    "prompts/list": ("prompts", None),
    "prompts/get": ("prompts", None),
    "logging/setLevel": ("logging", None),
    "completion/complete": ("completions", None),
}

LOG_LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
#: A log level (RFC 5424 severities, as MCP names them), least severe first.
LogLevel: TypeAlias = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


class Era(Enum):
    """Handshake era (initialize + sessions) or modern era (stateless, per-request ``_meta``)."""

    HANDSHAKE = "handshake"
    MODERN = "modern"


@dataclass(frozen=True, slots=True)
class Features:
    """What one protocol revision allows. Read it, never compare version strings elsewhere."""

    version: str
    era: Era
    batches: bool  # JSON-RPC batches on the wire (2025-03-26 only)
    audio: bool  # AudioContent
    tool_annotations: bool
    completions_capability: bool  # the `completions` server capability exists
    progress_message: bool
    structured_output: bool  # Tool.outputSchema / CallToolResult.structuredContent
    resource_links: bool
    elicitation: bool
    titles: bool
    annotations_last_modified: bool  # Annotations.lastModified (2025-06-18 on)
    completion_context: bool
    protocol_version_header: bool  # MCP-Protocol-Version MUST be sent on HTTP
    resource_indicators: bool  # OAuth: the client MUST name the server (RFC 8707 resource) to the authorization server
    pkce_advertised: bool  # OAuth: an authorization server whose metadata lists no PKCE method MUST be refused
    icons: bool
    implementation_details: bool  # Implementation.description and websiteUrl (serverInfo; 2025-11-25 on)
    url_elicitation: bool
    url_elicitation_required: (
        bool  # the -32042 error listing URL elicitations (2025-11-25; 2026-07-28 MUST NOT emit it)
    )
    elicitation_choices: bool  # titled and multi-select enums, a default on every field (2025-11-25 on)
    sampling_tools: bool
    sse_polling: bool  # priming events / retry (SEP-1699)
    error_id_optional: bool  # JSONRPCErrorResponse.id is optional (2025-11-25 on); JSON-RPC 2.0 requires it
    tasks: bool  # the experimental tasks utility of 2025-11-25 (params.task, tasks/get|result|list|cancel)
    streamable_http: bool
    # conventions of 2024-11-05/2025-03-26 sessions (from 2025-06-18 on, the official spec's behaviour)
    always_next_cursor: bool  # nextCursor "" at the end of every list
    always_structured_content: bool  # structuredContent {} on every tools/call result
    # modern era
    result_type: bool
    cacheable_results: bool
    input_required: bool  # InputRequiredResult instead of server->client requests
    listen: bool  # subscriptions/listen instead of resources/subscribe and the GET stream
    tasks_extension: bool  # tasks as the io.modelcontextprotocol/tasks extension (SEP-2663)
    ping: bool
    set_level: bool
    resource_not_found_code: int
    modern: bool = False  # era is MODERN (a plain field: read on every request)


def _make(version: str) -> Features:
    i = ALL_VERSIONS.index(version)
    modern = version in MODERN_VERSIONS

    def at_least(v: str) -> bool:
        return i >= ALL_VERSIONS.index(v)

    return Features(
        version=version,
        era=Era.MODERN if modern else Era.HANDSHAKE,
        batches=version == V2025_03_26,
        audio=at_least(V2025_03_26),
        tool_annotations=at_least(V2025_03_26),
        completions_capability=at_least(V2025_03_26),
        progress_message=at_least(V2025_03_26),
        structured_output=at_least(V2025_06_18),
        resource_links=at_least(V2025_06_18),
        elicitation=at_least(V2025_06_18),
        titles=at_least(V2025_06_18),
        annotations_last_modified=at_least(V2025_06_18),
        completion_context=at_least(V2025_06_18),
        protocol_version_header=at_least(V2025_06_18),
        resource_indicators=at_least(V2025_06_18),
        pkce_advertised=at_least(V2025_11_25),
        icons=at_least(V2025_11_25),
        implementation_details=at_least(V2025_11_25),
        url_elicitation=at_least(V2025_11_25),
        url_elicitation_required=version == V2025_11_25,
        elicitation_choices=at_least(V2025_11_25),
        sampling_tools=at_least(V2025_11_25),
        sse_polling=at_least(V2025_11_25),
        error_id_optional=at_least(V2025_11_25),
        tasks=version == V2025_11_25,
        streamable_http=at_least(V2025_03_26),
        always_next_cursor=version in (V2024_11_05, V2025_03_26),
        always_structured_content=version in (V2024_11_05, V2025_03_26),
        result_type=modern,
        cacheable_results=modern,
        input_required=modern,
        listen=modern,
        tasks_extension=modern,
        ping=not modern,
        set_level=not modern,
        resource_not_found_code=-32602 if modern else -32002,
        modern=modern,
    )


_FEATURES: dict[str, Features] = {v: _make(v) for v in ALL_VERSIONS}


def features(version: str) -> Features:
    """The :class:`Features` of a supported revision (KeyError for an unknown one)."""
    return _FEATURES[version]


def is_supported(version: object) -> TypeGuard[str]:
    return isinstance(version, str) and version in _FEATURES


def is_modern(version: str) -> bool:
    return version in MODERN_VERSIONS


def latest_of(candidates: Iterable[object]) -> str | None:
    """The newest revision among ``candidates`` that this SDK knows (None when none), by the order of
    :data:`ALL_VERSIONS`, not by comparing the strings."""
    known = set(candidates)
    return next((v for v in reversed(ALL_VERSIONS) if v in known), None)


def negotiate_handshake(requested: str, supported: tuple[str, ...] = HANDSHAKE_VERSIONS) -> str:
    """Server side of initialize: echo a supported version, else answer our latest handshake revision."""
    if requested in supported:
        return requested
    return max(supported)


def undeclared_capability(method: str, server_capabilities: dict[str, Any], feats: Features) -> str | None:
    """Why a client may not send ``method`` to a server that declared ``server_capabilities`` in revision
    ``feats`` (the capability or sub-flag it lacks), or None when it may."""
    need = SERVER_CAPABILITY_FOR.get(method)
    if need is None:
        return None
    cap, flag = need
    if cap == "completions" and not feats.completions_capability:
        return None  # 2024-11-05 had no completions capability flag
    value = server_capabilities.get(cap)
    if not isinstance(value, dict):
        return f"the server did not declare the {cap!r} capability, so {method!r} is not sent"
    if flag is not None and not value.get(flag):
        return f"the server did not declare {cap}.{flag}, so {method!r} is not sent"
    return None
