"""A TCP proxy on 127.0.0.1 that a test can cut or stall: what stands between one worker and Redis when the test
needs that worker (and only it) to lose Redis.

    with TcpProxy(redis_port) as proxy:       # redis://127.0.0.1:{proxy.port}/0 reaches Redis through it
        proxy.cut()       # every connection is reset, new ones are refused (closed at once)
        proxy.stall()     # connections stay open but nothing is forwarded (a stalled peer)
        proxy.restore()   # forwarding again (new connections; stalled bytes flow on)

It runs its own thread with a selector loop, so it serves synchronous and asynchronous tests alike.
"""

from __future__ import annotations

import selectors
import socket
import threading
from typing import Any


class TcpProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._pairs: dict[socket.socket, socket.socket] = {}
        self._mode = "open"  # "open", "cut", "stall"
        self._lock = threading.Lock()
        self._acks: list[threading.Event] = []  # callers of _set waiting for the loop to act on their mode
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="tcp-proxy", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ control

    def cut(self) -> None:
        """Reset every connection and refuse new ones until :meth:`restore`."""
        self._set("cut")

    def stall(self) -> None:
        """Keep connections open and accept new ones, but forward nothing until :meth:`restore`."""
        self._set("stall")

    def restore(self) -> None:
        self._set("open")

    def _set(self, mode: str) -> None:
        """Switch, and return once the proxy's thread acted on it (a cut connection is reset before this returns)."""
        done = threading.Event()
        with self._lock:
            self._mode = mode
            self._acks.append(done)
        self._wake_w.send(b"x")
        if not done.wait(timeout=5):
            raise RuntimeError("the TCP proxy did not take the new mode within 5 s")

    def close(self) -> None:
        self._stopped = True
        self._wake_w.send(b"x")
        self._thread.join(timeout=5)
        for sock in list(self._pairs):
            sock.close()
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ the loop

    def _drop(self, sock: socket.socket) -> None:
        peer = self._pairs.pop(sock, None)
        for s in (sock, peer):
            if s is None:
                continue
            self._pairs.pop(s, None)
            try:
                self._sel.unregister(s)
            except (KeyError, ValueError):
                pass
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # reset
            except OSError:
                pass
            s.close()

    def _run(self) -> None:
        while not self._stopped:
            with self._lock:
                mode = self._mode
                acks, self._acks = self._acks, []
            if mode == "cut":
                for sock in list(self._pairs):
                    self._drop(sock)
            for ack in acks:
                ack.set()
            for key, _ in self._sel.select(timeout=0.2):
                if key.data == "wake":
                    try:
                        self._wake_r.recv(1024)
                    except BlockingIOError:
                        pass
                    continue
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    try:
                        client, _ = self._listener.accept()
                    except BlockingIOError:
                        continue
                    if mode == "cut":
                        client.close()
                        continue
                    try:
                        upstream = socket.create_connection(self.target, timeout=2)
                    except OSError:
                        client.close()
                        continue
                    for s in (client, upstream):
                        s.setblocking(False)
                    self._pairs[client] = upstream
                    self._pairs[upstream] = client
                    self._sel.register(client, selectors.EVENT_READ, "conn")
                    self._sel.register(upstream, selectors.EVENT_READ, "conn")
                    continue
                if mode == "stall":
                    continue  # leave the bytes in the kernel's buffers
                peer = self._pairs.get(sock)
                if peer is None:
                    continue
                try:
                    data = sock.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    self._drop(sock)
                    continue
                if not data:
                    self._drop(sock)
                    continue
                try:
                    peer.setblocking(True)
                    peer.sendall(data)
                    peer.setblocking(False)
                except OSError:
                    self._drop(sock)
            if mode == "stall":
                threading.Event().wait(0.05)  # (readable sockets would spin the selector)
