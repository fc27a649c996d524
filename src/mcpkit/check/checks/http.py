"""Streamable HTTP: status codes, content types and the session header."""

from __future__ import annotations

import re

from ..wire import HttpWire
from ._base import (
    CheckerBase,
    _short,
)


class HttpChecks(CheckerBase):
    """Streamable HTTP: status codes, content types and the session header."""

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
