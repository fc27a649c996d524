"""The client rules, judged from what the scripted server recorded in one scenario (:class:`ClientJudge`).

Each method judges one group of rules over every connection the client opened, adding findings to the report
(whose ``prefix`` names the scenario). A rule the run gave nothing to judge by gets no finding; the report then lists
it with its reason (see :mod:`..catalog`).
"""

from __future__ import annotations

import json
from typing import Any

from ...protocol.versions import ALL_VERSIONS, LATEST_HANDSHAKE, V2025_03_26
from ..jsonrpc_rules import judge_envelope, judge_error, names_itself
from ..report import Report
from .judge_transport import TransportRules
from .scripted import ASK_TIMEOUT, Conn, Scenario, ScriptedServer
from .traffic import JSON, is_modern, items, notifications_of, obj, requests_of, short

# a request the client declared it serves -> (the rule its answer proves, the capability): left unanswered, it fails
DECLARED = {
    "roots/list": ("M071", "roots"),
    "sampling/createMessage": ("M076", "sampling"),
    "elicitation/create": ("S018", "elicitation"),
}
PROMPT = 2.0  # seconds within which a ping is answered "promptly" (M079)
CANCEL_SLACK = 1.0  # an answer this long after the server's cancellation was made after the client read it
SERVER_METHODS = {  # a server capability -> the client methods it makes available (S018)
    "prompts": ("prompts/",),
    "resources": ("resources/",),
    "completions": ("completion/",),
    "logging": ("logging/",),
}


