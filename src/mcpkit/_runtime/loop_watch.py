"""The watch over inline sync calls, in a small helper process: it notices a call that runs long without taking the
server's GIL (see :mod:`.handoff`).

A watchdog *thread* must take the GIL at every tick to look at the call under way. On a server busy with requests
the loop's thread gives the GIL up at every system call and takes it straight back, so a waiting watchdog is woken
again and again before it gets its turn: measured, that costs a saturated server 5% of its throughput (Streamable
HTTP, 32 concurrent, plain ``def`` tools: 141 µs of server CPU per call ticking, 134 µs without ticks). The watch
here reads a shared cell instead, from another process with its own GIL. The loop's thread writes the number of each
inline call into the cell when the call starts and its negation when it ends (two memory writes, no system call).
The helper looks every ``look`` seconds; a call it sees under way on looks ``span`` seconds apart (the first and two
more, with the defaults: 5 ms apart, 10 ms) is reported once, as 8 bytes on the alarm pipe, which a thread of the
server process waits on (blocked in ``read``, without the GIL). So the server takes a GIL-holding wake only for a real
hand-over. Looking twice per ``span`` finds a call that runs long within ``span`` to ``span + look`` of its start
(not ``span`` to ``2 * span``, as looks ``span`` apart would).

After ``idle`` seconds without inline calls the helper looks every ``10 * span`` seconds (a long-running call that
starts just then is seen within ``11 * span``). It ends when the server process
closes the life pipe (the loop is gone) or dies.

This file runs as a script in the helper (``python -I -S loop_watch.py FD ALARM LIFE LOOK_MS SPAN_MS IDLE_MS``): it
imports nothing but the standard library.
"""

from __future__ import annotations

import mmap
import os
import select
import signal
import sys

#: Bytes of the shared cell: one signed 64-bit number.
CELL_SIZE = 8


def watch(cell: memoryview, alarm: int, life: int, look: float, span: float, idle: float) -> None:
    """Look at ``cell`` every ``look`` seconds until ``life`` reads end of file; write the number of a call seen under
    way on looks ``span`` seconds apart to ``alarm`` (once per call)."""
    looks = max(1, round(span / look))  # the looks after the first one that must still see the call
    seen = reported = 0
    count = 0  # how many looks in a row after the first have seen the call ``seen``
    last = 0
    quiet = 0.0
    wait = look
    try:
        os.write(alarm, bytes(8))  # call number 0: the helper runs (the server's calls write the cell from now on)
    except OSError:
        return
    while True:
        if select.select([life], [], [], wait)[0]:
            return  # end of file (or anything at all): the server closed the life pipe or is gone
        value = cell[0]
        count = count + 1 if value > 0 and value == seen else 0
        if count >= looks and value != reported:
            try:
                os.write(alarm, value.to_bytes(8, "little"))
            except OSError:
                return  # nobody listens any more
            reported = value
        seen = value
        if value != last or value > 0:
            last = value
            quiet = 0.0
            wait = look
        else:
            quiet += wait
            if quiet >= idle:
                wait = span * 10


def main(argv: list[str]) -> None:
    """The helper's entry point: ``FD ALARM LIFE LOOK_MS SPAN_MS IDLE_MS``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the terminal is the server's to handle: it ends us
    fd, alarm, life = (int(a) for a in argv[:3])
    look_ms, span_ms, idle_ms = (float(a) for a in argv[3:6])
    mem = mmap.mmap(fd, CELL_SIZE)
    os.close(fd)
    watch(memoryview(mem).cast("q"), alarm, life, look_ms / 1000, span_ms / 1000, idle_ms / 1000)


if __name__ == "__main__":
    main(sys.argv[1:])
