"""Type-checking a user's program the way a user's editor or CI would (``mypy --strict``), for the tests that
hold mcpkit's public types to what the docs promise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def mypy_strict(program: Path, workdir: Path) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` on ``program`` (a file or a folder), run in ``workdir`` with a fresh cache there (bounded:
    300 s); its report is in ``stdout``."""
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", str(workdir / "c"), str(program)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=workdir,
    )


def revealed_types(report: str) -> list[str]:
    """The types mypy's report gives for the program's ``reveal_type(...)`` calls, in order."""
    return [line.split('Revealed type is "', 1)[1].rstrip('"') for line in report.splitlines() if "Revealed" in line]
