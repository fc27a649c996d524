"""Starting the same Python server script hundreds of times without paying its interpreter start each time.

The checker's fixtures judge a server over stdio by starting it about a dozen times per run (one process per
session), and run dozens of runs: the broken server's 51 stdio faults, the official SDK's and FastMCP's servers.
Each start imported the same modules again (asyncio, or ``mcp`` and pydantic: 0.15 s to 1.8 s of CPU a start),
most of a fixture's time on a two-core machine. A :class:`Zygote` imports them once, in one process, and forks a
server from it for each start; the command the checker runs (:meth:`Zygote.command`) is a small launcher, started
without ``site``, that hands its stdin, stdout and stderr to the zygote and lives exactly as long as the forked
server: its exit status is the server's, a signal sent to it is sent on to the server, and a launcher that is
killed takes its server with it. The server is still a real process on real pipes, and the checker still starts,
signals and reaps a real process; only the imports are shared.
"""

from __future__ import annotations

import builtins
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import CodeType, ModuleType, TracebackType

# Run as ``python -S -c LAUNCHER SOCKET SCRIPT ARG...``: no site, and only modules built into the interpreter (the
# checker starts one per server start, hundreds a fixture: `socket`, `signal` and `json` would import enum, re and
# collections: 19 ms of CPU a start against 9 ms). The job travels as the repr of a dict of strings.
LAUNCHER = r"""
import os, sys, _signal, _socket
s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
job = repr({"argv": sys.argv[2:], "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))
s.sendmsg([job], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)  # only the server holds the pipes now: its end of them is what its reader sees
pid = int(s.recv(64) or 0)
def forward(sig, frame):
    if pid > 0:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
for sig in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP, _signal.SIGQUIT):
    _signal.signal(sig, forward)
kind, _, value = s.recv(64).decode().partition(" ")
if kind == "signal":
    _signal.signal(int(value), _signal.SIG_DFL)
    os.kill(os.getpid(), int(value))
os._exit(int(value) if kind == "exit" else 1)
"""

# The zygote itself: ``python zygote.py SOCKET PRELOAD...`` where each PRELOAD is a module name, or a script path
# run under a name other than __main__ (its imports and definitions, not its main).
ZYGOTE = Path(__file__).resolve()


