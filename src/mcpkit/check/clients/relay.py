"""The stdio server a client under ``mcpkit check-client`` launches: a relay to the checker's scripted server.

Run as a file (``python relay.py HOST PORT TOKEN``: standard library only, so it starts in milliseconds and imports
nothing of mcpkit). It connects to the checker on 127.0.0.1, proves it was started by that checker with the token,
then forwards: every line the client writes to its stdin goes to the checker (wrapped, so the checker also learns
when stdin closes and which signals arrived, and nothing the client writes can be taken for a relay event); every
line the checker sends is written to stdout. A line longer than the bound is reported, not forwarded.

It exits when stdin closes (as a well-behaved server does), when the checker hangs up, or on SIGTERM/SIGINT. A
signal is reported with whether stdin closed around it (``eof``: stdin had closed within 200 ms), so the checker can
tell "closed stdin, then signalled at once" from "signalled with stdin open" (S001).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time

MAX_LINE = 4 * 1024 * 1024  # the bound of mcpkit's client and of the checker
EOF_GRACE = 0.2  # seconds a signal handler waits to learn whether stdin closed with it


def main() -> None:
    host, port, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    sock = socket.create_connection((host, port), timeout=10)
    sock.settimeout(None)
    lock = threading.Lock()
    eof = threading.Event()

    def event(obj: dict[str, object]) -> None:
        data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        with lock:
            try:
                sock.sendall(data)
            except OSError:
                os._exit(0)

    def on_signal(signum: int, _frame: object) -> None:
        at = time.monotonic()
        closed = eof.wait(EOF_GRACE)
        event({"t": "sig", "n": signum, "eof": closed, "ms": round((time.monotonic() - at) * 1000)})
        os._exit(128 + signum)

    def from_checker() -> None:
        out = sys.stdout.buffer
        for line in sock.makefile("rb"):
            try:
                out.write(line if line.endswith(b"\n") else line + b"\n")
                out.flush()
            except OSError:
                break
        os._exit(0)  # the checker hung up: this server is gone

    def from_client() -> None:
        stdin = sys.stdin.buffer
        while True:
            line = stdin.readline(MAX_LINE + 1)
            if not line:
                break
            if len(line) > MAX_LINE and not line.endswith(b"\n"):
                event({"t": "long"})
                while line and not line.endswith(b"\n"):  # drop the rest of it
                    line = stdin.readline(MAX_LINE)
                continue
            event({"t": "in", "d": line.rstrip(b"\r\n").decode("latin-1")})
        eof.set()
        event({"t": "eof"})
        os._exit(0)  # stdin closed: a well-behaved server exits

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    event({"t": "hello", "token": token, "pid": os.getpid()})
    threading.Thread(target=from_checker, daemon=True).start()
    threading.Thread(target=from_client, daemon=True).start()
    while True:  # the main thread only takes signals
        time.sleep(3600)


if __name__ == "__main__":
    main()
