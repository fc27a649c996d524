"""A gateway (``mcpkit.proxy({"prefix": target, ...})``): its prefixes are checked as a mount's are and never
shadow one another, and every resource URI a member hands out (in a tool's result, a prompt's messages) is the
gateway's, so the client reads it back through the gateway."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

import mcpkit
from mcpkit import Client, MCPKit
from mcpkit.client.targets import ServerStartError
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import MCPError
from mcpkit.testing import LeakProbe
from support.toolkit import APPS_FILE, ERAS, serve_http

pytestmark = pytest.mark.timeout(60)


def _member(name: str, tool: str) -> MCPKit:
    app = MCPKit(name)

    @app.tool(name=tool)
    def answer() -> str:
        return f"from {name}"

    return app


@pytest.mark.parametrize("prefixes", [("a", "a_b"), ("a_b", "a"), ("x", "x_y_z")])
def test_a_gateway_refuses_a_prefix_that_would_take_another_members_names(prefixes: tuple[str, str]) -> None:
    """With members "a" and "a_b", the name "a_b_x" is a's "b_x" or a_b's "x": the gateway routed it to whichever
    came first, so the other member's tool was listed but unreachable. Such prefixes are refused."""
    first, second = prefixes
    with pytest.raises(ValueError, match=f"'{first}'.*'{second}'|'{second}'.*'{first}'"):
        mcpkit.proxy({first: _member("one", "x"), second: _member("two", "x")})


@pytest.mark.parametrize("prefix", ["", "a/b", "s:p", " a", "a b", "_a", "x" * 65])
def test_a_gateway_prefix_follows_the_mount_prefix_rule(prefix: str) -> None:
    """A prefix is put in names and in URIs' authority (``scheme://<prefix>/...``): "a/b" or "s:p" made URIs the
    gateway could not route back, "" names starting with "_"."""
    with pytest.raises(ValueError, match="prefix"):
        mcpkit.proxy({prefix: _member("one", "x"), "ok": _member("two", "y")})


async def test_prefixes_that_only_share_a_beginning_route_each_name_to_its_member() -> None:
    gateway = mcpkit.proxy({"ab": _member("one", "x"), "a": _member("two", "x")})
    async with Client(gateway) as client:
        assert {t.name for t in await client.list_tools()} == {"ab_x", "a_x"}
        assert (await client.call_tool("ab_x", {})).text == "from one"
        assert (await client.call_tool("a_x", {})).text == "from two"


def _library() -> MCPKit:
    app = MCPKit("library")

    @app.resource("books://shelf/{title}")
    def book(title: str) -> str:
        return f"the text of {title}"

    @app.tool()
    def find(title: str):  # type: ignore[no-untyped-def]  # (no outputSchema: the list is the content)
        """A link to the book and the book itself."""
        uri = f"books://shelf/{title}"
        return [
            t.ResourceLink(uri=uri, name=title),
            t.EmbeddedResource(resource=t.TextResourceContents(uri=uri, text=f"the text of {title}")),
            t.TextContent(text="found"),
        ]

    @app.prompt()
    def read_aloud(title: str) -> list[dict[str, Any]]:
        uri = f"books://shelf/{title}"
        return [{"role": "user", "content": {"type": "resource", "resource": {"uri": uri, "text": "..."}}}]

    return app


@pytest.mark.parametrize("mode", ERAS)
async def test_resource_uris_in_a_members_results_are_the_gateways_and_read_back_through_it(mode: str) -> None:
    """A member's tool returns a resource link and an embedded resource naming its own URI; through the gateway
    they name the gateway's (``books://lib/shelf/...``), which ``resources/read`` routes back to the member (the
    member's own URI was "Unknown resource" at the gateway)."""
    gateway = mcpkit.proxy({"lib": _library(), "other": _member("other", "x")})
    async with serve_http(gateway) as url, Client(url, mode=mode) as client:
        result = await client.call_tool("lib_find", {"title": "dune"})
        link, embedded, text = result.content
        assert link.type == "resource_link" and link.uri == "books://lib/shelf/dune"
        assert embedded.type == "resource" and embedded.resource.uri == "books://lib/shelf/dune"
        assert text.type == "text" and text.text == "found"
        read = await client.read_resource(link.uri)
        assert read.contents[0].uri == "books://lib/shelf/dune" and read.contents[0].text == "the text of dune"
        prompt = await client.get_prompt("lib_read_aloud", {"title": "dune"})
        assert prompt.messages[0].content.resource.uri == "books://lib/shelf/dune"


