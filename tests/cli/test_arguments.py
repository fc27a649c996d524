"""``mcpkit call TARGET TOOL key=value ...`` reads each value as the tool's input schema says: ``isbn=978`` is the
string "978" for a string parameter, ``times=3`` the integer 3, ``on=yes`` a boolean; a value that cannot be what the
schema says is refused with the parameter's name before anything is called. The CLI runs as a real subprocess
against a real stdio server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("click")

SERVER = '''
from typing import Literal

from mcpkit import MCPKit

app = MCPKit("arguments")


@app.tool
def lookup(isbn: str) -> dict:
    """Echo an ISBN with its type."""
    return {"isbn": isbn, "type": type(isbn).__name__}


@app.tool
def repeat(text: str, times: int = 1, ratio: float = 1.0, loud: bool = False) -> dict:
    """Echo the arguments with their types."""
    return {k: [v, type(v).__name__] for k, v in {"text": text, "times": times, "ratio": ratio, "loud": loud}.items()}


@app.tool
def pick(tags: list[str], mode: Literal["a", "b"] = "a", limit: int | None = None, key: int | str = 0) -> dict:
    """Echo structured arguments with their types."""
    return {k: [v, type(v).__name__] for k, v in {"tags": tags, "mode": mode, "limit": limit, "key": key}.items()}
'''


def call(server: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "mcpkit.cli.main", "call", str(server), *args, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def structured(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["isError"] is False, out
    return out["structuredContent"]  # (a -> dict tool's value is the object itself)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "arguments_server.py"
    path.write_text(SERVER)
    return path


def test_a_string_parameter_keeps_digits_as_text(server: Path) -> None:
    assert structured(call(server, "lookup", "isbn=978")) == {"isbn": "978", "type": "str"}
    assert structured(call(server, "lookup", "isbn=true")) == {"isbn": "true", "type": "str"}


def test_numbers_and_booleans_are_read_by_the_schema(server: Path) -> None:
    got = structured(call(server, "repeat", "text=007", "times=3", "ratio=2", "loud=yes"))
    assert got == {"text": ["007", "str"], "times": [3, "int"], "ratio": [2.0, "float"], "loud": [True, "bool"]}
    got = structured(call(server, "repeat", "text=x", "loud=false"))
    assert got["loud"] == [False, "bool"]


def test_lists_choices_optional_and_unions(server: Path) -> None:
    got = structured(call(server, "pick", 'tags=["x", "y"]', "mode=b", "limit=null", "key=12"))
    assert got == {"tags": [["x", "y"], "list"], "mode": ["b", "str"], "limit": [None, "NoneType"], "key": [12, "int"]}
    got = structured(call(server, "pick", "tags=[]", "key=abc", "limit=5"))
    assert got["key"] == ["abc", "str"] and got["limit"] == [5, "int"]


def test_a_value_the_schema_cannot_take_names_the_parameter(server: Path) -> None:
    proc = call(server, "repeat", "text=x", "times=many")
    assert proc.returncode == 2
    assert "argument 'times' must be integer (the tool's input schema says so), got 'many'" in proc.stderr
