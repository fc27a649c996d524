"""Lifecycle and capability rules that need sessions of their own: a request before ``initialize``, the quiet
time before ``notifications/initialized`` (S014), ``initialize`` inside a batch, and the client capabilities a
server must respect (S018: no sampling, elicitation or roots request to a client that declared none)."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from ...protocol.versions import META_CLIENT_CAPABILITIES, V2025_03_26
from ..wire import Incoming, Wire, WireClosed
from ..wire_http import HttpWire
from ._base import JSON, CheckerBase, result_of, sample_arguments, shortened
from .lifecycle import BATCH_PACE

# tools whose names say they ask the client for something (an LLM, the user, its roots)
_ASKS_CLIENT = re.compile(r"sampl|elicit|ask|roots|confirm|prompt_user|input", re.I)
_HARMFUL = re.compile(r"delete|remove|destroy|kill|shutdown|exit|write|crash", re.I)
EARLY_WAIT = 1.0  # seconds the checker stays quiet between the initialize response and notifications/initialized
# The share of the run's --timeout a tool call that asks the client gets: the whole of it where the client answers
# what the server asks (the call's answer is what is judged), half of it in the S018 probe, where only the requests
# the server sends are judged and a server that waits for an answer its client cannot give may never answer.
ASKING_CALL_WAIT = 1.0
PROBE_CALL_WAIT = 0.5
CAPABILITY_FOR = {"sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots"}


class RuleChecks(CheckerBase):
    """Lifecycle and capability rules, each in a short session of its own."""

    async def check_lifecycle_rules(self) -> None:
        """The separate sessions of S014 and S021 (request before initialize, initialize in a batch)."""
        await self.judge_before_initialize()
        await self.judge_before_initialized()
        if V2025_03_26 in self.answered_versions.values():
            await self.judge_initialize_in_batch()

    async def _session(self) -> Wire | None:
        try:
            return await self.open_wire()
        except (OSError, ValueError):
            return None

    async def judge_before_initialize(self) -> None:
        """A request before initialize is a protocol error the server must survive (S021): any JSON-RPC answer or an
        HTTP 4xx, then initialize works."""
        r = self.report
        wire = await self._session()
        if wire is None:
            return
        try:
            # the first message a freshly started server reads: it gets the startup allowance initialize gets
            wait = self.first_message_timeout
            resp = await self.call(wire, "tools/list", {}, timeout=wait)
            if resp is None:
                r.fail(
                    "S021",
                    f"tools/list sent before initialize got no answer within {wait:g}s (JSON-RPC answers every "
                    "request; an error such as -32600 would do)",
                    "before initialize",
                )
                return
            init = await self.initialize(wire, self.version)
            if result_of(init) is None:
                r.fail(
                    "S021",
                    f"after a request before initialize, initialize failed: {shortened(init.raw if init else None)}",
                )
            else:
                r.ok("S021", f"a request before initialize -> {resp.short(100)}; initialize then worked", "lifecycle")
        finally:
            await wire.close()

    async def judge_before_initialized(self) -> None:
        """S014: between the initialize response and notifications/initialized the server sends no request but ping
        (the client declares roots, sampling and elicitation, so a server has a reason to ask)."""
        r = self.report
        wire = await self._session()
        if wire is None:
            return
        try:
            caps = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}}
            resp = await self.initialize(wire, self.version, initialized=False, capabilities=caps)
            if result_of(resp) is None:
                return
            await asyncio.sleep(EARLY_WAIT)
            early = [i for i in wire.server_requests if isinstance(i.data, dict) and i.data.get("method") != "ping"]
            if early:
                r.fail("S014", f"a request before notifications/initialized: {early[0].short(160)}", "lifecycle")
            else:
                r.ok(
                    "S014",
                    f"no request but ping in the {EARLY_WAIT:.0f}s before notifications/initialized",
                    "lifecycle",
                )
            await wire.notify("notifications/initialized")
        except WireClosed:
            pass
        finally:
            await wire.close()

    async def judge_initialize_in_batch(self) -> None:
        """initialize inside a JSON-RPC batch (2025-03-26) is a client error the server must survive (S021)."""
        r = self.report
        wire = await self._session()
        if wire is None:
            return
        try:
            rid = wire.new_id()
            fut = wire.expect(rid)
            # a batch refused whole is answered by one error whose id is null (JSON-RPC 2.0): the first message of
            # the session, so nothing else it could answer; it ends the wait as the member's answer does
            whole = wire.expect(None)
            params = {"protocolVersion": V2025_03_26, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
            refused = ""
            reply: Incoming | None = None
            follow: asyncio.Future[Incoming | None] | None = None
            try:
                await wire.send([{"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": params}])
            except WireClosed as exc:
                if not wire.alive:  # (the server hung up)
                    raise
                refused = f"refused ({shortened(str(exc), 100)})"  # (a POST answered 400): the session stays
            else:
                t0 = time.monotonic()
                window = min(self.timeout, 5.0)
                answered: set[asyncio.Future[Any]] = {fut, whole}
                if not isinstance(wire, HttpWire):  # (over HTTP the batch's own POST ends with its answer or none)
                    # the initialize after it goes at once: one stream, answered in order by most servers, so a
                    # server that answers it has dropped the batch; a slower answer to the batch still counts within
                    # BATCH_PACE times that initialize's round trip (never past the window)
                    follow = asyncio.ensure_future(self.initialize(wire, V2025_03_26))
                    answered.add(follow)
                await asyncio.wait(answered, timeout=window, return_when=asyncio.FIRST_COMPLETED)
                if follow is not None and follow.done() and not (fut.done() or whole.done()):
                    pace = BATCH_PACE * (time.monotonic() - t0)
                    rest = min(window, pace) - (time.monotonic() - t0)
                    await asyncio.wait({fut, whole}, timeout=max(0.0, rest), return_when=asyncio.FIRST_COMPLETED)
                reply = next((f.result() for f in (fut, whole) if f.done() and not f.cancelled()), None)
            finally:
                wire.forget(rid)
                wire.forget(None)
            after = await (follow if follow is not None else self.initialize(wire, V2025_03_26))
            if result_of(after) is not None or reply is not None:
                dropped = "no answer" + (" (the initialize sent after it was answered first)" if follow else "")
                what = reply.short(100) if reply is not None else refused or dropped
                r.ok("S021", f"initialize inside a batch -> {what}; the server went on", "initialize in a batch")
            else:
                r.fail("S021", "after initialize inside a batch the server answered nothing", "initialize in a batch")
        except WireClosed:
            r.fail("S021", "the server hung up on an initialize inside a batch", "initialize in a batch")
        finally:
            await wire.close()

    def asking_tools(self) -> list[JSON]:
        """The listed tools whose names say they ask the client for something (and nothing harmful), at most 4."""
        return [
            t
            for t in self.tools
            if isinstance(t, dict)
            and isinstance(t.get("name"), str)
            and _ASKS_CLIENT.search(t["name"])
            and not _HARMFUL.search(t["name"])
        ][:4]

    async def check_client_requests(self, wire: Wire) -> None:
        """Call the asking tools in a session whose client declared roots, sampling and elicitation (each answered),
        so the server's own requests show (M002-M005, M079 from its side, S018). In a stateless session
        (2026-07-28, no capability declared) the answers must not ask for an undeclared capability (S018). Each call
        waits :data:`ASKING_CALL_WAIT` of the run's timeout; the calls left unanswered are noted in the report."""
        wait = self.timeout * ASKING_CALL_WAIT
        unanswered: list[str] = []
        for tool in self.asking_tools():
            args = sample_arguments(tool.get("inputSchema"))
            resp = await self.call(wire, "tools/call", {"name": tool["name"], "arguments": args}, timeout=wait)
            if resp is None:
                unanswered.append(str(tool["name"]))
            res = result_of(resp)
            if wire.modern_meta is None or res is None or res.get("resultType") != "input_required":
                continue
            declared = wire.modern_meta.get(META_CLIENT_CAPABILITIES) or {}
            requests = res.get("inputRequests")
            for key, item in (requests or {}).items() if isinstance(requests, dict) else []:
                method = item.get("method") if isinstance(item, dict) else None
                cap = CAPABILITY_FOR.get(str(method))
                if cap is not None and cap not in declared:
                    self.report.fail(
                        "S018",
                        f"tools/call {tool['name']} asks for {method} ({key}) of a client that declared "
                        f"no '{cap}': {shortened(res, 160)}",
                        "capabilities",
                    )
                    break
            else:
                self.report.ok("S018", f"tools/call {tool['name']}: input_required without undeclared requests")
        if unanswered:
            era = "2026-07-28" if wire.modern_meta is not None else "handshake"
            self.report.info[f"asking tools unanswered ({era})"] = (
                f"tools/call {', '.join(unanswered)}: no answer within {wait:g}s (the run's timeout)"
            )

    async def check_capabilities_respected(self) -> None:
        """S018: in a session whose client declares no capability, call the tools whose names say they ask the
        client for something; the server must not send sampling, elicitation or roots requests to it. (The other
        sessions are judged too: a request for a capability their client did not declare fails S018.) Each call
        waits :data:`PROBE_CALL_WAIT` of the run's timeout."""
        r = self.report
        asking = self.asking_tools()
        if not asking:
            return
        wire = await self._session()
        if wire is None:
            return
        try:
            resp = await self.initialize(wire, self.version, capabilities={})
            if result_of(resp) is None:
                return
            wait = self.timeout * PROBE_CALL_WAIT
            for tool in asking:
                args = sample_arguments(tool.get("inputSchema"))
                await self.call(wire, "tools/call", {"name": tool["name"], "arguments": args}, timeout=wait)
            names = ", ".join(t["name"] for t in asking)
            r.info["S018 probe"] = (
                f"called {names} in a session declaring no client capability (each call waited at most {wait:g}s)"
            )
        finally:
            await wire.close()

    def judge_capabilities(self) -> None:
        """S018 over every session: each server request names a capability its client declared."""
        r = self.report
        asked = 0
        sessions = 0
        for wire in self.wires:
            declared = self.declared_capabilities.get(id(wire))
            if declared is None:
                continue
            sessions += wire.protocol_version is not None  # (a session: its initialize was answered)
            for inc in wire.server_requests:
                method = inc.data.get("method") if isinstance(inc.data, dict) else None
                cap = CAPABILITY_FOR.get(str(method))
                if cap is None:
                    continue
                asked += 1
                if cap not in declared:
                    r.fail("S018", f"{method} sent to a client that did not declare '{cap}': {inc.short(160)}")
        if self.report.status("S018") != "fail" and sessions:  # (no session: nothing to judge by)
            r.ok(
                "S018",
                f"{asked} server request(s) over {sessions} session(s), each for a capability its client declared",
                "capabilities",
            )
