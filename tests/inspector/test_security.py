"""The inspector's page under attack: a hostile server's strings render as text and run nothing (in a real headless
Chromium, with the page's CSP on and, to prove the page itself never parses them, off); and nobody but the page
opened with the run's token may use its API: another origin, a rebinding Host, a missing or wrong token are
refused on every route, the event stream included."""

from __future__ import annotations

import http.server
import json
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mcpkit.inspector.events import EventHub
from support.browser import (
    FLOOD,
    TWO_FRAMES,
    InspectorProcess,
    InspectorThread,
    chromium,
    log_drawn,
    log_messages,
    open_inspector,
    screenshot,
)
from support.paths import REPO

ROOT = REPO
HOSTILE = f"{sys.executable} {ROOT / 'tests' / 'support' / 'servers' / 'hostile_inspector_server.py'}"
EVERYTHING = str(ROOT / "examples" / "everything.py")

# Any element with an event-handler attribute, or a URL attribute that would run script (data-* attributes holding a
# server's text are inert and allowed).
NO_HANDLERS = r"""() => [...document.querySelectorAll('*')].flatMap(el => [...el.attributes].filter(a =>
    a.name.toLowerCase().startsWith('on') ||
    (['href', 'src', 'action', 'formaction', 'xlink:href', 'srcdoc'].includes(a.name.toLowerCase()) &&
     !/^(data:(image|audio)\/|blob:|\/static\/|#main$)/i.test(a.value.trim())))
  .map(a => el.tagName + ' ' + a.name + '=' + a.value))"""


@pytest.fixture(scope="module")
def everything() -> Iterator[InspectorProcess]:
    proc = InspectorProcess("inspect", EVERYTHING)
    try:
        yield proc
    finally:
        proc.stop()


# ---------------------------------------------------------------------------------------------- the API's gate


def test_the_api_refuses_other_origins_rebinding_hosts_and_missing_or_wrong_tokens(
    everything: InspectorProcess,
) -> None:
    base, token = everything.base, everything.token
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    port = base.rsplit(":", 1)[1]
    with httpx.Client(timeout=10) as http:
        ok = http.post(f"{base}/api/state", headers=auth, content=b"{}")  # the control: the right token, no Origin
        assert ok.status_code == 200 and ok.json()["result"]["target"]
        same = http.post(f"{base}/api/state", headers={**auth, "Origin": base}, content=b"{}")
        assert same.status_code == 200
        for origin in ("http://evil.example", "http://localhost:1", f"http://127.0.0.1:{int(port) + 1}", "null"):
            for method, path in (("GET", "/"), ("GET", "/api/events"), ("POST", "/api/call"), ("POST", "/api/answer")):
                r = http.request(
                    method,
                    f"{base}{path}",
                    headers={**auth, "Origin": origin},
                    content=b"{}" if method == "POST" else None,
                )
                assert r.status_code == 403, (origin, path, r.status_code)
        r = http.request("OPTIONS", f"{base}/api/call", headers={"Origin": "http://evil.example"})
        assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
        assert http.get(f"{base}/", headers={"Host": "evil.example"}).status_code == 403
        assert (
            http.post(f"{base}/api/state", headers={**auth, "Host": f"evil.example:{port}"}, content=b"{}").status_code
            == 403
        )
        assert (
            http.post(f"{base}/api/state", headers={**auth, "Sec-Fetch-Site": "cross-site"}, content=b"{}").status_code
            == 403
        )
        assert (
            http.post(f"{base}/api/state", content=b"{}", headers={"Content-Type": "application/json"}).status_code
            == 401
        )
        wrong = {**auth, "Authorization": "Bearer " + ("x" * len(token))}
        assert http.post(f"{base}/api/state", headers=wrong, content=b"{}").status_code == 401
        assert http.get(f"{base}/api/events", headers={"Authorization": "Bearer nope"}).status_code == 401
        plain = {**auth, "Content-Type": "text/plain"}
        assert http.post(f"{base}/api/call", headers=plain, content=b'{"name":"echo"}').status_code == 415
        assert http.get(f"{base}/static/../session.py").status_code == 404
        assert http.get(f"{base}/static/session.py").status_code == 404
        page = http.get(f"{base}/")
        assert page.status_code == 200
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe" not in csp
        assert page.headers["x-frame-options"] == "DENY" and page.headers["x-content-type-options"] == "nosniff"
        assert http.get(f"{base}/static/app.js").headers["content-type"].startswith("text/javascript")
        log = http.post(f"{base}/api/log", headers=auth, content=b"{}").json()["result"]["entries"]
        assert not [e for e in log if e["method"] == "tools/call"]  # none of the refused calls reached the server
    with httpx.Client(timeout=30) as http:  # (its own connection: the server closes it after a 413)
        big = http.post(f"{base}/api/state", headers=auth, content=b"x" * (8 * 1024 * 1024 + 1))
        assert big.status_code == 413


