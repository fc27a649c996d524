"""Streamable HTTP across sessions: session ids unique and unguessable, the Origin rule, and how a session ends
(DELETE, then 404 for its id)."""

from __future__ import annotations

from ..wire_http import HttpWire
from ._base import CLIENT_INFO, CheckerBase
from .http import BAD_ORIGIN


class HttpSessionChecks(CheckerBase):
    """Streamable HTTP rules that need sessions of their own."""

    async def http_wire(self) -> HttpWire:
        wire = await self.open_wire()
        assert isinstance(wire, HttpWire)
        return wire

    async def check_http_sessions(self, first_sid: str | None) -> None:
        """S005 (a second session gets another id), MX01 (a foreign Origin gets 403), A015/MX02/A014 (DELETE ends
        a session or is refused with 405; a request with the ended session's id then gets 404)."""
        await self.judge_origin()
        if first_sid is None:
            return
        r = self.report
        wire = await self.http_wire()
        try:
            resp = await self.initialize(wire, self.version)
            sid = wire.session_id
            if resp is None or sid is None:
                r.skip("S005", "a second session got no session id")
                return
            if sid == first_sid:
                r.fail("S005", f"two sessions got the same id {sid!r}", "http session")
            elif min(len(sid), len(first_sid)) < 16:
                r.fail("S005", f"session id {sid!r} is too short to be cryptographically secure", "http session")
            else:
                r.ok("S005", f"two sessions got distinct ids of {len(first_sid)}/{len(sid)} characters", "http session")
            await self.judge_delete(wire, sid)
        finally:
            await wire.close()

    async def judge_origin(self) -> None:
        r = self.report
        wire = await self.http_wire()
        try:
            ex = await wire.post(
                {
                    "jsonrpc": "2.0",
                    "id": wire.new_id(),
                    "method": "initialize",
                    "params": {"protocolVersion": self.version, "capabilities": {}, "clientInfo": CLIENT_INFO},
                },
                headers={"Origin": BAD_ORIGIN},
            )
            if ex.status == 403:
                r.ok("MX01", f"initialize with Origin: {BAD_ORIGIN} -> 403", "http origin")
            else:
                r.fail("MX01", f"initialize with Origin: {BAD_ORIGIN} -> {ex.brief(120)} (must be 403)", "http")
        finally:
            await wire.close()

    async def judge_delete(self, wire: HttpWire, sid: str) -> None:
        r = self.report
        ex = await wire.delete()
        if ex.status == 405:
            r.ok("A015", "DELETE -> 405: the server does not let clients end sessions", "http session")
            r.skip("MX02", "the session could not be ended (DELETE -> 405)")
            r.skip("A014", "the session could not be ended (DELETE -> 405)")
            return
        if not 200 <= ex.status < 300:
            r.fail("A015", f"DELETE of a live session -> {ex.brief(120)} (2xx ends it, 405 refuses)", "http session")
            r.skip("MX02", f"the session could not be ended (DELETE -> HTTP {ex.status})")
            r.skip("A014", f"the session could not be ended (DELETE -> HTTP {ex.status})")
            return
        r.ok("A015", f"DELETE -> HTTP {ex.status}: the session ended (405 would refuse)", "http session")
        wire.session_id = sid  # keep sending the ended id
        after = await wire.post({"jsonrpc": "2.0", "id": wire.new_id(), "method": "ping"})
        wire.session_id = None  # nothing left to DELETE on close
        if after.status == 404:
            r.ok("MX02", "a request with the ended session's id -> 404", "http session")
            r.ok("A014", "the session ended on DELETE and is answered 404 afterwards", "http session")
        else:
            r.fail("MX02", f"a request with the ended session's id -> {after.brief(120)} (must be 404)", "http")
