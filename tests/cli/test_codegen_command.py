"""``mcpkit codegen``, run as a real subprocess against real servers (an mcpkit server, a hostile one, the npm
server-everything): the module it writes passes ``mypy --strict`` and ``ruff``, is the same text every run, and a
program importing it calls the server's tools through it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import REPO, SERVERS, TESTS
from support.typecheck import mypy_strict, ruff_problems

EVERYTHING = TESTS / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
SHAPES = str(SERVERS / "codegen_server.py")
HOSTILE = str(SERVERS / "codegen_hostile_server.py")


def mcpkit(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpkit.cli.main", *args], capture_output=True, text=True, timeout=timeout
    )


def run(program: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(program)], capture_output=True, text=True, timeout=60, cwd=program.parent
    )


def test_codegen_of_an_mcpkit_server_is_typed_clean_and_calls_its_tools(tmp_path: Path) -> None:
    """A model result, a recursive input model, a map, a union of models, a wrapped int and list, a tool without
    structured output: the module passes mypy --strict and ruff, writing it again gives the same bytes, and a
    program (type-checked with it) gets typed results from the running server."""
    made = mcpkit("codegen", SHAPES, "-o", str(tmp_path / "shapes_client.py"))
    assert made.returncode == 0, made.stderr
    assert "wrote 5 tools to" in made.stderr
    again = mcpkit("codegen", SHAPES)
    assert again.returncode == 0 and again.stdout == (tmp_path / "shapes_client.py").read_text(encoding="utf-8")
    program = tmp_path / "use_shapes.py"
    program.write_text(
        f"""import asyncio

from mcpkit import Client
from shapes_client import CodegenShapesTools, Node


async def main() -> None:
    async with Client({SHAPES!r}) as client:
        tools = CodegenShapesTools(client)
        seat = await tools.book(row=3)
        print(seat["row"], seat["letter"], seat.get("note"))
        noted = await tools.book(row=4, letter="C", note=None)
        print(noted["letter"], noted.get("note"))
        tree: Node = {{"value": 1, "children": [{{"value": 2}}, {{"value": 3, "children": [{{"value": 4}}]}}]}}
        total: int = await tools.tree_sum(tree=tree)
        words: list[str] = await tools.top_words(counts={{"a": 1, "b": 5, "c": 3}})
        area: float = await tools.area(shape={{"kind": "square", "side": 2.0}})
        shouted = await tools.shout(text="hi", times=2)
        print(total, words, area, shouted.text)


asyncio.run(main())
""",
        encoding="utf-8",
    )
    report = mypy_strict(tmp_path, tmp_path)
    assert report.returncode == 0, report.stdout
    assert ruff_problems(tmp_path / "shapes_client.py", REPO / "pyproject.toml") == []
    ran = run(program)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["3 A None", "C None", "10 ['b', 'c'] 4.0 HI HI"]


def test_codegen_of_a_hostile_paginated_server_reads_every_page_and_injects_nothing(tmp_path: Path) -> None:
    """Tool names, descriptions, keys and the server's name built to break out of strings and docstrings, names of
    the wrapper's own members, tools/list in pages of two: every tool is there, importing the module runs none of
    it, mypy and ruff accept it, and calls send each argument under the server's own name."""
    made = mcpkit("codegen", HOSTILE, "-o", str(tmp_path / "hostile_client.py"))
    assert made.returncode == 0, made.stderr
    assert "wrote 8 tools to" in made.stderr
    program = tmp_path / "use_hostile.py"
    program.write_text(
        f"""import asyncio

from mcpkit import Client
from hostile_client import HostileImportOsOsExit9Tools


async def main() -> None:
    async with Client({HOSTILE!r}) as client:
        tools = HostileImportOsOsExit9Tools(client)
        got = await tools.import_os_os_exit_7(from_="x", class_="it's", self_=True, arguments_=1.5)
        print(sorted(got["received"].items()))
        print((await tools.client_()).text, (await tools.get_weather(l_="a")).text)
        print((await tools.get_weather_2(list_="b")).text, (await tools.class_(none=None)).text)
        print(await tools.cafe(), await tools.tree(node={{"next": {{}}}}))
        print(tools.import_os_os_exit_7.__doc__ is not None and "os._exit(7)" in tools.import_os_os_exit_7.__doc__)


asyncio.run(main())
""",
        encoding="utf-8",
    )
    report = mypy_strict(tmp_path, tmp_path)
    assert report.returncode == 0, report.stdout
    assert ruff_problems(tmp_path / "hostile_client.py", REPO / "pyproject.toml") == []
    ran = run(program)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        "[('arguments', 1.5), ('class', \"it's\"), ('from', 'x'), ('self', True)]",
        '{} {"l": "a"}',
        '{"list": "b"} {"None": null}',
        "{'received': {}} {'received': {'node': {'next': {}}}}",
        "True",
    ]


def test_codegen_refuses_too_many_tools_a_bad_class_name_and_an_unwritable_file(tmp_path: Path) -> None:
    too_many = mcpkit("codegen", HOSTILE, "--max-tools", "3")
    assert too_many.returncode == 1 and "the server lists more than 3 tools (--max-tools)" in too_many.stderr
    bad_name = mcpkit("codegen", HOSTILE, "--class-name", "not valid")
    assert bad_name.returncode == 2 and "'not valid' is not a Python identifier" in bad_name.stderr
    nowhere = mcpkit("codegen", HOSTILE, "-o", str(tmp_path / "missing" / "client.py"))
    assert nowhere.returncode == 1 and "error: cannot write" in nowhere.stderr
    named = mcpkit("codegen", HOSTILE, "--class-name", "Hostile")
    assert named.returncode == 0 and "class Hostile:" in named.stdout
    assert "codegen" in mcpkit("--help").stdout


@pytest.mark.npm
def test_codegen_of_server_everything_is_typed_clean_and_calls_its_tools(tmp_path: Path, node_bin: Path) -> None:
    """The TypeScript SDK's server-everything (zod schemas, enums, an outputSchema): the module passes mypy --strict
    and ruff, and calls its tools."""
    if not EVERYTHING.is_file():
        pytest.skip("server-everything missing")
    target = f"{node_bin} {EVERYTHING} stdio"
    made = mcpkit("codegen", target, "-o", str(tmp_path / "everything_client.py"))
    assert made.returncode == 0, made.stderr
    program = tmp_path / "use_everything.py"
    program.write_text(
        f"""import asyncio

from mcpkit import Client
from everything_client import McpServersEverythingTools


async def main() -> None:
    async with Client({target!r}) as client:
        tools = McpServersEverythingTools(client)
        print((await tools.echo(message="hi")).text)
        print((await tools.get_sum(a=4, b=5)).text)
        weather = await tools.get_structured_content(location="Chicago")
        print(sorted(weather), type(weather["temperature"]).__name__ in ("int", "float"))


asyncio.run(main())
""",
        encoding="utf-8",
    )
    report = mypy_strict(tmp_path, tmp_path)
    assert report.returncode == 0, report.stdout
    assert ruff_problems(tmp_path / "everything_client.py", REPO / "pyproject.toml") == []
    ran = run(program)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0] == "Echo: hi" and "9" in lines[1]
    assert lines[2] == "['conditions', 'humidity', 'temperature'] True"