class _OtherSite(http.server.BaseHTTPRequestHandler):
    page = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_page_on_another_origin_cannot_call_tools_or_answer_even_with_the_token(everything: InspectorProcess) -> None:
    base, token = everything.base, everything.token
    _OtherSite.page = f"""<!doctype html><script>
    window.results = [];
    const tryIt = (path, body, headers) => fetch("{base}" + path, {{method: "POST", body, headers}})
        .then(r => window.results.push(path + " " + r.status)).catch(e => window.results.push(path + " blocked"));
    Promise.all([
      tryIt("/api/call", '{{"name":"echo","arguments":{{"text":"from evil"}}}}',
            {{"Content-Type": "application/json", "Authorization": "Bearer {token}"}}),
      tryIt("/api/call", '{{"name":"echo","arguments":{{"text":"simple"}}}}', {{"Content-Type": "text/plain"}}),
      tryIt("/api/answer", '{{"id":"ask-1","answer":{{"action":"accept"}}}}', {{"Content-Type": "text/plain"}}),
    ]).then(() => window.done = true);
    </script>""".encode()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OtherSite)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with chromium() as browser:
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/")
            page.wait_for_function("window.done === true", timeout=15_000)
            results = page.evaluate("window.results")
    finally:
        server.shutdown()
        server.server_close()
    assert results and all(r.endswith(("blocked", "403")) for r in results), results
    with httpx.Client(timeout=10) as http_client:
        auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        log = http_client.post(f"{base}/api/log", headers=auth, content=b"{}").json()["result"]["entries"]
    assert not [e for e in log if e["method"] == "tools/call"]


# ---------------------------------------------------------------------------------------------- a hostile server


@pytest.fixture
def hostile() -> Iterator[InspectorProcess]:
    proc = InspectorProcess("inspect", HOSTILE, "--mode", "auto")
    try:
        yield proc
    finally:
        proc.stop()


