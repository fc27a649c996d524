"""Instructions per call by callgrind, for the in-process benches (``bench/uvicorn_inproc.py``,
``bench/core_inproc.py``): the same child run with a small and a large call count side by side, the difference per
call (start-up, imports and the measured rounds' set-up cancel out)."""

from __future__ import annotations

import re
import shutil
import subprocess

SMALL, LARGE = 200, 1200


def per_call(spec: str, argv: list[str], env: dict[str, str], rounds: int = 4) -> float:
    """Instructions per call of ``argv --calls N`` (a child that makes ``rounds`` measured rounds of N calls)."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    runs = []
    for calls in (SMALL, LARGE):
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv, "--calls", str(calls)]
        runs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    totals = []
    for proc in runs:
        _, err = proc.communicate(timeout=1800)
        found = re.search(r"Collected : (\d+)", err)
        if proc.returncode != 0 or found is None:
            raise SystemExit(f"{spec}: {err[-2000:]}")
        totals.append(int(found.group(1)))
    return (totals[1] - totals[0]) / (rounds * (LARGE - SMALL))
