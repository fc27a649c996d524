"""Streamable HTTP, one session: status codes and content types, the GET stream, SSE streams and their event ids,
resumption with ``Last-Event-ID``, the session and version headers, and how HTTP-level protocol errors are met."""

from __future__ import annotations

import json
import re
from typing import Any

from ...protocol.versions import META_PROTOCOL_VERSION, features, is_supported
from ..wire import Incoming
from ..wire_http import HttpExchange, HttpWire
from ._base import UNKNOWN_VERSION, CheckerBase, shortened

BAD_ORIGIN = "http://mcpkit-check.invalid"

_VISIBLE_ASCII = re.compile(r"[\x21-\x7e]+")


def _msg_key(inc: Incoming) -> str | None:
    """What identifies one JSON-RPC message across streams: a response by its id (ours, unique), a server request or
    a progress notification by its whole text (two identical ones on two streams look the same as one message sent
    twice)."""
    msg = inc.data
    if not isinstance(msg, dict):
        return None
    if "method" in msg and "id" in msg:  # (by its whole text: the server may reuse an id, M004 judges that)
        return "request " + json.dumps(msg, sort_keys=True)
    if "method" not in msg and msg.get("id") is not None:  # (id-less error answers are each their own)
        return "response " + json.dumps(msg["id"])
    if msg.get("method") == "notifications/progress":
        return "notification " + json.dumps(msg, sort_keys=True)
    return None


def _decoded(text: str) -> Incoming:
    try:
        return Incoming(text, json.loads(text))
    except (ValueError, RecursionError):
        return Incoming(text, None, "not JSON")


def _is_request_post(e: HttpExchange) -> bool:
    return e.method == "POST" and isinstance(e.sent, dict) and "id" in e.sent and "method" in e.sent


def _answers(e: HttpExchange) -> bool:
    """The exchange carried the response to the request it POSTed."""
    rid = e.sent.get("id") if isinstance(e.sent, dict) else None
    return any(isinstance(m.data, dict) and "method" not in m.data and m.data.get("id") == rid for m in e.messages)


