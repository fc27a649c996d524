"""Files as resources (``app.add_file``, ``app.add_directory``): what a client lists and reads, in both eras, and what
it cannot read however it writes the URI."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
from pathlib import Path

import pytest

from mcpkit import File, MCPKit
from mcpkit.client.lowlevel import ClientSession
from mcpkit.protocol import versions
from mcpkit.protocol.errors import MCPError
from mcpkit.server import files
from mcpkit.server.prompts import Message
from mcpkit.server.resources import Resource
from mcpkit.transports.http import StreamableHTTPClientTransport
from support.everything import MODES, connect
from support.mcp_http import running

NOT_FOUND = {"handshake": -32002, "modern": -32602}


def _tree(root: Path) -> Path:
    (root / "docs" / "deep").mkdir(parents=True)
    (root / "README.md").write_text("# Hello\n")
    (root / "docs" / "guide.txt").write_text("héllo wörld")
    (root / "docs" / "deep" / "data.json").write_text('{"a": 1}')
    (root / "docs" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x01\x02")
    (root / "docs" / "notes").write_text("no extension, but text")
    (root / "docs" / "blob").write_bytes(bytes(range(256)))
    (root / "with space.txt").write_text("spaced")
    (root / ".env").write_text("SECRET=1")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]")
    return root


async def _all_resources(cs: ClientSession) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    cursor = None
    while True:
        page = await cs.list_resources(cursor)
        out += [r.model_dump(by_alias=True, exclude_none=True) for r in page.resources]
        cursor = page.next_cursor
        if not cursor:
            return out


@pytest.mark.req("M050", "M052", "S022", "A017")
@pytest.mark.parametrize("mode", MODES)
async def test_a_folder_is_listed_file_by_file_and_each_reads_as_text_or_base64(tmp_path: Path, mode: str) -> None:
    root = _tree(tmp_path / "site")
    app = MCPKit("files")
    d = app.add_directory(root)
    base = root.resolve().as_uri() + "/"
    async with connect(app, mode=mode) as (cs, _, _):
        listed = {r["uri"]: r for r in await _all_resources(cs)}
        assert sorted(listed) == sorted(
            base + rel
            for rel in (
                "README.md",
                "docs/blob",
                "docs/deep/data.json",
                "docs/guide.txt",
                "docs/logo.png",
                "docs/notes",
                "with%20space.txt",
            )
        )  # no dot files, no .git
        assert listed[base + "README.md"]["mimeType"] == "text/markdown"
        assert listed[base + "README.md"]["size"] == len(b"# Hello\n")
        assert listed[base + "docs/logo.png"]["mimeType"] == "image/png"
        assert listed[base + "docs/notes"]["mimeType"] == "text/plain"  # (sniffed: UTF-8)
        assert listed[base + "docs/blob"]["mimeType"] == "application/octet-stream"
        assert listed[base + "docs/guide.txt"]["name"] == "docs/guide.txt"

        text = (await cs.read_resource(base + "docs/guide.txt")).dump()["contents"]
        assert text == [{"uri": base + "docs/guide.txt", "mimeType": "text/plain", "text": "héllo wörld"}]
        png = (await cs.read_resource(base + "docs/logo.png")).dump()["contents"][0]
        assert base64.b64decode(png["blob"]) == b"\x89PNG\r\n\x1a\n\x00\x01\x02"
        blob = (await cs.read_resource(base + "docs/blob")).dump()["contents"][0]
        assert base64.b64decode(blob["blob"]) == bytes(range(256))
        assert (await cs.read_resource(d.uri_of("with space.txt"))).dump()["contents"][0]["text"] == "spaced"
        # read at each read: what the file holds now
        (root / "README.md").write_text("# Changed\n")
        assert (await cs.read_resource(base + "README.md")).dump()["contents"][0]["text"] == "# Changed\n"


@pytest.mark.parametrize("mode", MODES)
async def test_no_uri_a_client_writes_reads_outside_what_was_listed(tmp_path: Path, mode: str) -> None:
    root = _tree(tmp_path / "site")
    (tmp_path / "outside.txt").write_text("not yours")
    app = MCPKit("files")
    app.add_directory(root)
    base = root.resolve().as_uri() + "/"
    tries = [
        base + "../outside.txt",
        base + "%2e%2e/outside.txt",
        base + "docs/../../outside.txt",
        base + ".env",
        base + ".git/config",
        base + "docs",
        (tmp_path / "outside.txt").resolve().as_uri(),
        base + "docs//guide.txt",
    ]
    async with connect(app, mode=mode) as (cs, _, _):
        for uri in tries:
            with pytest.raises(MCPError) as exc:
                await cs.read_resource(uri)
            assert exc.value.code == NOT_FOUND[mode], uri
        assert (await cs.read_resource(base + "README.md")).dump()["contents"][0]["text"] == "# Hello\n"


@pytest.mark.parametrize("mode", MODES)
async def test_a_file_swapped_for_a_symlink_or_a_fifo_after_the_scan_is_not_read(tmp_path: Path, mode: str) -> None:
    root = _tree(tmp_path / "site")
    secret = tmp_path / "secret.txt"
    secret.write_text("private key")
    app = MCPKit("files")
    d = app.add_directory(root)
    async with connect(app, mode=mode) as (cs, _, _):
        # the listed file replaced by a symlink to a file outside
        (root / "README.md").unlink()
        (root / "README.md").symlink_to(secret)
        with pytest.raises(MCPError) as exc:
            await cs.read_resource(d.uri_of("README.md"))
        assert exc.value.code == NOT_FOUND[mode]
        # a folder on the way replaced by a symlink to a folder outside holding a file of the same name
        outside = tmp_path / "elsewhere"
        outside.mkdir()
        (outside / "guide.txt").write_text("private too")
        (root / "docs").rename(tmp_path / "docs-moved")
        (root / "docs").symlink_to(outside, target_is_directory=True)
        with pytest.raises(MCPError) as exc:
            await cs.read_resource(d.uri_of("docs/guide.txt"))
        assert exc.value.code == NOT_FOUND[mode]
        # a FIFO in place of a file: refused at once, not a read that waits for a writer
        (root / "with space.txt").unlink()
        os.mkfifo(root / "with space.txt")
        with pytest.raises(MCPError) as exc:
            await asyncio.wait_for(cs.read_resource(d.uri_of("with space.txt")), 5)
        assert exc.value.code == NOT_FOUND[mode]


async def test_symlinks_are_followed_only_when_asked_and_only_inside_the_folder(tmp_path: Path) -> None:
    root = _tree(tmp_path / "site")
    (tmp_path / "secret.txt").write_text("private")
    (root / "alias.md").symlink_to(root / "README.md")
    (root / "leak.txt").symlink_to(tmp_path / "secret.txt")
    plain = MCPKit("plain")
    plain.add_directory(root)
    assert not any(u.endswith(("alias.md", "leak.txt")) for u in (r.uri for r in plain.resources))
    following = MCPKit("following")
    d = following.add_directory(root, follow_symlinks=True)
    assert d.uri_of("alias.md") in d.uris
    assert d.uri_of("leak.txt") not in d.uris
    async with connect(following) as (cs, _, _):
        assert (await cs.read_resource(d.uri_of("alias.md"))).dump()["contents"][0]["text"] == "# Hello\n"


@pytest.mark.parametrize("mode", MODES)
async def test_a_file_past_max_file_size_is_an_error_that_says_so(tmp_path: Path, mode: str) -> None:
    root = tmp_path / "site"
    root.mkdir()
    (root / "small.txt").write_text("x" * 10)
    app = MCPKit("files")
    d = app.add_directory(root, max_file_size=100)
    async with connect(app, mode=mode) as (cs, _, _):
        assert (await cs.read_resource(d.uri_of("small.txt"))).dump()["contents"][0]["text"] == "x" * 10
        (root / "small.txt").write_text("x" * 101)
        with pytest.raises(MCPError) as exc:
            await cs.read_resource(d.uri_of("small.txt"))
        assert exc.value.code == -32603
        assert "more than this server reads (100)" in exc.value.message


def test_include_exclude_and_hidden_choose_the_files(tmp_path: Path) -> None:
    root = _tree(tmp_path / "site")
    only_text = MCPKit("a").add_directory(root, include=["*.md", "*.txt"], exclude=["docs/*"])
    assert [u.rsplit("/", 1)[-1] for u in only_text.uris] == ["README.md", "with%20space.txt"]
    with_hidden = MCPKit("b").add_directory(root, include=["*config", ".env"], hidden=True)
    assert [u.rsplit("/site/", 1)[-1] for u in with_hidden.uris] == [".env", ".git/config"]
    prefixed = MCPKit("c").add_directory(root, uri_prefix="site://", include=["*.json"])
    assert prefixed.uris == ["site://docs/deep/data.json"]


def test_max_files_bounds_the_listing_and_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "many"
    root.mkdir()
    for i in range(30):
        (root / f"f{i:02}.txt").write_text(str(i))
    with caplog.at_level(logging.WARNING, logger="mcpkit.server.files"):
        d = MCPKit("many").add_directory(root, max_files=10)
    assert len(d.uris) == 10 and d.truncated
    assert d.uris[0].endswith("f00.txt") and d.uris[-1].endswith("f09.txt")
    assert "more than 10 files" in caplog.text


def test_the_scan_stops_at_the_depth_bound(tmp_path: Path) -> None:
    deep = tmp_path / "deep"
    p = deep
    for i in range(files.MAX_DEPTH + 3):
        p = p / f"d{i}"
    p.mkdir(parents=True)
    (p / "bottom.txt").write_text("deep")
    (deep / "top.txt").write_text("top")
    d = MCPKit("deep").add_directory(deep)
    assert [u.rsplit("/", 1)[-1] for u in d.uris] == ["top.txt"]


@pytest.mark.req("M055", "S023")
async def test_refresh_lists_new_files_unlists_gone_ones_and_tells_subscribers_of_changed_ones(tmp_path: Path) -> None:
    root = _tree(tmp_path / "site")
    app = MCPKit("files")
    d = app.add_directory(root)
    readme = d.uri_of("README.md")
    async with connect(app, mode="handshake") as (cs, _, rec):
        before = {r["uri"] for r in await _all_resources(cs)}
        await cs.subscribe_resource(readme)
        (root / "new.txt").write_text("new")
        (root / "docs" / "guide.txt").unlink()
        (root / "README.md").write_text("# Hello again, longer\n")
        changes = await d.refresh()
        assert changes.added == [d.uri_of("new.txt")]
        assert changes.removed == [d.uri_of("docs/guide.txt")]
        assert changes.changed == [readme]
        assert (await rec.wait_for("notifications/resources/updated"))["uri"] == readme
        await rec.wait_for("notifications/resources/list_changed")
        after = {r["uri"]: r for r in await _all_resources(cs)}
        assert set(after) == (before - {d.uri_of("docs/guide.txt")}) | {d.uri_of("new.txt")}
        assert after[readme]["size"] == len(b"# Hello again, longer\n")
        with pytest.raises(MCPError) as exc:
            await cs.read_resource(d.uri_of("docs/guide.txt"))
        assert exc.value.code == -32002
        assert not await d.refresh()  # nothing changed since


@pytest.mark.req("M055", "S023")
async def test_a_2026_listener_hears_of_a_changed_file_and_of_the_list(tmp_path: Path) -> None:
    root = _tree(tmp_path / "site")
    app = MCPKit("files")
    d = app.add_directory(root)
    readme = d.uri_of("README.md")
    async with connect(app, mode="modern") as (cs, _, _):
        async with cs.listen(resource_uris=[readme], resources=True) as sub:
            (root / "README.md").write_text("# Hello again, longer\n")
            (root / "new.txt").write_text("new")
            await d.refresh()
            heard = {(await sub.next(timeout=5))[0], (await sub.next(timeout=5))[0]}
        assert heard == {"notifications/resources/updated", "notifications/resources/list_changed"}


async def test_poll_s_rescans_while_the_app_is_served_over_http(tmp_path: Path) -> None:
    root = tmp_path / "site"
    root.mkdir()
    (root / "a.txt").write_text("a")
    app = MCPKit("files")
    d = app.add_directory(root, poll_s=0.5)
    async with (
        running(app) as (base, _),
        ClientSession(StreamableHTTPClientTransport(base + "/mcp"), mode="handshake") as cs,
    ):
        assert [r.uri for r in (await cs.list_resources()).resources] == [d.uri_of("a.txt")]
        (root / "b.txt").write_text("b")
        for _ in range(100):  # (the poll is every 0.5 s: 10 s at most)
            uris = [r.uri for r in (await cs.list_resources()).resources]
            if d.uri_of("b.txt") in uris:
                break
            await asyncio.sleep(0.1)
        assert uris == [d.uri_of("a.txt"), d.uri_of("b.txt")]
        assert (await cs.read_resource(d.uri_of("b.txt"))).dump()["contents"][0]["text"] == "b"
    assert d._task is None  # (stopped with the app)


def test_bad_arguments_are_refused_with_what_to_write(tmp_path: Path) -> None:
    app = MCPKit("bad")
    with pytest.raises(ValueError, match="is not a folder"):
        app.add_directory(tmp_path / "missing")
    with pytest.raises(ValueError, match="poll_s must be at least"):
        app.add_directory(tmp_path, poll_s=0.01)
    with pytest.raises(ValueError, match="needs a scheme"):
        app.add_directory(tmp_path, uri_prefix="docs/")
    with pytest.raises(ValueError, match="max_files"):
        app.add_directory(tmp_path, max_files=0)
    with pytest.raises(ValueError, match="is not a file"):
        app.add_file(tmp_path)


@pytest.mark.parametrize("mode", MODES)
async def test_add_file_serves_one_file_under_the_uri_given(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "report.csv"
    path.write_text("a,b\n1,2\n")
    app = MCPKit("one")
    item = app.add_file(path, "reports://latest", description="The latest report", scopes=["reports"])
    assert item.mime_type == "text/csv"
    assert app.scope_rule("resources/read", {"uri": "reports://latest"}) == ["reports"]
    async with connect(app, mode=mode) as (cs, _, _):
        [listed] = await _all_resources(cs)
        assert listed == {
            "uri": "reports://latest",
            "name": "report.csv",
            "description": "The latest report",
            "mimeType": "text/csv",
            "size": 8,
        }
        assert (await cs.read_resource("reports://latest")).dump()["contents"][0]["text"] == "a,b\n1,2\n"
        path.unlink()
        with pytest.raises(MCPError) as exc:
            await cs.read_resource("reports://latest")
        assert exc.value.code == NOT_FOUND[mode]


async def test_the_labels_of_add_directory_and_add_file_go_to_every_file_they_serve(tmp_path: Path) -> None:
    root = _tree(tmp_path / "site")
    app = MCPKit("labelled")
    d = app.add_directory(root, tags={"docs"}, scopes="read:docs", description="From the site")
    hidden = app.add_file(root / "README.md", "notes://readme", tags=["notes"], enabled=False)
    readme = d.uri_of("README.md")
    assert app.scope_rule("resources/read", {"uri": readme}) == ["read:docs"]
    assert app._resources[readme].tags == frozenset({"docs"})
    assert hidden.tags == frozenset({"notes"})
    async with connect(app, mode="handshake") as (cs, _, _):
        listed = {r["uri"]: r for r in await _all_resources(cs)}
        assert "notes://readme" not in listed  # (enabled=False: served, not shown)
        assert listed[readme]["description"] == "From the site"
        (root / "new.txt").write_text("new")
        assert (await d.refresh()).added == [d.uri_of("new.txt")]
        assert app._resources[d.uri_of("new.txt")].tags == frozenset({"docs"})  # (a file found later too)
        assert app.scope_rule("resources/read", {"uri": d.uri_of("new.txt")}) == ["read:docs"]
        app.disable(tags="docs")
        assert await _all_resources(cs) == []


def test_a_file_resource_has_every_attribute_a_resource_has(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    plain = {**vars(Resource("x://c", content="c")), **vars(Resource("x://f", lambda: "f"))}
    made = files.FileResource("x://a", tmp_path / "a.txt")
    assert set(plain) <= set(vars(made)), set(plain) - set(vars(made))
    added = MCPKit("one").add_file(tmp_path / "a.txt", ttl_ms=5, cache_scope="public", meta={"k": 1})
    assert set(plain) <= set(vars(added))
    assert (added.cache_hints, added.meta, added.size, added.fn, added.content) == (
        {"ttlMs": 5, "cacheScope": "public"},
        {"k": 1},
        1,
        None,
        None,
    )


def _file_app(tmp_path: Path) -> MCPKit:
    (tmp_path / "report.pdf").write_bytes(b"%PDF-1.7 \x00\xff")
    (tmp_path / "notes.md").write_text("# Notes ü")
    (tmp_path / "big.bin").write_bytes(b"x" * 101)
    app = MCPKit("file results")

    @app.tool
    def report() -> File:
        return File(path=tmp_path / "report.pdf")

    @app.tool
    def notes() -> list[File]:
        return [File(path=tmp_path / "notes.md"), File("made here", name="made.txt", uri="notes://made")]

    @app.tool
    def big() -> File:
        return File(path=tmp_path / "big.bin", max_bytes=100)

    @app.prompt
    def review() -> list[Message]:
        return [Message.user("Review this:"), Message.user(File(path=tmp_path / "notes.md"))]

    return app


@pytest.mark.req("M069", "M063")
@pytest.mark.parametrize("mode", MODES)
async def test_a_file_returned_by_a_tool_or_a_prompt_is_embedded_as_text_or_base64(tmp_path: Path, mode: str) -> None:
    app = _file_app(tmp_path)
    assert "outputSchema" not in app.get_tool("report").definition(versions.features(versions.LATEST_HANDSHAKE))
    async with connect(app, mode=mode) as (cs, _, _):
        [pdf] = (await cs.call_tool("report", {})).dump()["content"]
        assert pdf["type"] == "resource"
        assert pdf["resource"]["uri"] == "file:///report.pdf"  # (the name only: not the server's path)
        assert pdf["resource"]["mimeType"] == "application/pdf"
        assert base64.b64decode(pdf["resource"]["blob"]) == b"%PDF-1.7 \x00\xff"
        md, made = (await cs.call_tool("notes", {})).dump()["content"]
        assert md["resource"] == {"uri": "file:///notes.md", "mimeType": "text/markdown", "text": "# Notes ü"}
        assert made["resource"] == {"uri": "notes://made", "mimeType": "text/plain", "text": "made here"}
        failed = await cs.call_tool("big", {})
        assert failed.is_error  # (more than max_bytes: the tool fails, and says nothing of the server's files)
        messages = (await cs.get_prompt("review", {})).dump()["messages"]
        assert messages[1]["content"]["resource"]["text"] == "# Notes ü"


def test_file_takes_data_or_a_path_and_bounds_what_it_reads(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exactly one of"):
        File()
    (tmp_path / "x.bin").write_bytes(b"1234")
    with pytest.raises(ValueError, match="more than 3 bytes"):
        File(path=tmp_path / "x.bin", max_bytes=3)
    assert File(b"\x89PNG\r\n\x1a\n....").mime_type == "image/png"  # (sniffed)
    assert File(b"\x00\x01").to_content()["resource"]["blob"] == "AAE="
    assert File(b"not utf-8 \xff", name="a.txt").to_content()["resource"]["blob"]  # (text type, bytes not UTF-8)
