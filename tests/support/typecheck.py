"""Type-checking a user's program the way a user's editor or CI would (``mypy --strict``), for the tests that
hold mcpkit's public types to what the docs promise; and pyright's strict mode, as a user's Pylance would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

MYPY_CACHE: Path | None = None
"""The cache the session's ``mypy --strict`` runs share (one per xdist worker, set by tests/conftest.py): mcpkit and
what it imports are analysed by the first run only. A run analyses them again only when a file changes, which none
does within a session, so each run reports what a run with a fresh cache does; the first costs ~9 s of CPU, each
later ~0.5 s."""


def mypy_strict(program: Path, workdir: Path) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` on ``program`` (a file or a folder), run in ``workdir`` with the session's cache
    (:data:`MYPY_CACHE`), or a fresh one there outside a session (bounded: 300 s); its report is in ``stdout``."""
    cache = (
        ["--cache-dir", str(MYPY_CACHE)]
        if MYPY_CACHE is not None
        else ["--no-incremental", "--cache-dir", str(workdir / "c")]
    )
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", *cache, str(program)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=workdir,
    )


def ruff_problems(path: Path, config: Path) -> list[str]:
    """What ``ruff check`` and ``ruff format --check`` find in ``path`` with the settings of ``config`` (a
    pyproject.toml), as a user's CI would lint a generated file; empty when both accept it (each bounded: 60 s)."""
    problems = []
    for command in (["check", "--no-cache"], ["format", "--check", "--no-cache"]):
        proc = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--config", str(config), str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if proc.returncode != 0:
            problems.append(proc.stdout + proc.stderr)
    return problems


def revealed_types(report: str) -> list[str]:
    """The types mypy's report gives for the program's ``reveal_type(...)`` calls, in order."""
    return [line.split('Revealed type is "', 1)[1].rstrip('"') for line in report.splitlines() if "Revealed" in line]


def pyright_strict(
    program: Path,
    workdir: Path,
    node: Path,
    pyright_js: Path,
    mode: str = "strict",
    search: Path | None = None,
    timeout: float = 300,
) -> dict[str, Any]:
    """pyright's strict mode (what Pylance users see; ``mode`` "standard" for pyright's default) on ``program`` (a
    file or a folder), with the pinned ``pyright`` of tests/node_modules run by ``node``, resolving imports in
    ``search`` first, then with this interpreter (bounded: ``timeout`` s); returns its JSON report
    (``generalDiagnostics``, ``summary``)."""
    config = workdir / "pyrightconfig.json"
    settings: dict[str, Any] = {"include": [os.path.relpath(program, workdir)], "typeCheckingMode": mode}
    if search is not None:
        settings["extraPaths"] = [str(search)]
    config.write_text(json.dumps(settings), encoding="utf-8")
    proc = subprocess.run(
        [str(node), str(pyright_js), "--pythonpath", sys.executable, "--project", str(config), "--outputjson"],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=workdir,
    )
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def pyright_problems(report: dict[str, Any]) -> list[str]:
    """The errors and warnings of a pyright report, one ``file:line: message`` each."""
    return [
        f"{d['file']}:{d['range']['start']['line'] + 1}: {d['message']}"
        for d in report["generalDiagnostics"]
        if d["severity"] != "information"
    ]


def pyright_revealed(report: dict[str, Any]) -> list[str]:
    """The types pyright's report gives for the program's ``reveal_type(...)`` calls, in order."""
    return [
        d["message"].split('" is "', 1)[1][:-1]
        for d in report["generalDiagnostics"]
        if d["severity"] == "information" and d["message"].startswith("Type of ")
    ]