class HttpChecks(CheckerBase):
    """Streamable HTTP rules seen on one session (the checker's main handshake-era session)."""

    async def check_http(self, wire: HttpWire) -> None:
        """The HTTP rules of the main session, from what its exchanges showed, plus probes on it."""
        r = self.report
        self.judge_content_types(wire)
        await self.judge_get_stream(wire)
        init = next(
            (e for e in wire.exchanges if isinstance(e.sent, dict) and e.sent.get("method") == "initialize"), None
        )
        gets = [e for e in wire.exchanges if e.method == "GET"]
        get = gets[0] if gets else None
        if init is not None and init.status == 200 and get is not None and get.status in (200, 405):
            r.ok("M018", f"one endpoint {wire.url}: POST works, GET -> {get.status}", "http")
        elif init is not None:
            r.fail("M018", f"POST initialize -> {init.status}, GET -> {get.status if get else 'not tried'}", "http")
        await wire.settle()
        self.judge_sse_streams(wire)
        self.judge_event_ids(wire)
        await self.judge_resumption(wire)
        self.judge_one_stream_per_message(wire)
        await self.judge_http_errors(wire)
        await self.judge_session_headers(wire)

    async def check_stateless_http(self, wire: HttpWire) -> None:
        """For a server that speaks only 2026-07-28 (no handshake session to judge them in), the Streamable HTTP
        rules that revision keeps, on its stateless requests: MX01 (a foreign Origin: 403), M023 and M022 (what a
        POST gets), S002/S003/S004/A005/A008 (a request's SSE stream), M027 (each message on one stream), S021 and
        MX03 (wrong headers: a 4xx, an unsupported MCP-Protocol-Version: 400). Sessions, the GET stream and
        resumption are not part of that revision: nothing is asked of them."""
        r = self.report
        probe = {"jsonrpc": "2.0", "id": wire.new_id(), "method": "server/discover", "params": wire.with_meta({})}
        ex = await wire.post(probe, headers={"Origin": BAD_ORIGIN})
        if ex.status == 403:
            r.ok("MX01", f"server/discover with Origin: {BAD_ORIGIN} -> 403", "http origin")
        else:
            r.fail("MX01", f"server/discover with Origin: {BAD_ORIGIN} -> {ex.brief(120)} (must be 403)", "http")
        self.judge_content_types(wire)
        await wire.settle()
        self.judge_sse_streams(wire)
        self.judge_one_stream_per_message(wire)
        await self.judge_http_errors(wire)

    def judge_content_types(self, wire: HttpWire) -> None:
        """M023 (a request POST gets JSON or SSE) and M022 (a notification or response POST gets 202, no body)."""
        r = self.report
        posts = [e for e in wire.exchanges if _is_request_post(e) and e.status == 200]
        bad = [e for e in posts if e.content_type not in ("application/json", "text/event-stream")]
        if bad:
            method = bad[0].sent.get("method") if isinstance(bad[0].sent, dict) else "?"
            r.fail("M023", f"POST {method} answered with Content-Type {bad[0].headers.get('content-type')!r}", "http")
        elif posts:
            kinds = sorted({e.content_type for e in posts})
            r.ok("M023", f"{len(posts)} request POSTs answered with {', '.join(kinds)}", "http")
        quiet = [
            e
            for e in wire.exchanges
            if e.method == "POST" and isinstance(e.sent, dict) and ("method" not in e.sent or "id" not in e.sent)
        ]
        for e in quiet:
            sent = e.sent if isinstance(e.sent, dict) else {}
            what = f"notification {sent['method']}" if "method" in sent else f"response to {sent.get('id')!r}"
            if e.status == 202 and not e.body.strip():
                r.ok("M022", f"POST {what} -> 202 with no body", "http")
            elif e.status == 202:
                r.fail("M022", f"POST {what} -> 202 with a body: {shortened(e.body, 100)!r}", "http")
            elif 400 <= e.status < 500:
                r.ok("M022", f"POST {what} refused with HTTP {e.status} (allowed when not accepted)", "http")
            else:
                r.fail("M022", f"POST {what} -> HTTP {e.status} (must be 202 with no body): {e.brief(100)}", "http")

    async def judge_get_stream(self, wire: HttpWire) -> None:
        """M025 (GET: an SSE stream or 405), M026 (no responses on it), A007 (requests/notifications on it)."""
        r = self.report
        get = await wire.get(read_for=0.5)
        if get.status == 405:
            r.ok("M025", "GET -> 405 Method Not Allowed", "http GET")
            r.skip("A007", "the server offers no GET stream (405); its POST streams are judged by A005")
        elif get.status == 200 and get.is_sse:
            r.ok("M025", "GET -> 200 text/event-stream", "http GET")
            responses = [m for m in get.messages if isinstance(m.data, dict) and "method" not in m.data]
            if responses:
                r.fail("M026", f"a JSON-RPC response on the standalone GET stream: {responses[0].short()}", "http GET")
            else:
                r.ok("M026", "no responses on the standalone GET stream", "http GET")
            if get.messages:
                r.ok("A007", f"{len(get.messages)} message(s) on the GET stream: {get.messages[0].short(120)}")
            else:
                r.skip("A007", "the server sent nothing on the GET stream while it was open (allowed)")
        else:
            r.fail("M025", f"GET -> {get.brief()} (must be text/event-stream or 405)", "http GET")
        wrong = await wire.get(headers={"Accept": "application/json"}, read_for=0.3)
        if wrong.status >= 500 or wrong.status == 0:
            r.fail("S021", f"GET without text/event-stream in Accept -> {wrong.brief(100)}", "http GET")

    def judge_sse_streams(self, wire: HttpWire) -> None:
        """S002/S003 (a POST's SSE stream carries its response and is not closed before it), S004 (what comes before
        the response relates to the request), A005 (messages before the response), A008 (streams closed)."""
        r = self.report
        streams = [e for e in wire.exchanges if _is_request_post(e) and e.status == 200 and e.is_sse]
        if not streams:
            for req in ("S002", "S003", "S004", "A005", "A008"):
                r.skip(req, "the server answered every request POST with application/json (no SSE stream)")
        for e in streams:
            method = e.sent.get("method")
            if wire.key(e.sent.get("id")) in wire.cancelled:
                pass  # we cancelled it: no response is due
            elif _answers(e):
                r.ok("S002", f"the SSE stream of {method} carried its response", "http SSE")
                r.ok("S003", f"the SSE stream of {method} stayed open until its response", "http SSE")
            elif e.error is None and e.ended and not (e.events and e.events[-1].id and e.retry is not None):
                r.fail("S003", f"the SSE stream of {method} ended before its response: {shortened(e.body, 160)!r}")
                r.fail("S002", f"the SSE stream of {method} carried no response", "http SSE")
            token = ((e.sent.get("params") or {}).get("_meta") or {}).get("progressToken")
            before = [m for m in e.messages if isinstance(m.data, dict) and "method" in m.data]
            unrelated = [
                m
                for m in before
                if m.data.get("method") == "notifications/progress"
                and (m.data.get("params") or {}).get("progressToken") != token
            ]
            if unrelated:
                r.fail("S004", f"progress for another request on the stream of {method}: {unrelated[0].short(160)}")
            elif before:
                r.ok("S004", f"{len(before)} message(s) before the response of {method} relate to it", "http SSE")
                r.ok("A005", f"{method}: {before[0].short(120)} came before the response", "http SSE")
            if e.ended:
                r.ok("A008", f"the server closed the SSE stream of {method} after {len(e.events)} event(s)", "http SSE")
        self.judge_streams_closed(streams)
        if streams and not any(isinstance(m.data, dict) and "method" in m.data for e in streams for m in e.messages):
            r.skip("S004", "no message came before a response on any SSE stream")
            r.skip("A005", "no message came before a response on any SSE stream")

    def judge_streams_closed(self, streams: list[HttpExchange]) -> None:
        """SX13: once a POST's SSE stream has carried the response it owes, the server closes it (every Streamable
        HTTP revision: "after the JSON-RPC response has been sent, the server SHOULD close/terminate the SSE
        stream"). A stream still open :data:`~..wire_http.STREAM_GRACE` after its response fails; the long-lived
        answer of ``subscriptions/listen`` (2026-07-28) is meant to stay open and is not judged."""
        r = self.report
        judged = [e for e in streams if e.sent.get("method") != "subscriptions/listen"]
        held = [e for e in judged if e.held_open is not None]
        closed = [e for e in judged if e.ended and _answers(e)]
        if held:
            e = held[0]
            r.fail(
                "SX13",
                f"{len(held)} of {len(judged)} answered SSE stream(s) left open: the stream of {e.sent.get('method')} "
                f"was still open {e.held_open or 0:.1f}s after its response (the checker hung up)",
                "http SSE",
            )
        elif closed:
            r.ok("SX13", f"every SSE stream was closed after its response ({len(closed)} stream(s))", "http SSE")

    def judge_event_ids(self, wire: HttpWire) -> None:
        """A011: SSE event ids, when the server puts them, unique across the session's streams."""
        r = self.report
        streams = [e for e in wire.exchanges if _is_request_post(e) and e.status == 200 and e.is_sse]
        ids: dict[str, str] = {}
        duplicates = []
        for e in wire.exchanges:
            if e.request_headers.get("Last-Event-ID"):
                continue  # a replay repeats ids by design
            for ev in e.events:
                if ev.id:
                    stream = f"{e.method} {e.sent.get('method') if isinstance(e.sent, dict) else ''}".strip()
                    if ev.id in ids and ids[ev.id] != stream + str(id(e)):
                        duplicates.append(ev.id)
                    ids[ev.id] = stream + str(id(e))
        if duplicates:
            r.fail("A011", f"SSE event id(s) used twice within one session: {duplicates[:3]}", "http SSE")
        elif ids:
            r.ok("A011", f"{len(ids)} SSE event id(s), unique across the session's streams", "http SSE")
        elif streams:
            r.skip("A011", "the server puts no ids on its SSE events (no resumption)")

    async def judge_resumption(self, wire: HttpWire) -> None:
        """A012: resume a finished POST stream from its first event id; what comes back must be that stream's later
        messages (M026 allows the response on a GET only then). MX06: never another stream's (a MUST NOT of the
        resumption rules, which A012, a MAY, cannot carry: a server replaying every stream failed only a MAY)."""
        r = self.report

        def skip(why: str) -> None:
            for req in ("A012", "MX06"):
                r.skip(req, why)

        candidates = [
            e
            for e in wire.exchanges
            if _is_request_post(e) and e.is_sse and _answers(e) and any(ev.id for ev in e.events)
        ]
        if not candidates:
            skip("no SSE stream with event ids to resume")
            return
        e = max(candidates, key=lambda x: len(x.messages))
        at = next(i for i, ev in enumerate(e.events) if ev.id)
        first = e.events[at]
        later = {k for ev in e.events[at + 1 :] if ev.data.strip() for k in [_msg_key(_decoded(ev.data))] if k}
        if not later:
            skip(f"the stream of {e.sent.get('method')} has no message after its first event id to replay")
            return
        ex = await wire.get(headers={"Last-Event-ID": first.id}, read_for=2.0)
        if ex.status != 200 or not ex.is_sse:
            skip(f"GET with Last-Event-ID {first.id!r} -> {ex.brief(100)}: the server does not replay")
            return
        replayed = {_msg_key(m) for m in ex.messages if _msg_key(m)}
        foreign = replayed - later - {None}
        if foreign:
            what = (
                f"resuming the stream of {e.sent.get('method')} from {first.id!r} (GET with Last-Event-ID) replayed "
                f"messages of another stream: {sorted(k for k in foreign if k)[:3]}"
            )
            r.fail("A012", what, "http resume")
            r.fail("MX06", what, "http resume")
            return
        r.ok("MX06", f"GET with Last-Event-ID {first.id!r} replayed only messages of the stream it resumed", "http")
        if replayed >= later:
            r.ok("A012", f"GET with Last-Event-ID {first.id!r} replayed the {len(later)} later message(s)", "http")
            r.ok("M026", "a response on a GET stream only when resuming (Last-Event-ID)", "http resume")
        else:
            r.fail(
                "A012",
                f"GET with Last-Event-ID {first.id!r} -> 200 but replayed {len(replayed)} of the {len(later)} "
                f"later message(s) of that stream: {ex.brief(120)}",
                "http resume",
            )

    def judge_one_stream_per_message(self, wire: HttpWire) -> None:
        """M027: no message of the server is sent on two of the session's streams (replays we asked for aside). A
        response (to our own unique id) or a progress notification is one message wherever it shows. A request of
        the server carries an id the server chose: the same request on another stream is that one message only when
        that stream was already open as it was first sent (a broadcast); on a stream opened later it was sent anew,
        as a new request reusing an id (M004 judges that), e.g. a server without sessions asking two tool calls the
        same question, each numbered from 0."""
        r = self.report
        seen: dict[str, list[tuple[int, float]]] = {}
        shown: dict[str, str] = {}
        streams = 0
        for n, e in enumerate(wire.exchanges):
            if e.request_headers.get("Last-Event-ID") or not e.messages:
                continue
            streams += 1
            for m in e.messages:
                key = _msg_key(m)
                if key is not None:
                    seen.setdefault(key, []).append((n, m.at))
                    shown.setdefault(key, m.short(120))
        twice = []
        for key, where in seen.items():
            first, at = min(where, key=lambda x: x[1])
            others = {n for n, _ in where if n != first}
            if key.startswith("request "):
                others = {n for n in others if wire.exchanges[n].started <= at}
            if others:
                twice.append(key)
        if twice:
            r.fail("M027", f"the same message on two streams: {shown[twice[0]]}", "http streams")
        elif streams > 1:
            r.ok("M027", f"{len(seen)} messages over {streams} responses and streams, each on one only", "http")

    async def judge_http_errors(self, wire: HttpWire) -> None:
        """S021 at the HTTP level: a POST with a wrong Accept or Content-Type is refused with a 4xx (or served),
        never a 5xx, and the session goes on. MX03: an unsupported MCP-Protocol-Version header gets 400."""
        r = self.report
        ping: dict[str, Any] = {"jsonrpc": "2.0", "id": wire.new_id(), "method": "ping"}
        if wire.modern_meta is not None:  # (2026-07-28: every request carries its _meta; discover is its probe)
            ping = {**ping, "method": "server/discover", "params": wire.with_meta({})}
        for label, headers in (
            ("Accept: text/html", {"Accept": "text/html"}),
            ("Content-Type: text/plain", {"Content-Type": "text/plain"}),
        ):
            ex = await wire.post(dict(ping, id=wire.new_id()), headers=headers)
            if ex.status == 0 or ex.status >= 500:
                r.fail("S021", f"POST with {label} -> {ex.brief(120)}", "http errors")
            else:
                r.ok("S021", f"POST with {label} -> HTTP {ex.status}", "http errors")
        if wire.modern_meta is not None:
            meta = {**(wire.modern_meta or {}), META_PROTOCOL_VERSION: UNKNOWN_VERSION}
            ex = await wire.post({**ping, "id": wire.new_id(), "params": {"_meta": meta}})
            codes = [m.data["error"].get("code") for m in ex.messages if isinstance(m.data, dict) and "error" in m.data]
            if ex.status == 400:
                r.ok("MX03", f"MCP-Protocol-Version: {UNKNOWN_VERSION} -> 400 {codes}", "http version header")
            else:
                r.fail("MX03", f"MCP-Protocol-Version: {UNKNOWN_VERSION} -> {ex.brief(120)} (must be 400)", "http")
        elif (v := wire.protocol_version) is not None and is_supported(v) and features(v).protocol_version_header:
            ex = await wire.post(dict(ping, id=wire.new_id()), headers={"MCP-Protocol-Version": "1999-01-01"})
            if ex.status == 400:
                r.ok("MX03", "MCP-Protocol-Version: 1999-01-01 -> 400", "http version header")
            else:
                r.fail("MX03", f"MCP-Protocol-Version: 1999-01-01 -> {ex.brief(120)} (must be 400)", "http")
        else:
            r.skip("MX03", f"the session runs at {wire.protocol_version}, before the MCP-Protocol-Version header")
        check = await wire.post(dict(ping, id=wire.new_id()))
        if check.status != 200:
            r.fail("S021", f"the session stopped working after refused POSTs: ping -> {check.brief(120)}", "http")

    async def judge_session_headers(self, wire: HttpWire) -> None:
        """A013/M028 (the session id) and S006 (a request without it gets 400)."""
        r = self.report
        sid = wire.session_id
        if sid is None:
            r.skip("A013", "the server assigns no Mcp-Session-Id (allowed)")
            for req in ("M028", "S005", "S006", "MX02", "A014", "A015"):
                r.skip(req, "the server assigns no Mcp-Session-Id")
            return
        r.ok("A013", f"Mcp-Session-Id assigned on the initialize response ({len(sid)} characters)", "http session")
        if _VISIBLE_ASCII.fullmatch(sid):
            r.ok("M028", f"Mcp-Session-Id {sid!r} is visible ASCII", "http session")
        else:
            r.fail("M028", f"Mcp-Session-Id {sid!r} has characters outside 0x21-0x7E", "http session")
        ex = await wire.post(
            {"jsonrpc": "2.0", "id": wire.new_id(), "method": "tools/list", "params": {}},
            headers={"Mcp-Session-Id": ""},
        )
        if ex.status == 400:
            r.ok("S006", "POST without Mcp-Session-Id -> 400", "http session")
        else:
            r.fail("S006", f"POST without Mcp-Session-Id -> {ex.brief(100)} (expected 400)", "http session")
