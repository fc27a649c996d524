"""A real PostgreSQL for tests: ``initdb`` into a temporary directory, ``postgres`` on a free port of 127.0.0.1
(durability off: fsync, synchronous commit and full-page writes), stopped at teardown.

``postgres_url`` (session-scoped fixture, import it into a test module) yields
``postgresql://mcpkit@127.0.0.1:<port>/postgres`` (trust authentication on 127.0.0.1 only). The binaries are looked
up on PATH, then in ``/usr/lib/postgresql/<version>/bin`` (where Debian's ``postgresql`` package puts them). When
they are missing the test FAILS in CI (``CI`` set: scripts/test.sh installs the package, so a missing binary is a
broken build) and is skipped with a loud reason elsewhere. PostgreSQL refuses to run as root: under root the
server runs as the ``postgres`` user (or ``nobody``), which owns the data directory.
"""

from __future__ import annotations

import concurrent.futures
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from support.store_server import free_port as _free_port  # (the tests import it from here)
from support.store_server import missing, wait_ready

MISSING = (
    "!!! initdb/postgres NOT FOUND: the PostgreSQL store tests cannot run. Install them "
    "(`apt-get update && apt-get install -y postgresql`, or run `bash scripts/test.sh`). !!!"
)


def find_binaries() -> tuple[str, str] | None:
    """(initdb, postgres), from PATH or the newest /usr/lib/postgresql/*/bin; None when either is missing."""
    initdb, postgres = shutil.which("initdb"), shutil.which("postgres")
    if initdb and postgres:
        return initdb, postgres
    for directory in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2]), reverse=True):
        initdb, postgres = os.path.join(directory, "initdb"), os.path.join(directory, "postgres")
        if os.access(initdb, os.X_OK) and os.access(postgres, os.X_OK):
            return initdb, postgres
    return None


def require_postgres() -> tuple[str, str]:
    found = find_binaries()
    if found is None:
        missing(MISSING)
    assert found is not None
    return found


def _dropper(uid: int, gid: int) -> Callable[[], None]:
    def drop() -> None:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    return drop


def _as_user() -> tuple[Callable[[], None] | None, int | None, int | None]:
    """(preexec, uid, gid) that drop root for the PostgreSQL processes (None when not root)."""
    if os.geteuid() != 0:
        return None, None, None
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return _dropper(entry.pw_uid, entry.pw_gid), entry.pw_uid, entry.pw_gid
    raise RuntimeError("running as root and neither a 'postgres' nor a 'nobody' user exists to run PostgreSQL")


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _answers(url: str) -> bool:
    """Whether PostgreSQL takes a session (not "the database system is starting up")."""
    import asyncio

    import asyncpg

    async def attempt() -> None:
        conn = await asyncpg.connect(url, timeout=2)
        await conn.close()

    # (in a thread of its own: the fixture may be first asked for inside a running event loop)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        try:
            pool.submit(asyncio.run, attempt()).result(timeout=10)
            return True
        except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            return False


class PostgresServer:
    """One ``postgres`` subprocess on 127.0.0.1, its cluster made by ``initdb`` in ``directory``."""

    def __init__(self, binaries: tuple[str, str], directory: str, *, max_connections: int = 200) -> None:
        initdb, postgres = binaries
        self.port = _free_port()
        preexec, uid, gid = _as_user()
        root = Path(directory)
        data, sockets = root / "data", root / "sock"
        sockets.mkdir(parents=True, exist_ok=True)
        if uid is not None and gid is not None:
            for path in (root, sockets):
                os.chown(path, uid, gid)
        env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
        done = subprocess.run(
            [initdb, "-D", str(data), "-U", "mcpkit", "--auth=trust", "-E", "UTF8", "--no-sync"],
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=preexec,  # (drops root: PostgreSQL refuses to run as root)
            env=env,
        )
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stdout[-2000:]} {done.stderr[-2000:]}")
        args = [postgres, "-D", str(data), "-p", str(self.port), "-h", "127.0.0.1", "-k", str(sockets)]
        args += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        args += ["-c", f"max_connections={max_connections}", "-c", "shared_buffers=32MB"]
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=preexec,
            env=env,
        )
        # (it listens before it is ready: "the database system is starting up")
        ready = lambda: _accepts(self.port) and _answers(self.url)  # noqa: E731
        wait_ready(self.proc, ready, "postgres", 60, self.stop, every=0.05)

    @property
    def url(self) -> str:
        return f"postgresql://mcpkit@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # (SIGTERM: "smart" shutdown; the sessions still open are cut by SIGINT below)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(2)
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    # (a directory of its own under /tmp, not pytest's: under root pytest's base directory is closed to the
    # user PostgreSQL runs as)
    binaries = require_postgres()
    directory = tempfile.mkdtemp(prefix="mcpkit-postgres-")
    try:
        server = PostgresServer(binaries, directory)
        try:
            yield server.url
        finally:
            server.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- a worker process
#
# `python tests/support/store_server.py worker postgres POSTGRES_URL PORT NAME` serves one MCP endpoint worker on
# 127.0.0.1:PORT with the PostgreSQL stores given explicitly to create_app (tables under $WORKER_PREFIX); start
# several on one PostgreSQL and they behave as one endpoint (tests/e2e/test_postgres_workers.py).


def build_endpoint(url: str, name: str) -> object:
    """The ASGI app of one worker on the PostgreSQL at ``url``, its tables under ``$WORKER_PREFIX`` (``python
    tests/support/store_server.py worker postgres URL PORT NAME``)."""
    from mcpkit.stores.postgres import PostgresEventStore, PostgresFanout, PostgresSessionStore
    from mcpkit.transports.http import create_app
    from support.redis_server import worker_app

    prefix = os.environ.get("WORKER_PREFIX", "e2e_")
    return create_app(
        worker_app(name),
        fanout=PostgresFanout(url, prefix=prefix),
        event_store=PostgresEventStore(url, prefix=prefix),
        session_store=PostgresSessionStore(url, prefix=prefix),
        sse=False,
        ws=False,
    )
