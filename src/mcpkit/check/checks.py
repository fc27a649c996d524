"""The black-box checks of ``mcpkit check``: drive any MCP server over raw JSON-RPC and judge what it sends.

Every check names the MCP requirement it proves (a MUST/SHOULD/MAY of the specification, requirements.csv) and
records the message that proved or broke it. A check that cannot apply (the server offers no prompts, no slow
tool, no sessions, ...) is skipped with the reason. Sessions use the handshake era (initialize); extra short
sessions probe version negotiation and the batch support of 2025-03-26.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections.abc import Sequence
from typing import Any

from ..protocol.versions import (
    ALL_VERSIONS,
    LATEST_HANDSHAKE,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    V2024_11_05,
    V2025_03_26,
    V2025_06_18,
    V2026_07_28,
    features,
)
from .report import Report
from .wire import HttpWire, Incoming, StdioWire, Wire, WireClosed, is_url, split_command

JSON = dict[str, Any]
CLIENT_INFO = {"name": "mcpkit-check", "version": "1.0"}
CHECK_ROOT = {"uri": "file:///tmp/mcpkit-check", "name": "mcpkit check"}
UNKNOWN_VERSION = "1999-01-01"
CONTENT_TYPES = {"text", "image", "audio", "resource", "resource_link"}
_UNSAFE_TOOL = re.compile(
    r"sampl|elicit|delete|remove|destroy|kill|shutdown|exit|write|touch|add_tool|roots|notif|trigger|slow|long|sleep"
    r"|wait|delay|crash|fail|error|exception|reconnect|subscribe|toggle|ask_|env",
    re.I,
)
_SLOW_TOOL = re.compile(r"slow|long|sleep|delay|wait", re.I)


def _short(obj: Any, limit: int = 240) -> str:
    text = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[:limit] + "..."


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _err(inc: Incoming | None) -> JSON | None:
    if inc is None or not isinstance(inc.data, dict):
        return None
    err = inc.data.get("error")
    return err if isinstance(err, dict) else None


def _res(inc: Incoming | None) -> JSON | None:
    if inc is None or not isinstance(inc.data, dict):
        return None
    res = inc.data.get("result")
    return res if isinstance(res, dict) else None


def _code(inc: Incoming | None) -> Any:
    err = _err(inc)
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


class Checker:
    """Runs every check against one target (a command line or an http(s) URL)."""

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
    ) -> None:
        self.target = target
        self.modern_pass = modern
        self.http = is_url(target)
        self.version = protocol_version
        self.timeout = timeout
        self.env = env
        self.headers = headers
        self.cwd = cwd
        shown = target if isinstance(target, str) else " ".join(target)
        self.report = Report(shown, "http" if self.http else "stdio")
        self.wires: list[Wire] = []
        self.answered_versions: dict[str, str] = {}  # requested -> answered
        self.caps: JSON = {}
        self.feats = features(LATEST_HANDSHAKE)
        self.tools: list[Any] = []
        self.prompts: list[Any] = []
        self.templates: list[Any] = []
        self.progress_tokens: dict[str, Any] = {}

    # ------------------------------------------------------------------ plumbing

    async def open_wire(self) -> Wire:
        wire: Wire
        if self.http:
            assert isinstance(self.target, str)
            wire = HttpWire(self.target, self.headers)
            await wire.start()
        else:
            wire = StdioWire(split_command(self.target), env=self.env, cwd=self.cwd)
            await wire.start()
        self.wires.append(wire)
        return wire

    async def initialize(
        self, wire: Wire, version: str, *, initialized: bool = True, roots: bool = False
    ) -> Incoming | None:
        """initialize (+ notifications/initialized). With ``roots`` the client declares roots and answers
        ``roots/list``, which gives a server a reason to send requests (judged by M002-M005)."""
        caps: JSON = {"roots": {"listChanged": True}} if roots else {}
        if roots:
            wire.client_handlers["roots/list"] = lambda _params: {"roots": [CHECK_ROOT]}
        params = {"protocolVersion": version, "capabilities": caps, "clientInfo": CLIENT_INFO}
        resp = await wire.request("initialize", params, timeout=self.timeout * 2)
        res = _res(resp)
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

    # ------------------------------------------------------------------ entry point

    async def run(self) -> Report:
        r = self.report
        r.info["requested protocol version"] = self.version
        try:
            wire = await self.open_wire()
        except (OSError, ValueError) as exc:
            r.fail("M013", f"could not start the server: {exc}", "launch")
            r.info["aborted"] = "the server could not be started; nothing else was checked"
            return r
        try:
            ok = await self.check_handshake(wire)
            if ok:
                await self.check_basics(wire)
                await self.check_tools(wire)
                await self.check_resources(wire)
                await self.check_prompts(wire)
                await self.check_completion(wire)
                await self.check_logging(wire)
                await self.check_cancellation(wire)
                await self.check_malformed(wire)
                if isinstance(wire, HttpWire):
                    await self.check_http(wire)
                self.check_progress(wire)
                self.check_list_changed(wire)
        finally:
            await asyncio.sleep(0.2)
            await wire.close()
        if ok:
            await self.check_versions()
        if self.modern_pass:
            await self.check_modern()
        if ok:
            await self.check_with_client()
        self.check_messages()
        return r

    async def check_with_client(self) -> None:
        """Where no wire control is needed: connect with mcpkit's own high-level client (era negotiation, typed
        and validated results, pagination) and record what it saw. Informational, besides S021 on a failure."""
        from ..client.client import Client

        target = self.target if isinstance(self.target, str) and self.http else split_command(self.target)
        try:
            async with asyncio.timeout(30):
                client = Client(
                    target, env=self.env, cwd=self.cwd, headers=self.headers, reconnect=False, timeout=self.timeout
                )
                async with client:
                    tools = await client.list_tools() if "tools" in client.server_capabilities else []
                    prompts = await client.list_prompts() if "prompts" in client.server_capabilities else []
                    self.report.info["mcpkit client"] = (
                        f"connected at {client.protocol_version}; {len(tools)} tool(s), {len(prompts)} prompt(s)"
                    )
        except Exception as exc:  # report it; the raw checks above are the verdict
            self.report.info["mcpkit client"] = f"failed: {type(exc).__name__}: {_short(str(exc), 200)}"

    # ------------------------------------------------------------------ the stateless era (2026-07-28)

    async def check_modern(self) -> None:
        """If the server offers 2026-07-28 (``server/discover``), run the feature checks again in a stateless
        session (per-request ``_meta``; on HTTP the standard headers). Findings carry a ``[2026-07-28]`` prefix."""
        r = self.report
        try:
            wire = await self.open_wire()
        except (OSError, ValueError):
            return
        wire.modern_meta = {
            META_PROTOCOL_VERSION: V2026_07_28,
            META_CLIENT_CAPABILITIES: {},
            META_CLIENT_INFO: CLIENT_INFO,
        }
        saved = (self.caps, self.feats, self.tools, self.prompts, self.templates, self.progress_tokens)
        r.prefix = f"[{V2026_07_28}] "
        try:
            resp = await self.call(wire, "server/discover", {})
            res = _res(resp)
            versions = res.get("supportedVersions") if res else None
            if res is None or not isinstance(versions, list) or V2026_07_28 not in versions:
                r.info[V2026_07_28] = f"not offered (server/discover -> {resp.short(120) if resp else 'no response'})"
                return
            r.info[V2026_07_28] = f"offered; supportedVersions {versions}"
            self.check_discover(resp, res)
            caps = res.get("capabilities")
            self.caps = caps if isinstance(caps, dict) else {}
            self.feats = features(V2026_07_28)
            self.tools, self.prompts, self.templates, self.progress_tokens = [], [], [], {}
            await self.check_modern_version(wire)
            resp = await self.call(wire, "mcpkit-check/no-such-method", {})
            if _code(resp) == -32601:
                r.ok("S021", "unknown method -> -32601 Method not found", "unknown method")
            else:
                r.fail("S021", f"unknown method not answered with -32601: {resp.short() if resp else 'no response'}")
            await self.check_tools(wire)
            await self.check_resources(wire, subscribe=False)
            await self.check_prompts(wire)
            await self.check_completion(wire)
            await self.check_malformed(wire)
            self.check_progress(wire)
        finally:
            r.prefix = ""
            self.caps, self.feats, self.tools, self.prompts, self.templates, self.progress_tokens = saved
            await wire.close()

    def check_discover(self, resp: Incoming | None, res: JSON) -> None:
        r = self.report
        problems = []
        if not isinstance(res.get("capabilities"), dict):
            problems.append("capabilities missing")
        meta = res.get("_meta")
        info = res.get("serverInfo") or (meta.get(META_SERVER_INFO) if isinstance(meta, dict) else None)
        if (
            not isinstance(info, dict)
            or not isinstance(info.get("name"), str)
            or not isinstance(info.get("version"), str)
        ):
            problems.append("no server info (name and version) in the result or its _meta")
        if problems:
            r.fail("M042", f"server/discover: {'; '.join(problems)}: {resp.short() if resp else ''}", "discover")
        else:
            r.ok("M042", f"server/discover: supportedVersions, capabilities and server info: {_short(res, 160)}")
            r.ok("M047", f"capabilities declared in server/discover: {_short(res.get('capabilities'), 160)}")

    async def check_modern_version(self, wire: Wire) -> None:
        """M046 in the stateless era: an unsupported version is refused with -32022 naming the supported ones."""
        r = self.report
        resp = await self.call(wire, "server/discover", {"_meta": {META_PROTOCOL_VERSION: UNKNOWN_VERSION}})
        err = _err(resp)
        data = err.get("data") if err else None
        supported = data.get("supported") if isinstance(data, dict) else None
        if err and err.get("code") == -32022 and isinstance(supported, list) and supported:
            r.ok("M046", f"{UNKNOWN_VERSION} refused with -32022, supported: {supported}", "version")
        else:
            r.fail(
                "M046",
                f"{UNKNOWN_VERSION} should be refused with -32022 and data.supported: "
                f"{resp.short() if resp else 'no response'}",
                "version",
            )
        resp = await self.call(wire, "server/discover", {})
        if _res(resp) is not None:
            r.ok("M045", f"{V2026_07_28} requested and served", "version")

    # ------------------------------------------------------------------ handshake

    async def check_handshake(self, wire: Wire) -> bool:
        r = self.report
        resp = await self.initialize(wire, self.version, roots=True)
        if resp is not None and resp.error is not None and resp.channel == "http":
            r.fail("M042", f"initialize POST to {self.target} got no JSON-RPC response: {resp.raw}", "initialize")
            r.fail("M018", f"the endpoint does not answer an initialize POST: {resp.raw}", "initialize")
            r.info["aborted"] = "the server did not complete initialize; nothing else was checked"
            return False
        if resp is None:
            r.info["aborted"] = "the server did not complete initialize; nothing else was checked"
            stray = wire.strays[0].short() if wire.strays else None
            if stray:
                r.fail("M006", f"initialize sent with id 1; the only response had another id: {stray}", "initialize")
            where = "stdout" if not self.http else "the endpoint"
            extra = ""
            if isinstance(wire, StdioWire) and wire.stderr_tail:
                extra = f"; stderr: {_short(' / '.join(wire.stderr_tail[-3:]))}"
            r.fail("M042", f"no response to initialize on {where} within {self.timeout * 2:.0f}s{extra}", "initialize")
            if not self.http:
                r.fail("M013", f"no initialize response on {where}{extra}", "initialize")
            return False
        if not self.http:
            r.ok("M013", "initialize answered on stdout", "initialize")
        err = _err(resp)
        if err is not None:
            r.fail("M042", f"initialize answered with an error: {resp.short()}", "initialize")
            r.info["aborted"] = "the server did not complete initialize; nothing else was checked"
            return False
        res = _res(resp) or {}
        r.info["server"] = _short(res.get("serverInfo"), 120)
        r.info["negotiated protocol version"] = res.get("protocolVersion")
        problems = []
        if not isinstance(res.get("protocolVersion"), str):
            problems.append("protocolVersion missing or not a string")
        if not isinstance(res.get("capabilities"), dict):
            problems.append("capabilities missing or not an object")
        info = res.get("serverInfo")
        if not isinstance(info, dict):
            problems.append("serverInfo missing")
        else:
            if not isinstance(info.get("name"), str):
                problems.append("serverInfo.name missing")
            if not isinstance(info.get("version"), str):
                problems.append("serverInfo.version missing")
        if problems:
            r.fail("M042", f"{'; '.join(problems)}: {resp.short()}", "initialize result")
        else:
            r.ok(
                "M042", f"protocolVersion, capabilities and serverInfo present: {resp.short(200)}", "initialize result"
            )
        if isinstance(res.get("capabilities"), dict):
            self.caps = res["capabilities"]
            r.ok("M047", f"server capabilities declared: {_short(self.caps, 200)}", "initialize result")
        else:
            r.fail("M047", "initialize result declares no capabilities object", "initialize result")
        answered = res.get("protocolVersion")
        if answered == self.version:
            r.ok("M045", f"requested {self.version}, server answered the same", "initialize")
        elif isinstance(answered, str) and answered in ALL_VERSIONS:
            r.ok("M046", f"requested {self.version}, server answered another version it supports: {answered}")
        else:
            r.fail("M046", f"requested {self.version}, server answered an unknown version {answered!r}", "initialize")
        if isinstance(answered, str) and answered in ALL_VERSIONS:
            feats = features(answered)
            if feats.modern:
                r.fail("M045", f"a handshake initialize was answered with the stateless revision {answered}")
            self.feats = feats
        else:
            self.feats = features(LATEST_HANDSHAKE)
        return True

    async def check_versions(self) -> None:
        """Separate short sessions: echo of every known handshake revision, fallback from an unknown one, and a
        JSON-RPC batch where the negotiated revision (2025-03-26) has them."""
        r = self.report
        asked = [v for v in (V2025_06_18, V2025_03_26, V2024_11_05, UNKNOWN_VERSION) if v != self.version]

        async def one(version: str) -> None:
            wire = await self.open_wire()
            try:
                resp = await self.initialize(wire, version)
                res = _res(resp)
                if version == UNKNOWN_VERSION:
                    if res is None:
                        r.fail(
                            "M046",
                            f"initialize with unsupported version {UNKNOWN_VERSION} got "
                            f"{resp.short() if resp else 'no response'} instead of a supported version",
                            "version fallback",
                        )
                    elif res.get("protocolVersion") in ALL_VERSIONS:
                        r.ok(
                            "M046",
                            f"{UNKNOWN_VERSION} requested, server offered {res.get('protocolVersion')}",
                            "version fallback",
                        )
                    else:
                        r.fail(
                            "M046",
                            f"{UNKNOWN_VERSION} requested, server answered {res.get('protocolVersion')!r}, "
                            "which is no MCP revision",
                            "version fallback",
                        )
                    return
                if version == V2025_03_26 and res is not None and res.get("protocolVersion") == V2025_03_26:
                    await self.check_batch(wire)
            finally:
                await wire.close()

        await asyncio.gather(*(one(v) for v in asked))  # independent sessions, side by side
        # M045: a version the server chose itself (so it supports it) must be echoed when requested.
        supported = {v for v in self.answered_versions.values() if v in ALL_VERSIONS}
        for requested, answered in self.answered_versions.items():
            if requested == answered:
                r.ok("M045", f"{requested} requested and echoed", "version echo")
            elif requested in supported:
                r.fail(
                    "M045",
                    f"{requested} requested (a version this server answers in other sessions) but it answered "
                    f"{answered}",
                    "version echo",
                )
        if V2025_03_26 not in self.answered_versions or self.answered_versions[V2025_03_26] != V2025_03_26:
            r.skip("M011", "the server does not negotiate 2025-03-26, the only revision with JSON-RPC batches")

    async def check_batch(self, wire: Wire) -> None:
        r = self.report
        ids = [wire.new_id(), wire.new_id("str")]
        futs = [wire.expect(i) for i in ids]
        batch = [
            {"jsonrpc": "2.0", "id": ids[0], "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/mcpkit-check/ignored"},
            {"jsonrpc": "2.0", "id": ids[1], "method": "ping"},
        ]
        await wire.send(batch)
        done, _ = await asyncio.wait(futs, timeout=min(self.timeout, 3.0))  # two pings: quick or never
        if len(done) == 2:
            as_array = any(
                isinstance(i.data, list)
                and {wire.key(m.get("id")) for m in i.data if isinstance(m, dict)} >= {wire.key(x) for x in ids}
                for i in wire.incoming
            )
            r.ok(
                "M011",
                f"batch of 2 pings + 1 notification answered ({'as one array' if as_array else 'as separate messages'})"
                " at 2025-03-26",
                "batch",
            )
        else:
            got = [i.short() for i in wire.incoming[-2:]]
            r.fail(
                "M011",
                f"a batch of 2 pings at 2025-03-26 got {len(done)} of 2 responses within 3s; last: {got}",
                "batch",
            )

    # ------------------------------------------------------------------ ping, ids, errors

    async def check_basics(self, wire: Wire) -> None:
        r = self.report
        # a reason for the server to send a request of its own (roots/list), judged by M002-M005
        await wire.notify("notifications/roots/list_changed")
        for kind, rid in (("string", "chk-ping-\u00e9"), ("integer", 987654321)):
            t0 = time.monotonic()
            resp = await wire.request("ping", None, timeout=self.timeout, msg_id=rid)
            elapsed = time.monotonic() - t0
            if resp is None:
                stray = [s.short() for s in wire.strays]
                if stray:
                    r.fail("M006", f"ping with {kind} id {rid!r} answered with another id: {stray[-1]}", "ping")
                r.fail("M079", f"ping (id {rid!r}) not answered within {self.timeout:.0f}s", "ping")
                continue
            r.ok("M006", f"ping with {kind} id {rid!r} answered with the same id", "ping")
            res = _res(resp)
            if res is None:
                r.fail("M079", f"ping answered without a result object: {resp.short()}", "ping")
            elif set(res) - {"_meta"}:
                r.fail("M079", f"ping result is not empty: {resp.short()}", "ping")
            else:
                r.ok("M079", f"ping -> {_short(res)} in {elapsed * 1000:.0f} ms", "ping")
        resp = await self.call(wire, "mcpkit-check/no-such-method", {})
        if _code(resp) == -32601:
            r.ok("S021", "unknown method -> -32601 Method not found", "unknown method")
        else:
            r.fail("S021", f"unknown method not answered with -32601: {resp.short() if resp else 'no response'}")

    async def check_malformed(self, wire: Wire) -> None:
        """Malformed input must not kill the server: invalid JSON and a request without a method."""
        r = self.report
        if isinstance(wire, HttpWire):
            ex = await wire.post(None, raw=b'{"jsonrpc": "2.0", "id": 1, "method": ')
            if 400 <= ex.status < 500:
                r.ok("S021", f"invalid JSON body -> HTTP {ex.status}", "malformed JSON")
            else:
                r.fail("S021", f"invalid JSON body -> HTTP {ex.status} {_short(ex.body)}", "malformed JSON")
        else:
            before = len(wire.incoming)
            try:
                await wire.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
            except WireClosed:
                return
            await asyncio.sleep(0.3)
            replies = [i for i in wire.incoming[before:] if isinstance(i.data, dict) and "error" in i.data]
            if replies and _code(replies[0]) == -32700:
                r.ok("S021", "invalid JSON line -> -32700 Parse error", "malformed JSON")
            elif replies:
                r.warn("S021", f"invalid JSON line answered with {replies[0].short()} (expected -32700)")
        probe = "server/discover" if self.feats.modern else "ping"  # ping does not exist at 2026-07-28
        resp = await wire.request(probe, None, timeout=self.timeout)
        if resp is None or _res(resp) is None:
            r.fail("S021", f"the server stopped answering ({probe}) after a malformed message", "malformed JSON")
            return
        rid = wire.new_id()
        if isinstance(wire, HttpWire):
            ex = await wire.post({"jsonrpc": "2.0", "id": rid, "params": {}})
            codes = [_code(m) for m in ex.messages]
            if 400 <= ex.status < 500 or any(c in (-32600, -32601, -32602) for c in codes):
                r.ok("S021", f"request without a method -> HTTP {ex.status} {_short(ex.body, 120)}", "no method")
            else:
                r.fail("S021", f"request without a method -> HTTP {ex.status} {_short(ex.body, 120)}", "no method")
            return
        fut = wire.expect(rid)
        await wire.send({"jsonrpc": "2.0", "id": rid, "params": {}})
        try:
            reply: Incoming | None = await asyncio.wait_for(fut, min(self.timeout, 2.0))
        except TimeoutError:
            reply = None
        if _code(reply) in (-32600, -32601, -32602):
            r.ok("S021", f"request without a method -> {_code(reply)}", "request without method")
        elif reply is None:
            r.warn("S021", "a request without a method got no response (JSON-RPC expects -32600)")
        else:
            r.fail("S021", f"a request without a method got {reply.short()}", "request without method")

    # ------------------------------------------------------------------ capabilities vs methods

    def capability_matches(self, req: str, cap: str, method: str, resp: Incoming | None) -> None:
        r = self.report
        declared = cap in self.caps
        if resp is None:
            r.fail(req, f"{method} got no response within {self.timeout:.0f}s", method)
            return
        code = _code(resp)
        if declared and _res(resp) is not None:
            r.ok(req, f"'{cap}' declared and {method} answered", method)
        elif declared:
            r.fail(req, f"'{cap}' declared but {method} failed: {resp.short()}", method)
        elif _res(resp) is not None:
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
            res = _res(resp)
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
        resp = await self.call(wire, method, {"cursor": "mcpkit-check-not-a-cursor!"})
        if resp is None:
            r.fail("S030", f"{method} with an invalid cursor: no response", method)
        elif _code(resp) == -32602:
            r.ok("S030", f"{method} with an invalid cursor -> -32602", method)
        elif _err(resp) is not None:
            r.fail("S030", f"{method} with an invalid cursor -> error {_code(resp)} (expected -32602)", method)
        else:
            r.fail("S030", f"{method} accepted an invalid cursor: {resp.short(160)}", method)

    # ------------------------------------------------------------------ tools

    async def check_tools(self, wire: Wire) -> None:
        r = self.report
        resp = await self.call(wire, "tools/list", {})
        self.capability_matches("M065", "tools", "tools/list", resp)
        if _res(resp) is None:
            for req in ("M066", "M067", "M068", "M069"):
                r.skip(req, "the server offers no tools")
            return
        tools = await self.list_all(wire, "tools/list", "tools", "M066") or []
        self.tools = tools
        bad = []
        for tool in tools:
            if not isinstance(tool, dict):
                bad.append(f"not an object: {_short(tool)}")
                continue
            missing = [k for k in ("name", "description") if not isinstance(tool.get(k), str) or not tool.get(k)]
            schema = tool.get("inputSchema")
            if not isinstance(schema, dict) or schema.get("type") != "object":
                missing.append("inputSchema (an object schema)")
            if missing:
                bad.append(f"{tool.get('name', '?')}: missing {', '.join(missing)}")
        if not tools:
            r.skip("M067", "tools/list is empty")
        elif bad:
            r.fail("M067", f"{len(bad)} of {len(tools)} tool(s): " + "; ".join(bad[:4]), "tools/list")
        else:
            r.ok("M067", f"all {len(tools)} tool(s) have name, description and an object inputSchema", "tools/list")
        if any(isinstance(t, dict) and "annotations" in t for t in tools):
            r.ok("A020", "tools carry annotations", "tools/list")
        await self.check_invalid_cursor(wire, "tools/list")
        # call the tools that look side-effect free and whose required arguments we can fill in
        candidates = [
            t
            for t in tools
            if isinstance(t, dict) and isinstance(t.get("name"), str) and not _UNSAFE_TOOL.search(t["name"])
        ]
        candidates.sort(key=lambda t: "progress" not in t["name"].lower())  # stable: progress reporters first
        candidates = candidates[:8]
        if not candidates:
            r.skip("M068", "no tool looks safe to call black-box (all names suggest side effects or client requests)")
            r.skip("M069", "no tool called")
        for i, tool in enumerate(candidates):
            args = sample_arguments(tool.get("inputSchema"))
            token = f"chk-progress-{i}"
            params = {"name": tool["name"], "arguments": args, "_meta": {"progressToken": token}}
            resp = await self.call(wire, "tools/call", params, timeout=self.timeout * 2)
            self.progress_tokens[token] = resp
            self.judge_call(tool["name"], args, resp)
        resp = await self.call(wire, "tools/call", {"name": "mcpkit-check-no-such-tool", "arguments": {}})
        if resp is not None and (_err(resp) is not None or (_res(resp) or {}).get("isError") is True):
            r.ok("S021", f"calling an unknown tool -> {'error ' + str(_code(resp)) if _err(resp) else 'isError'}")
        elif resp is not None:
            r.fail("S021", f"calling an unknown tool succeeded: {resp.short()}", "unknown tool")

    def judge_call(self, name: str, args: JSON, resp: Incoming | None) -> None:
        r = self.report
        label = f"tools/call {name} {_short(args, 60)}"
        if resp is None:
            r.fail("M068", f"{label}: no response within {self.timeout * 2:.0f}s", "tools/call")
            return
        res = _res(resp)
        if res is None:
            # a protocol error for our synthesized arguments is not a shape fault
            r.skip("M068", f"{label} -> error {_code(resp)} (arguments we guessed may be wrong)", "tools/call")
            return
        if res.get("resultType") == "input_required":
            r.skip("M068", f"{label} asks the client for input first (input_required)", "tools/call")
            return
        content = res.get("content")
        if not isinstance(content, list):
            r.fail("M068", f"{label}: result has no content array: {resp.short()}", "tools/call")
            return
        if "isError" not in res:
            r.warn(
                "M068",
                f"{label}: content array present but no isError flag (requirement M068 asks for it; the official "
                "schema makes it optional, default false)",
                "tools/call",
            )
        elif not isinstance(res["isError"], bool):
            r.fail("M068", f"{label}: isError is not a boolean: {res['isError']!r}", "tools/call")
        else:
            r.ok("M068", f"{label}: content[{len(content)}] and isError={res['isError']}", "tools/call")
        self.judge_content("M069", label, content, allow_link=self.feats.resource_links)

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
            return f"content item is not an object: {_short(item)}"
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
            return f"{kind} content without data and mimeType: {_short(item, 120)}"
        if kind == "resource":
            res = item.get("resource")
            if not isinstance(res, dict) or not isinstance(res.get("uri"), str):
                return f"embedded resource without resource.uri: {_short(item, 120)}"
            if not isinstance(res.get("text"), str) and not isinstance(res.get("blob"), str):
                return f"embedded resource without text or blob: {_short(item, 120)}"
        if kind == "resource_link" and (not isinstance(item.get("uri"), str) or not isinstance(item.get("name"), str)):
            return f"resource_link without uri and name: {_short(item, 120)}"
        return None

    # ------------------------------------------------------------------ resources

    async def check_resources(self, wire: Wire, *, subscribe: bool = True) -> None:
        r = self.report
        resp = await self.call(wire, "resources/list", {})
        self.capability_matches("M048", "resources", "resources/list", resp)
        if _res(resp) is None:
            for req in ("M049", "M050", "M051", "M052", "M053", "M054", "M055", "M056", "S022"):
                r.skip(req, "the server offers no resources")
            return
        resources = await self.list_all(wire, "resources/list", "resources", "M049") or []
        bad = [
            _short(res, 100)
            for res in resources
            if not isinstance(res, dict) or not isinstance(res.get("uri"), str) or not isinstance(res.get("name"), str)
        ]
        if bad:
            r.fail("M050", f"{len(bad)} of {len(resources)} resource(s) lack uri or name: {'; '.join(bad[:3])}")
        elif resources:
            r.ok("M050", f"all {len(resources)} resource(s) have uri and name", "resources/list")
        else:
            r.skip("M050", "resources/list is empty")
        if any(isinstance(x, dict) and ({"description", "mimeType", "size"} & set(x)) for x in resources):
            r.ok("A017", "resources carry description/mimeType/size", "resources/list")
        await self.check_invalid_cursor(wire, "resources/list")
        # read up to two resources: the first, and the first binary-looking one
        picks = [x for x in resources[:1] if isinstance(x, dict)]
        binary = next(
            (x for x in resources if isinstance(x, dict) and not str(x.get("mimeType", "text")).startswith("text")),
            None,
        )
        if binary is not None and binary not in picks:
            picks.append(binary)
        for res in picks:
            await self.read_one(wire, str(res.get("uri")))
        if not picks:
            r.skip("M051", "no resource to read")
        resp = await self.call(wire, "resources/templates/list", {})
        if _res(resp) is None:
            r.skip("M053", f"resources/templates/list not offered ({_code(resp)})")
            templates: list[Any] = []
        else:
            templates = await self.list_all(wire, "resources/templates/list", "resourceTemplates", "M053") or []
            bad = [
                _short(t, 100)
                for t in templates
                if not isinstance(t, dict) or not isinstance(t.get("uriTemplate"), str)
            ]
            if bad:
                r.fail("M054", f"template(s) without uriTemplate: {'; '.join(bad[:3])}", "resources/templates/list")
            elif templates:
                r.ok("M054", f"all {len(templates)} template(s) have a uriTemplate", "resources/templates/list")
                if any({"name", "description", "mimeType"} & set(t) for t in templates):
                    r.ok("A018", "templates carry name/description/mimeType", "resources/templates/list")
            else:
                r.skip("M054", "no resource templates")
        self.templates = templates
        if subscribe:
            await self.check_subscribe(wire, resources)

    async def read_one(self, wire: Wire, uri: str) -> None:
        r = self.report
        resp = await self.call(wire, "resources/read", {"uri": uri})
        res = _res(resp)
        if res is None:
            r.fail(
                "M051", f"resources/read {uri} (a listed resource) failed: {resp.short() if resp else 'no response'}"
            )
            return
        contents = res.get("contents")
        if not isinstance(contents, list):
            r.fail("M051", f"resources/read {uri}: no contents array: {resp.short() if resp else ''}", "resources/read")
            return
        r.ok("M051", f"resources/read {uri}: contents[{len(contents)}]", "resources/read")
        for item in contents:
            if not isinstance(item, dict) or not isinstance(item.get("uri"), str):
                r.fail("M052", f"resources/read {uri}: content item without uri: {_short(item, 120)}")
            elif not isinstance(item.get("text"), str) and not isinstance(item.get("blob"), str):
                r.fail("M052", f"resources/read {uri}: content item without text or blob: {_short(item, 120)}")
            else:
                r.ok("M052", f"resources/read {uri}: uri and {'text' if 'text' in item else 'blob'}", "resources/read")
            if isinstance(item, dict):
                if isinstance(item.get("mimeType"), str):
                    r.ok("S022", f"resources/read {uri}: mimeType {item['mimeType']}", "resources/read")
                else:
                    r.fail("S022", f"resources/read {uri}: content item without mimeType", "resources/read")

    async def check_subscribe(self, wire: Wire, resources: list[Any]) -> None:
        r = self.report
        declared = isinstance(self.caps.get("resources"), dict) and self.caps["resources"].get("subscribe") is True
        uri = next((x["uri"] for x in resources if isinstance(x, dict) and isinstance(x.get("uri"), str)), None)
        if uri is None:
            r.skip("M056", "no resource to subscribe to")
            r.skip("M055", "no resource to subscribe to")
            return
        before = len(wire.notifications)
        resp = await self.call(wire, "resources/subscribe", {"uri": uri})
        if declared and _res(resp) is not None:
            r.ok("M056", f"resources.subscribe declared and resources/subscribe {uri} accepted", "resources/subscribe")
        elif declared:
            r.fail("M056", f"resources.subscribe declared but subscribe failed: {resp.short() if resp else 'none'}")
        elif _res(resp) is not None:
            r.fail("M056", f"resources/subscribe accepted but resources.subscribe is not declared: {resp.short()}")
        else:
            r.ok(
                "M056", f"resources.subscribe not declared and subscribe refused ({_code(resp)})", "resources/subscribe"
            )
        if not declared or _res(resp) is None:
            r.skip("M055", "no subscription")
            return
        await asyncio.sleep(0.5)
        updates = [
            n
            for n in wire.notifications[before:]
            if isinstance(n.data, dict) and n.data.get("method") == "notifications/resources/updated"
        ]
        if updates:
            r.ok("M055", f"notifications/resources/updated received: {updates[0].short()}", "resources/subscribe")
        else:
            r.skip("M055", "subscribed, but a black-box checker cannot make the resource change (no update in 0.5s)")
        await self.call(wire, "resources/unsubscribe", {"uri": uri})

    # ------------------------------------------------------------------ prompts

    async def check_prompts(self, wire: Wire) -> None:
        r = self.report
        resp = await self.call(wire, "prompts/list", {})
        self.capability_matches("M058", "prompts", "prompts/list", resp)
        if _res(resp) is None:
            for req in ("M059", "M060", "M061", "M062", "M063"):
                r.skip(req, "the server offers no prompts")
            return
        prompts = await self.list_all(wire, "prompts/list", "prompts", "M059") or []
        self.prompts = prompts
        bad = [_short(p, 100) for p in prompts if not isinstance(p, dict) or not isinstance(p.get("name"), str)]
        if bad:
            r.fail("M060", f"prompt(s) without a name: {'; '.join(bad[:3])}", "prompts/list")
        elif prompts:
            r.ok("M060", f"all {len(prompts)} prompt(s) have a name", "prompts/list")
            if any({"description", "arguments"} & set(p) for p in prompts):
                r.ok("A019", "prompts carry description/arguments", "prompts/list")
        else:
            r.skip("M060", "prompts/list is empty")
        await self.check_invalid_cursor(wire, "prompts/list")
        called = 0
        for prompt in prompts[:4]:
            if not isinstance(prompt, dict) or not isinstance(prompt.get("name"), str):
                continue
            args = {
                a["name"]: "test"
                for a in prompt.get("arguments") or []
                if isinstance(a, dict) and a.get("required") and isinstance(a.get("name"), str)
            }
            resp = await self.call(wire, "prompts/get", {"name": prompt["name"], "arguments": args})
            res = _res(resp)
            label = f"prompts/get {prompt['name']}"
            if res is None:
                r.skip("M061", f"{label} -> error {_code(resp)} (arguments we guessed may be wrong)")
                continue
            called += 1
            messages = res.get("messages")
            if not isinstance(messages, list):
                r.fail("M061", f"{label}: no messages array: {resp.short() if resp else ''}", "prompts/get")
                continue
            r.ok("M061", f"{label}: messages[{len(messages)}]", "prompts/get")
            bad_msgs = [
                _short(m, 100)
                for m in messages
                if not isinstance(m, dict)
                or m.get("role") not in ("user", "assistant")
                or not isinstance(m.get("content"), dict)
            ]
            if bad_msgs:
                r.fail("M062", f"{label}: message(s) without a valid role and content: {'; '.join(bad_msgs[:2])}")
            else:
                r.ok("M062", f"{label}: every message has role and content", "prompts/get")
            contents = [m["content"] for m in messages if isinstance(m, dict) and isinstance(m.get("content"), dict)]
            self.judge_content("M063", label, contents, allow_link=self.feats.resource_links)
        if not called and prompts:
            r.skip("M062", "no prompt could be fetched")

    # ------------------------------------------------------------------ completion, logging

    async def check_completion(self, wire: Wire) -> None:
        r = self.report
        ref: JSON | None = None
        arg = ""
        for prompt in self.prompts:
            args = prompt.get("arguments") if isinstance(prompt, dict) else None
            if args and isinstance(args[0], dict) and isinstance(args[0].get("name"), str):
                ref, arg = {"type": "ref/prompt", "name": prompt["name"]}, args[0]["name"]
                break
        if ref is None:
            for tpl in self.templates:
                m = re.search(r"\{[+#./;?&]?([A-Za-z0-9_]+)", str(tpl.get("uriTemplate", "")))
                if m:
                    ref, arg = {"type": "ref/resource", "uri": tpl["uriTemplate"]}, m.group(1)
                    break
        if ref is None:
            r.skip("M088", "no prompt argument or template variable to complete")
            r.skip("M089", "nothing to complete")
            return
        resp = await self.call(wire, "completion/complete", {"ref": ref, "argument": {"name": arg, "value": ""}})
        if self.feats.completions_capability:
            self.capability_matches("M088", "completions", "completion/complete", resp)
        res = _res(resp)
        if res is None:
            r.skip("M089", f"completion/complete refused ({_code(resp)})")
            return
        comp = res.get("completion")
        values = comp.get("values") if isinstance(comp, dict) else None
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            r.fail("M089", f"completion result without a values array of strings: {resp.short() if resp else ''}")
            return
        if len(values) > 100:
            r.fail("M089", f"completion returned {len(values)} values (at most 100 allowed)", "completion/complete")
        else:
            r.ok("M089", f"completion/complete {_short(ref, 80)} {arg}='' -> {len(values)} value(s)", "completion")
        assert isinstance(comp, dict)
        if "total" in comp:
            if _is_int(comp["total"]):
                r.ok("A026", f"completion total = {comp['total']}", "completion/complete")
            else:
                r.fail("A026", f"completion total is not an integer: {comp['total']!r}", "completion/complete")
        else:
            r.skip("A026", "the completion result has no total (optional)")

    async def check_logging(self, wire: Wire) -> None:
        resp = await self.call(wire, "logging/setLevel", {"level": "debug"})
        self.capability_matches("M087", "logging", "logging/setLevel", resp)
        if "logging" in self.caps and _res(resp) is not None and set(_res(resp) or {}) - {"_meta"}:
            self.report.fail("M087", f"logging/setLevel result is not empty: {resp.short() if resp else ''}")

    # ------------------------------------------------------------------ cancellation and progress

    async def check_cancellation(self, wire: Wire) -> None:
        r = self.report
        slow = next(
            (t for t in self.tools if isinstance(t, dict) and _SLOW_TOOL.search(str(t.get("name")))),
            None,
        )
        if slow is None:
            r.skip("S027", "no slow/long-running tool to cancel")
            return
        args = sample_arguments(slow.get("inputSchema"), slow=True)
        rid = wire.new_id()
        token = "chk-progress-cancel"
        fut = wire.expect(rid)
        t0 = time.monotonic()
        await wire.send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "tools/call",
                "params": {"name": slow["name"], "arguments": args, "_meta": {"progressToken": token}},
            }
        )
        await asyncio.sleep(0.6)
        if fut.done():
            r.skip("S027", f"{slow['name']} {_short(args)} finished before it could be cancelled")
            self.progress_tokens[token] = fut.result()
            return
        cancelled_at = time.monotonic()
        await wire.notify("notifications/cancelled", {"requestId": rid, "reason": "mcpkit check: cancellation test"})
        await asyncio.sleep(2.0)
        late = [
            n
            for n in wire.notifications
            if n.at > cancelled_at + 0.5
            and isinstance(n.data, dict)
            and (n.data.get("params") or {}).get("progressToken") == token
        ]
        self.progress_tokens[token] = None
        ended_without_response = fut.done() and fut.result().error is not None  # HTTP: the stream just closed
        if fut.done() and not ended_without_response:
            r.fail(
                "S027",
                f"{slow['name']} was answered {fut.result().at - cancelled_at:.1f}s after notifications/cancelled "
                f"(it kept processing): {fut.result().short(160)}",
                "cancellation",
            )
        elif late:
            r.fail("S027", f"{len(late)} progress notification(s) after cancellation: {late[0].short()}")
        else:
            closed = " (its response stream was closed)" if ended_without_response else ""
            r.ok(
                "S027",
                f"{slow['name']} {_short(args)} cancelled after {cancelled_at - t0:.1f}s: no response and no progress "
                f"in the next 2s{closed}",
                "cancellation",
            )
        wire._pending.pop(wire.key(rid), None)
        ping = await self.call(wire, "ping")
        if _res(ping) is None:
            r.fail("S027", "the server stopped answering pings after a cancellation", "cancellation")

    def check_progress(self, wire: Wire) -> None:
        r = self.report
        tokens = self.progress_tokens
        by_token: dict[Any, list[Incoming]] = {}
        for n in wire.notifications:
            if isinstance(n.data, dict) and n.data.get("method") == "notifications/progress":
                params = n.data.get("params")
                if (
                    not isinstance(params, dict)
                    or "progressToken" not in params
                    or not isinstance(params.get("progress"), (int, float))
                ):
                    r.fail("M084", f"progress notification without progressToken and progress: {n.short()}")
                    continue
                by_token.setdefault(params["progressToken"], []).append(n)
        if not by_token:
            for req in ("M084", "M085", "M086", "A025"):
                r.skip(req, "no tool reported progress for our progress tokens")
            return
        for token, notes in by_token.items():
            values = [n.data["params"]["progress"] for n in notes]
            r.ok("M084", f"{len(notes)} progress notification(s) for {token!r} carry progressToken and progress")
            if any(b <= a for a, b in itertools.pairwise(values)):
                r.fail("M085", f"progress for {token!r} does not increase: {values}", "progress")
            else:
                r.ok("M085", f"progress for {token!r} increases: {values[:8]}", "progress")
            if token not in tokens:
                r.fail("M086", f"progress for a token we never issued: {notes[0].short()}", "progress")
            else:
                resp = tokens[token]
                after = [n for n in notes if resp is not None and n.at > resp.at]
                if after:
                    r.fail("M086", f"progress for {token!r} after its response: {after[0].short()}", "progress")
                else:
                    r.ok("M086", f"progress for {token!r} only while its request was active", "progress")
            params0 = notes[-1].data["params"]
            if "total" in params0 or "message" in params0:
                r.ok("A025", f"progress carries total/message: {_short(params0)}", "progress")

    def check_list_changed(self, wire: Wire) -> None:
        r = self.report
        for req, cap, method in (
            ("M057", "resources", "notifications/resources/list_changed"),
            ("M064", "prompts", "notifications/prompts/list_changed"),
            ("M070", "tools", "notifications/tools/list_changed"),
        ):
            declared = isinstance(self.caps.get(cap), dict) and self.caps[cap].get("listChanged") is True
            sent = [n for n in wire.notifications if isinstance(n.data, dict) and n.data.get("method") == method]
            if sent and not declared:
                r.fail(req, f"{method} sent but {cap}.listChanged is not declared: {sent[0].short()}")
            elif sent:
                r.ok(req, f"{method} sent and {cap}.listChanged declared", "list_changed")
            elif declared:
                r.ok(req, f"{cap}.listChanged declared (no change observed)", "capabilities")
            else:
                r.skip(req, f"{cap}.listChanged not declared and no {method} seen")
        logs = [
            n
            for n in wire.notifications
            if isinstance(n.data, dict) and n.data.get("method") == "notifications/message"
        ]
        if logs and "logging" not in self.caps:
            r.fail("M087", f"notifications/message sent without the logging capability: {logs[0].short()}")

    # ------------------------------------------------------------------ Streamable HTTP

    async def check_http(self, wire: HttpWire) -> None:
        r = self.report
        init = next(
            (e for e in wire.exchanges if isinstance(e.sent, dict) and e.sent.get("method") == "initialize"), None
        )
        posts = [
            e
            for e in wire.exchanges
            if e.method == "POST"
            and isinstance(e.sent, dict)
            and "id" in e.sent
            and "method" in e.sent
            and e.status == 200
        ]
        bad = [
            e
            for e in posts
            if not any(t in e.headers.get("content-type", "") for t in ("application/json", "text/event-stream"))
        ]
        if bad:
            r.fail(
                "M023",
                f"POST {bad[0].sent.get('method')} answered with Content-Type {bad[0].headers.get('content-type')!r}",
                "http",
            )
        elif posts:
            kinds = sorted({e.headers.get("content-type", "").split(";")[0] for e in posts})
            r.ok("M023", f"{len(posts)} request POSTs answered with {', '.join(kinds)}", "http")
        notes = [
            e
            for e in wire.exchanges
            if isinstance(e.sent, dict) and e.sent.get("method") == "notifications/initialized"
        ]
        if notes:
            e = notes[0]
            if e.status == 202 and not e.body.strip():
                r.ok("M022", "POST notifications/initialized -> 202 with no body", "http")
            else:
                r.fail("M022", f"POST notifications/initialized -> HTTP {e.status} body {_short(e.body, 100)!r}")
        get = await wire.get()
        ctype = get.headers.get("content-type", "")
        if get.status == 405:
            r.ok("M025", "GET -> 405 Method Not Allowed", "http GET")
        elif get.status == 200 and "text/event-stream" in ctype:
            r.ok("M025", "GET -> 200 text/event-stream", "http GET")
            responses = [m for m in get.messages if isinstance(m.data, dict) and "method" not in m.data]
            if responses:
                r.fail("M026", f"a JSON-RPC response on the standalone GET stream: {responses[0].short()}")
            else:
                r.ok("M026", "no responses on the standalone GET stream", "http GET")
        else:
            r.fail("M025", f"GET -> HTTP {get.status} {ctype!r} (must be text/event-stream or 405)", "http GET")
        if init is not None and init.status == 200 and get.status in (200, 405):
            r.ok("M018", f"one endpoint {wire.url}: POST works, GET -> {get.status}", "http")
        elif init is not None:
            r.fail("M018", f"POST initialize -> {init.status}, GET -> {get.status}", "http")
        sid = wire.session_id
        if sid is None:
            for req in ("M028", "S005", "S006"):
                r.skip(req, "the server assigns no Mcp-Session-Id")
            return
        if re.fullmatch(r"[\x21-\x7e]+", sid):
            r.ok("M028", f"Mcp-Session-Id {sid!r} is visible ASCII", "http session")
        else:
            r.fail("M028", f"Mcp-Session-Id {sid!r} has characters outside 0x21-0x7E", "http session")
        other = HttpWire(wire.url, self.headers)
        try:
            resp = await self.initialize(other, self.version)
            sid2 = other.session_id
        finally:
            await other.close()
        if resp is None or sid2 is None:
            r.skip("S005", "a second session got no session id")
        elif sid2 == sid:
            r.fail("S005", f"two sessions got the same id {sid!r}", "http session")
        elif len(sid) < 16:
            r.fail("S005", f"session id {sid!r} is too short to be cryptographically secure", "http session")
        else:
            r.ok("S005", f"two sessions got distinct ids of {len(sid)}/{len(sid2)} characters", "http session")
        ex = await wire.post(
            {"jsonrpc": "2.0", "id": wire.new_id(), "method": "tools/list", "params": {}},
            headers={"Mcp-Session-Id": ""},
        )
        if ex.status == 400:
            r.ok("S006", "POST without Mcp-Session-Id -> 400", "http session")
        else:
            r.fail("S006", f"POST without Mcp-Session-Id -> HTTP {ex.status} (expected 400)", "http session")

    # ------------------------------------------------------------------ every message, every session

    def check_messages(self) -> None:
        r = self.report
        lines = bad_lines = total = 0
        for wire in self.wires:
            seen_ids: set[str] = set()
            for inc in wire.incoming:
                lines += 1
                if inc.error is not None:
                    bad_lines += 1
                    if inc.channel == "stdout":
                        r.fail("M016", f"stdout line is not a JSON-RPC message ({inc.error}): {inc.short(160)!r}")
                        if inc.raw.lstrip().startswith(("{", "[")) or inc.raw.rstrip().endswith(("}", "]")):
                            r.fail("M015", f"a message split across lines (embedded newline?): {inc.short(160)!r}")
                    else:
                        r.fail("M001", f"HTTP payload is not JSON ({inc.error}): {inc.short(160)!r}")
                    continue
                items = inc.data if isinstance(inc.data, list) else [inc.data]
                if isinstance(inc.data, list) and not inc.data:
                    r.fail("M001", "an empty JSON array was sent", "messages")
                for msg in items:
                    total += 1
                    self.judge_message(msg, inc, seen_ids, wire)
            for stray in wire.strays:
                if isinstance(stray.data, dict) and stray.data.get("id") is None and "error" in stray.data:
                    continue  # a parse-error reply (id null) to our malformed input
                sent = [m.get("id") for m in wire.sent if isinstance(m, dict) and "id" in m and "method" in m]
                r.fail(
                    "M006",
                    f"response id {stray.data.get('id')!r} matches no request we sent (we sent ids "
                    f"{_short(sent[-5:], 80)}): {stray.short(160)}",
                    "ids",
                )
        r.info["messages received"] = total
        if not self.http:
            if lines and not bad_lines:
                r.ok("M016", f"all {lines} stdout lines of {len(self.wires)} session(s) are JSON-RPC messages")
                r.ok("M014", f"{lines} newline-delimited messages", "stdout")
                r.ok("M015", "no message spans lines", "stdout")
            elif lines:
                r.fail("M014", f"{bad_lines} of {lines} stdout lines are not messages", "stdout")
        if total:
            for req, what in (
                ("M001", "every message is JSON-RPC 2.0"),
                ("M007", "every response has exactly one of result and error"),
                ("M008", "every error has an integer code and a string message"),
                ("M009", "no notification carries an id"),
                ("M010", "every notification has a method string"),
            ):
                if self.report.status(req) != "fail":
                    r.ok(req, f"{what} ({total} message(s))", "messages")
            sreqs = [i for w in self.wires for i in w.server_requests]
            methods = sorted({str(i.data.get("method")) for i in sreqs if isinstance(i.data, dict)})
            for req in ("M002", "M003", "M004", "M005"):
                if self.report.status(req) != "fail":
                    if sreqs:
                        r.ok(
                            req,
                            f"{len(sreqs)} server-sent request(s) ({', '.join(methods)}): string/integer ids, "
                            "unique per session, method strings",
                            "messages",
                        )
                    else:
                        r.skip(req, "the server sent no requests")
            if any(w.responses for w in self.wires) and self.report.status("M006") != "fail":
                n = sum(len(w.responses) for w in self.wires)
                r.ok("M006", f"all {n} responses carried the id of their request", "ids")

    def judge_message(self, msg: Any, inc: Incoming, seen_ids: set[str], wire: Wire) -> None:
        r = self.report
        if not isinstance(msg, dict):
            r.fail("M001", f"not a JSON object: {inc.short(160)}", "messages")
            return
        if msg.get("jsonrpc") != "2.0":
            r.fail("M001", f'jsonrpc is {msg.get("jsonrpc")!r}, not "2.0": {_short(msg, 160)}', "messages")
        if "method" in msg:
            if not isinstance(msg["method"], str):
                req = "M005" if "id" in msg else "M010"
                r.fail(req, f"method is not a string: {_short(msg, 160)}", "messages")
            if "id" in msg:
                if str(msg.get("method", "")).startswith("notifications/"):
                    r.fail("M009", f"a notification carries an id: {_short(msg, 160)}", "messages")
                    return
                rid = msg["id"]
                if rid is None:
                    r.fail("M003", f"request id is null: {_short(msg, 160)}", "messages")
                    r.fail("M002", f"request id is null, not a string or integer: {_short(msg, 160)}", "messages")
                    return
                if not (_is_int(rid) or isinstance(rid, str)):
                    r.fail("M002", f"request id is neither string nor integer: {_short(msg, 160)}", "messages")
                key = wire.key(rid)
                if key in seen_ids:
                    r.fail("M004", f"request id {rid!r} reused in one session: {_short(msg, 160)}", "messages")
                seen_ids.add(key)
            return
        has_result, has_error = "result" in msg, "error" in msg
        if has_result == has_error:
            r.fail("M007", f"response with {'both' if has_result else 'neither'} result and error: {_short(msg, 160)}")
            return
        if "id" not in msg:
            r.fail("M001", f"a response without an id: {_short(msg, 160)}", "messages")
        if has_error:
            err = msg["error"]
            if not isinstance(err, dict) or not _is_int(err.get("code")) or not isinstance(err.get("message"), str):
                r.fail("M008", f"error without an integer code and a string message: {_short(msg, 160)}", "messages")


async def run_checks(
    target: str | Sequence[str],
    *,
    protocol_version: str = LATEST_HANDSHAKE,
    timeout: float = 10.0,
    env: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    cwd: str | None = None,
    modern: bool = True,
) -> Report:
    """Run every check against ``target`` (a command line, an argv list, or an http(s) URL). With ``modern`` (the
    default) a server that offers 2026-07-28 is checked in a stateless session, too."""
    checker = Checker(
        target, protocol_version=protocol_version, timeout=timeout, env=env, headers=headers, cwd=cwd, modern=modern
    )
    return await checker.run()
