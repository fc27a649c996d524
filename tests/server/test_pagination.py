"""Issue 16, linear listing: a list page costs the same whatever the registry's size and the page's position
(no copy of the whole registry per page), and walks stay exact when the registry changes between pages."""

from __future__ import annotations

import gc
import sys
import tracemalloc
from typing import Any

import orjson
import pytest

from mcpkit import Client, MCPKit
from mcpkit.protocol.errors import MCPError
from mcpkit.protocol.versions import features
from mcpkit.server.pagination import DEFAULT_PAGE_SIZE, Paginator, Snapshot
from support.everything import connect
from support.paths import SERVERS


def resource_app(n: int) -> MCPKit:
    app = MCPKit("many", page_size=50)
    for i in range(n):
        app.add_resource(f"mem://r/{i}", "x", name=f"r{i}")
    return app


async def _page_allocation(n: int) -> tuple[int, int]:
    """Peak bytes allocated while answering one resources/list page deep in a registry of ``n`` (client and
    server: same process), and the number of resources the full walk returned."""
    app = resource_app(n)
    async with connect(app) as (cs, _, _):
        seen = 0
        cursor: str | None = None
        pages = 0
        peak = 0
        while True:
            deep = pages == 5
            if deep:
                tracemalloc.start()
            page = await cs.list_resources(cursor)
            if deep:
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            seen += len(page.resources)
            pages += 1
            cursor = page.next_cursor
            if not cursor or pages > 12:  # enough pages to measure; the walk itself is checked elsewhere
                break
    return peak, seen


async def test_list_page_does_not_copy_the_registry() -> None:
    """Issue 16 item 4: a resources/list page deep in 60,000 resources allocates about what one in 600 does;
    copying the registry per page (the old code) costs 60,000 pointers (~480 KB) more per page."""
    small, _ = await _page_allocation(600)
    large, _ = await _page_allocation(60_000)
    assert large - small < 150_000, (small, large)


@pytest.mark.parametrize("kind", ["tools", "prompts", "resources", "templates"])
async def test_full_walk_is_exact_and_in_order(kind: str) -> None:
    """Issue 16 item 4: every list walks every item once, in registration order, whatever the page size."""
    app = MCPKit("walk", page_size=7)
    n = 100
    for i in range(n):
        if kind == "tools":
            app.add_tool(lambda: "x", name=f"i{i}")
        elif kind == "prompts":
            app.add_prompt(lambda: "x", name=f"i{i}")
        elif kind == "resources":
            app.add_resource(f"mem://i{i}", "x", name=f"i{i}")
        else:
            app.add_resource(f"mem://i{i}/{{id}}", lambda id: id, name=f"i{i}")
    names: list[str] = []
    async with connect(app) as (cs, _, _):
        cursor: str | None = None
        while True:
            page: Any
            if kind == "tools":
                page = await cs.list_tools(cursor)
                names += [x.name for x in page.tools]
            elif kind == "prompts":
                page = await cs.list_prompts(cursor)
                names += [x.name for x in page.prompts]
            elif kind == "resources":
                page = await cs.list_resources(cursor)
                names += [x.name for x in page.resources]
            else:
                page = await cs.list_resource_templates(cursor)
                names += [x.name for x in page.resource_templates]
            cursor = page.next_cursor
            if not cursor:
                break
    assert names == [f"i{i}" for i in range(n)]


async def test_each_listed_item_is_encoded_once_per_revision() -> None:
    """Issue 16 item 4 (tools/list 1k -> 10k): a page copies each item's ready JSON text instead of encoding its
    definition again (walking thousands of scattered small objects per page made a page of a large registry cost
    up to twice one of a small registry). Two walks encode each item once, for the session's revision only, and
    the text is exactly the item's definition."""
    app = MCPKit("once", page_size=7)
    for i in range(20):
        app.add_tool(lambda: "x", name=f"i{i}", description=f"tool {i}")
    first: list[Any] = []
    async with connect(app) as (cs, _, _):
        for walk in range(2):
            cursor: str | None = None
            while True:
                page = await cs.list_tools(cursor)
                if walk == 0:
                    first += [t.model_dump(by_alias=True, exclude_none=True) for t in page.tools]
                cursor = page.next_cursor
                if not cursor:
                    break
        version = cs.protocol_version
    assert version is not None and len(first) == 20
    tool = app.get_tool("i3")
    assert tool is not None and list(tool._texts) == [version]
    text = tool.listed(features(version))
    assert text is tool._texts[version]  # the same text object on every page and walk
    assert orjson.loads(text) == tool.definition(features(version)) == first[3]


