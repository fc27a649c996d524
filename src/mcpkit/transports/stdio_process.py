"""The stdio client's child process, without asyncio's subprocess transport.

``asyncio.create_subprocess_exec`` can hang forever when the task that calls it is cancelled in the same sweep as
the helper task it starts to connect the pipes (CPython issues 125502 and 133536, in every version mcpkit supports):
``asyncio.run`` ending on an exception while a connection starts does exactly that, and the program never exits.
So the server is started with :class:`subprocess.Popen` (synchronously, as asyncio does too), its pipes are wrapped
with ``connect_read_pipe`` / ``connect_write_pipe`` by the caller, and the child is reaped here: through a pidfd the
loop watches (Linux), else a daemon thread. No task is involved, so no cancellation can lose the exit.

A pid is free for the system to give to another process once its process is reaped, so a signal must never be sent
to it after that. The pidfd's reaper reaps and records the exit in one callback of the loop, where signals are sent
too. The thread reaps and records the exit under a lock that :meth:`ChildProcess.send_signal` holds while it sends:
it waits for the exit without reaping (``waitid`` with ``WNOWAIT``), then reaps under the lock; where ``waitid`` is
missing (macOS) it looks every :data:`REAP_POLL_S` seconds, under the lock each time (``waitpid`` with ``WNOHANG``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import signal
import subprocess
import threading
import time

#: The exit code given to a child whose status someone else collected (another reaper waiting on every child):
#: the same value asyncio gives it.
UNKNOWN_EXIT = 255
#: How often (seconds) the thread reaper looks whether the child has exited, where it cannot wait for the exit without
#: reaping it (no ``waitid``: macOS).
REAP_POLL_S = 0.05


class ChildProcess:
    """A started child process, as the stdio client sees it: its ``pid``, its ``returncode`` (None while it runs;
    ``-N`` when signal N ended it), :meth:`wait` for its end, and the signals. It is reaped as soon as it exits,
    whether or not anyone waits, so it never stays a zombie while the loop runs."""

    def __init__(self, popen: subprocess.Popen[bytes], loop: asyncio.AbstractEventLoop) -> None:
        self._popen = popen
        self.pid: int = popen.pid
        self._loop = loop
        self._exited: asyncio.Future[int] = loop.create_future()
        self._pidfd = -1
        self._reaping = threading.Lock()  # (the thread reaper's: reaping and recording the exit are one step)
        try:
            self._pidfd = os.pidfd_open(self.pid)
            loop.add_reader(self._pidfd, self._pidfd_ready)
        except (AttributeError, OSError, NotImplementedError, RuntimeError):
            if self._pidfd >= 0:
                os.close(self._pidfd)
                self._pidfd = -1
            thread = threading.Thread(target=self._wait_in_thread, name=f"mcpkit-reap-{self.pid}", daemon=True)
            thread.start()

    @property
    def returncode(self) -> int | None:
        """The exit code once the process has ended and been reaped (``-N``: ended by signal N), else None."""
        return self._popen.returncode

    async def wait(self) -> int:
        """Wait for the process to end; its exit code. Cancelling the wait leaves the process (and its reaping)
        alone."""
        return await asyncio.shield(self._exited)

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the process itself (not its group); ProcessLookupError once it has been reaped."""
        with self._reaping:  # (not between the thread reaper's reaping and its record of it: see the module's docs)
            if self._popen.returncode is not None:
                raise ProcessLookupError(f"process {self.pid} has ended")
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        """SIGTERM the process."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the process."""
        self.send_signal(signal.SIGKILL)

    def _pidfd_ready(self) -> None:
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            code = UNKNOWN_EXIT
        else:
            if pid == 0:  # (not reapable yet: the pidfd stays watched)
                return
            code = os.waitstatus_to_exitcode(status)
        self._loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = -1
        self._set(code)

    def _wait_in_thread(self) -> None:
        while True:
            try:
                os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)  # (the exit, left unreaped)
            except AttributeError:  # (no waitid: macOS)
                time.sleep(REAP_POLL_S)
            except ChildProcessError:
                pass  # (someone else reaped it: the waitpid below says so)
            with self._reaping:
                try:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:
                    code = UNKNOWN_EXIT
                else:
                    if pid == 0:
                        continue  # (still running: stopped, or no waitid to wait with)
                    code = os.waitstatus_to_exitcode(status)
                self._popen.returncode = code
            break
        with contextlib.suppress(RuntimeError):  # (the loop is closed: nobody is left to tell)
            self._loop.call_soon_threadsafe(self._set, code)

    def _set(self, code: int) -> None:
        self._popen.returncode = code  # (Popen would otherwise warn, when collected, that the process still runs)
        if not self._exited.done():
            self._exited.set_result(code)


class PipeWriter(asyncio.Protocol):
    """The protocol of the server's stdin: flow control for :meth:`drain` (the writer waits while the pipe's
    buffer is over its high-water mark) and the pipe's end (a drain then fails with ConnectionResetError)."""

    def __init__(self) -> None:
        self._paused = False
        self._lost = False
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    async def drain(self) -> None:
        """Return once the pipe takes more (at once when it is not paused); ConnectionResetError once it ended."""
        if not self._lost and self._paused:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
        if self._lost:
            raise ConnectionResetError("the pipe was closed")
