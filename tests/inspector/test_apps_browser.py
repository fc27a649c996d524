"""``mcpkit inspect`` as an MCP Apps host, end to end in a real headless Chromium (Debian's, through Playwright).

The Apps spec (2026-01-26) says what these tests check: a web host renders a view through a sandbox proxy on
another origin, with the CSP its resource declares ("Host MUST NOT allow undeclared domains"); the host answers
``ui/initialize`` with its context, sends ``ui/notifications/tool-input`` then ``tool-result`` (or
``tool-cancelled``), forwards the view's ``tools/call`` (never to a tool whose visibility lacks ``"app"``) and
``resources/read``, opens links on the person's say-so, and sends ``ui/resource-teardown`` before tearing a view
down. Against the official example servers from npm (``@modelcontextprotocol/server-basic-vanillajs`` and
``server-basic-react``, over stdio) and against examples/apps in both eras; a hostile view shows that the page stays
responsive and says what the view did.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from support.browser import InspectorProcess, chromium, screenshot
from support.paths import REPO

APPS = str(REPO / "examples" / "apps" / "server.py")
HOSTILE = str(REPO / "tests" / "support" / "servers" / "apps_hostile_server.py")
NODE = REPO / "tests" / "node_modules"
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


def official(package: str) -> str:
    entry = NODE / "@modelcontextprotocol" / package / "dist" / "index.js"
    if not entry.is_file():
        pytest.skip(f"{package} is not installed in tests/node_modules (bash scripts/test.sh installs it)")
    return f"{NODE / '.bin' / 'node'} {entry} --stdio"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


def open_page(browser: Any, proc: InspectorProcess) -> Any:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.errors = []  # type: ignore[attr-defined]
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))  # type: ignore[attr-defined]
    page.goto(proc.url)
    page.wait_for_selector("#status-text:text('connected')", timeout=30_000)
    page.wait_for_selector("#tools-list button", timeout=30_000)
    return page


def call_with_view(page: Any, tool: str, **arguments: str) -> tuple[Any, Any]:
    """Call ``tool`` from its form; returns (the call's view box, the view's frame) once the view is ready."""
    page.click(f"#tools-list button[data-key='{tool}']")
    for field, value in arguments.items():
        page.fill(f"#tool-form [name='{field}']", value)
    before = page.locator(".app-view").count()
    page.click("#call-button")
    page.locator(".app-view").nth(before).wait_for(timeout=20_000)  # (no wait_for_function: the page's CSP stays on)
    box = page.locator(".app-view").first
    box.locator("xpath=self::*[@data-state='ready']").wait_for(timeout=30_000)
    frame = page.frame_locator(".app-view >> nth=0 >> .app-iframe").frame_locator("iframe")
    return box, frame


def requests_in_log(page: Any, method: str) -> int:
    """How many requests ``method`` the message log lists (each request the client sent, the view's included)."""
    rows = page.eval_on_selector_all("#log li[data-kind='request'] .what", "els => els.map(e => e.textContent)")
    return sum(1 for row in rows if row.startswith(f"request {method} "))


@pytest.mark.npm
@pytest.mark.parametrize("package", ["server-basic-vanillajs", "server-basic-react"])
def test_an_official_example_app_renders_and_its_button_calls_the_server_through_the_inspector(
    browser: Any, package: str
) -> None:
    proc = InspectorProcess("inspect", official(package), timeout=60)
    try:
        page = open_page(browser, proc)
        box, view = call_with_view(page, "get-time")
        frame_src = page.locator(".app-iframe").first.get_attribute("src")
        assert frame_src and not frame_src.startswith(proc.base)  # the sandbox is another origin
        time_text = view.locator("#server-time, code, .server-time").first
        time_text.wait_for(timeout=20_000)
        assert requests_in_log(page, "tools/call") == 1  # the person's call
        view.get_by_role("button", name=re.compile("Get Server Time", re.I)).click()
        page.wait_for_selector(".app-view .app-note:has-text('tools/call get-time: answered by the server')")
        assert ISO_TIME.search(view.locator("body").inner_text())  # the result shows in the view
        assert requests_in_log(page, "tools/call") == 2  # the view's call went through the client: in the log
        assert requests_in_log(page, "resources/read") >= 1  # (the view's document)
        assert "connected (apps protocol 2026-01-26)" in box.inner_text()
        screenshot(page, f"apps-{package}")
        assert not page.errors  # type: ignore[attr-defined]
    finally:
        proc.stop()


@pytest.fixture(scope="module", params=["handshake", "modern"])
def apps_inspector(request: pytest.FixtureRequest) -> Iterator[tuple[str, InspectorProcess]]:
    proc = InspectorProcess("inspect", APPS, "--mode", request.param)
    try:
        yield request.param, proc
    finally:
        proc.stop()


def test_the_plain_html_view_calls_its_app_only_tool_in_both_eras(browser: Any, apps_inspector: Any) -> None:
    era, proc = apps_inspector
    page = open_page(browser, proc)
    page.click("#tools-list button[data-key='reroll']")
    assert "app only" in page.locator("#tool-detail .annotations").inner_text()
    box, view = call_with_view(page, "roll_dice", sides="20")
    assert "MCP Apps view" in page.locator("#tool-detail .annotations").inner_text()
    view.locator("#sides:text('20')").wait_for(timeout=10_000)  # ui/notifications/tool-input
    view.locator("#result").filter(has_text=re.compile(r"^\d+$")).wait_for(
        timeout=10_000
    )  # ui/notifications/tool-result
    view.locator("#reroll").click()
    view.locator("#status:text('rolled by the view')").wait_for(timeout=20_000)
    assert re.fullmatch(r"\d+", view.locator("#result").inner_text())
    page.wait_for_selector(".app-note:has-text('tools/call reroll: answered by the server')")
    assert "model context now: The die shows" in box.inner_text()
    assert requests_in_log(page, "tools/call") == 2  # roll_dice by the person, reroll by the view
    screenshot(page, f"apps-dice-{era}")


def test_the_app_sdk_view_calls_its_app_only_tool_in_both_eras(browser: Any, apps_inspector: Any) -> None:
    era, proc = apps_inspector
    page = open_page(browser, proc)
    _, view = call_with_view(page, "count", name="taps")
    view.locator("#name:text('taps')").wait_for(timeout=10_000)
    view.locator("#count:text('0')").wait_for(timeout=10_000)  # ui/notifications/tool-result
    view.locator("#increment").click()
    view.locator("#count:text('1')").wait_for(timeout=20_000)
    view.locator("#increment").click()
    view.locator("#count:text('2')").wait_for(timeout=20_000)
    page.wait_for_selector(".app-note:has-text('tools/call increment: answered by the server')")
    screenshot(page, f"apps-counter-{era}")


def test_display_modes_links_messages_and_teardown(browser: Any) -> None:
    """(The host side does not depend on the era: one run, negotiated.)"""
    proc = InspectorProcess("inspect", APPS)
    try:
        page = open_page(browser, proc)
        box, view = call_with_view(page, "roll_dice")
        view.locator("#fullscreen").click()
        view.locator("#status:text('display mode: fullscreen')").wait_for(timeout=10_000)
        assert "fullscreen" in (box.get_attribute("class") or "")
        box.locator("button:text('Exit fullscreen')").click()
        page.wait_for_selector(".app-view:not(.fullscreen)")

        view.locator("#share").click()
        page.wait_for_selector(".app-note:has-text('the view sends to the conversation (user): I rolled')")

        view.locator("#docs").click()  # ui/open-link: nothing opens until the person says so
        row = box.locator(".app-note.link").last
        row.wait_for()
        assert "modelcontextprotocol.io" in row.inner_text()
        # (dispatched: the view may resize itself while the row scrolls into view, moving the button under the pointer)
        row.locator('button:text("Don\'t open")').dispatch_event("click")
        view.locator("#status:text('Link opening denied by user')").wait_for(timeout=10_000)
        view.locator("#docs").click()
        page.context.route(
            "https://modelcontextprotocol.io/**", lambda route: route.fulfill(body="docs", content_type="text/html")
        )
        with page.context.expect_page(timeout=10_000) as opened:
            box.locator(".app-note.link").last.get_by_role("button", name="Open", exact=True).dispatch_event("click")
        opened.value.wait_for_load_state()
        assert opened.value.url == "https://modelcontextprotocol.io/extensions/apps/overview"
        assert opened.value.evaluate("() => window.opener") is None  # (noopener)
        view.locator("#status:text('link opened')").wait_for(timeout=10_000)

        box.locator("button:text('Close view')").click()  # ui/resource-teardown, answered by the view, then gone
        box.locator("xpath=self::*[@data-state='closed']").wait_for(timeout=10_000)
        assert box.locator("iframe").count() == 0
        assert "did not answer ui/resource-teardown" not in box.inner_text()

    finally:
        proc.stop()


def test_a_cancelled_call_is_told_to_its_view(browser: Any) -> None:
    proc = InspectorProcess("inspect", HOSTILE)
    try:
        page = open_page(browser, proc)
        page.click("#tools-list button[data-key='slow']")
        page.click("#call-button")
        box = page.locator(".app-view").first
        box.locator("xpath=self::*[@data-state='ready']").wait_for(timeout=30_000)
        page.click(".call button.danger")  # Cancel
        page.wait_for_selector(".call[data-status='cancelled']")
        view = page.frame_locator(".app-iframe").frame_locator("iframe")
        view.locator("#out:has-text('[cancelled: cancelled by the person]')").wait_for(timeout=10_000)
    finally:
        proc.stop()


def test_a_misbehaving_view_is_contained_and_the_page_says_what_it_did(browser: Any) -> None:
    proc = InspectorProcess("inspect", HOSTILE)
    try:
        page = open_page(browser, proc)
        box, view = call_with_view(page, "hostile")
        notes = box.locator(".app-activity")
        # the CSP it asked for, checked: the invalid sources dropped and said so, the valid one kept
        assert "csp.connectDomains: '*' is not an https:// or wss:// origin" in notes.inner_text()
        assert "permissions.usb is not a permission of MCP Apps" in notes.inner_text()
        assert "connectDomains: https://api.example.com" in notes.inner_text()
        page.wait_for_selector(".app-note:has-text('csp blocked img-src https://images.example.com/pixel.png')")

        view.locator("#malformed").click()
        page.wait_for_selector(
            ".app-note:has-text('dropped a malformed message (not a JSON-RPC 2.0 object): not json-rpc at all')"
        )
        page.wait_for_selector(".app-note:has-text('its params are not an object')")
        page.wait_for_selector(".app-note:has-text('dropped an answer to no request of ours')")

        view.locator("#forbidden").click()
        page.wait_for_selector(
            ".app-note:has-text('refused sampling/createMessage: a view may not ask that of the host')"
        )
        page.wait_for_selector(".app-note:has-text('refused prompts/get')")
        view.locator("#out:has-text('error -32601')").wait_for()

        view.locator("#model-only").click()
        page.wait_for_selector(".app-note:has-text(\"the tool 'secret' is not callable by views\")")
        assert "the view must never get this" not in page.locator("#log").inner_text()

        view.locator("#bad-link").click()
        page.wait_for_selector(".app-note:has-text('only http(s) links are opened')")

        view.locator("#escape").click()
        report = page.locator(".app-note:has-text('escape report')")
        report.wait_for(timeout=15_000)
        text = report.inner_text()
        for blocked in ("parent.document:blocked", "top.storage:blocked", "storage:blocked", "fetch:blocked"):
            assert blocked in text, text

        view.locator("#huge").click()
        page.wait_for_selector(".app-note:has-text('characters (more than 1048576)')")

        started = time.monotonic()
        view.locator("#flood").click()
        page.wait_for_selector(".app-note:has-text('the view sent too many messages')", timeout=20_000)
        # the page stays responsive: the person can still call a tool and read its result
        page.click("#tools-list button[data-key='echo']")
        page.fill("#tool-form [name='text']", "from the person")
        page.click("#call-button")
        page.wait_for_selector(".call pre.text:text('from the person')", timeout=20_000)
        assert time.monotonic() - started < 30
        view.locator("#ok").click()
        page.wait_for_selector(".app-note:has-text('tools/call echo: answered by the server')")
        screenshot(page, "apps-hostile")
        assert not page.errors  # type: ignore[attr-defined]
    finally:
        proc.stop()


FLOODING_APPS = """
import runpy

from mcpkit import Context

app = runpy.run_path({apps!r})["app"]


@app.tool()
async def flood(count: int, ctx: Context) -> str:
    \"\"\"Send ``count`` log messages as fast as possible.\"\"\"
    for i in range(count):
        await ctx.info(f"line {{i}} " + "x" * 200)
    return "flooded"
"""


#: Run on the page: busy (no event read) until the call ``id`` is done, asking the inspector every 0.2 s with
#: synchronous requests (which dispatch no events either); 120 s at most.
STALL_UNTIL_DONE = """([token, id]) => {
    const end = Date.now() + 120000;
    while (Date.now() < end) {
        const request = new XMLHttpRequest();
        request.open("POST", "/api/state", false);
        request.setRequestHeader("Authorization", "Bearer " + token);
        request.setRequestHeader("Content-Type", "application/json");
        request.send("{}");
        const calls = JSON.parse(request.responseText).result.calls;
        if (calls.some((call) => call.id === id && call.status === "done")) return;
        const next = Date.now() + 200;
        while (Date.now() < next);
    }
}"""


# (the page stalls as long as 20,000 events take to pass through a stdio server and the inspector: 60-110 s of the
# test at load 18, past the suite's 120 s with the browser's start and the catching up; each wait has its own bound)
@pytest.mark.timeout(300)
def test_open_views_survive_a_resync_of_a_page_that_fell_behind(browser: Any, tmp_path: Any) -> None:
    """A page that falls behind gets ``resync`` and draws everything again; the views it shows stay open (their
    frame, their state), as they close only when the connection they were opened on is replaced. The resyncs of
    one backlog (each buffered before the page read it: 19 at load 6) cost one redraw, and one more for those that
    came meanwhile: a redraw per resync (the state and the whole log fetched and drawn each time) kept the page
    busy for 35 s after it caught up, past the 30 s a click on the view is given."""
    import httpx

    server = tmp_path / "flooding_apps.py"
    server.write_text(FLOODING_APPS.format(apps=APPS))
    proc = InspectorProcess("inspect", str(server))
    try:
        page = open_page(browser, proc)
        redraws: list[str] = []  # the page's own fetches of the state (the stall below asks with XMLHttpRequest)
        page.on(
            "request",
            lambda r: redraws.append(r.url) if r.url.endswith("/api/state") and r.resource_type == "fetch" else None,
        )
        box, view = call_with_view(page, "roll_dice", sides="20")
        view.locator("#result").filter(has_text=re.compile(r"^\d+$")).wait_for(timeout=10_000)
        rolled = view.locator("#result").inner_text()
        base, token = proc.url.split("/#token=")
        api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        flood = api.post("/api/call", json={"name": "flood", "arguments": {"count": 20000}}).json()["result"]["id"]
        # the page stalls until the flood has ended (its 20,000 events all sent to a page that reads none): a
        # stall of a fixed 6 s could end before the server had sent enough to fall behind on a loaded machine
        page.evaluate(STALL_UNTIL_DONE, [token, flood])
        page.wait_for_selector("body[data-resyncs]", timeout=60_000)
        page.wait_for_selector(".call.done:has-text('flood')", timeout=60_000)
        assert box.get_attribute("data-state") == "ready", box.inner_text()
        assert "view closed" not in box.inner_text()
        assert view.locator("#result").inner_text() == rolled  # the same frame, not a reloaded one
        view.locator("#reroll").click()  # and it still talks to the server
        view.locator("#status:text('rolled by the view')").wait_for(timeout=20_000)
        assert not page.errors  # type: ignore[attr-defined]
        # one at a time, one more for the resyncs meanwhile (a third when the backlog is read in more pieces)
        assert 1 <= len(redraws) <= 3, (len(redraws), page.get_attribute("body", "data-resyncs"))
    finally:
        proc.stop()


def test_the_oldest_view_is_torn_down_when_more_views_open_than_the_inspector_keeps(browser: Any) -> None:
    """The inspector keeps 32 views (``views.MAX_VIEWS``): the page tears the oldest down the way the spec says
    (``ui/resource-teardown``, then the frame goes) rather than leaving it running while the inspector no longer
    forwards anything it asks (it used to stay "ready", its requests answered "no such view is open")."""
    import httpx

    from mcpkit.inspector.views import MAX_VIEWS

    proc = InspectorProcess("inspect", HOSTILE)
    try:
        page = open_page(browser, proc)
        api = httpx.Client(base_url=proc.base, headers={"Authorization": f"Bearer {proc.token}"}, timeout=30)
        for _ in range(MAX_VIEWS):
            assert "id" in api.post("/api/call", json={"name": "hostile", "arguments": {}}).json()["result"]
        oldest = page.locator(".app-view[data-call='call-1']")
        ready = page.locator(".app-view[data-state='ready']")
        deadline = time.monotonic() + 60
        while ready.count() < MAX_VIEWS and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ready.count() == MAX_VIEWS
        assert "id" in api.post("/api/call", json={"name": "hostile", "arguments": {}}).json()["result"]
        oldest.locator("xpath=self::*[@data-state='closed']").wait_for(timeout=20_000)
        text = oldest.inner_text()
        assert "teardown #1" in text  # the view was told, once, and answered
        assert "teardown #2" not in text and "did not answer ui/resource-teardown" not in text
        assert f"more than {MAX_VIEWS} views are open" in text
        page.locator(f".app-view[data-call='call-{MAX_VIEWS + 1}'][data-state='ready']").wait_for(timeout=30_000)
        assert page.locator(".app-iframe").count() == MAX_VIEWS
        second = page.locator(".app-view[data-call='call-2']")
        view = second.frame_locator(".app-iframe").frame_locator("iframe")
        view.locator("#ok").click()  # the views still shown still reach the server
        second.locator(".app-note:has-text('tools/call echo: answered by the server')").wait_for(timeout=20_000)
        assert not page.errors  # type: ignore[attr-defined]
    finally:
        proc.stop()


def test_closing_a_view_twice_tells_it_once(browser: Any) -> None:
    proc = InspectorProcess("inspect", HOSTILE)
    try:
        page = open_page(browser, proc)
        box, _ = call_with_view(page, "hostile")
        close = box.locator("button:text('Close view')")
        close.evaluate("b => { b.click(); b.click(); }")
        box.locator("xpath=self::*[@data-state='closed']").wait_for(timeout=10_000)
        text = box.inner_text()
        assert "teardown #1" in text and "teardown #2" not in text, text
    finally:
        proc.stop()


def test_closing_a_view_cancels_the_requests_it_still_waits_for(browser: Any) -> None:
    """A view's request still running on the server when the view is torn down is cancelled
    (``notifications/cancelled``): nobody is left to read its answer, and the person cannot cancel it from the page
    (it is not one of their calls)."""
    import httpx

    proc = InspectorProcess("inspect", HOSTILE)
    try:
        page = open_page(browser, proc)
        box, view = call_with_view(page, "hostile")
        api = httpx.Client(base_url=proc.base, headers={"Authorization": f"Bearer {proc.token}"}, timeout=30)

        def sent(method: str) -> list[Any]:
            entries = api.post("/api/log", json={"since": 0}).json()["result"]["entries"]
            return [e for e in entries if e.get("method") == method and e.get("dir") == "out"]

        view.locator("#slow").click()
        deadline = time.monotonic() + 20
        while len(sent("tools/call")) < 2 and time.monotonic() < deadline:  # the person's hostile, the view's slow
            time.sleep(0.2)
        assert len(sent("tools/call")) == 2
        box.locator("button:text('Close view')").click()
        box.locator("xpath=self::*[@data-state='closed']").wait_for(timeout=10_000)
        deadline = time.monotonic() + 10
        while not sent("notifications/cancelled") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(sent("notifications/cancelled")) == 1
        assert not page.errors  # type: ignore[attr-defined]
    finally:
        proc.stop()


SILENT_VIEW_APP = """
from mcpkit import MCPKit

app = MCPKit("clock")
app.add_view("ui://clock/face", html="<!doctype html><html><body><p id=t>…</p></body></html>")


@app.tool(ui="ui://clock/face")
def now() -> dict[str, str]:
    \"\"\"The time now.\"\"\"
    return {"time": "12:00"}
"""


def test_a_view_that_never_starts_the_handshake_is_pointed_out(browser: Any, tmp_path: Any) -> None:
    """A view that never sends ``ui/initialize`` (plain HTML with no script) gets no tool input or result: the page
    says so, rather than showing a view that silently never fills in."""
    server = tmp_path / "silent_view_app.py"
    server.write_text(SILENT_VIEW_APP)
    proc = InspectorProcess("inspect", str(server))
    try:
        page = open_page(browser, proc)
        page.click("#tools-list button[data-key='now']")
        page.click("#call-button")
        box = page.locator(".app-view").first
        box.locator(".app-note:has-text('has not sent ui/initialize')").wait_for(timeout=20_000)
        assert box.get_attribute("data-state") == "loading"
        assert not page.errors  # type: ignore[attr-defined]
    finally:
        proc.stop()


def test_the_view_is_told_its_container_and_when_it_changes(browser: Any) -> None:
    """The frame's width is the host's: ``containerDimensions`` says so (a fixed ``width``, a ``maxHeight`` inline;
    a fixed ``height`` too in fullscreen), and a change (the window resized, the display mode) is sent as
    ``ui/notifications/host-context-changed``. Before, only ``maxHeight`` was sent: width unbounded, which by the
    spec gives the view control of it, yet the host ignored the width of its size changes."""
    proc = InspectorProcess("inspect", HOSTILE)
    try:
        page = open_page(browser, proc)
        box, _ = call_with_view(page, "hostile")
        first = box.locator(".app-note:has-text('container {')")
        first.wait_for(timeout=10_000)
        sent = re.search(r'container \{"width":(\d+),"maxHeight":640\}', first.inner_text())
        assert sent and int(sent[1]) > 600, first.inner_text()
        page.set_viewport_size({"width": 900, "height": 1000})
        frame = page.locator(".app-iframe").first
        deadline = time.monotonic() + 10
        widths: list[int] = []
        while time.monotonic() < deadline:  # (the last width sent is the frame's)
            notes = box.locator(".app-note:has-text('context changed')").all_inner_texts()
            widths = [
                int(w) for w in re.findall(r'"containerDimensions":\{"width":(\d+),"maxHeight":640\}', " ".join(notes))
            ]
            if widths and widths[-1] == frame.evaluate("f => f.clientWidth") < int(sent[1]):
                break
            time.sleep(0.2)
        assert widths and widths[-1] == frame.evaluate("f => f.clientWidth") < int(sent[1]), widths
    finally:
        proc.stop()


def test_a_request_dropped_by_the_rate_bound_is_answered_with_an_error(browser: Any) -> None:
    """Beyond the page's rate bound a view's messages are dropped; a request among them is still answered (-32000),
    so a view that bursts (a well-meaning one included) does not wait forever for answers that never come."""
    proc = InspectorProcess("inspect", HOSTILE)
    try:
        page = open_page(browser, proc)
        box, view = call_with_view(page, "hostile")
        view.locator("#burst").click()
        note = box.locator(".app-note:has-text('burst answered')")
        note.wait_for(timeout=15_000)
        assert "burst answered 150 of 150" in note.inner_text()
        view.locator("#out:has-text('error -32000')").wait_for(timeout=5_000)
        page.wait_for_selector(".app-note:has-text('the view sent too many messages')", timeout=5_000)
    finally:
        proc.stop()


def test_the_view_gets_the_json_rpc_id_of_the_tools_call_that_opened_it(browser: Any) -> None:
    """``hostContext.toolInfo.id`` is "JSON-RPC id of the tools/call request" (Apps spec): the id the server saw,
    which the client assigned, not the page's own name for the call (it used to be ``"call-1"``)."""
    proc = InspectorProcess("inspect", HOSTILE)
    try:
        page = open_page(browser, proc)
        box, _ = call_with_view(page, "hostile")
        result = page.locator(".call pre.text:has-text('request id')").first
        result.wait_for(timeout=20_000)
        seen = re.search(r"request id (\d+)", result.inner_text())
        assert seen, result.inner_text()
        note = box.locator(".app-note:has-text('tool call id')")
        note.wait_for(timeout=10_000)
        assert f"tool call id {seen[1]}" in note.inner_text(), note.inner_text()
    finally:
        proc.stop()


def test_a_view_is_never_switched_to_a_display_mode_it_did_not_declare(browser: Any) -> None:
    """A view that declares ``availableDisplayModes: ["fullscreen"]`` is shown fullscreen and stays so: the host
    offers no "Exit fullscreen" (it used to switch such a view to inline), only "Close view", and its request for
    inline is answered with the mode it keeps (the spec: the host MUST NOT switch a view to an undeclared mode, and
    answers with the current mode)."""
    proc = InspectorProcess("inspect", HOSTILE)
    try:
        page = open_page(browser, proc)
        box, view = call_with_view(page, "fullscreen_only")
        box.locator(".app-note:has-text('mode fullscreen; tool call id')").wait_for(timeout=10_000)
        assert "fullscreen" in (box.get_attribute("class") or "").split()
        assert box.locator("button:text('Exit fullscreen')").is_hidden()
        assert box.locator("button:text('Close view')").is_visible()
        view.locator("#inline").click()
        box.locator(".app-note:has-text('display mode answered fullscreen')").wait_for(timeout=10_000)
        assert "fullscreen" in (box.get_attribute("class") or "").split()
        assert "display mode: inline" not in box.inner_text()
        box.locator("button:text('Close view')").click()
        box.locator("xpath=self::*[@data-state='closed']").wait_for(timeout=10_000)
    finally:
        proc.stop()


def test_a_view_that_declares_no_modes_may_still_go_fullscreen_and_back(browser: Any) -> None:
    proc = InspectorProcess("inspect", HOSTILE)
    try:
        page = open_page(browser, proc)
        box, view = call_with_view(page, "hostile")
        view.locator("#fullscreen").click()
        box.locator(".app-note:has-text('display mode answered fullscreen')").wait_for(timeout=10_000)
        box.locator("button:text('Exit fullscreen')").click()
        page.wait_for_selector(".app-view:not(.fullscreen) .app-note:has-text('display mode: inline')")
    finally:
        proc.stop()


def test_a_message_from_the_view_in_another_role_than_user_is_refused_and_not_shown(browser: Any) -> None:
    """``ui/message`` carries ``role: "user"`` only (Apps spec): another role is answered -32000 "Invalid message
    format" and not shown as sent to the conversation (it used to be, as "(assistant)")."""
    proc = InspectorProcess("inspect", HOSTILE)
    try:
        page = open_page(browser, proc)
        box, view = call_with_view(page, "hostile")
        view.locator("#assistant").click()
        view.locator("#out:has-text('error -32000 Invalid message format')").wait_for(timeout=10_000)
        assert "said by the model" not in box.inner_text()
        assert "sends to the conversation" not in box.inner_text()
        box.locator(".app-note.refused:has-text('ui/message')").wait_for(timeout=5_000)
    finally:
        proc.stop()


def test_a_views_progress_token_never_mixes_with_the_inspectors_own_calls(browser: Any) -> None:
    """A view's forwarded ``tools/call`` kept its own ``_meta.progressToken`` (the App SDK always sets one, its own
    request id): equal to the id of one of the inspector's running calls, the server's progress for the view's
    call was shown on the person's call. The host now sends its own token and passes the progress to the view under
    the view's token."""
    import httpx

    proc = InspectorProcess("inspect", HOSTILE)
    try:
        page = open_page(browser, proc)
        page.click("#tools-list button[data-key='slow']")  # runs until cancelled, reports no progress
        page.click("#call-button")
        box = page.locator(".app-view").first
        box.locator("xpath=self::*[@data-state='ready']").wait_for(timeout=30_000)
        note = box.locator(".app-note:has-text('tool call id')")
        note.wait_for(timeout=10_000)
        slow_id = re.search(r"tool call id (\d+)", note.inner_text())
        assert slow_id, note.inner_text()
        view = page.frame_locator(".app-iframe").frame_locator("iframe")
        view.locator("#progress").click()  # tools/call ticks, its progressToken = the slow call's request id
        box.locator(".app-note:has-text('tools/call ticks: answered by the server')").wait_for(timeout=20_000)
        api = httpx.Client(base_url=proc.base, headers={"Authorization": f"Bearer {proc.token}"}, timeout=30)
        calls = api.post("/api/state", json={}).json()["result"]["calls"]
        slow = next(c for c in calls if c["name"] == "slow")
        assert slow["status"] == "running" and slow["progress"] is None, slow
        # the view gets its call's progress, under the token it chose
        last = box.locator(".app-note:has-text('progress {')").last
        last.wait_for(timeout=10_000)
        assert f'"progressToken":{slow_id[1]},"progress":3' in last.inner_text().replace(" ", ""), last.inner_text()
        page.click(".call button.danger")  # (the slow call ends)
    finally:
        proc.stop()
