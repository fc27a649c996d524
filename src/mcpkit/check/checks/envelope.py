"""The MAYs of the JSON-RPC envelope and of stdio, where the answers show them: params are optional on requests
(A001) and notifications (A002), a batch may be answered with a batch (A003), a cancellation for an unknown or
finished request may be ignored (A024), a stdio server may log UTF-8 on stderr (A004) and takes no credentials over
stdio (S009). (A003, a batch answered with a batch, is judged by the batch check.)"""

from __future__ import annotations

import asyncio

from ..wire import StdioWire, Wire, WireClosed
from ._base import CheckerBase, error_of, result_of


class EnvelopeChecks(CheckerBase):
    """Envelope MAYs and the stdio ones, on the main session."""

    async def check_envelope(self, wire: Wire) -> None:
        r = self.report
        probe = "server/discover" if self.feats.modern else "ping"
        # A001: a request without params (ping has none; check_basics sent one too)
        resp = await self.call(wire, probe)
        if result_of(resp) is not None:
            r.ok("A001", f"{probe} without params answered with a result", "envelope")
        elif resp is not None:
            r.fail("A001", f"{probe} without params refused: {resp.short(160)}", "envelope")
        # A002: a notification with params, then one without; the session must go on
        try:
            await wire.notify("notifications/roots/list_changed", {"_meta": {}})
            await wire.notify("notifications/roots/list_changed")
        except WireClosed:
            r.fail("A002", "the server hung up on notifications with and without params", "envelope")
            return
        resp = await self.call(wire, probe)
        if result_of(resp) is not None:
            r.ok("A002", "notifications with and without params accepted; the session went on", "envelope")
        else:
            got = resp.short(160) if resp else "no response"
            r.fail("A002", f"after notifications with and without params, {probe} -> {got}", "envelope")
        if any(isinstance(n.data, dict) and isinstance(n.data.get("params"), dict) for n in wire.notifications):
            r.ok("A002", "the server's notifications carry params objects", "envelope")
        await self.judge_unknown_cancellation(wire, probe)

    async def judge_unknown_cancellation(self, wire: Wire, probe: str) -> None:
        """A024: notifications/cancelled for a request that never existed and for one already answered: ignored
        (no error answer), and the session goes on."""
        r = self.report
        if result_of(await self.call(wire, probe)) is None:
            return  # the session had already stopped (A002 says why)
        done = next(iter(wire.responses.values()), None)
        before = len(wire.incoming)
        try:
            await wire.notify("notifications/cancelled", {"requestId": "mcpkit-check-never-sent", "reason": "check"})
            if done is not None and isinstance(done.data, dict):
                await wire.notify("notifications/cancelled", {"requestId": done.data.get("id"), "reason": "check"})
        except WireClosed:
            r.fail("A024", "the server hung up on a cancellation of an unknown request", "envelope")
            return
        await asyncio.sleep(0.2)
        answered = [i for i in wire.incoming[before:] if error_of(i) is not None]
        resp = await self.call(wire, probe)
        if answered:
            r.fail("A024", f"a cancellation notification was answered with an error: {answered[0].short(160)}")
        elif result_of(resp) is None:
            r.fail(
                "A024", f"after cancelling unknown/finished requests, {probe} -> {resp.short(120) if resp else None}"
            )
        else:
            r.ok("A024", "cancellations of an unknown and of a finished request ignored; the session went on")

    def check_stdio_mays(self, wire: Wire) -> None:
        """A004 (UTF-8 on stderr) and S009 (no authorization over stdio), from the main session."""
        if not isinstance(wire, StdioWire):
            return
        r = self.report
        if r.info.get("negotiated protocol version"):
            r.ok("S009", "the stdio server served the session without asking for credentials", "stdio")
        if wire.stderr_not_utf8:
            r.fail("A004", f"{wire.stderr_not_utf8} stderr line(s) are not UTF-8", "stdio stderr")
        elif wire.stderr_bytes:
            r.ok("A004", f"{wire.stderr_bytes} bytes of UTF-8 on stderr, e.g. {wire.stderr_tail[-1][:120]!r}")
        else:
            r.skip("A004", "the server wrote nothing to stderr (allowed)")