@pytest.mark.parametrize("csp", ["csp-on", "csp-off"])
def test_hostile_names_descriptions_and_results_render_as_text_and_run_nothing(
    hostile: InspectorProcess, csp: str
) -> None:
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=csp == "csp-off")
        page = context.new_page()
        dialogs: list[str] = []
        popups: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        context.on("page", lambda p: popups.append(p.url))
        page.goto(hostile.url)
        page.locator("#status-text", has_text="connected").wait_for(timeout=20_000)
        first = page.locator("#tools-list button").first
        first.wait_for(timeout=20_000)
        assert "<script>window.__pwned='title'</script>" in first.text_content()
        assert "<script>window.__pwned='server-name'</script>" in page.text_content("#server-name")
        first.click()
        detail = page.text_content("#tool-detail")
        assert "<img src=x onerror=\"window.__pwned='name'\">" in detail
        assert "<img src=x onerror=\"window.__pwned='field-help'\">" in detail
        page.click("#call-button")
        done = page.locator(".call[data-status='done']")
        done.wait_for(timeout=20_000)
        text = done.text_content()
        assert "<script>window.__pwned='result'</script>" in text
        assert "<script>window.__pwned='embedded'</script>" in text
        assert "window.__pwned='structured'" in text
        assert done.locator("img").count() == 0  # neither image is a valid image: text/html, a MIME with a quote
        assert "not shown" in text
        # a resource_link to javascript: is read through MCP on request, never navigated to
        done.locator("button", has_text="Read it").click()
        page.locator("#resource-detail .contents, #resource-detail .banner").first.wait_for(timeout=10_000)
        # structured content that does not match the tool's outputSchema is shown, and said so; audio plays
        page.click("#tab-tools")
        page.click("#tools-list button[data-key='mismatch']")
        page.click("#call-button")
        checked = page.locator(".call[data-status='done']", has_text="mismatch")
        checked.wait_for(timeout=20_000)
        assert "does not match its outputSchema" in checked.locator(".validation").text_content()
        assert checked.locator("audio").get_attribute("src").startswith("data:audio/wav;base64,")
        # a URL elicitation to javascript: is shown, never opened
        page.click("#tools-list button[data-key='phish']")
        page.click("#call-button")
        ask = page.locator(".ask[data-kind='elicitation']")
        ask.wait_for(timeout=20_000)
        assert "javascript:window.__pwned='url'" in ask.text_content()
        assert ask.locator("button", has_text="Open the link").is_disabled()
        assert "not an http(s) link" in ask.text_content()
        screenshot(page, f"hostile-{csp}")
        ask.locator("button", has_text="Decline").click()
        page.locator(".call[data-status='done'] pre.text", has_text="the user chose decline").wait_for(timeout=20_000)
        page.click("#tab-server")
        assert "(not an http(s) link)" in page.text_content("#server-info")
        page.click("#tab-resources")
        page.click("#resources-list button >> nth=0")
        page.locator("#resource-contents pre.text").wait_for(timeout=10_000)
        page.click("#tab-prompts")
        page.locator("#prompts-list button").first.wait_for()
        assert page.evaluate("window.__pwned") is None
        assert page.evaluate(NO_HANDLERS) == []
        assert page.locator("script").count() == 1  # the page's own module, nothing the server sent
        assert page.locator("img[src='x']").count() == 0
        assert not dialogs and not popups
        context.close()


# ---------------------------------------------------------------------------------------------- a flooding server


def test_a_flood_of_log_messages_and_list_changes_leaves_the_page_bounded() -> None:
    proc = InspectorProcess("inspect", FLOOD, "--mode", "handshake")
    try:
        with chromium() as browser:
            page = browser.new_context(bypass_csp=True).new_page()
            page.goto(proc.url)
            page.locator("#status-text", has_text="connected").wait_for(timeout=20_000)
            page.locator("#tools-list button").first.wait_for(timeout=20_000)

            def call(name: str, n: int | None = None) -> Any:
                page.click(f"#tools-list button[data-key='{name}']")
                if n is not None:
                    page.fill("#tool-form [name='n']", str(n))
                before = page.locator(".call").count()
                page.click("#call-button")
                page.wait_for_function(f"document.querySelectorAll('.call').length > {before}")
                box = page.locator(".call").first
                box.locator("xpath=self::*[@data-status='done']").wait_for(timeout=30_000)
                return box

            for _ in range(3):  # (300 at a time: the page keeps up, no resync redraws the list from its bound)
                call("logs", 300)
                page.wait_for_function("document.body.textContent.includes('line 299')", timeout=10_000)
            rows = page.locator("#server-log li")
            assert rows.count() == 500  # the last 500 shown, as kept; it grew by every message it was sent
            assert rows.last.text_content().endswith("line 299")
            # a changed list is asked for again, but not once per notification: 200 of each cost a few
            call("list_changed", 200)
            page.wait_for_timeout(1_000)
            counts = call("counts").locator("pre.text").first.text_content()
            assert json.loads(counts)["tools/list"] < 20, counts
    finally:
        proc.stop()


