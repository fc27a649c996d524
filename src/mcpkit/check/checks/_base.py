"""What every group of checks shares: the target, the report, the wires, and the helpers that judge answers."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ...protocol.versions import (
    LATEST_HANDSHAKE,
    Features,
    features,
)
from ..report import Report
from ..wire import Incoming, StdioWire, Wire, WireClosed, network_wire, server_argv, target_transport
from ..wire_http import HttpWire

JSON = dict[str, Any]
CLIENT_INFO = {"name": "mcpkit-check", "version": "1.0"}
CHECK_ROOT = {"uri": "file:///tmp/mcpkit-check", "name": "mcpkit check"}
UNKNOWN_VERSION = "1999-01-01"
CANNED_SAMPLE = {
    "role": "assistant",
    "content": {"type": "text", "text": "mcpkit check"},
    "model": "mcpkit-check",
    "stopReason": "endTurn",
}
# what the main session declares (each answered: roots, a canned sampling reply, a declined elicitation)
ALL_CLIENT_CAPABILITIES: JSON = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}}
CONTENT_TYPES = {"text", "image", "audio", "resource", "resource_link"}
#: tools whose names say calling them blindly could harm or hang the server: the checker does not call them
UNSAFE_TOOL = re.compile(
    r"sampl|elicit|delete|remove|destroy|kill|shutdown|exit|write|touch|add_tool|roots|notif|trigger|slow|long|sleep"
    r"|wait|delay|crash|fail|error|exception|reconnect|subscribe|toggle|ask_|env",
    re.I,
)
#: tools whose names say they take a while: the cancellation and progress checks use them
SLOW_TOOL = re.compile(r"slow|long|sleep|delay|wait", re.I)


def shortened(obj: Any, limit: int = 240) -> str:
    """``obj`` (JSON unless a string) cut to ``limit`` characters, for a check's message."""
    text = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[:limit] + "..."


def is_int(v: Any) -> bool:
    """Whether ``v`` is a JSON integer (``bool`` is not one)."""
    return isinstance(v, int) and not isinstance(v, bool)


def error_of(inc: Incoming | None) -> JSON | None:
    """The ``error`` object of a received answer, or None."""
    if inc is None or not isinstance(inc.data, dict):
        return None
    err = inc.data.get("error")
    return err if isinstance(err, dict) else None


def result_of(inc: Incoming | None) -> JSON | None:
    """The ``result`` object of a received answer, or None."""
    if inc is None or not isinstance(inc.data, dict):
        return None
    res = inc.data.get("result")
    return res if isinstance(res, dict) else None


def error_code(inc: Incoming | None) -> Any:
    """The ``error.code`` of a received answer, or None."""
    err = error_of(inc)
    return err.get("code") if err else None


