"""The client rules of each transport, judged from one scenario's recordings: stdio framing and shutdown; the
Streamable HTTP rules (POST and Accept, session and version headers, DELETE, a new session after a 404, resumption
after a cut stream); and the 2026-07-28 rules (``_meta`` and headers on every request, the ``input_required``
retry, no responses); and, in the auth scenario, the client's OAuth rules."""

from __future__ import annotations

import json
from urllib.parse import parse_qs

from ...protocol.versions import features, is_supported
from ..report import Report
from ..wire import MAX_MESSAGE
from .scripted import TOO_DEEP, Conn, Entry, Scenario, ScriptedServer
from .traffic import (
    JSON,
    accepts,
    carries_request,
    has_modern_meta,
    header_problem,
    headers_of,
    is_modern,
    items,
    requests_of,
    short,
)


class TransportRules:
    """The transport's rules over the connections of one scenario (``report.prefix`` names the scenario)."""

    def __init__(self, report: Report, server: ScriptedServer, transport: str, conns: list[Conn]) -> None:
        self.r = report
        self.server = server
        self.scenario: Scenario = server.scenario
        self.transport = transport
        self.conns = conns

    def stdio(self) -> None:
        """M012 (the server launched), M014/M015/M017 (stdin framing), S001 (shutdown by closing stdin)."""
        r = self.r
        r.ok("M012", f"the client launched the server command ({len(self.conns)} process(es))", "stdio")
        bad = [e for c in self.conns for e in c.incoming() if e.error not in (None, TOO_DEEP)]
        lines = sum(len(c.incoming()) for c in self.conns)
        long = [e for c in self.conns for e in c.events() if e.raw == "long"]
        self.too_deep("M017", "stdin line")
        if bad:
            r.fail("M017", f"{len(bad)} of {lines} stdin line(s) are not MCP messages: {short(bad[0].raw, 160)!r}")
            split = next((run for c in self.conns for run in _bad_runs(c) if _joins(run)), None)
            if split is not None:
                joined = " / ".join(e.raw for e in split)
                r.fail("M015", f"one message split across {len(split)} lines: {short(joined, 160)!r}", "stdio")
            r.fail("M014", f"{len(bad)} of {lines} stdin lines are not one message each", "stdio")
        elif lines:
            r.ok("M017", f"all {lines} stdin line(s) are MCP messages", "stdio")
            r.ok("M014", f"{lines} newline-delimited messages", "stdio")
            r.ok("M015", "no message spans lines", "stdio")
        if long:
            r.fail("M017", f"{len(long)} stdin line(s) over 4 MiB", "stdio")
        for conn in self.conns:
            kinds = [e.raw for e in conn.events()]
            sig = next((e.data for e in conn.events() if e.raw == "sig"), None)
            if "eof" in kinds and ("sig" not in kinds or kinds.index("eof") < kinds.index("sig")):
                r.ok("S001", f"process {conn.no}: stdin closed first to shut it down", "stdio shutdown")
            elif isinstance(sig, dict) and sig.get("eof"):
                r.fail(
                    "S001", f"process {conn.no}: stdin closed and signal {sig.get('n')} sent at once (no time to exit)"
                )
            elif sig is not None:
                r.fail("S001", f"process {conn.no}: signal {short(sig)} with its stdin still open", "stdio shutdown")
            elif "closed" in kinds:
                r.fail("S001", f"process {conn.no}: killed without its stdin being closed first", "stdio shutdown")

    def too_deep(self, req: str, what: str) -> None:
        """A message nested deeper than the checker's JSON parser goes is valid JSON it cannot judge: a warning
        that says so (not a failure of the framing rule, nor a crash of the scripted server)."""
        deep = [e for c in self.conns for e in c.incoming() if e.error == TOO_DEEP]
        if deep:
            self.r.warn(req, f"{len(deep)} {what}(s) with {TOO_DEEP}, not judged: {short(deep[0].raw, 120)!r}")

    def http(self) -> None:
        """M019-M021, M024, M029, MX12, A006, S007, MX10 (expiry), MX11/SX11 (resume)."""
        r = self.r
        posts = [e for c in self.conns for e in c.incoming() if e.http]
        gets = [e for c in self.conns for e in c.log if e.dir == "http" and e.raw == "GET"]
        others = [e for c in self.conns for e in c.log if e.dir == "http" and e.raw not in ("GET", "DELETE")]
        if others:
            r.fail("M019", f"a request to the endpoint with HTTP {others[0].raw} (messages go by POST)", "http")
        elif posts:
            r.ok("M019", f"{len(posts)} message(s) sent as HTTP POSTs", "http")
        bad_accept = [e for e in posts if not accepts(e, "application/json", "text/event-stream")]
        if bad_accept:
            accept = headers_of(bad_accept[0]).get("accept") if bad_accept[0].http else None
            r.fail("M020", f"{len(bad_accept)} POST(s) with Accept {accept!r} (must list both JSON and SSE)", "http")
        elif posts:
            r.ok("M020", f"all {len(posts)} POSTs accept application/json and text/event-stream", "http")
        bodies = [e for e in posts if e.error is None]
        self.too_deep("M021", "POST body")
        if any(e.error not in (None, "too large", TOO_DEEP) for e in posts):
            bad = next(e for e in posts if e.error not in (None, "too large", TOO_DEEP))
            r.fail("M021", f"a POST body that is not a JSON-RPC message: {short(bad.raw, 160)!r}", "http")
        elif bodies:
            r.ok("M021", f"every POST body is one JSON-RPC message ({len(bodies)})", "http")
        if gets:
            bad_get = [e for e in gets if not accepts(e, "text/event-stream")]
            if bad_get:
                accept = headers_of(bad_get[0]).get("accept")
                r.fail("M024", f"a GET with Accept {accept!r} (must list text/event-stream)", "http")
            else:
                r.ok("M024", f"{len(gets)} GET(s) accept text/event-stream", "http")
            r.ok("A006", f"the client opened {len(gets)} GET stream(s)", "http")
        for conn in self.conns:
            if conn.era == "handshake" and conn.init_answered is not None:
                self.session_headers(conn)
        loose = [
            e
            for c in self.conns
            if c.era is None
            for e in c.incoming()
            if e.http and carries_request(e) and not (isinstance(e.data, dict) and is_modern(e.data))
        ]
        if loose and any(c.era == "handshake" for c in self.conns):
            first_init = min(c.init_answered or 1e18 for c in self.conns if c.era == "handshake")
            late = [e for e in loose if e.at > first_init]
            if late:
                r.fail("M029", f"a request without the session id after initialization: {short(late[0].raw)}")
        self.expiry()
        self.resume()

    def session_headers(self, conn: Conn) -> None:
        r = self.r
        entries = [e for e in conn.log if e.http and e.at > (conn.init_answered or 0)]
        if not entries:
            return
        missing = [e for e in entries if not headers_of(e).get("mcp-session-id")]
        if missing:
            r.fail(
                "M029", f"session {conn.no}: {len(missing)} request(s) without Mcp-Session-Id: {short(missing[0].raw)}"
            )
        else:
            r.ok("M029", f"session {conn.no}: Mcp-Session-Id on all {len(entries)} later request(s)", "http session")
        if is_supported(conn.version) and features(conn.version).protocol_version_header:
            wrong = [e for e in entries if headers_of(e).get("mcp-protocol-version") != conn.version]
            if wrong:
                got = headers_of(wrong[0]).get("mcp-protocol-version")
                r.fail("MX12", f"session {conn.no} at {conn.version}: a request with MCP-Protocol-Version {got!r}")
            else:
                r.ok("MX12", f"MCP-Protocol-Version: {conn.version} on all {len(entries)} later request(s)", "http")
        deletes = [e for e in conn.log if e.dir == "http" and e.raw == "DELETE"]
        if deletes:
            r.ok("S007", f"session {conn.no} ended with DELETE", "http session")
        elif self.scenario.answer_version is None and not self.scenario.expire:
            r.fail("S007", f"session {conn.no} was left without a DELETE", "http session")

    def expiry(self) -> None:
        """MX10: after a 404 for its session, the client starts a new session with initialize and no session id."""
        if not self.scenario.expire:
            return
        r = self.r
        gone = [(c, e) for c in self.conns for e in c.incoming() if e.http and e.http.get("status") == 404]
        if not gone:
            return
        conn, entry = gone[0]
        again = [
            (c, e)
            for c in self.conns
            if c is not conn
            for e in c.incoming()
            if e.at > entry.at and isinstance(e.data, dict) and e.data.get("method") == "initialize"
        ]
        if again and not headers_of(again[0][1]).get("mcp-session-id"):
            r.ok("MX10", "after a 404 for its session the client sent a new initialize without a session id")
        elif again:
            r.fail("MX10", "after a 404 the client re-initialized but still sent the old session id", "http session")
        else:
            r.fail("MX10", f"after a 404 for its session the client did not initialize again: {short(entry.raw)}")

    def resume(self) -> None:
        """SX11 (a GET with Last-Event-ID after a cut stream) and MX11 (not before ``retry`` milliseconds)."""
        if not self.scenario.resume:
            return
        r = self.r
        for conn in self.conns:
            cut = next((e for e in conn.events() if e.raw == "cut"), None)
            if cut is None:
                continue
            event_id, retry = cut.data["id"], cut.data["retry"]
            resumed = [
                e
                for e in conn.log
                if e.dir == "http"
                and e.raw == "GET"
                and e.at > cut.at
                and (e.http or {}).get("headers", {}).get("last-event-id")
            ]
            if not resumed:
                r.fail("SX11", f"the stream cut after event {event_id!r} was never resumed with Last-Event-ID")
                continue
            got = headers_of(resumed[0]).get("last-event-id")
            if got == event_id:
                r.ok("SX11", f"resumed with GET and Last-Event-ID: {event_id}", "http resume")
            else:
                r.fail("SX11", f"resumed with Last-Event-ID {got!r}, not the last event id {event_id!r}")
            waited = (resumed[0].at - cut.at) * 1000
            if waited + 30 >= retry:  # (the clocks are the same; 30 ms for the cut to reach the client)
                r.ok("MX11", f"reconnected {waited:.0f} ms after the cut (retry: {retry})", "http resume")
            else:
                r.fail("MX11", f"reconnected {waited:.0f} ms after the cut, before its retry of {retry} ms")

    # ------------------------------------------------------------------------------------------- lifecycle

    def modern(self, conn: Conn) -> None:
        """MX13 (_meta), MX14 (HTTP headers), MX15-MX17 (the input_required retry), MX18 (no responses)."""
        r = self.r
        reqs = requests_of(conn)
        missing = [m for _, m in reqs if not has_modern_meta(m)]
        if missing:
            r.fail("MX13", f"a 2026-07-28 request without protocolVersion and clientCapabilities: {short(missing[0])}")
        elif reqs:
            r.ok("MX13", f"all {len(reqs)} request(s) carry _meta protocolVersion and clientCapabilities")
        if self.transport == "http":
            for entry, msg in reqs:
                problem = header_problem(entry, msg)
                if problem:
                    r.fail("MX14", f"{msg.get('method')}: {problem}", "headers")
                    break
            else:
                if reqs:
                    r.ok("MX14", f"MCP-Protocol-Version, Mcp-Method and Mcp-Name right on {len(reqs)} POST(s)")
        answers = [e for e in conn.incoming() for m in items(e) if isinstance(m, dict) and "method" not in m]
        if answers:
            r.fail("MX18", f"a JSON-RPC response sent in 2026-07-28: {short(answers[0].raw)}", "2026-07-28")
        elif reqs:
            r.ok("MX18", "no JSON-RPC responses from the client in 2026-07-28", "2026-07-28")
        self.retry(conn, reqs)

    def retry(self, conn: Conn, reqs: list[tuple[Entry, JSON]]) -> None:
        r = self.r
        asks = [
            m for _, m in reqs if m.get("method") == "tools/call" and (m.get("params") or {}).get("name") == "check_ask"
        ]
        if not asks:
            return
        first = next((m for m in asks if "requestState" not in (m.get("params") or {})), None)
        retries = [m for m in asks if m is not first]
        if first is None or not retries:
            return
        issued = {
            state: info
            for state, info in self.server.states.items()
            if json.dumps(info["id"]) == json.dumps(first.get("id"))
        }
        retry = retries[0]
        params = retry.get("params") or {}
        state = params.get("requestState")
        if issued and state in issued:
            r.ok("MX15", "the retry echoed the requestState exactly", "input_required")
            info = issued[state]
        else:
            r.fail("MX15", f"the retry carried requestState {short(state, 80)!r}, not the one given", "input_required")
            info = next(iter(issued.values()), {"keys": [], "id": first.get("id")})
        if json.dumps(retry.get("id")) == json.dumps(first.get("id")):
            r.fail("MX16", f"the retry reused the id {first.get('id')!r} of the first request", "input_required")
        else:
            r.ok("MX16", f"the retry had a new id ({first.get('id')!r} then {retry.get('id')!r})", "input_required")
        responses = params.get("inputResponses")
        keys = sorted(responses) if isinstance(responses, dict) else []
        if keys == info["keys"]:
            r.ok("MX17", f"inputResponses answered every input request ({', '.join(keys) or 'none asked'})")
        else:
            r.fail("MX17", f"inputResponses keys {keys} for input requests {info['keys']}", "input_required")

    def authorization(self) -> None:
        """The client's OAuth rules (the auth scenario): the metadata protocol followed (M032, M033), PKCE S256,
        ``state`` and ``resource`` on the authorization request (M031), ``MCP-Protocol-Version`` on the discovery
        requests (S012), the token in the ``Authorization`` header of every request after it was issued (M036) and
        never in a query string (M037)."""
        r = self.r
        log = self.server.http_log
        if not log:
            return
        discovery = [e for e in log if e["path"].startswith("/.well-known/")]
        as_meta = [e for e in discovery if "oauth-authorization-server" in e["path"] or "openid" in e["path"]]
        authorize = [e for e in log if e["path"] == "/authorize"]
        tokens = [e for e in log if e["path"] == "/token" and e.get("status") == 200]
        if not authorize and not tokens:
            r.fail("M036", "the client never authorized (no request to /authorize or /token)", "oauth")
            return
        if as_meta and (not authorize or as_meta[0]["at"] < authorize[0]["at"]):
            r.ok("M032", f"authorization server metadata fetched: {as_meta[0]['path']}", "oauth")
            r.ok("M033", "the endpoints the metadata names were then used (/authorize, /token)", "oauth")
        else:
            r.fail("M032", "the client authorized without fetching the authorization server's metadata", "oauth")
        missing = [e["path"] for e in discovery if not e["headers"].get("mcp-protocol-version")]
        if missing:
            r.fail("S012", f"discovery without MCP-Protocol-Version: {missing[0]}", "oauth")
        elif discovery:
            r.ok("S012", f"MCP-Protocol-Version on all {len(discovery)} discovery request(s)", "oauth")
        if authorize:
            query = parse_qs(authorize[0]["query"])
            problems = []
            if query.get("code_challenge_method") != ["S256"] or not query.get("code_challenge"):
                problems.append(f"code_challenge_method {query.get('code_challenge_method')} (PKCE S256 is required)")
            if not query.get("state"):
                problems.append("no state")
            if not query.get("resource"):
                problems.append("no resource (RFC 8707)")
            if problems:
                r.fail("M031", f"the authorization request: {'; '.join(problems)}", "oauth")
            else:
                r.ok("M031", "the authorization request used PKCE S256, a state and the resource parameter", "oauth")
        issued = tokens[0]["at"] if tokens else None
        later = [e for e in log if e["path"] == "/mcp" and issued is not None and e["at"] > issued]
        bare = [e for e in later if not e["headers"].get("authorization", "").lower().startswith(("bearer ", "dpop "))]
        if bare:
            r.fail("M036", f"a request after the token was issued without it in Authorization: {bare[0]['method']}")
        elif later:
            r.ok("M036", f"the token in the Authorization header of all {len(later)} later request(s)", "oauth")
        in_query = [e for e in log if "access_token=" in e["query"]]
        if in_query:
            r.fail("M037", f"a token in the query string: {in_query[0]['method']} {in_query[0]['path']}", "oauth")
        elif later:
            r.ok("M037", "no token in any query string", "oauth")


def _bad_runs(conn: Conn) -> list[list[Entry]]:
    """The runs of consecutive stdin lines of ``conn`` that are no JSON (two or more lines each)."""
    runs: list[list[Entry]] = [[]]
    for e in conn.incoming():
        if e.error is not None and e.error != TOO_DEEP:
            runs[-1].append(e)
        elif runs[-1]:
            runs.append([])
    return [run for run in runs if len(run) > 1]


def _joins(run: list[Entry]) -> bool:
    """Some stretch of ``run`` (two lines or more) is one JSON message once its lines are joined again. Bounded: a
    stretch starts at one of the first 10 lines, spans at most 200 and at most MAX_MESSAGE characters."""
    for i in range(min(len(run), 10)):
        size = len(run[i].raw)
        for j in range(i + 1, min(len(run), i + 200)):
            size += len(run[j].raw) + 1
            if size > MAX_MESSAGE:
                break
            try:
                json.loads("\n".join(e.raw for e in run[i : j + 1]))
            except (ValueError, RecursionError):
                continue
            return True
    return False