# Counts, in the page, the appends to the message log (a MutationObserver record that adds rows).
COUNT_LOG_APPENDS = """() => {
  window.logAppends = 0;
  new MutationObserver((records) => {
    for (const r of records) if (r.addedNodes.length) window.logAppends += 1;
  }).observe(document.getElementById('log'), {childList: true});
}"""
SHOWN_CALLS = 100  # static/draw.js MAX_CALLS_SHOWN


# (2,000 calls through a stdio server and the inspector take 3-5 s idle, longer beside the other tests; each wait has
# its own bound)
@pytest.mark.timeout(300)
def test_a_burst_of_calls_and_messages_is_shown_completely_and_drawn_in_batches_while_the_page_answers() -> None:
    """2,000 tool calls (4,000 messages, 6,000 call events) and 2,000 log messages from the server in one burst: the
    page ends showing the inspector's whole message log (its last 2,000 entries, each once, the rows in view drawn)
    and the last 100 calls, the ones the inspector keeps among them, all done. It draws them in batches, one append to
    the log per frame, not one per message: each append read the layout of a page that kept every call of the
    session, which held the page in one task for 30-40 s after 2,000 calls on an idle machine, a click on it waiting
    all that time."""
    import concurrent.futures
    import time

    proc = InspectorProcess("inspect", FLOOD, "--mode", "handshake")
    try:
        with chromium() as browser:
            page = browser.new_context(bypass_csp=True, viewport={"width": 1400, "height": 1000}).new_page()
            page.goto(proc.url)
            page.locator("#status-text", has_text="connected").wait_for(timeout=30_000)
            page.locator("#tools-list button").first.wait_for(timeout=30_000)
            page.evaluate(COUNT_LOG_APPENDS)
            api = httpx.Client(base_url=proc.base, headers={"Authorization": f"Bearer {proc.token}"}, timeout=60)
            api.post("/api/call", json={"name": "logs", "arguments": {"n": 2_000}}).raise_for_status()

            def call(_: int) -> None:
                while (r := api.post("/api/call", json={"name": "counts", "arguments": {}})).status_code == 429:
                    time.sleep(0.01)  # (32 run at once: the inspector refuses one more until one ends)
                r.raise_for_status()

            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                list(pool.map(call, range(2_000)))
            # the page answers a click while it still draws the burst: measured 0.1-1.3 s (load 3-20), 30-40 s before
            started = time.monotonic()
            page.click("#tab-server", timeout=60_000)
            page.locator("#panel-server:not([hidden])").wait_for(timeout=60_000)
            assert time.monotonic() - started < 15

            def calls_kept() -> list[dict[str, Any]]:
                calls: list[dict[str, Any]] = api.post("/api/state", json={}).json()["result"]["calls"]
                return calls

            kept = calls_kept()
            while any(c["status"] == "running" for c in kept):
                time.sleep(0.1)
                kept = calls_kept()
            entries = [e["seq"] for e in api.post("/api/log", json={"since": 0}).json()["result"]["entries"]]
            assert len(entries) == 2_000
            page.wait_for_function(
                f"() => document.querySelector('#log li:last-child')?.dataset.seq === '{entries[-1]}'"
                " && !document.querySelector('.call.running')",
                timeout=60_000,
            )
            # the list draws the rows in view (and a margin): the last ones, and scrolled to the top the first ones
            shown = page.eval_on_selector_all("#log li", "rows => rows.map(r => Number(r.dataset.seq))")
            assert 0 < len(shown) <= 100 and shown == entries[-len(shown) :]
            page.evaluate("() => { document.getElementById('log-scroll').scrollTop = 0; }")
            page.wait_for_function(
                f"() => document.querySelector('#log li:first-child')?.dataset.seq === '{entries[0]}'", timeout=30_000
            )
            shown = page.eval_on_selector_all("#log li", "rows => rows.map(r => Number(r.dataset.seq))")
            assert 0 < len(shown) <= 100 and shown == entries[: len(shown)]
            calls = page.eval_on_selector_all("#calls > .call", "els => els.map(e => [e.dataset.id, e.dataset.status])")
            assert len(kept) <= len(calls) <= SHOWN_CALLS  # (the kept ones alone after a resync)
            assert {status for _, status in calls} == {"done"}
            assert {c["id"] for c in kept} <= {id_ for id_, _ in calls}
            # one append per frame, however many messages came in it (one per message before: over 4,000)
            appends = page.evaluate("window.logAppends")
            assert appends <= 6_000 / 10, appends
    finally:
        proc.stop()


