"""Cancellation, progress notifications and list_changed notifications."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

from ..wire import Incoming, Wire
from ._base import (
    SLOW_TOOL,
    CheckerBase,
    result_of,
    sample_arguments,
    shortened,
)

CANCEL_WATCH = 2.5  # seconds the checker watches a cancelled request for a response or more progress (at most)
CANCEL_SLACK = 1.0  # an answer this long after the cancellation was made after it (when its order is not known)


class UtilityChecks(CheckerBase):
    """Cancellation, progress notifications and list_changed notifications."""

    async def check_cancellation(self, wire: Wire) -> None:
        r = self.report
        slow = next(
            (t for t in self.tools if isinstance(t, dict) and SLOW_TOOL.search(str(t.get("name")))),
            None,
        )
        if slow is None:
            r.skip("S027", "no slow/long-running tool to cancel")
            r.skip("SX12", "no slow/long-running tool to cancel")
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
            r.skip("S027", f"{slow['name']} {shortened(args)} finished before it could be cancelled")
            r.skip("SX12", f"{slow['name']} {shortened(args)} finished before it could be cancelled")
            self.progress_tokens[token] = fut.result()
            return
        cancelled_at = time.monotonic()
        await wire.notify("notifications/cancelled", {"requestId": rid, "reason": "mcpkit check: cancellation test"})
        # a request sent after the cancellation marks when the server has read it: progress recorded after its
        # answer was made after that (clock times would say so only on a machine that is not busy)
        probe = await self.call(wire, "server/discover" if self.feats.modern else "ping")
        mark = next((i for i, inc in enumerate(wire.incoming) if inc is probe), len(wire.incoming))
        # the watch ends early once the request is answered, or (HTTP) its response stream closed: progress for it
        # goes on that stream only, so nothing more of it can come
        watch = time.monotonic()
        await asyncio.wait({fut}, timeout=CANCEL_WATCH)
        watched = time.monotonic() - watch
        late = [
            inc
            for inc in wire.incoming[mark + 1 :]
            if isinstance(inc.data, dict)
            and inc.data.get("method") == "notifications/progress"
            and (inc.data.get("params") or {}).get("progressToken") == token
        ]
        self.progress_tokens[token] = None
        answer = fut.result() if fut.done() else None
        ended_without_response = answer is not None and answer.error is not None  # HTTP: the stream just closed
        if answer is not None and not ended_without_response:
            after = answer.at - cancelled_at
            answered_late = wire.incoming.index(answer) > mark if answer in wire.incoming else after > CANCEL_SLACK
            if result_of(answer) is not None and answered_late:
                r.fail(
                    "S027",
                    f"{slow['name']} was answered {after:.1f}s after notifications/cancelled with its result (it kept "
                    f"processing): {answer.short(160)}",
                    "cancellation",
                )
            else:
                r.ok("S027", f"{slow['name']} stopped at once when cancelled ({after:.1f}s)", "cancellation")
            r.fail("SX12", f"the cancelled {slow['name']} was answered: {answer.short(160)}", "cancellation")
        elif len(late) >= 2:
            r.fail(
                "S027",
                f"tools/call {slow['name']} {shortened(args)} with progressToken {token!r}, cancelled after "
                f"{cancelled_at - t0:.1f}s: {len(late)} progress notification(s) after the cancellation was read: "
                f"{late[0].short()}",
                "cancellation",
            )
        else:
            until = f"until its response stream was closed ({watched:.1f}s)" if ended_without_response else ""
            r.ok(
                "S027",
                f"{slow['name']} {shortened(args)} cancelled after {cancelled_at - t0:.1f}s: "
                + "no response and no progress "
                + (until or f"in the next {CANCEL_WATCH:g}s"),
                "cancellation",
            )
            quiet = until or f"in {CANCEL_WATCH:g}s"
            r.ok("SX12", f"no response to the cancelled {slow['name']} {quiet}", "cancellation")
        wire.forget(rid)
        ping = await self.call(wire, "ping")
        if result_of(ping) is None:
            r.fail("S027", "the server stopped answering pings after a cancellation", "cancellation")

    def check_progress(self, wire: Wire) -> None:
        r = self.report
        tokens = self.progress_tokens
        by_token: dict[Any, list[Incoming]] = {}
        seen: set[str] = set()
        for n in wire.notifications:
            if n.channel == "http-replay" or (n.channel == "http-get" and n.raw in seen):
                continue  # a replay we asked for, or a copy on the GET stream (M027 judges that), not new progress
            seen.add(n.raw)
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
                r.ok("A025", f"progress carries total/message: {shortened(params0)}", "progress")

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
                r.ok(req, f"{cap}.listChanged not declared, and no {method} sent", "capabilities")
        logs = [
            n
            for n in wire.notifications
            if isinstance(n.data, dict) and n.data.get("method") == "notifications/message"
        ]
        if logs and "logging" not in self.caps:
            r.fail("M087", f"notifications/message sent without the logging capability: {logs[0].short()}")