def _dice() -> MCPKit:
    app = MCPKit("dice")
    app.add_view("ui://dice/board", html="<!doctype html><html><body>board</body></html>")

    @app.tool(ui="ui://dice/board")
    def roll() -> int:
        return 4

    return app


@pytest.mark.parametrize("mode", ERAS)
async def test_a_members_tool_links_to_its_view_under_the_gateways_uri(mode: str) -> None:
    """A member's MCP Apps tool kept the member's view URI in ``_meta.ui.resourceUri`` (and the flat
    ``ui/resourceUri``) while the gateway served the view under its prefix: a host reading the linked view got
    "Resource not found", so no member's view could be shown through a gateway."""
    gateway = mcpkit.proxy({"games": _dice(), "other": _member("other", "x")})
    async with serve_http(gateway) as url, Client(url, mode=mode) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
        meta = tools["games_roll"].meta
        assert meta is not None and meta["ui"] == {"resourceUri": "ui://games/dice/board"}
        assert meta["ui/resourceUri"] == "ui://games/dice/board"
        assert tools["other_x"].meta is None
        view = await client.read_view(tools["games_roll"])
        assert view.uri == "ui://games/dice/board" and "board" in view.html


# ---------------------------------------------------------------------------------------------- a member that is down


def _ticking(tmp_path: Path, name: str) -> tuple[dict[str, Any], Path, Path]:
    """A member: the toolkit's ticking app as a stdio subprocess that refuses to start while its ``down`` file
    exists, each process leaving its id in its ``pids`` folder. The entry, that file and that folder."""
    down, pids = tmp_path / f"{name}-down", tmp_path / f"{name}-pids"
    pids.mkdir()
    entry = {
        "command": sys.executable,
        "args": [str(APPS_FILE), "ticking"],
        "env": {"TOOLKIT_REFUSE_IF": str(down), "TOOLKIT_PID_DIR": str(pids)},
    }
    return entry, down, pids


def _gateway(tmp_path: Path, upstream_mode: str, *, b_down_at_start: bool = False) -> tuple[MCPKit, Path, Path]:
    """A gateway of two ticking members, ``a`` and ``b`` (see :func:`_ticking`), reached in ``upstream_mode``, that
    tries a member again quickly (2 attempts a round, 0.05 s doubling up to 0.2 s). ``b_down_at_start``: ``b``
    cannot start when the gateway does. The gateway, ``b``'s down file and its pids folder."""
    a, _, _ = _ticking(tmp_path, "a")
    b, b_down, b_pids = _ticking(tmp_path, "b")
    if b_down_at_start:
        b_down.touch()
    gateway = mcpkit.proxy(
        {"a": a, "b": b},
        client_options={"mode": upstream_mode},
        reconnect_attempts=2,
        reconnect_delay=0.05,
        reconnect_max_delay=0.2,
    )
    return gateway, b_down, b_pids


def _kill(pids: Path) -> None:
    for entry in pids.iterdir():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(entry.name), signal.SIGKILL)
        entry.unlink()


