"""Issue 13 (the first hour of a new user): installs that work, errors that teach, a typed client result.

Missing extras are proven in real subprocesses whose import system cannot see the extra's package (a
``sitecustomize`` that makes those imports fail exactly as an absent package does); the fresh-venv installs
themselves are exercised by ``scripts/check_install.py`` (the install stage of ``scripts/test.sh``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import mcpkit
from mcpkit import Client, MCPKit
from mcpkit.client.client import ToolOutputError
from support.extras import HTTP_CLIENT_CODE, one_line_error, run_without
from support.paths import REPO

ROOT = REPO
SRC = Path(mcpkit.__file__).resolve().parent.parent  # the mcpkit under test (the subprocesses import it too)

# ---------------------------------------------------------------------------------------------- (a) extras


def test_cli_without_click_names_the_extra(tmp_path: Path) -> None:
    """Issue 13 (a): `mcpkit --help` on a bare install says `pip install 'mcpkit[cli]'` in one line."""
    proc = run_without(["click", "rich"], "from mcpkit.cli import main; main(['--help'])", tmp_path)
    line = one_line_error(proc)
    assert "pip install 'mcpkit[cli]'" in line and "click" in line
    # python -m mcpkit is the same command
    proc = run_without(["click", "rich"], "import runpy; runpy.run_module('mcpkit', run_name='__main__')", tmp_path)
    assert "pip install 'mcpkit[cli]'" in one_line_error(proc)
    proc = run_without([], "import runpy, sys; sys.argv = ['mcpkit', '--help']; runpy.run_module('mcpkit')", tmp_path)
    assert proc.returncode == 0 and "Usage" in proc.stdout, proc.stderr


def test_app_run_http_without_uvicorn_names_the_extra(tmp_path: Path) -> None:
    """Issue 13 (a): `app.run("http")` without uvicorn ends the program with one line (no traceback) that says
    `pip install 'mcpkit[http]'`."""
    proc = run_without(["uvicorn"], "from mcpkit import MCPKit\nMCPKit('x').run('http', port=0)", tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "pip install 'mcpkit[http]'" in one_line_error(proc)


def test_http_client_target_without_httpx_names_the_extra(tmp_path: Path) -> None:
    """Issue 13 (a): a client for an http:// URL without httpx says `pip install 'mcpkit[http]'`."""
    proc = run_without(["httpx"], HTTP_CLIENT_CODE, tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "pip install 'mcpkit[http]'" in one_line_error(proc)


def test_redis_store_without_redis_names_the_extra(tmp_path: Path) -> None:
    """Issue 13 (a): a Redis store from a URL without the redis package says `pip install 'mcpkit[redis]'`."""
    code = """
    import sys
    from mcpkit.stores.redis import RedisEventStore
    from mcpkit._extras import MissingExtra
    try:
        RedisEventStore("redis://127.0.0.1:9/0")
    except MissingExtra as exc:
        print(exc, file=sys.stderr)
        sys.exit(3)
    """
    proc = run_without(["redis"], code, tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "pip install 'mcpkit[redis]'" in one_line_error(proc)


def test_auth_without_pyjwt_names_the_extra(tmp_path: Path) -> None:
    """Issue 13 (a): `from mcpkit.auth import JWTVerifier` without pyjwt says `pip install 'mcpkit[auth]'`."""
    code = """
    import sys
    from mcpkit._extras import MissingExtra
    try:
        from mcpkit.auth import JWTVerifier
    except MissingExtra as exc:
        print(exc, file=sys.stderr)
        sys.exit(3)
    """
    proc = run_without(["jwt"], code, tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "pip install 'mcpkit[auth]'" in one_line_error(proc)


def test_bare_install_validates_output_without_dev_extras(tmp_path: Path) -> None:
    """Issue 13 (a): with neither jsonschema nor any extra importable, a stdio client validates a tool's output
    against its outputSchema (the declared validator is a runtime dependency) and prints the unwrapped 5."""
    code = """
    import asyncio
    from mcpkit import Client
    async def main():
        async with Client("examples/everything.py") as c:
            r = await c.call_tool("add", {"a": 2, "b": 3})
            assert r.validated, r
            print(r.data)
    asyncio.run(main())
    """
    proc = run_without(
        ["jsonschema", "click", "rich", "uvicorn", "httpx", "websockets", "redis", "jwt"], code, tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "5"


# ---------------------------------------------------------------------------------------------- (c) python targets


async def test_python_target_runs_under_the_callers_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 13 (c): `Client("python examples/everything.py")` runs the server with sys.executable, not the
    `python` first on PATH (here a decoy that only fails, like a system Python without mcpkit)."""
    decoy = tmp_path / "bin"
    decoy.mkdir()
    for name in ("python", "python3"):
        script = decoy / name
        script.write_text("#!/bin/sh\necho 'decoy python: no mcpkit here' >&2\nexit 1\n")
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{decoy}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(ROOT)
    for target in ("python examples/everything.py", ["python3", "examples/everything.py"]):
        async with Client(target) as client:
            result = await client.call_tool("add", {"a": 2, "b": 3})
            assert result.data == 5


# ---------------------------------------------------------------------------------------------- (e) errors


def test_duplicate_names_are_errors_unless_replace() -> None:
    """Issue 13 (e): a second tool, prompt or resource with the same name (URI) is a ValueError that says how to
    replace it; ``replace=True`` replaces."""
    app = MCPKit("dups")

    @app.tool
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ValueError, match=r"a tool named 'add' is already registered; pass replace=True"):

        @app.tool(name="add")
        def add_again(a: int) -> int:
            return a

    @app.tool(name="add", replace=True)
    def add_three(a: int, b: int, c: int = 0) -> int:
        return a + b + c

    assert app.get_tool("add") is not None and app.get_tool("add").fn is add_three  # type: ignore[union-attr]

    @app.prompt
    def greet(name: str) -> str:
        return f"hi {name}"

    with pytest.raises(ValueError, match=r"a prompt named 'greet' is already registered"):
        app.add_prompt(greet)
    app.add_prompt(greet, replace=True)

    app.add_resource("demo://a", "first")
    with pytest.raises(ValueError, match=r"a resource named 'demo://a' is already registered"):
        app.add_resource("demo://a", "second")
    with pytest.raises(ValueError, match=r"a resource named 'demo://\{id\}' is already registered"):
        app.add_resource("demo://{id}", lambda id: id)
        app.add_resource("demo://{id}", lambda id: id)
    app.add_resource("demo://a", "second", replace=True)
    assert [r.content for r in app.resources] == ["second"]


def _failing_app(debug: bool | None) -> MCPKit:
    app = MCPKit("fails", debug=debug)

    @app.tool
    def divide(a: int, b: int) -> float:
        return a / b

    return app


async def test_tool_exception_shown_in_development_masked_in_production() -> None:
    """Issue 13 (e): an unexpected tool exception shows its type and message with MCPKit(debug=True); without it
    the client sees only an error id."""
    async with Client(_failing_app(debug=True)) as client:
        r = await client.call_tool("divide", {"a": 1, "b": 0})
        assert r.is_error
        assert "ZeroDivisionError: division by zero" in r.text and "error id" in r.text
    async with Client(_failing_app(debug=False)) as client:
        r = await client.call_tool("divide", {"a": 1, "b": 0})
        assert r.is_error
        assert "division by zero" not in r.text and "ZeroDivision" not in r.text
        assert "an internal error occurred (error id" in r.text


async def test_mcpkit_debug_env_turns_on_development_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 13 (e): MCPKIT_DEBUG=1 in the server's environment (what `mcpkit run --dev` sets) shows the message."""
    server = tmp_path / "failing.py"
    server.write_text(
        "from mcpkit import MCPKit\n"
        "app = MCPKit('fails')\n"
        "@app.tool\n"
        "def boom(what: str) -> str:\n"
        "    raise RuntimeError(f'cannot {what}')\n"
        "if __name__ == '__main__':\n"
        "    app.run()\n"
    )
    monkeypatch.setenv("MCPKIT_DEBUG", "1")
    async with Client(str(server)) as client:
        r = await client.call_tool("boom", {"what": "fly"})
        assert r.is_error and "RuntimeError: cannot fly" in r.text
    monkeypatch.delenv("MCPKIT_DEBUG")
    async with Client(str(server)) as client:
        r = await client.call_tool("boom", {"what": "fly"})
        assert r.is_error and "cannot fly" not in r.text


# ---------------------------------------------------------------------------------------------- (f) typed results


class Point(BaseModel):
    x: int
    y: int


@dataclasses.dataclass
class Span:
    start: int
    end: int


def _typed_app() -> MCPKit:
    app = MCPKit("typed")

    @app.tool
    def points(n: int) -> list[Point]:
        return [Point(x=i, y=-i) for i in range(n)]

    @app.tool
    def numbers(n: int) -> list[int]:
        return list(range(n))

    @app.tool
    def one(x: int) -> Point:
        return Point(x=x, y=x)

    @app.tool
    def span(start: int) -> Span:
        return Span(start, start + 1)

    @app.tool
    def maybe_point(x: int) -> Point | None:
        return Point(x=x, y=0) if x else None

    return app


async def test_data_is_unwrapped_the_same_way_for_every_return_type() -> None:
    """Issue 13 (f): `-> list[Model]` unwraps like `-> list[int]` (the wrapper's $defs defeated the check)."""
    async with Client(_typed_app()) as client:
        assert (await client.call_tool("numbers", {"n": 2})).data == [0, 1]
        r = await client.call_tool("points", {"n": 2})
        assert r.validated and r.structured == {"result": [{"x": 0, "y": 0}, {"x": 1, "y": -1}]}
        assert r.data == [{"x": 0, "y": 0}, {"x": 1, "y": -1}]
        assert (await client.call_tool("maybe_point", {"x": 3})).data == {"x": 3, "y": 0}
        assert (await client.call_tool("maybe_point", {"x": 0})).data is None
        assert (await client.call_tool("one", {"x": 4})).data == {"x": 4, "y": 4}  # an object: never wrapped


async def test_result_type_validates_into_a_model_or_dataclass() -> None:
    """Issue 13 (f): call_tool(..., result_type=T) gives `data` as a T (pydantic model, dataclass, list[Model])
    and a result that does not fit is a ToolOutputError naming the type."""
    async with Client(_typed_app()) as client:
        r = await client.call_tool("points", {"n": 2}, result_type=list[Point])
        assert r.data == [Point(x=0, y=0), Point(x=1, y=-1)]
        assert r.structured == {"result": [{"x": 0, "y": 0}, {"x": 1, "y": -1}]}  # raw stays raw
        assert (await client.call_tool("one", {"x": 4}, result_type=Point)).data == Point(x=4, y=4)
        assert (await client.call_tool("span", {"start": 1}, result_type=Span)).data == Span(1, 2)
        assert (await client.call_tool("maybe_point", {"x": 0}, result_type=Point | None)).data is None
        with pytest.raises(ToolOutputError, match=r"result_type=Span at start"):
            await client.call_tool("one", {"x": 4}, result_type=Span)


# ---------------------------------------------------------------------------------------------- (g) exports, docstrings


def test_top_level_exports_what_examples_import() -> None:
    """Issue 13 (g): the names the examples used to import from deep modules come from `mcpkit` itself, and no
    example imports them deeply any more."""
    import mcpkit
    from mcpkit.protocol.errors import ResourceNotFound
    from mcpkit.server.prompts import Message
    from mcpkit.server.tools import Audio, Image

    assert (mcpkit.Image, mcpkit.Audio, mcpkit.Message, mcpkit.ResourceNotFound) == (
        Image,
        Audio,
        Message,
        ResourceNotFound,
    )
    for name in mcpkit.__all__:
        assert getattr(mcpkit, name) is not None
    deep = ("mcpkit.server.tools import", "mcpkit.server.prompts import", "mcpkit.protocol.errors import")
    for example in (ROOT / "examples").glob("*.py"):
        text = example.read_text()
        assert not any(d in text for d in deep), example


def test_only_documented_docstring_sections_reach_descriptions() -> None:
    """Issue 13 (g): `Keyword Args:` (and the other Google/NumPy sections) no longer leak into a tool's
    description; keyword arguments documented there describe their parameters."""
    app = MCPKit("docs")

    @app.tool
    def search(query: str, *, limit: int = 10, exact: bool = False) -> str:
        """Search the catalogue.

        Keyword Args:
            limit: At most this many hits.
            exact: Whole words only.

        Warning:
            Slow on huge catalogues.

        Example:
            search("lamp", limit=3)
        """
        return query

    tool = app.get_tool("search")
    assert tool is not None
    assert tool.description == "Search the catalogue."
    props = tool.input_schema["properties"]
    assert props["limit"]["description"] == "At most this many hits."
    assert props["exact"]["description"] == "Whole words only."


# ---------------------------------------------------------------------------------------------- (b) stdin /dev/null


def test_stdio_server_with_stdin_devnull_or_a_file_exits_at_eof(tmp_path: Path) -> None:
    """Issue 13 (b): a server script run with stdin from /dev/null (how the install check runs the README's code
    blocks) or from a regular file ends at end of input; epoll refuses both, and the server used to hang."""
    server = tmp_path / "calc.py"
    server.write_text(
        "from mcpkit import MCPKit\n"
        "app = MCPKit('calc')\n"
        "@app.tool\n"
        "def add(a: int, b: int) -> int:\n"
        "    return a + b\n"
        "app.run()\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, str(server)], stdin=subprocess.DEVNULL, capture_output=True, timeout=30, env=env
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"Traceback" not in proc.stderr and proc.stdout == b""
    requests = tmp_path / "requests.jsonl"
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    call = {"name": "add", "arguments": {"a": 2, "b": 3}}
    requests.write_text(
        "\n".join(
            json.dumps(m)
            for m in (
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
            )
        )
        + "\n"
    )
    with requests.open("rb") as stdin:
        proc = subprocess.run([sys.executable, str(server)], stdin=stdin, capture_output=True, timeout=30, env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, 2]
    assert answers[1]["result"]["structuredContent"] == {"result": 5}


def _check_install_module() -> Any:
    spec = importlib.util.spec_from_file_location("check_install", ROOT / "scripts" / "check_install.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_install"] = module  # (dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def test_install_check_extracts_every_python_block_and_honours_no_run(tmp_path: Path) -> None:
    """Issue 13 (b): the install stage runs every ```python block; only a block right after
    `<!-- no-run: reason -->` is skipped, with its reason; other languages are not Python blocks."""
    ci = _check_install_module()
    doc = tmp_path / "page.md"
    doc.write_text(
        "# Page\n\n```python\nprint(1)\n```\n\n<!-- no-run: needs a browser -->\n```python\nopen()\n```\n\n"
        "<!-- no-run: too far above -->\n\n```python\nprint(2)\n```\n\n```bash\nmcpkit --help\n```\n\n"
        "- item\n\n  ```python\n  print(3)\n  ```\n"
    )
    blocks = ci.extract_blocks(doc)
    assert [(b.line, b.code, b.skip) for b in blocks] == [
        (3, "print(1)\n", None),
        (8, "open()\n", "needs a browser"),
        (14, "print(2)\n", None),
        (24, "print(3)\n", None),
    ]
    # the README's CLI commands that the stage runs are the README's own, verbatim
    readme = (ROOT / "README.md").read_text()
    assert all(command in readme for command, _ in ci.README_COMMANDS)
    # and the README's blocks are what users copy: none of them is skipped
    assert [b.skip for b in ci.extract_blocks(ROOT / "README.md")] == [None, None]