class ClientJudge:
    """Judges one scenario's recordings into ``report`` (``transport``: stdio or http)."""

    def __init__(self, report: Report, server: ScriptedServer, transport: str) -> None:
        self.r = report
        self.server = server
        self.scenario: Scenario = server.scenario
        self.transport = transport
        self.conns: list[Conn] = [c for c in server.conns if c.incoming() or c.events()]

    def judge(self) -> None:
        if self.scenario.auth:  # (its requests may never have reached the endpoint: judged first)
            TransportRules(self.r, self.server, self.transport, self.conns).authorization()
        if not self.conns:
            if self.transport == "stdio" and self.server.started_client:
                self.r.fail("M012", "the client ran but never launched the server command it was given", "stdio")
            return
        self.envelope()
        rules = TransportRules(self.r, self.server, self.transport, self.conns)
        if self.transport == "stdio":
            rules.stdio()
        else:
            rules.http()
        first_init = min(
            (e.at for c in self.conns for e, m in requests_of(c) if m.get("method") == "initialize"), default=None
        )
        for conn in self.conns:
            if conn.era == "handshake":
                self.lifecycle(conn)
                self.answers(conn)
                self.cancelled_by_server(conn)
            elif conn.era == "modern":
                rules.modern(conn)
            else:
                self.uninitialized(conn, first_init)
        self.requests()
        self.pagination()
        self.cancellation()
        self.mays()

    # ------------------------------------------------------------------------------------------- envelope

    def envelope(self) -> None:
        """M001-M010 on every message the client sent; M011 (a batch from the server answered)."""
        r = self.r
        total = 0
        for conn in self.conns:
            seen: set[str] = set()
            # without a session (HTTP requests without one, the 2026-07-28 era) an id need only differ from the
            # ids of the requests still unanswered
            outstanding_only = conn.era != "handshake"
            asked = {
                json.dumps(m.get("id"))
                for e in conn.log
                if e.dir == "out"
                for m in items(e)
                if isinstance(m, dict) and "method" in m and "id" in m
            }
            for entry in conn.log:  # in the order things happened
                if entry.dir == "out" and outstanding_only:
                    for m in items(entry):
                        if isinstance(m, dict) and "method" not in m:
                            seen.discard(json.dumps(m.get("id"), sort_keys=True))  # answered: its id is free
                if entry.dir == "event" and entry.raw == "answered" and outstanding_only:
                    for rid in entry.data or []:
                        seen.discard(json.dumps(rid, sort_keys=True))
                if entry.dir != "in" or entry.error is not None:
                    continue  # (not JSON at all: the transport's framing rule, M017 over stdio, M021 over HTTP)
                holds_initialize = any(isinstance(m, dict) and m.get("method") == "initialize" for m in items(entry))
                if isinstance(entry.data, list) and conn.version != V2025_03_26 and not holds_initialize:
                    r.fail("M001", f"a JSON-RPC batch at {conn.version}, which has none: {short(entry.raw)}")
                for msg in items(entry):
                    total += 1
                    self.message(msg, seen, asked)
        if total:
            for req, what in (
                ("M001", "every message is JSON-RPC 2.0"),
                ("M002", "every request id is a string or an integer"),
                ("M003", "no request id is null"),
                ("M004", "no request id was used twice on one connection"),
                ("M005", "every request has a method string"),
                ("M006", "every answer to the server carried the id of its request"),
                ("M007", "every answer has exactly one of result and error"),
                ("M008", "every error has an integer code and a string message"),
                ("M009", "no notification carries an id"),
                ("M010", "every notification has a method string"),
            ):
                if r.status(req) != "fail":
                    r.ok(req, f"{what} ({total} message(s))", "messages")
        self.batch()

    def message(self, msg: Any, seen: set[str], asked: set[str]) -> None:
        r = self.r
        shown = short(msg)
        if not judge_envelope(r, msg, shown, seen, _id_key, "on one connection"):
            return
        if json.dumps(msg.get("id")) not in asked:
            r.fail("M006", f"an answer whose id matches no request of the server: {shown}", "messages")
        judge_error(r, msg, shown)

    def batch(self) -> None:
        """M011 (batch scenario): the server's batch of two pings got both answers."""
        if not self.scenario.batch:
            return
        for conn in self.conns:
            sent = [e for e in conn.log if e.dir == "out" and isinstance(e.data, list)]
            if not sent:
                continue
            ids = {json.dumps(m.get("id")) for m in sent[0].data if isinstance(m, dict)}
            answered = {
                json.dumps(m.get("id"))
                for e in conn.incoming()
                if e.at >= sent[0].at
                for m in items(e)
                if isinstance(m, dict) and "method" not in m and "result" in m
            }
            if ids <= answered:
                self.r.ok("M011", "a batch of two pings from the server: both answered", "batch")
                continue
            pace = [json.dumps(m.get("id")) for e in conn.log if e.dir == "out" for m in items(e) if _is_pace(m)]
            alive = "; the ping sent just after it was answered" if set(pace) & answered else ""
            self.r.fail("M011", f"a batch of two pings from the server: {len(ids & answered)} of 2 answered{alive}")

    # ----------------------------------------------------------------------------------------------- stdio

    def lifecycle(self, conn: Conn) -> None:
        """M039-M041, M043, M044, M047, S013, S015, S017 and M082 for one handshake-era connection."""
        r = self.r
        reqs = requests_of(conn)
        init = next(((e, m) for e, m in reqs if m.get("method") == "initialize"), None)
        if init is None:
            return
        entry, msg = init
        # (a 2026-07-28 probe may come first: a dual-era client asks server/discover before it falls back)
        first = next((m for e, m in reqs if m.get("method") != "server/discover" and not is_modern(m)), None)
        if first is msg:
            r.ok("M039", f"connection {conn.no}: initialize came first", "lifecycle")
        else:
            r.fail("M039", f"connection {conn.no}: {short(first)} came before initialize", "lifecycle")
        if isinstance(entry.data, list):
            r.fail("M041", f"initialize inside a JSON-RPC batch: {short(entry.raw)}", "lifecycle")
        else:
            r.ok("M041", "initialize sent on its own, not in a batch", "lifecycle")
        params = obj(msg.get("params"))
        info = params.get("clientInfo")
        problems = []
        if not isinstance(params.get("protocolVersion"), str):
            problems.append("protocolVersion")
        if not isinstance(params.get("capabilities"), dict):
            problems.append("capabilities")
        if not names_itself(info):
            problems.append("clientInfo (name and version)")
        if problems:
            r.fail("M040", f"initialize without {', '.join(problems)}: {short(msg)}", "lifecycle")
        else:
            r.ok("M040", f"initialize with protocolVersion, capabilities and clientInfo {short(info, 80)}", "lifecycle")
        if isinstance(params.get("capabilities"), dict):
            r.ok("M047", f"client capabilities declared: {short(params['capabilities'], 120)}", "lifecycle")
        else:
            r.fail("M047", "initialize declares no capabilities object", "lifecycle")
        asked = params.get("protocolVersion")
        if asked in ALL_VERSIONS:
            r.ok("M044", f"requested {asked}, a revision of MCP", "version")
        else:
            r.fail("M044", f"requested {asked!r}, which is no MCP revision", "version")
        if asked == LATEST_HANDSHAKE:
            r.ok("S015", f"requested {asked}, the latest handshake revision", "version")
        else:
            r.warn("S015", f"requested {asked!r}; the latest handshake revision is {LATEST_HANDSHAKE}", "version")
        answered = conn.init_answered
        early = [
            m
            for e, m in reqs
            if answered is not None and entry.at < e.at < answered and m is not msg and m.get("method") != "ping"
        ]
        if early:
            r.fail("S013", f"a request before the initialize response: {short(early[0])}", "lifecycle")
        elif answered is not None:
            r.ok("S013", "no request but ping before the initialize response", "lifecycle")
        rest = [m for e, m in reqs if answered is not None and e.at > answered]
        initialized = notifications_of(conn, "notifications/initialized")
        if self.scenario.answer_version == "x":
            if initialized or rest:
                what = short(rest[0]) if rest else "notifications/initialized"
                r.fail("S017", f"after an unknown protocol version the client went on: {what}", "version")
            elif answered is not None:
                r.ok("S017", "after an unknown protocol version the client sent nothing more", "version")
        elif initialized and answered is not None and initialized[0][0].at < answered:
            r.fail("M043", "notifications/initialized came before the initialize response", "lifecycle")
        elif initialized:
            r.ok("M043", f"connection {conn.no}: notifications/initialized after the initialize response", "lifecycle")
        elif rest:
            r.fail("M043", f"requests without notifications/initialized first: {short(rest[0])}", "lifecycle")
        cancels = notifications_of(conn, "notifications/cancelled")
        if any((m.get("params") or {}).get("requestId") == msg.get("id") for _, m in cancels):
            r.fail("M082", "the client cancelled its initialize request", "lifecycle")
        elif answered is not None:
            r.ok("M082", "initialize was not cancelled", "lifecycle")

    def uninitialized(self, conn: Conn, first_init: float | None) -> None:
        """M039 for a connection that never initialized: a handshake-era request on it (not a 2026-07-28 one, nor
        the ``server/discover`` probe of a dual-era client) sent before any ``initialize`` of the run."""
        early = [
            m
            for e, m in requests_of(conn)
            if m.get("method") not in ("initialize", "server/discover")
            and not is_modern(m)
            and (first_init is None or e.at < first_init)
        ]
        if early:
            when = "and no initialize at all" if first_init is None else "before any initialize"
            self.r.fail("M039", f"connection {conn.no}: {short(early[0])} sent {when}", "lifecycle")

    # ------------------------------------------------------------------------------- answers to the server

    def answers(self, conn: Conn) -> None:
        """M079 (ping), M071-M073/A021 (roots), M076-M078 (sampling), S018 (answers follow the declaration)."""
        r = self.r
        out = [
            (e, m)
            for e in conn.log
            if e.dir == "out"
            for m in items(e)
            if isinstance(m, dict) and "method" in m and "id" in m
        ]
        replies = {
            json.dumps(m.get("id")): (e, m)
            for e in conn.incoming()
            for m in items(e)
            if isinstance(m, dict) and "method" not in m
        }
        caps = conn.client_caps
        # answers under an id the server never used (M006): a request "unanswered" may have been answered so
        strays = set(replies) - {json.dumps(m.get("id")) for _, m in out}
        if conn.probe is None:
            r.fail("S021", "after a notification of an unknown method and a stray answer the client stopped answering")
        elif conn.probe != "not sent":
            r.ok("S021", "after a notification of an unknown method and a stray answer the client answered a ping")
        batched = {
            json.dumps(m.get("id")) for e in conn.log if e.dir == "out" and isinstance(e.data, list) for m in e.data
        }
        cancelled = {json.dumps(c[1]) for c in _cancels(conn)}
        for sent_entry, req in out:
            method = req["method"]
            if json.dumps(req["id"]) in batched or str(req["id"]).endswith(("-probe", "-pace")):
                continue  # judged by M011 and S021 (-pace: the batch's pace, see ScriptedServer.ask_batch)
            got = replies.get(json.dumps(req["id"]))
            if json.dumps(req["id"]) in cancelled and (got is None or "result" not in got[1]):
                continue  # the server cancelled it: no answer (or an error) is what it asked for (S027, SX12)
            if got is None:
                if method == "ping":
                    r.fail("M079", f"ping {req['id']!r} got no answer within {ASK_TIMEOUT:.0f}s", "ping")
                elif (
                    method in DECLARED
                    and not strays
                    and (conn.closed_at is None or conn.closed_at - sent_entry.at >= ASK_TIMEOUT)
                ):
                    rid, cap = DECLARED[method]
                    r.fail(rid, f"{cap} declared but {method} {req['id']!r} got no answer within {ASK_TIMEOUT:.0f}s")
                continue
            entry, reply = got
            result = reply.get("result")
            if method == "ping":
                delay = entry.at - sent_entry.at
                if not isinstance(result, dict) or set(result) - {"_meta"}:
                    r.fail("M079", f"ping answered with {short(reply)} (must be an empty result)", "ping")
                elif delay > PROMPT:
                    r.fail("M079", f"ping answered after {delay:.1f}s", "ping")
                else:
                    r.ok("M079", f"ping answered with {{}} in {delay * 1000:.0f} ms", "ping")
            elif method == "roots/list":
                self.roots(reply, "roots" in caps)
            elif method == "sampling/createMessage":
                self.sampling(reply, "sampling" in caps)
            elif method == "elicitation/create":
                action = result.get("action") if isinstance(result, dict) else None
                if action in ("accept", "decline", "cancel"):
                    r.ok("S018", f"elicitation declared and answered ({action})", "capabilities")
                else:
                    r.fail("S018", f"elicitation declared but elicitation/create got {short(reply)}", "capabilities")
        for _, note in notifications_of(conn, "notifications/roots/list_changed"):
            declared = isinstance(caps.get("roots"), dict) and caps["roots"].get("listChanged") is True
            if declared:
                r.ok("M075", "notifications/roots/list_changed sent with roots.listChanged declared", "roots")
                r.ok("M074", "the client said its roots changed", "roots")
            else:
                r.fail("M075", f"notifications/roots/list_changed without roots.listChanged declared: {short(note)}")

    def cancelled_by_server(self, conn: Conn) -> None:
        """S027 and SX12 (the cancel scenario): a request the server cancelled gets no answer, and the client goes
        on answering. An answer that came after the ping sent after the cancellation was answered (or
        :data:`CANCEL_SLACK` after the cancellation) was made after the client read it; a result before may have
        crossed it (not judged). An error after the cancellation is its answer (the work was not failing before)."""
        r = self.r
        for at, rid, index in _cancels(conn):
            sent = next((m for e in conn.log if e.dir == "out" for m in items(e) if _is_request(m, rid)), None)
            what = f"{sent.get('method') if sent else 'request'} {rid!r}"
            probe = next(
                (m.get("id") for e in conn.log[index + 1 :] if e.dir == "out" for m in items(e) if _is_ping(m)), None
            )
            reply_at = next((i for i, e in enumerate(conn.log) if e.dir == "in" and _answers(e, rid)), None)
            probe_at = next((i for i, e in enumerate(conn.log) if e.dir == "in" and _answers(e, probe)), None)
            if probe is not None and probe_at is None:
                r.fail("S027", f"the client stopped answering pings after the server cancelled {what}", "cancellation")
            if reply_at is None:
                end = conn.closed_at if conn.closed_at is not None else conn.log[-1].at
                watched = max(0.0, end - at)
                r.ok("S027", f"{what} cancelled: no answer in the {watched:.1f}s watched after it", "cancellation")
                r.ok("SX12", f"no response to the cancelled {what}", "cancellation")
                continue
            entry = conn.log[reply_at]
            reply = next(m for m in items(entry) if isinstance(m, dict) and m.get("id") == rid)
            after = entry.at - at
            late = (probe_at is not None and reply_at > probe_at) or after > CANCEL_SLACK or "result" not in reply
            if not late:
                r.skip("S027", f"{what} was answered {after:.2f}s after its cancellation: the two crossed")
                r.skip("SX12", f"{what} was answered {after:.2f}s after its cancellation: the two crossed")
                continue
            if "result" in reply:
                r.fail(
                    "S027",
                    f"{what} answered with its result {after:.1f}s after notifications/cancelled (it kept processing):"
                    f" {short(reply, 160)}",
                    "cancellation",
                )
            else:
                r.ok("S027", f"{what} stopped when cancelled (it answered an error {after:.1f}s later)", "cancellation")
            r.fail("SX12", f"the cancelled {what} was answered: {short(reply, 160)}", "cancellation")

    def _answered(self, reply: JSON, declared: bool, req: str, area: str, method: str) -> JSON | None:
        """The result of a request the client declared it answers (``req``: a declared capability is answered),
        or None when it did not declare it or refused."""
        if not declared:
            return None
        result = reply.get("result")
        if not isinstance(result, dict):
            self.r.fail(req, f"{area} declared but {method} refused: {short(reply)}", area)
            return None
        self.r.ok(req, f"{area} declared and {method} answered", area)
        return result

    def roots(self, reply: JSON, declared: bool) -> None:
        r = self.r
        result = self._answered(reply, declared, "M071", "roots", "roots/list")
        if result is None:
            return
        roots = result.get("roots")
        if not isinstance(roots, list):
            r.fail("M072", f"roots/list result without a roots array: {short(result)}", "roots")
            return
        r.ok("M072", f"roots/list returned a roots array ({len(roots)} root(s))", "roots")
        bad = [x for x in roots if not isinstance(x, dict) or not isinstance(x.get("uri"), str)]
        if bad:
            r.fail("M073", f"root(s) without a uri: {short(bad[:2])}", "roots")
        elif roots:
            r.ok("M073", f"every root has a uri: {short([x['uri'] for x in roots][:3])}", "roots")
            if any("name" in x for x in roots):
                r.ok("A021", "roots carry names", "roots")

    def sampling(self, reply: JSON, declared: bool) -> None:
        r = self.r
        result = self._answered(reply, declared, "M076", "sampling", "sampling/createMessage")
        if result is None:
            return
        missing = [k for k in ("role", "content", "model") if k not in result]
        if missing:
            r.fail("M077", f"sampling result without {', '.join(missing)}: {short(result)}", "sampling")
        elif "stopReason" not in result:
            r.warn("M077", "sampling result without stopReason (M077 asks for it; the schema makes it optional)")
        else:
            r.ok("M077", f"sampling result with role, content, model and stopReason {result['stopReason']!r}")
        content = result.get("content")
        blocks = content if isinstance(content, list) else [content]
        kinds = [b.get("type") if isinstance(b, dict) else None for b in blocks]
        if all(k in ("text", "image", "audio") for k in kinds):
            r.ok("M078", f"sampling content of type(s) {', '.join(str(k) for k in kinds)}", "sampling")
        else:
            r.fail("M078", f"sampling content type(s) {kinds} (must be text, image or audio)", "sampling")

    # --------------------------------------------------------------------------------- the client's asking

    def requests(self) -> None:
        """S018: the client asks only for what the server declared; M083: progress tokens unique while active."""
        r = self.r
        undeclared = []
        for conn in self.conns:
            for _, msg in requests_of(conn):
                method = str(msg.get("method"))
                for cap, prefixes in SERVER_METHODS.items():
                    if method.startswith(prefixes) and cap not in ("tools",):
                        undeclared.append(method)
        if undeclared:
            r.fail("S018", f"the client called {undeclared[0]}, whose capability the server did not declare")
        elif any(requests_of(c) for c in self.conns):
            r.ok("S018", "the client called only methods of capabilities the server declared", "capabilities")
        tokens: dict[str, list[tuple[float, float]]] = {}
        for conn in self.conns:
            answers = {
                json.dumps(m.get("id")): e.at
                for e in conn.log
                if e.dir == "out"
                for m in items(e)
                if isinstance(m, dict) and "method" not in m
            }
            for entry, msg in requests_of(conn):
                token = (
                    ((msg.get("params") or {}).get("_meta") or {}).get("progressToken")
                    if isinstance(msg.get("params"), dict)
                    else None
                )
                if token is None:
                    continue
                end = answers.get(json.dumps(msg.get("id")), 1e18)
                tokens.setdefault(json.dumps(token), []).append((entry.at, end))
        clash = [
            t
            for t, spans in tokens.items()
            if any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(spans) for b in spans[i + 1 :])
        ]
        if clash:
            r.fail("M083", f"progress token {clash[0]} used by two requests active at once", "progress")
        elif tokens:
            r.ok("M083", f"{len(tokens)} progress token(s), each unique among the active requests", "progress")

    def pagination(self) -> None:
        """MX19-like opacity: a cursor the client sends is the one the server gave, unchanged."""
        r = self.r
        cursors = [
            (msg.get("params") or {}).get("cursor")
            for c in self.conns
            for _, msg in requests_of(c)
            if msg.get("method") == "tools/list" and isinstance(msg.get("params"), dict) and "cursor" in msg["params"]
        ]
        if not cursors:
            return
        wrong = [c for c in cursors if c != self.server.cursor]
        if wrong:
            r.fail("MX19", f"tools/list with cursor {wrong[0]!r}, not the server's nextCursor", "pagination")
        else:
            r.ok("MX19", f"followed nextCursor to page 2 with the cursor unchanged ({len(cursors)} time(s))")

    def cancellation(self) -> None:
        """M080, M081, A023 when the client cancels something."""
        r = self.r
        for conn in self.conns:
            sent = {json.dumps(m.get("id")) for _, m in requests_of(conn)}
            for _, note in notifications_of(conn, "notifications/cancelled"):
                params = obj(note.get("params"))
                if "requestId" not in params and conn.era != "modern":
                    r.fail("M080", f"notifications/cancelled without requestId: {short(note)}", "cancellation")
                    continue
                r.ok("M080", f"notifications/cancelled names request {params.get('requestId')!r}", "cancellation")
                if json.dumps(params.get("requestId")) in sent:
                    r.ok("M081", "the cancelled request is one the client sent", "cancellation")
                else:
                    r.fail("M081", f"a cancellation of a request the client never sent: {short(note)}")
                if isinstance(params.get("reason"), str):
                    r.ok("A023", f"cancellation reason: {short(params['reason'], 80)}", "cancellation")

    def mays(self) -> None:
        """A001/A002 (params on requests and notifications are optional), A003 (the client sends a batch)."""
        r = self.r
        reqs = [m for c in self.conns for _, m in requests_of(c)]
        notes = [m for c in self.conns for _, m in notifications_of(c)]
        for rid, sent, what in (("A001", reqs, "requests"), ("A002", notes, "notifications")):
            if not sent:
                continue
            bad = [m for m in sent if "params" in m and not isinstance(m["params"], (dict, list))]
            if bad:
                r.fail(rid, f"{what} with params that are neither an object nor an array: {short(bad[0])}")
            else:
                with_params = sum(1 for m in sent if "params" in m)
                r.ok(rid, f"{with_params} of {len(sent)} {what} carry params (an object)", "envelope")
        batches = [e for c in self.conns for e in c.incoming() if isinstance(e.data, list)]
        if batches:
            r.ok("A003", f"the client sent {len(batches)} batch(es)", "envelope")
        else:
            r.skip("A003", "the client sends no batches (optional)", "envelope")

    # ---------------------------------------------------------------------------------------- 2026-07-28


def _cancels(conn: Conn) -> list[tuple[float, Any, int]]:
    """(when, request id, log index) of every ``notifications/cancelled`` the server sent on ``conn``."""
    return [
        (e.at, m["params"].get("requestId"), i)
        for i, e in enumerate(conn.log)
        if e.dir == "out"
        for m in items(e)
        if isinstance(m, dict) and m.get("method") == "notifications/cancelled" and isinstance(m.get("params"), dict)
    ]


def _is_request(msg: Any, rid: Any) -> bool:
    return isinstance(msg, dict) and "method" in msg and msg.get("id") == rid


def _is_pace(m: Any) -> bool:
    """The ping the server sends just after its batch (ScriptedServer.ask_batch)."""
    return isinstance(m, dict) and m.get("method") == "ping" and str(m.get("id")).endswith("-pace")


def _is_ping(msg: Any) -> bool:
    return isinstance(msg, dict) and msg.get("method") == "ping" and "id" in msg


def _answers(entry: Any, rid: Any) -> bool:
    return rid is not None and any(
        isinstance(m, dict) and "method" not in m and m.get("id") == rid for m in items(entry)
    )


def _id_key(rid: Any) -> str:
    return json.dumps(rid, sort_keys=True)