async def _tool_names(client: Client) -> set[str]:
    return {tool.name for tool in await client.list_tools()}


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("upstream_mode", ["handshake", "modern"])
async def test_a_gateway_starts_without_a_member_that_is_down_and_adds_it_when_it_comes_up(
    mode: str, upstream_mode: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One member of two cannot be reached when the gateway starts: the gateway serves the other one, says so in
    one log line, and keeps trying in the background. A call to the missing member's tool is refused at once with
    an error saying it is unavailable. When the member comes up, the client hears that the tools changed (a
    handshake-era session by notification, a 2026-07-28 client on its listen stream) and calls its tools. When
    it dies again (and cannot be started), its calls fail clearly and the other member's still work."""
    gateway, b_down, b_pids = _gateway(tmp_path, upstream_mode, b_down_at_start=True)
    caplog.set_level(logging.WARNING, "mcpkit.proxy")
    async with serve_http(gateway) as url, Client(url, mode=mode) as client, client.watch(tools=True) as watch:
        missing = [r.getMessage() for r in caplog.records if "gateway member 'b'" in r.getMessage()]
        assert len(missing) == 1 and "cannot be reached" in missing[0], missing
        assert await _tool_names(client) == {"a_process", "a_crash"}
        with pytest.raises(MCPError) as error:
            await client.call_tool("b_process", {}, timeout=10)
        assert error.value.code == -32603 and "is unavailable" in error.value.message
        a_pid = (await client.call_tool("a_process", {})).data

        b_down.unlink()  # the member comes up: the gateway connects (it gave up after no number of attempts)
        method, _ = await watch.next(timeout=15)
        assert method == "notifications/tools/list_changed"
        assert await _tool_names(client) == {"a_process", "a_crash", "b_process", "b_crash"}
        b_pid = (await client.call_tool("b_process", {})).data
        assert isinstance(b_pid, int) and b_pid != a_pid
        assert [r for r in caplog.records if "gateway member 'b'" in r.getMessage() and "connected" in r.getMessage()]

        b_down.touch()  # the member dies and cannot start again
        _kill(b_pids)
        loop = asyncio.get_running_loop()
        for _ in range(3):
            start = loop.time()
            with pytest.raises(MCPError) as error:
                await client.call_tool("b_process", {}, timeout=10)
            assert error.value.code == -32603 and "is unavailable" in error.value.message
            assert loop.time() - start < 5
            assert (await client.call_tool("a_process", {})).data == a_pid


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("upstream_mode", ["handshake", "modern"])
async def test_a_gateway_tells_its_clients_when_a_member_goes_down_and_when_it_is_back(
    mode: str, upstream_mode: str, tmp_path: Path
) -> None:
    """A member that was up dies and cannot start again: its tools leave the gateway's list, and the clients are
    told so (``tools/list_changed``: a handshake-era session by notification, a 2026-07-28 client on its listen
    stream), as they are when it joins; before, they heard nothing until it came back. Back again (the list that
    follows starts a new round), they are told again."""
    gateway, b_down, b_pids = _gateway(tmp_path, upstream_mode)
    async with serve_http(gateway) as url, Client(url, mode=mode) as client, client.watch(tools=True) as watch:
        everything = {"a_process", "a_crash", "b_process", "b_crash"}
        assert await _tool_names(client) == everything
        b_down.touch()  # the member dies and cannot start again
        _kill(b_pids)
        method, _ = await watch.next(timeout=15)
        assert method == "notifications/tools/list_changed"
        assert await _tool_names(client) == {"a_process", "a_crash"}
        with contextlib.suppress(TimeoutError):  # (one announcement while it stays down; drained)
            while True:
                await watch.next(timeout=1)
        b_down.unlink()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while await _tool_names(client) != everything:  # (the background attempts, or a list, connect it again)
            assert loop.time() < deadline, "the member did not come back"
            await asyncio.sleep(0.2)
        method, _ = await watch.next(timeout=15)
        assert method == "notifications/tools/list_changed"


async def test_a_gateway_keeps_trying_a_member_it_never_reached_no_faster_than_its_longest_delay(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A member that was never reached is tried again without end (no request would ever start a new round: its
    tools are not listed), the first attempts backing off from ``reconnect_delay`` and then one at most every
    ``reconnect_max_delay`` seconds: the bound on the rate at which a gateway starts a server that is down."""
    a, _, _ = _ticking(tmp_path, "a")
    with socket.socket() as closed:  # (a port nothing listens on: each attempt is refused at once)
        closed.bind(("127.0.0.1", 0))
        b = f"http://127.0.0.1:{closed.getsockname()[1]}/mcp"
    gateway = mcpkit.proxy({"a": a, "b": b}, reconnect_attempts=2, reconnect_delay=0.1, reconnect_max_delay=0.4)
    caplog.set_level(logging.DEBUG, "mcpkit.proxy")
    async with serve_http(gateway) as url, Client(url) as client:
        start = asyncio.get_running_loop().time()
        await asyncio.sleep(3)
        elapsed = asyncio.get_running_loop().time() - start
        attempts = [r for r in caplog.records if "gateway member 'b'" in r.getMessage() and "attempt" in r.getMessage()]
        # the delays: 0.1, 0.2, 0.4, 0.4... (80-100 % of each): at most 3 + elapsed / (0.8 x 0.4 s), and more than
        # the two of a reconnection round
        assert 4 <= len(attempts) <= 3 + elapsed / 0.32, [r.getMessage() for r in attempts]
        assert all(r.levelno < logging.WARNING for r in attempts)  # (one warning line at startup, not one a try)
        assert await _tool_names(client) == {"a_process", "a_crash"}


async def test_a_gateway_that_requires_all_its_members_does_not_start_without_one_and_leaves_no_process(
    tmp_path: Path,
) -> None:
    """``require_all=True``: the old fail-fast behaviour; the member that was reached is closed again."""
    a, _, a_pids = _ticking(tmp_path, "a")
    b, b_down, _ = _ticking(tmp_path, "b")
    b_down.touch()
    gateway = mcpkit.proxy({"a": a, "b": b}, require_all=True)
    with pytest.raises(ServerStartError, match="refusing to start"):
        await gateway.startup()
    for _ in range(50):  # (the reached member's process exits once its pipe closes)
        alive = [p for p in a_pids.iterdir() if _running(int(p.name))]
        if not alive:
            break
        await asyncio.sleep(0.1)
    assert not alive


async def test_a_single_target_proxy_still_fails_at_startup_when_its_upstream_cannot_be_reached(
    tmp_path: Path,
) -> None:
    """A plain proxy has nothing else to serve: its upstream down at startup is an error at once, as before."""
    b, b_down, _ = _ticking(tmp_path, "b")
    b_down.touch()
    with pytest.raises(ServerStartError, match="refusing to start"):
        await mcpkit.proxy(b).startup()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    return True


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("upstream_mode", ["handshake", "modern"])
async def test_a_member_whose_reconnection_gave_up_is_tried_in_the_background_and_its_listeners_hear_it_back(
    mode: str, upstream_mode: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A member dies and stays down past its round of ``reconnect_attempts``: the gateway keeps trying it in the
    background (no request comes: the client only listens), and when it is back the client hears
    ``tools/list_changed`` and lists its tools again. Before, only a request started a new round, so a client
    that only waited for list changes never saw the member come back. Nothing is left running afterwards."""
    probe = LeakProbe.take()
    gateway, b_down, b_pids = _gateway(tmp_path, upstream_mode)
    caplog.set_level(logging.WARNING, "mcpkit.proxy")
    async with serve_http(gateway) as url, Client(url, mode=mode) as client, client.watch(tools=True) as watch:
        everything = {"a_process", "a_crash", "b_process", "b_crash"}
        assert await _tool_names(client) == everything
        b_down.touch()  # the member dies and cannot start again
        _kill(b_pids)
        method, _ = await watch.next(timeout=15)  # (its tools left the list)
        assert method == "notifications/tools/list_changed"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while not [r for r in caplog.records if r.levelno >= logging.ERROR and "attempts" in r.getMessage()]:
            assert loop.time() < deadline, "the round of attempts never ended"
            await asyncio.sleep(0.05)
        with contextlib.suppress(TimeoutError):  # (drained: what was said while it was down)
            while True:
                await watch.next(timeout=0.5)
        b_down.unlink()  # back, and no request of the client from here until it heard so
        method, _ = await watch.next(timeout=15)
        assert method == "notifications/tools/list_changed"
        assert await _tool_names(client) == everything
    await probe.assert_clean()


async def _heard(watch: Any, quiet: float = 1.5) -> dict[str, int]:
    """The notifications ``watch`` gets from the next one until none came for ``quiet`` seconds, counted by
    method (at most 15 s for the first)."""
    method, _ = await watch.next(timeout=15)
    counts = {method: 1}
    with contextlib.suppress(TimeoutError):
        while True:
            method, _ = await watch.next(timeout=quiet)
            counts[method] = counts.get(method, 0) + 1
    return counts


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("upstream_mode", ["handshake", "modern"])
@pytest.mark.parametrize("outage", ["restarts at once", "stays down a while"])
async def test_a_client_of_a_gateway_hears_one_list_changed_per_list_for_each_event_of_a_member(
    outage: str, mode: str, upstream_mode: str, tmp_path: Path
) -> None:
    """A member that dies and is connected again at once is one event; one that goes down for a while is two (gone,
    back). For each, a client hears one ``list_changed`` for each list the member has items in (tools, resources:
    the ticking app has no prompts). Before, a handshake-era session heard the member's return twice: from the
    gateway, and from its own upstream session opened again."""
    gateway, b_down, b_pids = _gateway(tmp_path, upstream_mode)
    expected = {"notifications/tools/list_changed": 1, "notifications/resources/list_changed": 1}
    async with (
        serve_http(gateway) as url,
        Client(url, mode=mode) as client,
        client.watch(tools=True, prompts=True, resources=True) as watch,
    ):
        assert "b_process" in await _tool_names(client)  # (the session's upstream sessions are open)
        if outage == "restarts at once":
            _kill(b_pids)
            assert [await _heard(watch)] == [expected]
        else:
            b_down.touch()
            _kill(b_pids)
            heard = [await _heard(watch)]
            b_down.unlink()
            heard.append(await _heard(watch))
            assert heard == [expected, expected]
        assert await _tool_names(client) == {"a_process", "a_crash", "b_process", "b_crash"}