def test_the_servers_log_messages_are_still_shown_after_the_page_reloads() -> None:
    """The Server tab's log messages are part of the inspector's state, as its stderr is: a page reloaded (or one
    that fell behind and redraws from the state) shows them again; they used to reach a page only as events, so a
    reload left the tab empty."""
    proc = InspectorProcess("inspect", FLOOD, "--mode", "handshake")
    try:
        with chromium() as browser:
            page = browser.new_context(bypass_csp=True).new_page()  # (for wait_for_function)
            page.goto(proc.url)
            page.locator("#status-text", has_text="connected").wait_for(timeout=20_000)
            page.click("#tools-list button[data-key='logs']")
            page.fill("#tool-form [name='n']", "300")
            page.click("#call-button")
            page.locator(".call[data-status='done']").wait_for(timeout=30_000)
            page.wait_for_function("document.querySelectorAll('#server-log li').length === 300", timeout=10_000)
            page.reload()
            page.locator("#status-text", has_text="connected").wait_for(timeout=20_000)
            page.wait_for_function("document.querySelectorAll('#server-log li').length > 0", timeout=10_000)
            rows = page.locator("#server-log li")
            assert rows.count() == 300
            assert (rows.first.text_content() or "").endswith("line 0")
            assert (rows.last.text_content() or "").endswith("line 299")
    finally:
        proc.stop()


def test_the_servers_log_messages_kept_are_bounded_in_count_and_bytes_and_a_long_one_is_cut_saying_so() -> None:
    """The inspector keeps the last 500 log messages and at most 4 MiB of them; one message longer than 64 KiB is
    kept (and shown) cut, with its size, so that 4 MiB messages cannot make the state hold 500 x 4 MiB."""
    from inspector.test_transports import api, until

    proc = InspectorProcess("inspect", FLOOD, "--mode", "handshake")
    try:
        until(proc, lambda s: s["status"] == "connected")

        def call(name: str, **arguments: int) -> None:
            call_id = api(proc, "call", {"name": name, "arguments": arguments})["id"]
            until(proc, lambda s: any(c["id"] == call_id and c["status"] == "done" for c in s["calls"]), 60)

        call("logs", n=600)
        kept = api(proc, "state")["serverLog"]
        assert len(kept) == 500  # the count bound: the oldest went first
        assert kept[0]["data"] == "line 100" and kept[-1]["data"] == "line 599"
        call("big_logs", n=100, size=60_000)  # 6 MB of messages, each under the one-message bound
        kept = api(proc, "state")["serverLog"]
        held = sum(len(json.dumps(p)) for p in kept)
        assert held <= 4 * 1024 * 1024, held
        assert kept[-1]["data"].startswith("99:") and len(kept[-1]["data"]) == 60_000
        assert 60 <= len(kept) < 100  # the byte bound, not the count, decided
        call("big_logs", n=2, size=1_000_000)  # one message alone over the bound: kept cut, saying so
        last = api(proc, "state")["serverLog"][-1]
        assert last["data"].startswith("1:") and len(last["data"]) <= 64 * 1024
        assert last["cut"] > 1_000_000 and last["level"] == "info" and last["logger"] == "flood"
    finally:
        proc.stop()


