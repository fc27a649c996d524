"""``mcpkit.proxy`` and ``mcpkit proxy``: every pair of protocol eras bridged, over stdio and Streamable HTTP fronts;
gateways with prefixes; the incoming token never forwarded; URL targets under the SSRF rules; one request in,
at most one request out; cancellation and progress preserved."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import mcpkit
from mcpkit import Client, Context, MCPKit, proxy_listen
from mcpkit.engine.tap import IN, TapEvent
from mcpkit.protocol.errors import MCPError
from support.asgi import serve_asgi
from support.procs import stderr_until, stop
from support.toolkit import APPS_FILE, ERAS, build, serve_http

pytestmark = pytest.mark.timeout(90)
HANDLERS: dict[str, Any] = {
    "elicitation_handler": lambda params: {"name": "Oslo"},
    "sampling_handler": lambda params: "mild and dry",
    "roots": ["file:///work"],
}


def _upstream(name: str) -> list[str]:
    return [sys.executable, str(APPS_FILE), name]


@contextlib.asynccontextmanager
async def through_proxy(
    upstream: str, front: str, mode: str, upstream_mode: str = "auto", pool_size: int = 1, **client_options: Any
) -> AsyncIterator[Client]:
    """A client of a proxy of the toolkit app ``upstream`` (a stdio subprocess): the proxy served over stdio
    (``mcpkit proxy`` itself) or over HTTP (in process)."""
    if front == "stdio":
        command = [sys.executable, "-m", "mcpkit", "proxy", " ".join(_upstream(upstream)), "--mode", upstream_mode]
        command += ["--pool-size", str(pool_size)]
        async with Client(command, mode=mode, **client_options) as client:
            yield client
        return
    app = mcpkit.proxy(_upstream(upstream), client_options={"mode": upstream_mode}, pool_size=pool_size)
    async with serve_http(app) as url, Client(url, mode=mode, **client_options) as client:
        yield client


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("upstream_mode", ["handshake", "modern"])
@pytest.mark.parametrize("front", ["stdio", "http"])
async def test_every_era_pair_is_bridged_with_progress_logs_elicitation_sampling_and_list_changes(
    front: str, upstream_mode: str, mode: str
) -> None:
    logs: list[Any] = []
    async with through_proxy(
        "compose", front, mode, upstream_mode, log_level="info", logging_handler=logs.append, **HANDLERS
    ) as client:
        assert client.server_info is not None and client.server_info["name"] == "main"  # the upstream's info
        names = [t.name for t in await client.list_tools()]
        assert {"weather_forecast", "weather_ask_city", "grow"} <= set(names)
        progress: list[float] = []
        result = await client.call_tool(
            "weather_forecast", {"city": "Paris"}, on_progress=lambda p, total, message: progress.append(p)
        )
        assert result.text == "Paris: sunny, celsius (served by weather)" and progress == [1, 2]
        assert (await client.call_tool("weather_ask_city", {})).text == "you chose Oslo"
        assert (await client.call_tool("weather_summarize", {})).text == "model says mild and dry"
        assert (await client.call_tool("weather_double", {"x": 5})).data == 10
        assert await client.read_text("data://weather/city/Rome") == "data of Rome"
        assert (await client.complete("weather_brief", "style", "l")).completion.values == ["long"]
        prompt = await client.get_prompt("weather_brief", {"city": "Oslo"})
        assert prompt.messages[0].content.text == "Write a short brief for Oslo"  # type: ignore[union-attr]
        with pytest.raises(MCPError):
            await client.list_tools_page("forged-cursor")
        async with client.watch(tools=True) as watch:
            await client.call_tool("grow", {"name": "later"})
            assert (await watch.next(timeout=10))[0] == "notifications/tools/list_changed"
        assert "weather_later" in [t.name for t in await client.list_tools()]
    assert {"level": "info", "data": "forecast for Paris"} in [{k: e[k] for k in ("level", "data")} for e in logs]


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18"])
@pytest.mark.parametrize("front", ["stdio", "http"])
async def test_a_handshake_only_server_reached_by_a_2026_07_28_only_client(front: str, version: str) -> None:
    async with through_proxy(f"legacy-{version}", front, "modern", **HANDLERS) as client:
        assert client.protocol_version == "2026-07-28"
        assert (await client.call_tool("sample", {})).text == "model: mild and dry"
        assert (await client.call_tool("roots", {})).text == "file:///work"
        progress: list[float] = []
        assert (
            await client.call_tool("slow", {"steps": 3}, on_progress=lambda p, t, m: progress.append(p))
        ).text == "done"
        assert progress == [1, 2, 3]
        asked = await client.call_tool("ask", {})
        if version < "2025-06-18":  # elicitation came with 2025-06-18: an older server cannot ask
            assert asked.is_error
        else:
            assert asked.text == "Hello, Oslo!"


async def _progress_across_an_input_round(in_gap_count: int) -> tuple[list[float], list[float]]:
    """A 2026-07-28 call through the proxy to a handshake-era tool that asks its client for roots from the side
    (as server-everything's roots sync does) and goes on: it reports ``in_gap_count`` updates while the client
    holds the ``input_required`` answer and has not sent its retry (the client answers once they reached the
    proxy), then one more. Returns the progress the client saw on the wire and the one its callback got."""
    in_gap = asyncio.Event()  # the client has the input_required answer and has not sent its retry yet
    relayed = asyncio.Event()  # the proxy has received the progress the upstream sent meanwhile
    total = in_gap_count + 1
    upstream = MCPKit("side-asker", versions=["2025-06-18"])

    @upstream.tool
    async def work(ctx: Context) -> str:
        asking = asyncio.ensure_future(ctx.list_roots())  # the tool does not wait for the answer
        await in_gap.wait()
        for i in range(in_gap_count):
            await ctx.report_progress(i + 1, total)
        roots = await asking
        await ctx.report_progress(total, total)
        return ",".join(str(r.uri) for r in roots)

    def upstream_tap(event: TapEvent) -> None:  # the proxy's upstream clients: what reaches the proxy
        msg = event.message
        if event.direction == IN and msg.method == "notifications/progress" and msg.params["progress"] == in_gap_count:
            relayed.set()

    async def roots() -> list[str]:  # answered between the two rounds, once the upstream's progress is in
        in_gap.set()
        await relayed.wait()
        return ["file:///work"]

    wire: list[float] = []

    def client_tap(event: TapEvent) -> None:
        msg = event.message
        if event.direction == IN and msg.method == "notifications/progress":
            wire.append(msg.params["progress"])

    app = mcpkit.proxy(upstream, client_options={"tap": upstream_tap})
    async with serve_http(app) as url, Client(url, mode="modern", roots=roots, tap=client_tap) as client:
        progress: list[float] = []
        result = await client.call_tool("work", {}, on_progress=lambda p, t, m: progress.append(p), timeout=30)
        assert result.text == "file:///work"
    assert in_gap.is_set() and relayed.is_set()
    return wire, progress


async def test_upstream_progress_sent_between_two_rounds_of_a_2026_07_28_call_reaches_the_client_on_the_retry() -> None:
    """No request of the client is open between the ``input_required`` answer and the retry: the proxy holds the
    upstream's progress of that time and sends it on the retry's stream, before the rest. None is lost."""
    wire, progress = await _progress_across_an_input_round(2)
    assert wire == progress == [1, 2, 3]


async def test_progress_held_for_a_retry_beyond_its_bound_drops_the_oldest_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """At most ProgressRelay.MAX_QUEUED updates wait: beyond, the oldest go (the latest progress is kept, in
    order) and a warning is logged once."""
    from mcpkit.proxy_rounds import ProgressRelay

    bound = ProgressRelay.MAX_QUEUED
    extra = 44
    with caplog.at_level("WARNING", logger="mcpkit.proxy"):
        wire, progress = await _progress_across_an_input_round(bound + extra)
    assert wire == progress == list(range(extra + 1, bound + extra + 2))
    warnings = [r for r in caplog.records if r.name == "mcpkit.proxy" and "progress updates" in r.getMessage()]
    assert len(warnings) == 1 and "dropping the oldest" in warnings[0].getMessage()


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("front", ["stdio", "http"])
async def test_resource_updates_of_a_2026_07_28_upstream_reach_subscribers_of_either_era(front: str, mode: str) -> None:
    """A 2026-07-28 server has no resources/subscribe: the proxy holds one listen stream upstream naming what its
    clients subscribed to (a handshake-era session's resources/subscribe, a 2026-07-28 client's listen stream) and
    relays the updates, once each; a subscription ended and made again works again."""
    async with through_proxy("cached", front, mode, "modern") as client:
        for _ in range(2):
            async with client.watch(resource_uris=["data://clock"]) as watch:
                await client.call_tool("touch", {})
                method, params = await watch.next(timeout=10)
                assert method == "notifications/resources/updated" and params["uri"] == "data://clock"
                with pytest.raises(TimeoutError):
                    await watch.next(timeout=0.5)  # (relayed once)


async def test_the_upstream_resource_watch_follows_the_subscriptions_and_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The URIs watched on a 2026-07-28 upstream are the union of what the clients want, at most MAX_WATCHED (a
    subscription beyond is refused with -32600); they go when the subscriptions end."""
    monkeypatch.setattr(proxy_listen, "MAX_WATCHED", 3)  # (where the watches are counted)
    app = mcpkit.proxy(_upstream("cached"), client_options={"mode": "modern"})
    async with serve_http(app) as url, Client(url, mode="handshake") as first, Client(url, mode="handshake") as other:
        upstream = app.upstreams[0]
        await first.subscribe_resource("data://clock")
        await first.subscribe_resource("data://a")
        await other.subscribe_resource("data://clock")  # already watched
        assert upstream.watched == {"data://clock", "data://a"}
        await other.subscribe_resource("data://b")
        with pytest.raises(MCPError) as refused:
            await other.subscribe_resource("data://c")
        assert refused.value.code == -32600 and "watches 3 resources" in str(refused.value)
        await first.unsubscribe_resource("data://a")
        await other.subscribe_resource("data://c")
        assert upstream.watched == {"data://clock", "data://b", "data://c"}
        async with Client(url, mode="modern") as modern, modern.watch(resource_uris=["data://clock"]):
            assert upstream.watched == {"data://clock", "data://b", "data://c"}
        for uri in ("data://clock", "data://b", "data://c"):
            await other.unsubscribe_resource(uri)
        await first.unsubscribe_resource("data://clock")
        assert upstream.watched == frozenset()


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("front", ["stdio", "http"])
async def test_cancellation_reaches_the_upstream(front: str, mode: str) -> None:
    """A call given up by the client is cancelled at the upstream too. It is given up once the upstream runs it (its
    first progress): a fixed short timeout could end it before the proxy had forwarded it, on a loaded machine."""
    async with through_proxy("legacy-2025-06-18", front, mode, **HANDLERS) as client:
        started = asyncio.Event()
        call = asyncio.ensure_future(
            client.call_tool("slow", {"steps": 100}, on_progress=lambda p, t, m: started.set(), timeout=60)
        )
        await asyncio.wait_for(started.wait(), 30)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        for _ in range(50):
            if (await client.call_tool("was_cancelled", {})).data is True:
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("the upstream tool was never cancelled")


async def _crash_upstream(client: Any) -> Any:
    """The upstream process's id (the ``process`` tool), then that process crashed (the ``crash`` tool): the call
    fails, or answers an error."""
    first = (await client.call_tool("process", {})).data
    try:
        crashed = await client.call_tool("crash", {}, timeout=10)
    except MCPError:
        return first
    assert crashed.is_error
    return first


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("front", ["stdio", "http"])
async def test_after_the_upstream_process_crashed_the_next_calls_reach_a_new_one(front: str, mode: str) -> None:
    """A stdio upstream that dies fails the call it was running; the proxy does not keep the dead connection:
    the next calls get a new process (a handshake-era client session too: a new upstream session)."""
    async with through_proxy("legacy-2025-06-18", front, mode, **HANDLERS) as client:
        first = await _crash_upstream(client)
        for _ in range(2):
            second = (await client.call_tool("process", {}, timeout=10)).data
            assert isinstance(second, int) and second != first


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("front", ["stdio", "http"])
async def test_after_a_2026_07_28_upstream_process_crashed_the_next_call_reaches_a_new_one_which_relays_changes(
    front: str, mode: str
) -> None:
    """Every request shares a 2026-07-28 upstream's one connection: when its stdio server dies, the next call
    gets a new process, and what the client watched before (list changes, a resource) is relayed from it."""
    async with (
        through_proxy("cached", front, mode, "modern") as client,
        client.watch(tools=True, resource_uris=["data://clock"]) as watch,
    ):
        first = await _crash_upstream(client)
        second = (await client.call_tool("process", {}, timeout=10)).data
        assert isinstance(second, int) and second != first
        assert (await client.call_tool("process", {}, timeout=10)).data == second  # (the new one stays)
        await client.call_tool("grow", {"name": "later"})
        assert (await watch.next(timeout=10))[0] == "notifications/tools/list_changed"
        await client.call_tool("touch", {})
        method, params = await watch.next(timeout=10)
        assert method == "notifications/resources/updated" and params["uri"] == "data://clock"


async def _next_after_reconnect(watch: Any, kinds: tuple[str, ...] = ("tools",)) -> Any:
    """Read ``watch`` until the list changes a proxy says once it connected again (what the new server lists may
    differ) have all come, then the next resource update (one the new server sent): its params."""
    waiting = {f"notifications/{kind}/list_changed" for kind in kinds}
    while waiting:
        method, _ = await watch.next(timeout=15)
        waiting.discard(method)
    while True:
        method, params = await watch.next(timeout=15)
        if method == "notifications/resources/updated":
            return params


def _kill_upstreams(pids: Path) -> set[int]:
    """Kill every process of the ticking app that left its id in ``pids`` (the proxy's connections to it): the
    upstream server died. Their ids."""
    killed = set()
    for entry in pids.iterdir():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(entry.name), signal.SIGKILL)
        killed.add(int(entry.name))
        entry.unlink()
    return killed