@pytest.mark.req("S030")
async def test_changes_between_pages_and_tampered_cursors() -> None:
    """Issue 16 item 4: the snapshot is rebuilt after every change: an item added, replaced or removed between
    pages shows on the next page and nothing is skipped; a tampered cursor is still -32602."""
    app = MCPKit("changes", page_size=3)
    for i in range(9):
        app.add_tool(lambda: "x", name=f"t{i}")
    async with connect(app) as (cs, _, _):
        first = await cs.list_tools()
        assert [x.name for x in first.tools] == ["t0", "t1", "t2"]
        app.remove_tool("t0")
        app.remove_tool("t3")
        app.add_tool(lambda: "y", name="t4", description="replaced", replace=True)
        app.add_tool(lambda: "z", name="new")
        second = await cs.list_tools(first.next_cursor)
        assert [x.name for x in second.tools] == ["t4", "t5", "t6"]
        assert second.tools[0].description == "replaced"
        third = await cs.list_tools(second.next_cursor)
        assert [x.name for x in third.tools] == ["t7", "t8", "new"] and not third.next_cursor
        assert first.next_cursor is not None
        body, _, sig = first.next_cursor.partition(".")
        with pytest.raises(MCPError) as exc:
            await cs.list_tools(body[:-2] + "AA." + sig)
        assert exc.value.code == -32602


def test_snapshot_numbers_items_in_registration_order_and_rebuilds() -> None:
    """A Snapshot rebuilds after invalidate() or a size change, and numbers its items: increasing in registration
    order, kept while an item stays (a replacement, told by its key, keeps its number), a new number at the end for
    an item added or registered again. No memory for the numbers while nothing was removed (a range); a cursor that
    carries the number of the last item seen resumes right after it, whatever was removed since (that item
    included)."""
    reg = {f"k{i}": i for i in range(10)}
    snap = Snapshot(reg)
    assert snap.items == list(range(10)) and snap.seqs == range(10)
    assert snap.items is snap.items  # no copy per page
    reg["k10"] = 10
    assert snap.items[-1] == 10 and snap.seqs == range(11)  # a missed invalidate(): the length check rebuilds
    del reg["k0"]
    snap.invalidate()
    assert list(snap.seqs) == list(range(1, 11))
    del reg["k5"]
    reg["k5"] = 5  # registered again: at the end, with a new number
    snap.invalidate()
    assert snap.items == [1, 2, 3, 4, 6, 7, 8, 9, 10, 5]
    assert list(snap.seqs) == [1, 2, 3, 4, 6, 7, 8, 9, 10, 11]
    p = Paginator(b"k" * 32)
    cursor = p.encode("x", 5, "")  # the client saw up to the old k5, number 5
    assert p.window("x", snap.items, {"cursor": cursor}, 2, str, snap.seqs)[:2] == (4, 6)  # k6, k7
    names = {f"k{i}": [f"k{i}"] for i in range(10)}
    named = Snapshot(names, key=lambda item: item[0])  # (a replacement is told by its key, not by ==)
    assert named.seqs == range(10)
    del names["k1"]
    names["k4"] = ["k4", "replaced"]
    names["k1"] = ["k1"]
    named.invalidate()
    assert list(named.seqs) == [0, 2, 3, 4, 5, 6, 7, 8, 9, 10]


async def test_a_page_is_encoded_once_per_snapshot_and_revision() -> None:
    """Issue 16 item 4 (the per-page cost must not depend on the registry's size): a page is served as one ready
    JSON array per revision (a 2024-11-05 session lists no titles, a 2025-06-18 one does), the same text object on
    a second walk, and encoded anew after the registry changed."""
    app = MCPKit("pages", page_size=4)
    for i in range(10):
        app.add_tool(lambda: "x", name=f"t{i}", title=f"Tool {i}")
    snap = app._snapshots["tools"]
    walks: dict[str, list[list[dict[str, Any]]]] = {}
    for version in ("2024-11-05", "2025-06-18"):
        async with connect(app, version=version) as (cs, _, _):
            pages: list[list[dict[str, Any]]] = []
            cursor: str | None = None
            while True:
                page = await cs.list_tools(cursor)
                pages.append([t.model_dump(by_alias=True, exclude_none=True) for t in page.tools])
                cursor = page.next_cursor
                if not cursor:
                    break
            walks[version] = pages
    assert [len(p) for p in walks["2025-06-18"]] == [4, 4, 2]
    assert "title" not in walks["2024-11-05"][0][0] and walks["2025-06-18"][0][0]["title"] == "Tool 0"
    assert sorted(snap._pages) == sorted((v, s, e) for v in walks for s, e in ((0, 4), (4, 8), (8, 10)))
    newer = features("2025-06-18")
    text = snap.page_text(newer, 4, 8)
    assert snap.page_text(newer, 4, 8) is text  # kept: the next walk copies it
    assert [t["name"] for t in orjson.loads(orjson.dumps(text))] == ["t4", "t5", "t6", "t7"]
    app.remove_tool("t5")  # the registry changed: the pages are made anew
    assert snap._pages == {}
    names = [t["name"] for t in orjson.loads(orjson.dumps(snap.page_text(newer, 4, 8)))]
    assert names == ["t4", "t6", "t7", "t8"]