# ---------------------------------------------------------------------------------------------- a page that fell behind

# the page's event queue in these tests: a page falls behind once more than this many events wait for it (a call
# costs the page 4 events: no burst of the tests below comes near it but the one that makes it fall behind)
QUEUE = 100


def fall_behind(running: InspectorThread, before: Any = None, after: Any = None) -> None:
    """In one callback of the inspector's loop (the page reads nothing meanwhile): ``await before()``, more stderr
    lines than the page's queue holds, one more line and ``await after()``. The queue is dropped for one ``resync``,
    with what ``before`` published; the last line and what ``after`` publishes come after it, so the page reads them
    in the state it reads again as well as in their events."""
    inspector = running.inspector

    async def burst() -> None:
        if before is not None:
            await before()
        for i in range(QUEUE + 1):
            inspector._on_stderr(f"filler {i}")
        inspector._on_stderr("a line after the drop")
        if after is not None:
            await after()

    running.run(burst)


def test_server_lines_that_come_while_a_page_that_fell_behind_reads_the_state_are_shown_once() -> None:
    """A page that fell behind reads the state again and holds the events that come meanwhile; a stderr line or a log
    message that came between the drop of its queue and the reading of the state is in both. Their events carry a
    number (``seq``) and the state the last one's: the page shows each once (it showed them twice)."""

    running = InspectorThread(FLOOD, mode="handshake", hub=EventHub(queue_size=QUEUE))
    try:
        with chromium() as browser:
            page = open_inspector(browser, running)
            page.click("#tab-server")
            inspector = running.inspector

            async def log_message() -> None:
                await inspector._on_log_message({"level": "info", "logger": "t", "data": "a message after the drop"})

            fall_behind(running, after=log_message)
            page.wait_for_selector("body[data-resyncs]", timeout=30_000)
            page.wait_for_function(
                "() => document.getElementById('server-log')?.textContent.includes('a message after the drop')"
                " && document.getElementById('stderr')?.textContent.includes('a line after the drop')",
                timeout=30_000,
            )
            page.evaluate(TWO_FRAMES)
            state = running.run(inspector.snapshot)
            assert page.text_content("#stderr").split("\n") == state["stderr"]
            rows = page.eval_on_selector_all("#server-log li", "rows => rows.map(r => r.textContent)")
            assert len(rows) == len(state["serverLog"]) == 1
            assert rows[0].endswith("a message after the drop")
    finally:
        running.stop()


