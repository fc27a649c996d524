"""Running a snippet of code in a fresh interpreter where some optional packages cannot be imported (issue 13 (a):
a missing extra is named in one line, ``pip install 'mcpkit[...]'``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import mcpkit

ROOT = Path(__file__).resolve().parent.parent.parent
SRC = Path(mcpkit.__file__).resolve().parent.parent  # the mcpkit under test (the subprocesses import it too)

_BLOCKER = """
import sys
_BLOCKED = set({blocked!r})

class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, _Block())
"""


def run_without(blocked: list[str], code: str, tmp_path: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter in which the ``blocked`` top-level packages are not installed."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_BLOCKER.format(blocked=sorted(blocked)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(SRC), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
    )


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1, proc.stderr
    return lines[0]


#: A client for an http:// URL, run where an extra is missing: exits 3 with the MissingExtra's one line.
HTTP_CLIENT_CODE = """
import asyncio, sys
from mcpkit import Client
from mcpkit._extras import MissingExtra
async def main():
    async with Client("http://127.0.0.1:9/mcp") as c:
        pass
try:
    asyncio.run(main())
except MissingExtra as exc:
    print(exc, file=sys.stderr)
    sys.exit(3)
"""