def _proxy_of_an_upstream_that_can_go_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, upstream_mode: str, max_delay: float
) -> tuple[Any, Path, Path]:
    """A proxy of the ticking app (2 reconnect attempts, backing off from 0.05 s to ``max_delay``), whose servers
    leave their ids in the directory ``pids`` and refuse to start while the file ``down`` exists: the proxy, down,
    pids."""
    down, pids = tmp_path / "down", tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("TOOLKIT_PID_DIR", str(pids))
    monkeypatch.setenv("TOOLKIT_REFUSE_IF", str(down))
    app = mcpkit.proxy(
        _upstream("ticking"),
        client_options={"mode": upstream_mode},
        reconnect_attempts=2,
        reconnect_delay=0.05,
        reconnect_max_delay=max_delay,
    )
    return app, down, pids


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("upstream_mode", ["handshake", "modern"])
@pytest.mark.parametrize("front", ["stdio", "http"])
async def test_a_client_that_only_listens_hears_the_upstream_again_after_its_process_died(
    front: str, upstream_mode: str, mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy notices at once that its upstream died and connects again in the background, re-making what its
    clients listen for (list changes, the resources they subscribed to): a client that sends no request after the
    crash is told the lists may have changed, then hears the new server's resource updates."""
    monkeypatch.setenv("TOOLKIT_PID_DIR", str(tmp_path))
    async with through_proxy("ticking", front, mode, upstream_mode) as client:
        await client.call_tool("process", {})
        async with client.watch(tools=True, resource_uris=["data://tick"]) as watch:
            method, params = await watch.next(timeout=10)
            assert method == "notifications/resources/updated" and params["uri"] == "data://tick"
            killed = _kill_upstreams(tmp_path)  # (no request from here on until the new server was heard)
            assert (await _next_after_reconnect(watch))["uri"] == "data://tick"
        assert int(await client.read_text("data://tick")) not in killed


@pytest.mark.parametrize("upstream_mode", ["handshake", "modern"])
async def test_while_the_upstream_cannot_be_reached_requests_are_refused_at_once_and_the_proxy_comes_back_with_it(
    upstream_mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the upstream cannot be reached (its server does not start), a request is refused at once with an
    error saying so (no hang); the proxy tries again a bounded number of times, backing off, then more slowly in the
    background, and a request past that round makes it try at once: once the server starts again, requests and
    listeners are served."""
    app, down, pids = _proxy_of_an_upstream_that_can_go_down(tmp_path, monkeypatch, upstream_mode, max_delay=0.1)
    async with (
        serve_http(app) as url,
        Client(url, mode="modern") as client,
        client.watch(tools=True, resource_uris=["data://tick"]) as watch,
    ):
        await client.call_tool("process", {})
        down.touch()
        killed = _kill_upstreams(pids)
        loop = asyncio.get_running_loop()
        for _ in range(50):  # (the attempts fail, then the proxy gives up; each request still answers at once)
            start = loop.time()
            with pytest.raises(MCPError) as error:
                await client.call_tool("process", {}, timeout=10)
            assert loop.time() - start < 5
            assert error.value.code == -32603 and "is unavailable" in error.value.message
            if "attempts in a row failed" in error.value.message:
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("the round of attempts never ended")
        down.unlink()
        second = (await client.call_tool("process", {}, timeout=10)).data  # (it tries once more, and succeeds)
        assert isinstance(second, int) and second not in killed
        assert (await _next_after_reconnect(watch))["uri"] == "data://tick"


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("upstream_mode", ["handshake", "modern"])
async def test_a_client_that_only_listens_hears_the_upstream_again_when_it_is_back_after_the_round_gave_up(
    upstream_mode: str, mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The upstream stays down past the proxy's round of ``reconnect_attempts``: the proxy keeps trying in the
    background, so a client that sends no request (it only listens) hears the new server's resource updates once
    it is back. Before, the round gave up and only a request started a new one: the listener heard nothing."""
    app, down, pids = _proxy_of_an_upstream_that_can_go_down(tmp_path, monkeypatch, upstream_mode, max_delay=0.2)
    caplog.set_level(logging.WARNING, "mcpkit.proxy")
    async with serve_http(app) as url, Client(url, mode=mode) as client:
        await client.call_tool("process", {})
        async with client.watch(tools=True, resource_uris=["data://tick"]) as watch:
            method, params = await watch.next(timeout=10)
            assert method == "notifications/resources/updated" and params["uri"] == "data://tick"
            down.touch()
            killed = _kill_upstreams(pids)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 15
            # (a handshake-era session's own upstream session on a handshake-era upstream gives up too)
            rounds = 2 if mode == upstream_mode == "handshake" else 1
            while len([r for r in caplog.records if r.levelno >= logging.ERROR]) < rounds:
                assert loop.time() < deadline, "the round of attempts never ended"
                await asyncio.sleep(0.05)
            down.unlink()  # back: no request from here on until the new server was heard
            assert (await _next_after_reconnect(watch))["uri"] == "data://tick"
        assert int(await client.read_text("data://tick")) not in killed


async def test_past_its_round_the_proxy_tries_an_upstream_that_is_down_no_faster_than_its_longest_delay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The bound on the background attempts after a round gave up: one at most every ``reconnect_max_delay``
    seconds (80-100 % of it; the delay doubles up to it), logged below WARNING (one ERROR line said the round gave
    up), without end. Each gap between two failed attempts is at least the delay the proxy waited, so the gaps are
    what is measured: a count of attempts in a fixed window failed on a loaded machine, where an attempt that starts
    a Python interpreter can take seconds (none fitted in the window). While the upstream is down, its command is a
    shell that refuses at once, so an attempt takes milliseconds and a proxy that did not wait would be seen."""
    down, pids = tmp_path / "down", tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("TOOLKIT_PID_DIR", str(pids))
    monkeypatch.setenv("TOOLKIT_REFUSE_IF", str(down))
    upstream = ["sh", "-c", f'test -e "$TOOLKIT_REFUSE_IF" && exit 1; exec {shlex.join(_upstream("ticking"))}']
    app = mcpkit.proxy(upstream, reconnect_attempts=2, reconnect_delay=0.05, reconnect_max_delay=0.4)
    caplog.set_level(logging.DEBUG, "mcpkit.proxy")

    def attempts() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.levelno >= logging.ERROR or ": attempt " in r.getMessage()]

    async with serve_http(app) as url, Client(url, mode="modern") as client:
        await client.call_tool("process", {})
        down.touch()
        _kill_upstreams(pids)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while not [r for r in attempts() if r.levelno >= logging.ERROR][-1:] or len(attempts()) < 8:
            assert loop.time() < deadline, [r.getMessage() for r in attempts()]
            await asyncio.sleep(0.05)
        failed = attempts()
        gave_up = next(i for i, r in enumerate(failed) if r.levelno >= logging.ERROR)
        after = failed[gave_up:]
        assert len(after) >= 4, [r.getMessage() for r in failed]  # (the background attempts go on)
        assert all(r.levelno < logging.WARNING for r in after[1:])
        assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1
    # the delays after the round: 0.1, 0.2, then 0.4 for ever (80-100 % of each); a gap also holds the attempt itself
    gaps = [b.created - a.created for a, b in itertools.pairwise(after)]
    floors = [0.8 * min(0.1 * 2**i, 0.4) - 0.002 for i in range(len(gaps))]
    assert all(gap >= floor for gap, floor in zip(gaps, floors, strict=True)), gaps


async def test_the_subscriptions_a_session_keeps_through_a_proxy_to_make_them_again_are_bounded() -> None:
    """A handshake-era client session's subscriptions on a handshake-era upstream are kept by the proxy (to make
    them again on a new upstream session): at most ``max_subscriptions`` of them, of URIs of at most
    ``max_subscription_uri`` characters; beyond, refused, and the session goes on."""
    app = mcpkit.proxy(build("ticking"), client_options={"mode": "handshake"})
    app.max_subscriptions = 2
    async with Client(app, mode="handshake") as client:
        for uri in ("data://tick", "data://a"):
            await client.subscribe_resource(uri)
        await client.subscribe_resource("data://a")  # (one it holds already)
        with pytest.raises(MCPError) as error:
            await client.subscribe_resource("data://b")
        assert error.value.code == -32600 and "max_subscriptions=2" in error.value.message
        await client.unsubscribe_resource("data://a")
        await client.subscribe_resource("data://b")
        with pytest.raises(MCPError) as error:
            await client.subscribe_resource("data://" + "x" * app.max_subscription_uri)
        assert error.value.code == -32602
        assert await client.read_text("data://tick")


@pytest.mark.parametrize("front", ["stdio", "http"])
async def test_requests_one_after_the_other_go_back_to_the_first_upstream_process_after_a_burst(front: str) -> None:
    """A stdio target is one process per pooled connection (a pool the operator asked for: ``pool_size``): a burst
    of 2026-07-28 calls opens a second one, and once they are done the next calls are served by the first again
    (whatever order the burst ended in)."""
    async with through_proxy("legacy-2025-06-18", front, "modern", pool_size=4, **HANDLERS) as client:
        first = (await client.call_tool("process", {})).data
        started = asyncio.Event()
        short = asyncio.ensure_future(
            client.call_tool("slow", {"steps": 10}, on_progress=lambda p, t, m: started.set(), timeout=30)
        )
        await started.wait()  # the short call holds the first process: the long one opens another
        long_call = await client.call_tool("slow", {"steps": 30}, timeout=30)
        assert long_call.text == "done" and (await short).text == "done"  # the second process was freed last
        assert [(await client.call_tool("process", {})).data for _ in range(3)] == [first] * 3


async def test_a_gateway_prefixes_its_members_and_sends_one_request_out_per_request_in() -> None:
    first, second = build("visibility"), build("transform")
    counts = {"first": 0, "second": 0}
    for name, app in (("first", first), ("second", second)):
        original = app._handlers["tools/list"]

        def counting(ctx: Any, params: Any, original: Any = original, name: str = name) -> Any:
            counts[name] += 1
            return original(ctx, params)

        app.set_handler("tools/list", counting)
    gateway = mcpkit.proxy({"v": first, "t": second})
    async with serve_http(gateway) as url, Client(url) as client:
        pages = 0
        names: list[str] = []
        cursor = None
        while True:
            items, cursor = await client.list_tools_page(cursor)
            pages += 1
            names += [t.name for t in items]
            if not cursor:
                break
        assert names == [
            f"v_{n}"
            for n in ("public_0", "public_1", "public_2", "public_3", "public_4", "wipe", "set_admin", "set_beta")
        ] + [
            "t_search",
            "t_find",
            "t_shout",
        ]
        assert counts["first"] + counts["second"] == pages  # (startup lists nothing: the primary only connects)
        assert (await client.call_tool("t_find", {"q": "cats"})).data["limit"] == 3
        assert (await client.call_tool("v_wipe", {})).text == "wiped"
        with pytest.raises(MCPError):
            await client.call_tool("wipe", {})  # only prefixed names exist
        forged = cursor or "x"
        with pytest.raises(MCPError):
            await client.list_tools_page(forged + "tampered")


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("front", ["stdio", "http"])
async def test_a_gateway_of_stdio_servers_serves_either_era_over_either_front(front: str, mode: str) -> None:
    """``mcpkit proxy t=CMD l=CMD`` (stdio front) or ``mcpkit.proxy({...})`` over HTTP: each member's tools under
    its prefix, calls routed to their member with elicitation and progress passing through, unprefixed names and
    forged cursors refused."""
    members = {"t": " ".join(_upstream("transform")), "l": " ".join(_upstream("legacy-2025-06-18"))}
    async with contextlib.AsyncExitStack() as stack:
        if front == "stdio":
            command = [sys.executable, "-m", "mcpkit", "proxy", *(f"{k}={v}" for k, v in members.items())]
            client = await stack.enter_async_context(Client(command, mode=mode, **HANDLERS))
        else:
            url = await stack.enter_async_context(serve_http(mcpkit.proxy(members)))
            client = await stack.enter_async_context(Client(url, mode=mode, **HANDLERS))
        names = {t.name for t in await client.list_tools()}
        assert {"t_search", "t_find", "t_shout", "l_ask", "l_sample", "l_slow"} <= names
        assert all(n.startswith(("t_", "l_")) for n in names)
        assert (await client.call_tool("t_find", {"q": "cats"})).data == {
            "query": "cats",
            "limit": 3,
            "key_used": True,
        }
        assert (await client.call_tool("l_ask", {})).text == "Hello, Oslo!"
        progress: list[float] = []
        slow = await client.call_tool("l_slow", {"steps": 3}, on_progress=lambda p, t, m: progress.append(p))
        assert slow.text == "done" and progress == [1, 2, 3]
        with pytest.raises(MCPError):
            await client.call_tool("find", {"q": "cats"})  # only prefixed names exist
        with pytest.raises(MCPError):
            await client.list_tools_page("forged-cursor")


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("front", ["stdio", "http"])
async def test_an_mcp_json_entry_is_a_target(front: str, mode: str, tmp_path: Path) -> None:
    """``mcpkit proxy mcp.json#name`` (stdio front) and ``mcpkit.proxy(entry)`` over HTTP start the entry's
    command with its environment."""
    entry = {
        "command": sys.executable,
        "args": [str(APPS_FILE), "legacy-2025-06-18"],
        "env": {"TOOLKIT_MARK": "from-the-entry"},
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"legacy": entry, "other": {"url": "http://127.0.0.1:1/mcp"}}}))
    async with contextlib.AsyncExitStack() as stack:
        if front == "stdio":
            command = [sys.executable, "-m", "mcpkit", "proxy", f"{path}#legacy"]
            client = await stack.enter_async_context(Client(command, mode=mode, **HANDLERS))
        else:
            url = await stack.enter_async_context(serve_http(mcpkit.proxy(entry)))
            client = await stack.enter_async_context(Client(url, mode=mode, **HANDLERS))
        assert (await client.call_tool("environment", {"name": "TOOLKIT_MARK"})).text == "from-the-entry"
        assert (await client.call_tool("sample", {})).text == "model: mild and dry"


async def test_mcpkit_proxy_serves_a_2024_11_05_stdio_server_as_a_2026_07_28_endpoint_behind_a_token() -> None:
    """The command line: ``mcpkit proxy "<2024-11-05 stdio server>" -t http --port 0 --auth-token T``. A
    2026-07-28-only client presenting T is served (sampling, roots and progress of the old server reach it); a
    request without T is refused with 401 and a plain Bearer challenge: static tokens have no authorization server,
    so there is no resource metadata to discover (MCP requires it to name one)."""
    upstream = " ".join(_upstream("legacy-2024-11-05"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpkit", "proxy", upstream, "-t", "http", "--port", "0", "--auth-token", "s3cret"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = stderr_until(proc, "proxying on", timeout=30)
        match = re.search(r"proxying on (http://\S+)", "".join(lines))
        assert match, f"mcpkit proxy did not announce its URL: {lines}"
        url = match.group(1)
        async with httpx.AsyncClient() as raw:
            refused = await raw.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "server/discover"})
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer", refused.headers
        origin = url[: url.index("/", len("http://"))]
        async with httpx.AsyncClient() as raw:
            assert (await raw.get(origin + "/.well-known/oauth-protected-resource/mcp")).status_code == 404
        # the token's audience is the port it listens on, though it was asked for port 0: T is accepted below
        async with Client(url, mode="modern", headers={"Authorization": "Bearer s3cret"}, **HANDLERS) as client:
            assert client.protocol_version == "2026-07-28"
            assert (await client.call_tool("sample", {})).text == "model: mild and dry"
            assert (await client.call_tool("roots", {})).text == "file:///work"
            progress: list[float] = []
            slow = await client.call_tool("slow", {"steps": 3}, on_progress=lambda p, t, m: progress.append(p))
            assert slow.text == "done" and progress == [1, 2, 3]
            assert (await client.call_tool("ask", {})).is_error  # (no elicitation before 2025-06-18)
    finally:
        stop(proc)


async def test_the_incoming_token_is_never_forwarded_upstream() -> None:
    from mcpkit.auth import StaticTokenVerifier, protect
    from mcpkit.transports.http import create_app

    seen: list[dict[str, str]] = []

    def recording(inner: Any) -> Any:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                seen.append({k.decode().lower(): v.decode() for k, v in scope["headers"]})
            await inner(scope, receive, send)

        return app

    async with serve_asgi(recording(create_app(build("compose")))) as upstream_port:
        upstream_url = f"http://127.0.0.1:{upstream_port}/mcp"
        proxy_app = mcpkit.proxy(upstream_url, client_options={"headers": {"Authorization": "Bearer proxy-own"}})
        async with serve_asgi(
            protect(
                create_app(proxy_app),
                resource="http://proxy.test/mcp",
                verifier=StaticTokenVerifier.simple({"incoming-secret": []}, audience="http://proxy.test/mcp"),
            )
        ) as port:
            url = f"http://127.0.0.1:{port}/mcp"
            async with Client(url, headers={"Authorization": "Bearer incoming-secret"}) as client:
                assert (await client.call_tool("weather_double", {"x": 2})).data == 4
    assert seen, "the upstream saw no request"
    assert all("incoming-secret" not in value for headers in seen for value in headers.values())
    assert {h.get("authorization") for h in seen} == {"Bearer proxy-own"}


@pytest.mark.parametrize("url", ["http://169.254.169.254/mcp", "http://10.1.2.3/mcp", "http://0.0.0.0/mcp"])
async def test_url_targets_on_private_or_link_local_addresses_are_refused(url: str) -> None:
    app = mcpkit.proxy(url)
    with pytest.raises(ValueError, match="refusing to proxy"):
        await app.upstreams[0].check_target()
    await mcpkit.proxy(url, allow_private_network=True).upstreams[0].check_target()  # allowed on request


def test_a_proxy_needs_targets_and_a_gateway_names_them() -> None:
    with pytest.raises(ValueError):
        mcpkit.ProxyServer({})
    with pytest.raises(ValueError, match="prefix"):
        mcpkit.ProxyServer({None: "a.py", "x": "b.py"})
    assert isinstance(mcpkit.proxy(MCPKit("x")), mcpkit.ProxyServer)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_official_python_client_reads_the_upstreams_server_info_through_the_proxy(mode: str) -> None:
    """In 2026-07-28 the official client learns serverInfo from ``server/discover`` (``mode="auto"`` asks it; a
    pinned ``mode="2026-07-28"`` adopts a made-up discover result and asks nothing, so it has None whatever the
    server): through the proxy it reads the upstream's, as it does directly. The proxy's HTTP app connects
    upstream when it starts (its ASGI lifespan enters the proxy's), before the first client arrives."""
    from mcp import Client as OfficialClient

    upstream = MCPKit("upstream-named", version="9.9.1")
    upstream.tool(lambda: "x", name="x")
    async with serve_http(upstream) as direct_url:
        async with OfficialClient(direct_url, mode=mode) as direct:
            expected = (direct.server_info.name, direct.server_info.version) if direct.server_info else None
            version = direct.protocol_version
        proxy_app = mcpkit.proxy(direct_url, allow_private_network=True)
        async with serve_http(proxy_app) as url:
            assert proxy_app.name == "upstream-named"  # connected at startup: the upstream's info, no request yet
            async with OfficialClient(url, mode=mode) as proxied:
                assert proxied.server_info is not None
                assert (
                    (proxied.server_info.name, proxied.server_info.version) == expected == ("upstream-named", "9.9.1")
                )
                assert proxied.protocol_version == ("2026-07-28" if mode == "auto" else version)


@pytest.mark.parametrize(
    ("target", "transport", "code", "message"),
    [
        ("/nonexistent/server.py", "stdio", 2, "server file not found: /nonexistent/server.py"),
        ("no-such-mcp-binary --stdio", "http", 2, "server command not found on PATH: no-such-mcp-binary"),
        (f"{sys.executable} -c \"raise SystemExit('db down')\"", "stdio", 1, "exited before the connection"),
        ("http://127.0.0.1:1/mcp", "http", 1, "cannot connect to http://127.0.0.1:1/mcp"),
    ],
)
def test_mcpkit_proxy_with_an_upstream_it_cannot_reach_says_so_in_one_line(
    target: str, transport: str, code: int, message: str
) -> None:
    """An upstream that does not exist, dies at start or does not listen: ``mcpkit proxy`` ends with one line
    (and the upstream's stderr when it has some) and the client commands' exit codes, not a traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "mcpkit.cli.main", "proxy", target, "-t", transport, "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.startswith("error: ") and message in proc.stderr.splitlines()[0], proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize(("transport", "path"), [("ws", None), ("sse", None), ("ws", "/gate"), ("http", "/gate")])
async def test_mcpkit_proxy_serves_each_transport_at_the_url_it_announces(transport: str, path: str | None) -> None:
    """``mcpkit proxy -t ws`` (or ``sse``) is reached at the URL it prints: it printed ``/ws`` (``/sse``) while
    it served that transport at ``/mcp``, the default of its ``--path`` moved onto the chosen transport."""
    upstream = " ".join(_upstream("legacy-2024-11-05"))
    extra = ["--path", path] if path else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpkit", "proxy", upstream, "-t", transport, "--port", "0", *extra],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = stderr_until(proc, "proxying on", timeout=30)
        match = re.search(r"proxying on (\S+)", "".join(lines))
        assert match, lines
        url = match.group(1)
        assert url.endswith(path or {"ws": "/ws", "sse": "/sse"}[transport]), url
        async with Client(url, transport=transport) as client:
            assert client.server_info.name
    finally:
        stop(proc)