def test_a_resync_keeps_the_rows_of_the_messages_still_logged_and_shows_the_log_as_the_inspector_has_it() -> None:
    """A page that fell behind reads the whole message log again (2,000 entries at most): it keeps the row of each
    entry it still shows, the same element (a row opened stays open), and only removes the rows of the entries the log
    no longer has and adds the missing ones. It made all 2,000 rows again, which held the page 0.6-1 s per resync."""
    import time

    import httpx

    from mcpkit.inspector.log import MessageLog

    running = InspectorThread(FLOOD, mode="handshake", hub=EventHub(queue_size=QUEUE), log=MessageLog(max_entries=30))
    try:
        with chromium() as browser:
            page = open_inspector(browser, running)
            inspector = running.inspector
            api = httpx.Client(base_url=running.base, headers={"Authorization": f"Bearer {running.token}"}, timeout=60)

            def logged() -> list[int]:
                return [e["seq"] for e in api.post("/api/log", json={"since": 0}).json()["result"]["entries"]]

            def shown() -> list[int]:
                return list(page.eval_on_selector_all("#log li", "rows => rows.map((r) => Number(r.dataset.seq))"))

            for _ in range(12):  # (24 messages more: the inspector's log keeps 30, the page all it was sent)
                api.post("/api/call", json={"name": "counts", "arguments": {}}).raise_for_status()
            deadline = time.monotonic() + 30
            while (last := logged()[-1]) != (shown() or [0])[-1] or page.locator(".call.running").count():
                assert time.monotonic() < deadline, (last, shown()[-1:])
                time.sleep(0.05)
            assert len(shown()) > 30 and not page.get_attribute("body", "data-resyncs")
            page.locator(f"#log li[data-seq='{last}'] button.row").click()  # opened: it shows the whole message
            page.locator(f"#log li[data-seq='{last}'] pre").wait_for()
            page.evaluate(REMEMBER_ROWS)

            async def log_messages() -> None:  # logged, their events dropped with the queue: read with the log
                for i in range(3):
                    message = {
                        "jsonrpc": "2.0",
                        "method": "notifications/message",
                        "params": {"level": "info", "data": i},
                    }
                    inspector.log.record("in", json.dumps(message).encode())

            with page.expect_response(lambda r: r.url.endswith("/api/log"), timeout=30_000) as answer:
                fall_behind(running, before=log_messages)
            read = [e["seq"] for e in answer.value.json()["result"]["entries"]]  # (the page's own reading)
            assert len(read) == 30 and read[-1] >= last + 3
            # the log read, then what came since (the page lists the tools and the rest again after a resync: their
            # messages come as events; the page keeps more rows than the inspector's 30)
            deadline = time.monotonic() + 30
            while shown() != (entries := read + [seq for seq in logged() if seq > read[-1]]):
                assert time.monotonic() < deadline, (shown(), entries)
                time.sleep(0.05)
            kept = [seq for seq in read if seq <= last]
            assert len(kept) >= 10  # (the log's 30 less the 3 above and the lists' messages)
            assert page.evaluate(SAME_ROWS) == kept  # the same element for each; the others made
            assert page.get_attribute(f"#log li[data-seq='{last}'] button.row", "aria-expanded") == "true"
    finally:
        running.stop()


# The log's rows now, by seq (in the page, for SAME_ROWS); the seqs of the rows that are still the same elements.
REMEMBER_ROWS = (
    "() => { window.rows = new Map([...document.querySelectorAll('#log li')].map((r) => [r.dataset.seq, r])); }"
)
SAME_ROWS = """() => [...document.querySelectorAll('#log li')]
  .filter((r) => window.rows.get(r.dataset.seq) === r).map((r) => Number(r.dataset.seq))"""


# The call boxes' drawn parts now, by call id (for SAME_CALLS); the ids of the calls whose parts are the same elements.
REMEMBER_CALLS = """() => { window.callParts = new Map([...document.querySelectorAll('#calls > .call')]
  .map((c) => [c.dataset.id, [c.querySelector('.call-head'), c.querySelector('.call-rest').firstChild]])); }"""
SAME_CALLS = """() => [...document.querySelectorAll('#calls > .call')].filter((c) => {
  const was = window.callParts.get(c.dataset.id);
  return was && was[0] === c.querySelector('.call-head') && was[1] === c.querySelector('.call-rest').firstChild; })
  .map((c) => c.dataset.id)"""


def test_a_resync_draws_again_only_the_calls_that_changed() -> None:
    """A page that fell behind reads the state again, with the calls the inspector keeps (up to 100 boxes): a call
    its box shows as it is is not drawn again, its head and its result the same elements. Every box was made again
    on each resync, the page's longest work after the message log was windowed."""
    running = InspectorThread(FLOOD, mode="handshake", hub=EventHub(queue_size=QUEUE))
    try:
        with chromium() as browser:
            page = open_inspector(browser, running)
            api = httpx.Client(base_url=running.base, headers={"Authorization": f"Bearer {running.token}"}, timeout=60)
            ids = [
                api.post("/api/call", json={"name": "counts", "arguments": {}}).json()["result"]["id"] for _ in range(5)
            ]
            done = " && ".join(f'document.querySelector(\'.call[data-id="{i}"][data-status="done"] pre\')' for i in ids)
            page.wait_for_function(f"() => !!({done})", timeout=30_000)
            page.evaluate(REMEMBER_CALLS)
            fall_behind(running)
            page.wait_for_function(  # (shown from the state the page read again)
                "() => document.getElementById('stderr')?.textContent.includes('a line after the drop')", timeout=30_000
            )
            page.evaluate(TWO_FRAMES)
            assert page.get_attribute("body", "data-resyncs")
            assert sorted(page.evaluate(SAME_CALLS)) == sorted(ids)
    finally:
        running.stop()


