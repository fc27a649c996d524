"""The handshake, version negotiation, batches (2025-03-26), ping/ids/errors and malformed input."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from ...protocol.versions import (
    ALL_VERSIONS,
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    V2024_11_05,
    V2025_03_26,
    V2025_06_18,
    V2026_07_28,
    Features,
    features,
)
from ..wire import Incoming, StdioWire, Wire, WireClosed
from ..wire_http import NOT_AUTHORIZED, HttpExchange, HttpWire
from ._base import (
    ALL_CLIENT_CAPABILITIES,
    CLIENT_INFO,
    JSON,
    UNKNOWN_VERSION,
    CheckerBase,
    error_code,
    error_of,
    result_of,
    shortened,
)

# seconds a batch of two pings gets before M011 fails, stretched to BATCH_PACE times how long a ping sent just after
# it took (a server slow to answer anything, as on a busy machine, is not judged by a fixed window)
BATCH_WAIT = 3.0
BATCH_PACE = 2.0
# On one stream (stdio, SSE, WebSocket) that ping answered also ends the wait early: the server has read what came
# before it, and what it still owes gets BATCH_PACE times the ping's round trip, never less than PACE_FLOOR (JSON-RPC
# lets a server answer in any order: one working on a batch beside later messages answers it a little later)
PACE_FLOOR = 1.0
PARSE_ERROR_WAIT = 0.3  # seconds an invalid JSON line waits for its -32700 (at most: it ends when an error comes)
NO_METHOD_WAIT = 2.0  # seconds a request without a method waits for its error (at the server's pace, as above)

_ASKS_FOR_AUTH = re.compile(r"unauthori[sz]ed|bearer|access token|authori[sz]ation required|credential", re.I)


def _not_connected(wire: Wire) -> str | None:
    """Why the HTTP wire's first request never reached a server (connection refused, no such host, TLS failure, a
    connect timeout, no token from the run's OAuth client), or None when something answered it."""
    if not isinstance(wire, HttpWire) or not wire.exchanges:
        return None
    first = wire.exchanges[0]
    if first.status or first.error is None:
        return None
    if not first.error.startswith(("ConnectError", "ConnectTimeout", NOT_AUTHORIZED)):
        return None
    return first.error


_NOT_HERE = (404, 405, 501)  # no such resource, no POST there, no POST on this whole server


def _not_mcp(ex: HttpExchange | None) -> str | None:
    """What answered a POST instead of an MCP endpoint (``HTTP 404``, ``HTTP 200 text/html, not JSON``), or None
    when the answer may be one's (a JSON-RPC message in it, a JSON or SSE body, any other status)."""
    if ex is None or not ex.status or any(m.data is not None for m in ex.messages):  # (data: it parsed as JSON)
        return None
    if ex.status in _NOT_HERE:
        return f"HTTP {ex.status}"
    json_like = ex.content_type in ("application/json", "text/event-stream") or ex.body.lstrip().startswith(("{", "["))
    if 200 <= ex.status < 300 and not json_like:
        return f"HTTP {ex.status} {ex.content_type or '(no content type)'}, not JSON"
    return None


