"""Child processes for the benchmark: every child gets its own process group, its stderr goes to a
temporary file (a pipe nobody drains can stall a server), and every group is killed when the run ends,
however it ends."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

_LIVE_GROUPS: set[int] = set()


def _kill_all() -> None:
    for pgid in list(_LIVE_GROUPS):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    _LIVE_GROUPS.clear()


atexit.register(_kill_all)


def install_signal_handlers() -> None:
    """SIGINT/SIGTERM end the run through SystemExit so atexit still kills every child group."""

    def handler(signum: int, _frame: object) -> None:
        _kill_all()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Child:
    proc: asyncio.subprocess.Process
    stderr_path: Path
    argv: list[str]
    _stderr_file: object = field(repr=False, default=None)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr_tail(self, limit: int = 400) -> str:
        """What the child said last: the exception line of a traceback if there is one."""
        try:
            data = self.stderr_path.read_bytes()
        except OSError:
            return ""
        lines = [ln.strip() for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
        if not lines:
            return ""
        if any(ln.startswith("Traceback (most recent call last)") for ln in lines):
            for ln in reversed(lines):
                if not ln.startswith(("File ", "^", "~")) and (":" in ln or ln.endswith(("Error", "Exception"))):
                    return ln[:limit]
        return " | ".join(lines[-2:])[-limit:]

    def exited(self) -> bool:
        return self.proc.returncode is not None

    async def stop(self, grace: float = 1.0) -> None:
        pgid = self.proc.pid
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), grace)
            except TimeoutError:
                pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError, ProcessLookupError):
            await asyncio.wait_for(self.proc.wait(), 5)
        _LIVE_GROUPS.discard(pgid)
        f = self._stderr_file
        if f is not None:
            with contextlib.suppress(Exception):
                f.close()  # type: ignore[attr-defined]
        with contextlib.suppress(OSError):
            self.stderr_path.unlink()


async def spawn(argv: list[str], *, stdio: bool, env: dict[str, str] | None = None) -> Child:
    """Start argv in a new session (own process group). stdio=True wires stdin/stdout as pipes."""
    fd, name = tempfile.mkstemp(prefix="bench-stderr-", suffix=".log")
    errf = os.fdopen(fd, "wb")
    full_env = dict(os.environ)
    # Same interpreter conditions for every contender: buffered stdio, bytecode caches allowed.
    for key in ("PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONPROFILEIMPORTTIME", "PYTHONDEVMODE"):
        full_env.pop(key, None)
    if env:
        full_env.update(env)
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if stdio else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE if stdio else asyncio.subprocess.DEVNULL,
        stderr=errf,
        start_new_session=True,
        env=full_env,
        limit=64 * 1024 * 1024,
    )
    _LIVE_GROUPS.add(proc.pid)
    return Child(proc=proc, stderr_path=Path(name), argv=argv, _stderr_file=errf)


def _status_kb(pid: int, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def rss_kb(pid: int) -> int | None:
    return _status_kb(pid, "VmRSS")


def peak_rss_kb(pid: int) -> int | None:
    return _status_kb(pid, "VmHWM")