SCROLL_LOG = """(to) => { const box = document.getElementById('log-scroll');
  box.scrollTop = to * (box.scrollHeight - box.clientHeight); }"""
AT_BOTTOM = """() => { const box = document.getElementById('log-scroll');
  return box.scrollTop + box.clientHeight >= box.scrollHeight - 2; }"""


def test_the_message_log_draws_only_the_rows_in_view_at_its_2000_bound_and_scrolls_and_follows_as_a_full_list() -> None:
    """With 2,000 messages logged the list holds the rows in view and a margin (the layout of 2,000 grid rows held the
    page up to a second per resync; a window's is the same at any count), each where it is in the full list: scrolled
    to the middle it shows the middle entries; scrolled up it stays on the entry it shows while messages come and the
    oldest go; at the bottom it follows them; a row opened stays open (the same element) across a resync."""
    running = InspectorThread(FLOOD, mode="handshake", hub=EventHub(queue_size=QUEUE))

    def record(n: int) -> None:
        log_messages(running, n)

    def drawn(wait_for: int | None = None) -> tuple[list[int], list[int]]:
        """The log's seqs and those the page shows in view, once every row drawn is where the full list has it."""
        entries, rows = log_drawn(page, running, wait_for)
        assert 20 <= len(rows) <= 100, len(rows)  # (the view holds about 45 rows, and 20 more on each side)
        return entries, [r["seq"] for r in rows if r["seen"]]

    try:
        with chromium() as browser:
            page = open_inspector(browser, running)
            record(2_000)  # (the page falls behind: its queue holds 100 events)
            entries, seen = drawn()
            assert len(entries) == 2_000 and seen[-1] == entries[-1] and page.evaluate(AT_BOTTOM)  # the tail
            # the middle
            page.evaluate(SCROLL_LOG, 0.5)
            entries, seen = drawn(entries[1_000])
            assert 1_000 - 50 < entries.index(seen[0]) < 1_000 < entries.index(seen[-1]) < 1_000 + 50
            # scrolled up: more messages come and as many of the oldest go; it stays on the entry it showed
            record(5)
            assert drawn(seen[0])[1][0] == seen[0]
            # a row opened stays open, the same element, across a resync (the page reads the log again)
            opened = seen[len(seen) // 2]
            page.locator(f"#log li[data-seq='{opened}'] button.row").click()
            page.locator(f"#log li[data-seq='{opened}'] pre").wait_for(timeout=30_000)
            page.evaluate(f"() => {{ window.openedRow = document.querySelector(\"#log li[data-seq='{opened}']\"); }}")
            fall_behind(running)
            page.wait_for_function(  # (shown from the state the page read again, with the log)
                "() => document.getElementById('stderr')?.textContent.includes('a line after the drop')", timeout=30_000
            )
            assert page.get_attribute("body", "data-resyncs")
            selector = f"#log li[data-seq='{opened}']"
            assert page.evaluate(f'() => document.querySelector("{selector}") === window.openedRow')
            assert page.get_attribute(f"{selector} button.row", "aria-expanded") == "true"
            page.locator(f"{selector} button.row").click()  # (closed: every row one height again)
            assert opened in drawn(opened)[1]
            # at the bottom, it follows the messages that come
            page.evaluate(SCROLL_LOG, 1)
            record(5)
            entries, seen = drawn()
            assert seen[-1] == entries[-1] and page.evaluate(AT_BOTTOM)
    finally:
        running.stop()