class Zygote:
    """A process that has imported ``preload`` once and forks a server script from it per :meth:`command` start.

    Use it as a context manager; leaving it stops the zygote and any server it forked that is still running."""

    def __init__(self, preload: list[str]) -> None:
        self.preload = preload
        self._dir = tempfile.mkdtemp(prefix="zygote-")
        self.socket_path = os.path.join(self._dir, "sock")
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Zygote:
        self._proc = subprocess.Popen(
            [sys.executable, str(ZYGOTE), self.socket_path, *self.preload],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while not os.path.exists(self.socket_path):
            if self._proc.poll() is not None:
                raise RuntimeError(f"the zygote exited ({self._proc.returncode}) before it served")
            if time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise RuntimeError("the zygote did not serve within 120 s")
            time.sleep(0.02)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for name in os.listdir(self._dir):
            os.unlink(os.path.join(self._dir, name))
        os.rmdir(self._dir)

    def command(self, script: str | Path, *args: str) -> list[str]:
        """The argv that runs ``script`` with ``args`` as ``python script args`` would, forked from the zygote
        (``script`` ``"-m"`` and a module name: as ``python -m module args``)."""
        return [sys.executable, "-S", "-c", LAUNCHER, self.socket_path, str(script), *args]

    def python(self, argv: list[str]) -> list[str]:
        """``argv`` (``[sys.executable, ...]``, a Python command line) as forked from the zygote."""
        assert argv[0] == sys.executable, argv
        return self.command(*argv[1:])


# ------------------------------------------------------------------------------------------------ the zygote


# The preloaded scripts' code, compiled once (a fork runs it as __main__ instead of compiling its source again: 7 ms
# of CPU a start for the 900 lines of the broken server)
_SCRIPTS: dict[str, CodeType] = {}


def _preload(names: list[str]) -> None:
    import importlib

    for name in names:
        if name.endswith(".py"):
            sys.path[0] = os.path.dirname(name)
            code = _SCRIPTS[os.path.abspath(name)] = compile(Path(name).read_bytes(), name, "exec")
            exec(code, _module("__zygote_preload__", name).__dict__)
        else:
            importlib.import_module(name)


def _module(name: str, path: str) -> ModuleType:
    """A fresh module ``name`` for the script at ``path``, in sys.modules while it runs (as runpy puts it)."""
    sys.modules[name] = module = ModuleType(name)
    module.__file__ = path
    module.__builtins__ = builtins  # type: ignore[attr-defined]
    return module


def _run_script(path: str) -> None:
    """Run ``path`` as ``python path`` would, as __main__ (its preloaded code, if any)."""
    import runpy

    code = _SCRIPTS.get(os.path.abspath(path))
    if code is None:
        runpy.run_path(path, run_name="__main__")
        return
    exec(code, _module("__main__", path).__dict__)


def _child(job: dict[str, object], fds: list[int], closing: list[int]) -> None:
    """In the forked process: become ``python SCRIPT ARGS`` on the launcher's stdio; never returns."""
    import runpy
    import traceback

    code = 1
    try:
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.set_wakeup_fd(-1)
        os.setsid()  # its own group, as a server started in a session of its own (nothing of the zygote's reaches it)
        for fd in closing:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        argv = job["argv"]
        env = job["env"]
        assert isinstance(argv, list) and isinstance(env, dict)
        os.chdir(str(job["cwd"]))
        os.environ.clear()
        os.environ.update(env)
        try:
            if argv[0] == "-m":  # as ``python -m MODULE``: the module's file is argv[0], the cwd leads the path
                sys.argv = [str(a) for a in argv[1:]]
                sys.path[0] = os.getcwd()
                runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
            else:
                sys.argv = [str(a) for a in argv]
                sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
                _run_script(sys.argv[0])
            code = 0
        except SystemExit as stop:
            if stop.code is None or isinstance(stop.code, int):
                code = stop.code or 0
            else:
                print(stop.code, file=sys.stderr)
        except KeyboardInterrupt:  # as an interpreter does: it dies of the SIGINT
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        except BaseException:
            traceback.print_exc()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
    finally:
        os._exit(code)


def serve(path: str, preload: list[str]) -> None:
    """The zygote's loop: one thread (so forking is safe), a selector over the listening socket, each launcher's
    connection (its end means the launcher is gone: its server is killed) and the SIGCHLD wake-up pipe."""
    _preload(preload)
    import threading

    if threading.active_count() != 1:  # forking a process with threads can copy a lock some thread holds
        raise SystemExit(f"zygote: preloading {preload} started threads: {threading.enumerate()}")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path + ".tmp")
    listener.listen(64)
    os.rename(path + ".tmp", path)  # (the parent waits for this name)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    launchers: dict[int, socket.socket] = {}  # server pid -> its launcher's connection
    while not stopping:
        for key, _ in sel.select():
            if key.fileobj is listener:
                conn, _ = listener.accept()
                try:
                    msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
                except OSError:
                    conn.close()
                    continue
                import ast

                closing = [
                    listener.fileno(),
                    sel.fileno(),
                    wake_r,
                    wake_w,
                    conn.fileno(),
                    *(c.fileno() for c in launchers.values()),
                ]
                pid = os.fork()
                if pid == 0:
                    _child(ast.literal_eval(msg.decode()), fds, closing)
                for fd in fds:
                    os.close(fd)
                launchers[pid] = conn
                sel.register(conn, selectors.EVENT_READ, pid)
                conn.send(str(pid).encode())
            elif key.fileobj == wake_r:
                while True:
                    try:
                        if not os.read(wake_r, 512):
                            break
                    except BlockingIOError:
                        break
            else:  # a launcher's connection: readable only when it closed (the launcher died)
                assert isinstance(key.fileobj, socket.socket)
                sel.unregister(key.fileobj)
                try:
                    os.kill(key.data, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        while launchers:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = launchers.pop(pid)
            signalled = os.WIFSIGNALED(status)
            report = f"signal {os.WTERMSIG(status)}" if signalled else f"exit {os.WEXITSTATUS(status)}"
            try:
                conn.send(report.encode())
            except OSError:
                pass
            try:
                sel.unregister(conn)
            except KeyError:
                pass
            conn.close()
    for pid in launchers:  # servers still running when the zygote is stopped go with it
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in list(launchers):
        os.waitpid(pid, 0)


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2:])
