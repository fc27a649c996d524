"""The one way the tests (and ``tests/conformance/run.py``) wait for a server subprocess to listen and stop it: the
testing kit's :mod:`mcpkit.testing.processes`.

proc = subprocess.Popen([...])
try:
    wait_listening(port, proc)       # raises ServerDidNotStart (an AssertionError) with the reason
    ...
finally:
    stop(proc)                       # terminate, then kill if it does not end in time
"""

from __future__ import annotations

import subprocess
import time

from mcpkit.testing.processes import ServerDidNotStart, wait_listening
from mcpkit.testing.processes import stop_process as stop

__all__ = ["ServerDidNotStart", "stderr_until", "stop", "wait_listening"]


def stderr_until(proc: subprocess.Popen[str], needle: str, timeout: float = 20.0) -> list[str]:
    """The lines ``proc`` writes to its (text, piped) stderr up to the first containing ``needle`` (included), or
    all it wrote when it ends or ``timeout`` seconds pass first (a bare readline could wait forever)."""
    import select

    assert proc.stderr is not None
    lines: list[str] = []
    end = time.monotonic() + timeout
    while (left := end - time.monotonic()) > 0 and select.select([proc.stderr], [], [], left)[0]:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if needle in line:
            break
    return lines