@pytest.mark.req("S030")
async def test_a_page_window_is_remembered_per_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 16 item 4: a second walk asks the paginator nothing (each page's window, cursor verified and next
    cursor sealed, is remembered per snapshot); a forged or malformed cursor is refused every time and never
    remembered; a change starts afresh and an old cursor still resumes after the last item seen; bounded."""
    app = MCPKit("windows", page_size=3)
    for i in range(9):
        app.add_tool(lambda: "x", name=f"t{i}")
    snap = app._snapshots["tools"]
    asked: list[Any] = []
    real_window = app._paginator.window

    def window(*args: Any) -> Any:
        asked.append(args[2].get("cursor"))
        return real_window(*args)

    monkeypatch.setattr(app._paginator, "window", window)

    async def walk(cs: Any) -> tuple[list[str], list[str]]:
        names: list[str] = []
        cursors: list[str] = []
        cursor: str | None = None
        while True:
            page = await cs.list_tools(cursor)
            names += [t.name for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                return names, cursors
            cursors.append(cursor)

    async with connect(app) as (cs, _, _):
        names, cursors = await walk(cs)
        assert names == [f"t{i}" for i in range(9)] and len(asked) == 3
        assert sorted(snap._windows, key=str) == sorted([(None, 3), (cursors[0], 3), (cursors[1], 3)], key=str)
        assert await walk(cs) == (names, cursors) and len(asked) == 3  # remembered: the paginator is not asked
        body, _, sig = cursors[0].partition(".")
        for bad in (body[:-2] + "AA." + sig, cursors[0] + "x", 5, ["x"], "x" * 2000):
            for _ in range(2):
                with pytest.raises(MCPError) as exc:
                    await cs.list_tools(bad)  # type: ignore[arg-type]
                assert exc.value.code == -32602
        assert len(snap._windows) == 3  # nothing refused was remembered
        app.remove_tool("t1")  # a change: the windows are made anew
        assert snap._windows == {}
        second = await cs.list_tools(cursors[0])  # the client saw t0..t2 before t1 went
        assert [t.name for t in second.tools] == ["t3", "t4", "t5"]
        names, _ = await walk(cs)
        assert names == ["t0", "t2", "t3", "t4", "t5", "t6", "t7", "t8"]
        app.add_tool(lambda: "x", name="t9")  # (a change: what the snapshot kept is given back)
        assert app._list_caches.used == 0
        app._list_caches.max_bytes = 1_000  # room for a window and a page or two, not for all four pages
        names, _ = await walk(cs)
        assert names == ["t0", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"]
        assert 0 < len(snap._windows) < 4 and app._list_caches.used <= 1_000
        before, kept = len(asked), len(snap._windows)
        names, _ = await walk(cs)  # the pages not remembered were asked again, with the same answer
        assert names[-1] == "t9" and before < len(asked) <= before + 4 - kept and app._list_caches.used <= 1_000


async def test_a_walked_list_keeps_memory_in_proportion_to_its_json() -> None:
    """What a server keeps after a list was walked (each item's text, each page's text and window) is a small
    multiple of the list's JSON: every kept text is a right-sized copy (the bytes orjson returns keep its whole
    encoding buffer, 4 KiB at least, which made each listed resource cost ~4 KiB), and the definition an item's
    text was made from is not kept beside it."""
    n = 20_000
    app = MCPKit("kept")
    for i in range(n):
        app.add_resource(f"mem://r/{i}", "x", name=f"r{i}")
    gc.collect()
    tracemalloc.start()
    try:
        async with connect(app) as (cs, _, _):
            cursor: str | None = None
            pages = 0
            while True:
                page = await cs.list_resources(cursor)
                pages += 1
                cursor = page.next_cursor
                if not cursor:
                    break
            version = cs.protocol_version
        gc.collect()
        kept = sum(
            stat.size
            for stat in tracemalloc.take_snapshot().statistics("filename")
            if "mcpkit/server/" in stat.traceback[0].filename
        )
    finally:
        tracemalloc.stop()
    assert version is not None and pages == n // DEFAULT_PAGE_SIZE
    listed = sum(len(r.listed(features(version))) for r in app._resources.values())
    assert kept < 6 * listed, (kept, listed)  # ~4x: the item texts, the page texts and their containers
    assert kept / n < 600, kept / n  # bytes per resource (the old code: ~4,400)
    assert app._list_caches.used < 2 * listed


async def test_every_revision_and_view_of_every_list_share_one_byte_bound() -> None:
    """The page texts and windows of every list, revision and per-principal view are charged to the app's one
    ListCache: with a bound smaller than what the walks would keep it is never passed, every walk stays exact,
    and a change gives back what the changed list kept."""
    app = MCPKit("bounded", page_size=10)
    for i in range(200):
        app.add_tool(lambda: "x", name=f"t{i}", description="d" * 50)
        app.add_resource(f"mem://r/{i}", "x", name=f"r{i}")
    app.set_view_filter(lambda component, principal: True)  # (a view per principal)
    app._list_caches.max_bytes = 40_000  # a few of the ~100 pages' texts these walks would keep
    for version in ("2024-11-05", "2025-06-18", "2025-11-25"):
        async with connect(app, version=version) as (cs, _, _):
            for _ in range(2):
                tools: list[str] = []
                resources: list[str] = []
                cursor: str | None = None
                while True:
                    page = await cs.list_tools(cursor)
                    tools += [t.name for t in page.tools]
                    cursor = page.next_cursor
                    if not cursor:
                        break
                cursor = None  # (a 2024-11-05 list ends with nextCursor "")
                while True:
                    rpage = await cs.list_resources(cursor)
                    resources += [r.name for r in rpage.resources]
                    cursor = rpage.next_cursor
                    if not cursor:
                        break
                assert tools == [f"t{i}" for i in range(200)] and resources == [f"r{i}" for i in range(200)]
                assert 0 < app._list_caches.used <= 40_000
    used = app._list_caches.used
    app.remove_resource("mem://r/0")  # (the list walked last: its view holds what is kept)
    assert app._list_caches.used < used


@pytest.mark.timeout(120)
async def test_the_client_lists_100000_resources_with_its_default_settings() -> None:
    """``Client(...).list_resources()`` with no option set returns all 100,000 resources of an MCPKit server with
    no option set, over stdio: the server's pages (1,000 items) and the client's bounds (10,000 pages, 1,000,000
    items, 64 MiB) fit each other (it stopped at 5,000 before: 50 a page times 100 pages)."""
    async with Client([sys.executable, str(SERVERS / "large_lists_server.py"), "100000"]) as client:
        resources = await client.list_resources()
        assert len(resources) == 100_000
        assert resources[0].uri == "mem://r/0" and resources[-1].name == "r99999"
        assert len({r.uri for r in resources}) == 100_000
    small_pages = MCPKit("fifty", page_size=50)  # a server paging by 50, as many do: 240 pages
    for i in range(12_000):
        small_pages.add_resource(f"mem://r/{i}", "x", name=f"r{i}")
    async with Client(small_pages) as client:
        assert len(await client.list_resources()) == 12_000


async def _names(cs: Any, cursor: str | None) -> tuple[list[str], str | None]:
    page = await cs.list_tools(cursor)
    return [t.name for t in page.tools], page.next_cursor


@pytest.mark.req("S030")
async def test_a_walk_resumes_by_position_so_removals_never_skip_items() -> None:
    """A cursor resumes after the last item the client saw by its place in registration order, whatever was
    removed since (that item included): with t0..t4 in pages of two, seeing t0, t1 and then removing t1 and t2
    leaves t3, t4 for the next page (resuming at the old offset skipped t3). Items added at the end are seen; an
    item removed and registered again moves to the end. The same holds for a list seen through visibility rules
    (a shared view and a per-principal one), where disabling an item removes it."""
    app = MCPKit("positions", page_size=2)
    for i in range(5):
        app.add_tool(lambda: "x", name=f"t{i}")
    async with connect(app) as (cs, _, _):
        names, cursor = await _names(cs, None)
        assert names == ["t0", "t1"]
        app.remove_tool("t1")
        app.remove_tool("t2")
        names, cursor = await _names(cs, cursor)
        assert names == ["t3", "t4"] and cursor is None

        app.add_tool(lambda: "x", name="t1")  # registered again: now after t4
        names, cursor = await _names(cs, None)
        assert names == ["t0", "t3"]
        app.remove_tool("t0")
        app.remove_tool("t3")
        app.remove_tool("t4")
        app.add_tool(lambda: "x", name="t5")
        names, cursor = await _names(cs, cursor)
        assert names == ["t1", "t5"] and cursor is None

        for view_filter in (None, lambda component, principal: True):
            app.set_view_filter(view_filter)
            names, cursor = await _names(cs, None)
            assert names == ["t1", "t5"] and cursor is None
            app.add_tool(lambda: "x", name="late")
            app.add_tool(lambda: "x", name="last")
            names, cursor = await _names(cs, None)
            assert names == ["t1", "t5"] and cursor is not None
            app.disable("t5", "late")
            names, cursor = await _names(cs, cursor)
            assert names == ["last"] and cursor is None
            app.enable("t5", "late")
            app.remove_tool("late")
            app.remove_tool("last")
