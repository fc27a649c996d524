"""examples/weather.py and examples/files.py do what their docs say (files.py refuses path traversal)."""

from __future__ import annotations

import base64
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import jsonschema
import pytest

from mcpkit.client.lowlevel import ClientSession
from mcpkit.protocol.errors import MCPError
from mcpkit.transports.stdio import StdioClientTransport, StdioServer
from support.everything import MODES, REPO, connect, text_of


def load(name: str) -> ModuleType:
    module_name = f"example_{name}_{id(object())}"
    spec = importlib.util.spec_from_file_location(module_name, REPO / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = mod  # as any import does: pydantic resolves the module's annotations through it
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("mode", MODES)
async def test_weather(mode: str) -> None:
    app = load("weather").app
    async with connect(app, mode=mode) as (cs, _, _):
        tools = {t.name: t.dump() for t in (await cs.list_tools()).tools}
        assert set(tools) == {"get_weather", "get_forecast"}
        props = tools["get_weather"]["inputSchema"]["properties"]
        assert props["units"]["enum"] == ["metric", "imperial"] and props["city"]["description"]
        r = await cs.call_tool("get_weather", {"city": "Lisbon", "units": "imperial"})
        jsonschema.validate(r.structured_content, tools["get_weather"]["outputSchema"])
        assert r.structured_content is not None and r.structured_content["units"] == "imperial"
        again = await cs.call_tool("get_weather", {"city": "Lisbon", "units": "imperial"})
        assert again.structured_content == r.structured_content  # deterministic
        steps: list[float] = []
        f = await cs.call_tool("get_forecast", {"city": "Oslo", "days": 4}, on_progress=lambda p, t, m: steps.append(p))
        assert f.structured_content is not None and len(f.structured_content["result"]) == 4 and steps == [1, 2, 3, 4]
        jsonschema.validate(f.structured_content, tools["get_forecast"]["outputSchema"])
        bad = await cs.call_tool("get_forecast", {"city": "Oslo", "days": 30})
        assert bad.is_error and "days" in text_of(bad)
        empty = await cs.call_tool("get_weather", {"city": " "})
        assert empty.is_error and text_of(empty) == "Please give a city name."
        (c,) = (await cs.read_resource("weather://Lisbon/current")).dump()["contents"]
        assert c["mimeType"] == "application/json" and '"city":"Lisbon"' in c["text"]
        p = await cs.get_prompt("plan_outfit", {"city": "Rome"})
        assert "Rome" in p.messages[0].content.text  # type: ignore[union-attr]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "served"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "readme.md").write_text("# Hello\n")
    (root / "data.bin").write_bytes(b"\xff\x00\xfe")
    (tmp_path / "secret.txt").write_text("top secret")
    os.symlink(tmp_path / "secret.txt", root / "docs" / "escape.txt")
    return root


@pytest.mark.parametrize("mode", MODES)
async def test_files_serves_the_tree_and_refuses_traversal(tree: Path, mode: str) -> None:
    app = load("files").create_app(tree)
    async with connect(app, mode=mode) as (cs, _, _):
        (c,) = (await cs.read_resource("file:///docs/readme.md")).dump()["contents"]
        assert c == {"uri": "file:///docs/readme.md", "mimeType": "text/markdown", "text": "# Hello\n"}
        (b,) = (await cs.read_resource("file:///data.bin")).dump()["contents"]
        assert base64.b64decode(b["blob"]) == b"\xff\x00\xfe"
        links = (await cs.call_tool("list_files", {"directory": "docs", "pattern": "*.md"})).dump()["content"]
        assert links == [
            {
                "type": "resource_link",
                "uri": "file:///docs/readme.md",
                "name": "readme.md",
                "mimeType": "text/markdown",
                "size": 8,
            }
        ]
        for uri in (
            "file:///../secret.txt",
            "file:///docs/../../secret.txt",
            "file:///%2e%2e/secret.txt",
            "file:///docs/escape.txt",  # a symlink out of the tree
            f"file:///{tree.parent / 'secret.txt'}",
            "file:///docs",
            "file:///missing.txt",
        ):
            with pytest.raises(MCPError) as exc:
                await cs.read_resource(uri)
            assert exc.value.code in (-32002, -32602), uri
            assert "top secret" not in str(exc.value.data)
        r = await cs.call_tool("list_files", {"directory": ".."})
        assert r.is_error and "outside" in text_of(r)
        listed = (await cs.call_tool("list_files", {"directory": "docs"})).dump()["content"]
        assert [x["name"] for x in listed] == ["readme.md"]  # the escaping symlink is not offered


@pytest.mark.parametrize("mode", MODES)
async def test_files_links_read_back_whatever_the_file_is_named(tree: Path, mode: str) -> None:
    names = ["my file.txt", "a%20b.txt", "q?x#y.txt", "ünï 日本.md"]
    for name in names:
        (tree / name).write_text(name)
    app = load("files").create_app(tree)
    async with connect(app, mode=mode) as (cs, _, _):
        links = (await cs.call_tool("list_files", {})).dump()["content"]
        by_name = {link["name"]: link["uri"] for link in links}
        assert set(names) <= set(by_name)
        for name in names:
            uri = by_name[name]
            assert " " not in uri and "?" not in uri and "#" not in uri, uri  # a valid URI (RFC 3986)
            (c,) = (await cs.read_resource(uri)).dump()["contents"]
            assert c["text"] == name and c["uri"] == uri


@pytest.mark.parametrize("pattern", ["", "/etc/*"])
async def test_files_answers_a_pattern_it_cannot_use_with_the_reason(tree: Path, pattern: str) -> None:
    app = load("files").create_app(tree)
    async with connect(app, mode="modern") as (cs, _, _):
        r = await cs.call_tool("list_files", {"pattern": pattern})
        assert r.is_error and "pattern" in text_of(r) and "internal error" not in text_of(r)


def test_files_refuses_to_start_on_a_root_that_is_not_a_directory(tmp_path: Path) -> None:
    for root in (tmp_path / "missing", tmp_path / "a-file.txt"):
        (tmp_path / "a-file.txt").write_text("x")
        with pytest.raises(NotADirectoryError, match="not a directory"):
            load("files").create_app(root)
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / "files.py"), str(tmp_path / "missing")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0 and "not a directory" in proc.stderr and "Traceback" not in proc.stderr


async def test_files_over_stdio(tree: Path) -> None:
    transport = StdioClientTransport(StdioServer([sys.executable, str(REPO / "examples" / "files.py"), str(tree)]))
    await transport.start()
    async with ClientSession(transport) as cs:
        (c,) = (await cs.read_resource("file:///docs/readme.md")).dump()["contents"]
        assert c["text"] == "# Hello\n"
        with pytest.raises(MCPError):
            await cs.read_resource("file:///../secret.txt")