def sample_value(schema: Any, name: str = "", slow: bool = False) -> Any:
    """A value satisfying a simple JSON Schema (enough for the arguments black-box calls need)."""
    if not isinstance(schema, dict):
        return "test"
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema and not slow:
        return schema["default"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    for key in ("anyOf", "oneOf"):
        if kind is None and isinstance(schema.get(key), list) and schema[key]:
            return sample_value(schema[key][0], name, slow)
    lname = name.lower()
    if kind in ("integer", "number"):
        value: float = 1
        if slow:
            if "step" in lname:
                value = 50
            elif "ms" in lname or "milli" in lname:
                value = 100
            elif "duration" in lname or "second" in lname or "time" in lname:
                value = 10
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if isinstance(lo, (int, float)):
            value = max(value, lo)
        if isinstance(hi, (int, float)):
            value = min(value, hi)
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return "test"


def sample_arguments(input_schema: Any, slow: bool = False) -> JSON:
    if not isinstance(input_schema, dict):
        return {}
    props = input_schema.get("properties") or {}
    required = input_schema.get("required") or []
    args: JSON = {}
    for name, sub in props.items() if isinstance(props, dict) else []:
        if name in required or (slow and isinstance(sub, dict) and sub.get("type") in ("integer", "number")):
            args[name] = sample_value(sub, name, slow)
    return args


class CheckerBase:
    """The state of one run against one target and the plumbing every group of checks uses.

    ``target`` is a command line (or argv list) run over stdio, or a URL: ``http(s)://`` Streamable HTTP (legacy
    HTTP+SSE when its path ends in ``/sse``), ``ws(s)://`` WebSocket; ``transport`` overrides the guess. ``headers``
    and ``token`` (sent as ``Authorization: Bearer``) go to the target's own origin only; ``auth`` (an
    ``httpx.Auth`` such as :class:`mcpkit.auth.OAuthClient`) authorizes the Streamable HTTP sessions instead."""

    def __init__(
        self,
        target: str | Sequence[str],
        *,
        protocol_version: str = LATEST_HANDSHAKE,
        timeout: float = 10.0,
        env: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        cwd: str | None = None,
        modern: bool = True,
        transport: str | None = None,
        token: str | None = None,
        auth: Any = None,
    ) -> None:
        self.target = target
        self.modern_pass = modern
        self.transport: str = target_transport(target, transport)
        self.http: bool = self.transport == "http"
        self.version = protocol_version
        self.timeout = timeout
        self.env = env
        self.token = token
        self.auth = auth  # an httpx.Auth (e.g. mcpkit.auth.OAuthClient) for a protected Streamable HTTP target
        self.headers: dict[str, str] = dict(headers or {})
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.cwd = cwd
        shown = target if isinstance(target, str) else " ".join(target)
        self.report: Report = Report(shown, self.transport, "server")
        self.wires: list[Wire] = []
        self.answered_versions: dict[str, str] = {}  # requested -> answered
        self.caps: JSON = {}
        self.feats: Features = features(LATEST_HANDSHAKE)
        self.tools: list[Any] = []
        self.prompts: list[Any] = []
        self.templates: list[Any] = []
        self.progress_tokens: dict[str, Any] = {}
        self.declared_capabilities: dict[int, JSON] = {}  # id(wire) -> the client capabilities it declared
        #: the server refused initialize as a 2026-07-28-only server does: no handshake session to judge HTTP in
        self.modern_only = False

    @property
    def first_message_timeout(self) -> float:
        """How long the first message of a session waits for its answer: a new stdio server may still be starting
        (importing a large framework on a busy machine), so twice the per-response timeout."""
        return self.timeout * 2

    async def open_wire(self) -> Wire:
        """A new connection to the target (a new process for stdio), started; OSError/ValueError when it fails."""
        wire: Wire
        if self.transport == "http":
            assert isinstance(self.target, str)
            wire = HttpWire(self.target, self.headers, timeout=max(30.0, self.timeout * 3), auth=self.auth)
        elif self.transport in ("sse", "ws"):
            assert isinstance(self.target, str)
            wire = network_wire(self.transport, self.target, self.headers, max(10.0, self.timeout))
        else:
            wire = StdioWire(server_argv(self.target), env=self.env, cwd=self.cwd)
        self.wires.append(wire)
        await wire.start()
        return wire

    async def initialize(
        self,
        wire: Wire,
        version: str,
        *,
        initialized: bool = True,
        roots: bool = False,
        capabilities: JSON | None = None,
    ) -> Incoming | None:
        """initialize (+ notifications/initialized). With ``roots`` the client declares roots and answers
        ``roots/list``, which gives a server a reason to send requests (judged by M002-M005). ``capabilities``
        declares those instead (each declared one is answered: roots, a canned sampling reply, a declined
        elicitation); what a session declared is kept for S018."""
        caps: JSON = capabilities if capabilities is not None else ({"roots": {"listChanged": True}} if roots else {})
        if "roots" in caps:
            wire.client_handlers["roots/list"] = lambda _params: {"roots": [CHECK_ROOT]}
        if "sampling" in caps:
            wire.client_handlers["sampling/createMessage"] = lambda _params: dict(CANNED_SAMPLE)
        if "elicitation" in caps:
            wire.client_handlers["elicitation/create"] = lambda _params: {"action": "decline"}
        self.declared_capabilities[id(wire)] = caps
        params = {"protocolVersion": version, "capabilities": caps, "clientInfo": CLIENT_INFO}
        resp = await wire.request("initialize", params, timeout=self.first_message_timeout)
        res = result_of(resp)
        if res is not None and isinstance(res.get("protocolVersion"), str):
            self.answered_versions[version] = res["protocolVersion"]
            wire.protocol_version = res["protocolVersion"]
            if initialized:
                await wire.notify("notifications/initialized")
        return resp

    async def call(self, wire: Wire, method: str, params: JSON | None = None, timeout: float | None = None) -> Any:
        try:
            return await wire.request(method, params, timeout=timeout or self.timeout)
        except WireClosed:
            return None

    def capability_matches(self, req: str, cap: str, method: str, resp: Incoming | None) -> None:
        r = self.report
        declared = cap in self.caps
        if resp is None:
            r.fail(req, f"{method} got no response within {self.timeout:.0f}s", method)
            return
        code = error_code(resp)
        if declared and result_of(resp) is not None:
            r.ok(req, f"'{cap}' declared and {method} answered", method)
        elif declared:
            r.fail(req, f"'{cap}' declared but {method} failed: {resp.short()}", method)
        elif result_of(resp) is not None:
            r.fail(req, f"{method} answered but capability '{cap}' is not declared: {resp.short(160)}", method)
        else:
            r.ok(req, f"'{cap}' not declared and {method} refused with {code}", method)

    async def list_all(self, wire: Wire, method: str, key: str, req_array: str) -> list[Any] | None:
        """Page through a list method (at most 20 pages); checks the array and the cursor type."""
        r = self.report
        items: list[Any] = []
        cursor: str | None = None
        for _page in range(20):
            resp = await self.call(wire, method, {"cursor": cursor} if cursor else {})
            res = result_of(resp)
            if res is None:
                if cursor is None:
                    return None
                r.fail(req_array, f"{method} page with cursor {cursor!r} failed: {resp.short() if resp else 'none'}")
                return items
            if not isinstance(res.get(key), list):
                r.fail(req_array, f"{method} result has no '{key}' array: {resp.short() if resp else ''}", method)
                return None
            items.extend(res[key])
            nxt = res.get("nextCursor")
            if nxt is not None and not isinstance(nxt, str):
                r.fail(req_array, f"{method} nextCursor is not a string: {nxt!r}", method)
                return items
            if not nxt:
                break
            cursor = nxt
        r.ok(req_array, f"{method} returned a '{key}' array ({len(items)} item(s))", method)
        return items

    async def check_invalid_cursor(self, wire: Wire, method: str) -> None:
        r = self.report
        cursor = "mcpkit-check-not-a-cursor!"
        resp = await self.call(wire, method, {"cursor": cursor})
        sent = f"{method} with cursor {cursor!r} (one it never issued)"
        if resp is None:
            r.fail("S030", f"{sent}: no response", method)
        elif error_code(resp) == -32602:
            r.ok("S030", f"{sent} -> -32602", method)
        elif error_of(resp) is not None:
            r.fail("S030", f"{sent} -> error {error_code(resp)} (expected -32602)", method)
        elif resp.error is not None:
            r.fail("S030", f"{sent} got no JSON-RPC answer: {resp.short(160)}", method)
        else:
            r.fail("S030", f"{sent} was accepted: {resp.short(160)}", method)

    def judge_content(self, req: str, label: str, content: list[Any], allow_link: bool) -> None:
        r = self.report
        problems = []
        for item in content:
            problem = self.content_problem(item, allow_link)
            if problem:
                problems.append(problem)
        if problems:
            r.fail(req, f"{label}: {'; '.join(problems[:3])}", label.split(" ")[0])
        elif content:
            kinds = sorted({str(c.get("type")) for c in content})
            r.ok(req, f"{label}: {len(content)} content item(s) of type(s) {', '.join(kinds)}", label.split(" ")[0])

    def content_problem(self, item: Any, allow_link: bool) -> str | None:
        if not isinstance(item, dict):
            return f"content item is not an object: {shortened(item)}"
        kind = item.get("type")
        allowed = CONTENT_TYPES if allow_link else CONTENT_TYPES - {"resource_link"}
        if kind not in allowed:
            return f"content type {kind!r} is not one of {', '.join(sorted(allowed))}"
        if kind == "audio" and not self.feats.audio:
            return f"audio content at {self.feats.version}, which has no audio"
        if kind == "text" and not isinstance(item.get("text"), str):
            return "text content without a text string"
        if kind in ("image", "audio") and (
            not isinstance(item.get("data"), str) or not isinstance(item.get("mimeType"), str)
        ):
            return f"{kind} content without data and mimeType: {shortened(item, 120)}"
        if kind == "resource":
            res = item.get("resource")
            if not isinstance(res, dict) or not isinstance(res.get("uri"), str):
                return f"embedded resource without resource.uri: {shortened(item, 120)}"
            if not isinstance(res.get("text"), str) and not isinstance(res.get("blob"), str):
                return f"embedded resource without text or blob: {shortened(item, 120)}"
        if kind == "resource_link" and (not isinstance(item.get("uri"), str) or not isinstance(item.get("name"), str)):
            return f"resource_link without uri and name: {shortened(item, 120)}"
        return None