class LifecycleChecks(CheckerBase):
    """The handshake, version negotiation, batches (2025-03-26), ping/ids/errors and malformed input."""

    caps: JSON
    feats: Features

    async def no_mcp_endpoint(self, wire: HttpWire) -> str | None:
        """What the URL answered when it has no MCP endpoint: the initialize POST and a ``server/discover`` POST
        (a 2026-07-28 server may refuse the first) both got a 404, 405 or 501 or a 2xx that is not JSON; None
        when either may have reached an MCP server (then what it answered is judged)."""
        seen = _not_mcp(next((ex for ex in wire.exchanges if ex.method == "POST"), None))
        if seen is None:
            return None
        meta = {META_PROTOCOL_VERSION: V2026_07_28, META_CLIENT_CAPABILITIES: {}, META_CLIENT_INFO: CLIENT_INFO}
        discover = {
            "jsonrpc": "2.0",
            "id": "mcpkit-check-discover",
            "method": "server/discover",
            "params": {"_meta": meta},
        }
        headers = {"MCP-Protocol-Version": V2026_07_28, "Mcp-Method": "server/discover"}
        again = _not_mcp(await wire.post(discover, headers=headers))
        if again is None:
            return None
        return seen if again == seen else f"{seen} to initialize, {again} to server/discover"

    async def check_handshake(self, wire: Wire) -> bool:
        r = self.report
        try:
            resp = await self.initialize(wire, self.version, capabilities=dict(ALL_CLIENT_CAPABILITIES))
        except WireClosed:  # (a stdio server gone before initialize could be written: it never answered)
            resp = None
            for _ in range(20):  # (its exit code, when it comes within a second)
                if not isinstance(wire, StdioWire) or wire.conn.returncode is not None:
                    break
                await asyncio.sleep(0.05)
        unreachable = _not_connected(wire)
        if unreachable is not None:
            # no TCP (or TLS) connection at all: nothing answered, so nothing can be said of the server
            r.info["aborted"] = f"could not connect to {self.target}: {unreachable}; nothing was checked"
            return False
        if resp is not None and resp.error is not None and resp.channel == "http":
            nothing = await self.no_mcp_endpoint(wire) if isinstance(wire, HttpWire) else None
            if nothing is not None:  # not an MCP server that broke a rule: no MCP server at all (a bad target)
                r.info["no MCP endpoint"] = nothing
                r.info["aborted"] = f"no MCP endpoint at {self.target}: {nothing}; nothing was checked"
                self.modern_pass = False  # (server/discover was asked already)
                return False
            r.fail("M042", f"initialize POST to {self.target} got no JSON-RPC response: {resp.raw}", "initialize")
            r.fail("M018", f"the endpoint does not answer an initialize POST: {resp.raw}", "initialize")
            r.info["aborted"] = "the server did not complete initialize; nothing else was checked"
            return False
        if resp is None:
            r.info["aborted"] = "the server did not complete initialize; nothing else was checked"
            stray = wire.strays[0].short() if wire.strays else None
            if stray:
                r.fail("M006", f"initialize sent with id 1; the only response had another id: {stray}", "initialize")
            where = "stdout" if self.transport == "stdio" else "the endpoint"
            extra = ""
            if isinstance(wire, StdioWire) and wire.stderr_tail:
                extra = f"; stderr: {shortened(' / '.join(wire.stderr_tail[-3:]))}"
            code = wire.conn.returncode if isinstance(wire, StdioWire) else None
            if code is not None:  # it ended without answering: no wait is to blame
                r.fail("M042", f"the server exited (code {code}) without answering initialize{extra}", "initialize")
            else:
                r.fail(
                    "M042", f"no response to initialize on {where} within {self.timeout * 2:.0f}s{extra}", "initialize"
                )
            if self.transport == "stdio":
                r.fail("M013", f"no initialize response on {where}{extra}", "initialize")
            return False
        if self.transport == "stdio":
            r.ok("M013", "initialize answered on stdout", "initialize")
        err = error_of(resp)
        supported = _modern_only(err)
        if supported is not None:  # a 2026-07-28-only server, which refuses initialize as that revision asks
            self.modern_only = True
            r.info["handshake era"] = (
                f"not served: initialize refused with -32022, supported {supported} (a 2026-07-28 only server, "
                "judged in the stateless era)"
            )
            if not self.modern_pass:
                r.info["aborted"] = "the server speaks 2026-07-28 only, which --no-stateless skips"
            return False
        if err is not None:
            r.fail("M042", f"initialize answered with an error: {resp.short()}", "initialize")
            if self.transport == "stdio" and _ASKS_FOR_AUTH.search(str(err.get("message", ""))):
                r.fail("S009", f"the stdio server asks for authorization: {resp.short(160)}", "initialize")
            r.info["aborted"] = "the server did not complete initialize; nothing else was checked"
            return False
        res = result_of(resp) or {}
        r.info["server"] = shortened(res.get("serverInfo"), 120)
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
            r.ok("M047", f"server capabilities declared: {shortened(self.caps, 200)}", "initialize result")
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
        # 2025-03-26 gets its own session even when the run asked for it: the batch (M011) is sent there
        asked = [
            v for v in (V2025_06_18, V2025_03_26, V2024_11_05, UNKNOWN_VERSION) if v != self.version or v == V2025_03_26
        ]

        async def one(version: str) -> None:
            wire = await self.open_wire()
            try:
                resp = await self.initialize(wire, version)
                res = result_of(resp)
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
            r.skip("A003", "no batch was sent (the server does not negotiate 2025-03-26)")
        self.judge_latest_version()

    def judge_latest_version(self) -> None:
        """S016: the version a server picks itself (for an unknown request) is the latest it supports."""
        r = self.report
        fallback = self.answered_versions.get(UNKNOWN_VERSION)
        echoed = {req for req, ans in self.answered_versions.items() if req == ans}
        if fallback is None or fallback not in ALL_VERSIONS:
            return
        newest = max(echoed | {fallback})
        if fallback == newest:
            r.ok("S016", f"for {UNKNOWN_VERSION} the server offered {fallback}, the latest it echoes", "versions")
        else:
            r.fail("S016", f"for {UNKNOWN_VERSION} the server offered {fallback}, but it also serves {newest}")

    async def check_batch(self, wire: Wire) -> None:
        r = self.report
        ids = [wire.new_id(), wire.new_id("str")]
        futs = [wire.expect(i) for i in ids]
        batch = [
            {"jsonrpc": "2.0", "id": ids[0], "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/mcpkit-check/ignored"},
            {"jsonrpc": "2.0", "id": ids[1], "method": "ping"},
        ]
        try:
            await wire.send(batch)
        except WireClosed as exc:  # the transport refused it (e.g. a POST answered 400): no batch received
            for i in ids:
                wire.forget(i)
            r.fail("M011", f"a batch of 2 pings at 2025-03-26 was refused: {shortened(str(exc), 200)}", "batch")
            r.skip("A003", "the server answered no batch (see M011)")
            return
        # two pings: quick or never, "quick" at the server's own pace: a ping sent just after the batch shows it
        window = await self.await_at_pace(wire, futs, min(self.timeout, BATCH_WAIT))
        done = [f for f in futs if f.done() and not f.cancelled()]
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
            if as_array:  # A003: answering a batch with one array is the server sending a batch
                r.ok("A003", "the server answered a batch with a batch (one JSON array)", "batch")
            else:
                r.skip("A003", "the server answers batch items as separate messages (it sends no batches)")
        else:
            got = [i.short() for i in wire.incoming[-2:]]
            r.fail(
                "M011",
                f"a batch of 2 pings at 2025-03-26 got {len(done)} of 2 responses within {window:.3g}s; last: {got}",
                "batch",
            )
            r.skip("A003", "the server answered no batch (see M011)")

    async def await_at_pace(self, wire: Wire, futs: list[asyncio.Future[Incoming]], window: float) -> float:
        """Wait for the answers ``futs`` to what was just sent, at the server's own pace, shown by a ping (or
        ``server/discover``) sent right after: at most ``window`` seconds, stretched to BATCH_PACE times that ping's
        round trip for a server slow to answer anything (a busy machine); on one stream, ended once the ping is
        answered and BATCH_PACE times its round trip (at least PACE_FLOOR) has passed. Returns the window used."""
        t0 = time.monotonic()
        pace: list[float] = []
        probe = asyncio.ensure_future(self.call(wire, "server/discover" if self.feats.modern else "ping"))
        probe.add_done_callback(lambda _: pace.append(time.monotonic() - t0))
        answered = asyncio.ensure_future(asyncio.wait(futs))
        one_stream = not isinstance(wire, HttpWire)  # (over HTTP each POST ends with its own answer or none)
        try:
            await asyncio.wait(
                {answered, probe} if one_stream else {answered}, timeout=window, return_when=asyncio.FIRST_COMPLETED
            )
            if not answered.done():  # on a busy machine the answers come as late as the ping's, or later
                await asyncio.wait({probe}, timeout=max(0.0, self.timeout - (time.monotonic() - t0)))
                if pace:
                    paced = BATCH_PACE * pace[0]
                    window = min(self.timeout, max(PACE_FLOOR, paced) if one_stream else max(window, paced))
                if (rest := window - (time.monotonic() - t0)) > 0:
                    await asyncio.wait({answered}, timeout=rest)
        finally:
            probe.cancel()
            answered.cancel()
        return window

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
            res = result_of(resp)
            if res is None:
                r.fail("M079", f"ping answered without a result object: {resp.short()}", "ping")
            elif set(res) - {"_meta"}:
                r.fail("M079", f"ping result is not empty: {resp.short()}", "ping")
            else:
                r.ok("M079", f"ping -> {shortened(res)} in {elapsed * 1000:.0f} ms", "ping")
        resp = await self.call(wire, "mcpkit-check/no-such-method", {})
        if error_code(resp) == -32601:
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
                r.fail("S021", f"invalid JSON body -> HTTP {ex.status} {shortened(ex.body)}", "malformed JSON")
        else:
            before = len(wire.incoming)
            try:
                await wire.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
            except WireClosed:
                return

            def errors() -> list[Incoming]:
                return [i for i in wire.incoming[before:] if isinstance(i.data, dict) and "error" in i.data]

            await wire.until(lambda: bool(errors()), PARSE_ERROR_WAIT)
            replies = errors()
            if replies and error_code(replies[0]) == -32700:
                r.ok("S021", "invalid JSON line -> -32700 Parse error", "malformed JSON")
            elif replies:
                r.warn("S021", f"invalid JSON line answered with {replies[0].short()} (expected -32700)")
        probe = "server/discover" if self.feats.modern else "ping"  # ping does not exist at 2026-07-28
        resp = await self.call(wire, probe)
        if resp is None or result_of(resp) is None:
            gone = "" if wire.alive else " (it ended the session: the connection is closed)"
            r.fail("S021", f"the server stopped answering ({probe}) after a malformed message{gone}", "malformed JSON")
            return
        rid = wire.new_id()
        if isinstance(wire, HttpWire):
            ex = await wire.post({"jsonrpc": "2.0", "id": rid, "params": {}})
            codes = [error_code(m) for m in ex.messages]
            if 400 <= ex.status < 500 or any(c in (-32600, -32601, -32602) for c in codes):
                r.ok("S021", f"request without a method -> HTTP {ex.status} {shortened(ex.body, 120)}", "no method")
            else:
                r.fail("S021", f"request without a method -> HTTP {ex.status} {shortened(ex.body, 120)}", "no method")
            return
        fut = wire.expect(rid)
        await wire.send({"jsonrpc": "2.0", "id": rid, "params": {}})
        window = await self.await_at_pace(wire, [fut], min(self.timeout, NO_METHOD_WAIT))
        reply = fut.result() if fut.done() and not fut.cancelled() else None
        wire.forget(rid)
        if error_code(reply) in (-32600, -32601, -32602):
            r.ok("S021", f"request without a method -> {error_code(reply)}", "request without method")
        elif reply is None:
            r.warn("S021", f"a request without a method got no response within {window:.3g}s (JSON-RPC expects -32600)")
        else:
            r.fail("S021", f"a request without a method got {reply.short()}", "request without method")


def _modern_only(err: dict[str, Any] | None) -> list[str] | None:
    """The versions an ``initialize`` error names when it says the server speaks no handshake-era revision:
    UnsupportedProtocolVersionError (-32022) whose ``data.supported`` lists only later revisions (the 2026-07-28
    versioning page: a modern-only server SHOULD name its versions in any error to ``initialize``)."""
    if err is None or err.get("code") != -32022:
        return None
    data = err.get("data")
    supported = data.get("supported") if isinstance(data, dict) else None
    if not isinstance(supported, list) or not supported or not all(isinstance(v, str) for v in supported):
        return None
    if any(v in HANDSHAKE_VERSIONS for v in supported):
        return None
    return supported
