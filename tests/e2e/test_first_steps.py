"""The five programs a new user writes first (``examples/first_steps``): each runs and checks what it got, and the
five pass ``mypy --strict`` with no ``type: ignore`` and no ``cast``. scripts/check_install.py runs the same in a
fresh ``pip install 'mcpkit[all]'`` venv; this is the quick version in the dev venv."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import REPO
from support.typecheck import mypy_strict, pyright_strict

FIRST_STEPS = REPO / "examples" / "first_steps"
PROGRAMS = ("client.py", "elicitation.py", "sampling.py", "over_http.py")


@pytest.mark.parametrize("program", PROGRAMS)
def test_each_program_runs_and_gets_what_it_expects(program: str) -> None:
    if program == "over_http.py":
        pytest.importorskip("uvicorn")
    proc = subprocess.run([sys.executable, str(FIRST_STEPS / program)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("args", [["serve"], ["serve", "eighty"]])
def test_over_http_serve_without_a_port_number_says_how_to_run_it(args: list[str]) -> None:
    pytest.importorskip("uvicorn")
    program = FIRST_STEPS / "over_http.py"
    proc = subprocess.run([sys.executable, str(program), *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "usage: python over_http.py serve PORT" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_programs_pass_mypy_strict_with_no_escape_hatch(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    sources = sorted(FIRST_STEPS.glob("*.py"))
    assert [p.name for p in sources] == sorted((*PROGRAMS, "server.py"))
    for path in sources:
        text = path.read_text(encoding="utf-8")
        assert "type: ignore" not in text and not re.search(r"\bcast\(", text), path.name
    proc = mypy_strict(FIRST_STEPS, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success: no issues found in 5 source files" in proc.stdout


def test_the_programs_pass_pyright_strict(tmp_path: Path, node_bin: Path, pyright_js: Path) -> None:
    """Users' editors run pyright, which holds a protocol's mutable attribute to be one in the implementing class
    too: the same five programs (``app.run()`` included, which binds ``self`` to the ``HostedServer`` protocol)
    pass its strict mode, against the pinned ``pyright`` of tests/node_modules."""
    report = pyright_strict(FIRST_STEPS, tmp_path, node_bin, pyright_js)
    problems = [f"{d['file']}:{d['range']['start']['line'] + 1}: {d['message']}" for d in report["generalDiagnostics"]]
    assert problems == [], "\n".join(problems)
    assert report["summary"]["filesAnalyzed"] == 5
