"""Tasks in Redis: :class:`RedisTaskStore`, a :class:`~mcpkit.tasks.TaskStore` that every worker sharing it serves
(needs ``pip install 'mcpkit[redis]'``).

A task started on worker A is polled, answered, cancelled and read on worker B; its record (and its result) stays
in Redis until its time to live, whatever becomes of A. Layout (``<prefix>`` shared by the app's keys; the part in
braces is the Redis Cluster hash tag):

====================================  ========================================================================
key                                   holds
====================================  ========================================================================
``<prefix>{<task id>}:task``          the record, one JSON value, expiring at the task's time to live (``PX``;
                                      in progress: a grace period later, see ``kept_until``)
``<prefix>{tasks}:live``              the tasks in progress, all owners (sorted set, score: when they expire)
``<prefix>{tasks}:live:<owner>``      one owner's tasks in progress (``<owner>``: a SHA-256 prefix of it)
``<prefix>{tasks}:own:<owner>``       one owner's tasks (score: creation time), what ``tasks/list`` pages through
                                      and the order the owner's oldest finished task is found in; expires with
                                      the last record it lists (anonymous tasks: one owner, ``-``, listed to nobody)
``<prefix>{tasks}:kept:<owner>``      one owner's tasks kept (score: when the record goes): its count, bounded
``<prefix>{tasks}:size:<owner>``      the bytes of each of them (a hash; field ``*``: their sum), bounded
``<prefix>{tasks}:all``               every task kept, all owners (score: creation time), the order the store's
                                      oldest finished task is found in
``<prefix>{tasks}:ends``              every task kept (score: when the record goes): their count, bounded
``<prefix>{tasks}:sizes``             the bytes and owner of each (a hash; field ``*``: the bytes' sum), bounded
``<prefix>{tasks}:changes``           a Redis stream: the id of each task that changed (capped, ~10,000 entries)
``<prefix>{tasks}:runner:<runner>``   one per worker that created tasks, renewed while it lives (expires
                                      ``runner_timeout`` after its last beat); each record names its runner
====================================  ========================================================================

Creating a task is one script on the ``{tasks}`` keys (the caps on tasks in progress are checked and the place
reserved atomically; the owner's tasks kept are counted, its oldest finished one evicted past the bound, then the
store's, its oldest finished one evicted past the store's total), then the record's ``SET``: both before the task
id is returned, so a ``tasks/get`` on any worker finds it. A task that ends is weighed by another script (its
record's bytes; past the owner's byte budget its oldest finished tasks are evicted, then past the store's the
oldest finished of all); an evicted record is deleted at once and reads as unknown, as an expired one does. The
scripts are in :mod:`.task_scripts`. A change is an
optimistic transaction (``WATCH`` the record, ``SET ... KEEPTTL``), retried on a conflict, then an ``XADD`` to the
change stream, which every worker's store follows (``XREAD BLOCK``) to wake what waits on that task (a runner
waiting for an answer, a ``tasks/result`` waiting for the end, a cancellation reaching the worker that runs the
task). A worker cut off from Redis meanwhile reads every record it waits on again when it
is back (waiters read again every few seconds anyway).

The ``{tasks}`` keys share one Redis Cluster slot (one node holds them; the records spread over all). Every key
expires: records at their TTL, the sets with the last of the records they count (a task in progress past its TTL
included); entries of a worker that died mid-task leave the sets when their score passes, and the task itself
reads ``failed`` ("the worker running the task is gone") on any other worker once that worker's runner mark has
expired. Every command goes through the connection's guard:
an unreachable Redis raises :class:`~mcpkit.stores.redis.StoreUnavailable` at once instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from ...protocol.errors import INTERNAL_ERROR, TaskLimitReached
from ...tasks.model import FAILED, TaskRecord, after_cursor, expires_at, is_terminal, kept_until, now_ms
from ...tasks.store import (
    MAX_BYTES,
    MAX_BYTES_PER_OWNER,
    MAX_RECORDS,
    MAX_RECORDS_PER_OWNER,
    Change,
    KeptBounds,
    Listener,
    Listeners,
    kept_refused,
    total_refused,
)
from .connection import DEFAULT_TIMEOUT, OnConnection, RedisConnection, connection_for
from .task_scripts import CREATE, ENDED, FORGET

if TYPE_CHECKING:
    from .connection import RedisClient

logger: logging.Logger = logging.getLogger("mcpkit.stores.redis")

#: the longest a record may live here (and how long the sets are kept after their last change): 30 days
MAX_TTL_MS = 30 * 24 * 3600 * 1000
UPDATE_RETRIES = 32
FEED_LENGTH = 10_000  # entries the change stream keeps (approximately: MAXLEN ~)
#: seconds a store's runner mark lives without a beat: the tasks of a worker killed mid-task (SIGKILL, the OOM
#: killer: nothing recorded) read ``failed`` on the other workers after it
RUNNER_TIMEOUT = 10.0
GONE = "the worker running the task is gone"


class RedisTaskStore(OnConnection, KeptBounds):
    """A :class:`~mcpkit.tasks.TaskStore` shared by every worker (see the module docstring).

    Args:
        redis: a URL, a ``redis.asyncio`` client or a shared :class:`~mcpkit.stores.redis.RedisConnection`.
        prefix, cluster, timeout: for a URL or a client (see :class:`~mcpkit.stores.redis.RedisConnection`).
        runner_timeout: seconds after which a task whose worker stopped beating (killed mid-task: nothing was
            recorded) reads ``failed`` ("the worker running the task is gone") on the other workers; each store
            beats every quarter of it while it has created a task (one ``SET`` in the ``{tasks}`` slot).
        max_records_per_owner: tasks kept per caller, in progress or finished (default 1,000; the owner of
            :mod:`mcpkit.tasks.model`: a principal, a handshake session, or one count for the callers neither
            identifies): a new task past it evicts that caller's oldest finished one; with none finished the task
            is refused (:class:`~mcpkit.protocol.errors.TaskLimitReached`).
        max_bytes_per_owner: the bytes of one caller's records (default 32 MiB, weighed when a task is created and
            when it ends): past it that caller's oldest finished tasks are evicted (never the one that just
            ended). So one caller fills at most this much of Redis, for no longer than its tasks' time to live.
        max_records, max_bytes: tasks kept by the whole store, all callers together (default 10,000 and 256 MiB,
            as the in-memory store): past either the oldest finished tasks go, whoever made them (never one in
            progress, nor the one that just ended); at ``max_records`` with none finished a new task is refused
            (:class:`~mcpkit.protocol.errors.TaskLimitReached`). The bound for callers the one per caller cannot
            tell apart: an unauthenticated client gets a new count with every handshake session it opens.

    ``app.enable_tasks(RedisTaskStore(url))`` on every worker. Built from a URL or a client it owns its connection:
    the engine's ``aclose()`` closes it.
    """

    def __init__(
        self,
        redis: str | RedisClient | RedisConnection,
        *,
        prefix: str = "mcpkit:",
        cluster: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
        runner_timeout: float = RUNNER_TIMEOUT,
        max_records_per_owner: int = MAX_RECORDS_PER_OWNER,
        max_bytes_per_owner: int = MAX_BYTES_PER_OWNER,
        max_records: int = MAX_RECORDS,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        if runner_timeout <= 0:
            raise ValueError("runner_timeout must be positive")
        self._keep_within(max_records, max_bytes, max_records_per_owner, max_bytes_per_owner)
        self.conn: RedisConnection
        self.conn, self._owns = connection_for(redis, prefix=prefix, cluster=cluster, timeout=timeout)
        self._create = self.conn.client.register_script(CREATE)
        self._ended = self.conn.client.register_script(ENDED)
        self._forget = self.conn.client.register_script(FORGET)
        self._listeners = Listeners()
        self._reader: asyncio.Task[None] | None = None
        self._closed = False
        self.runner_timeout = runner_timeout
        self.runner: str = secrets.token_hex(8)  # this store's mark on the tasks it creates (and runs)
        self._beat: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ keys

    def _record(self, task_id: str) -> str:
        return self.conn.keys.key(task_id, "task")

    def _live(self, owner: str | None = None, *, everyone: bool = False) -> str:
        if everyone:
            return self.conn.keys.key("tasks", "live")
        return self.conn.keys.key("tasks", "live", _owner_key(owner))

    def _index(self, owner: str | None) -> str:
        return self.conn.keys.key("tasks", "own", _owner_key(owner))

    def _owner_keys(self, owner: str | None) -> list[str]:
        """The keys of the scripts on ``owner``'s task (:mod:`.task_scripts`): tasks in progress (all, its own), its
        index, kept set and sizes, then the store's index, kept set and sizes."""
        part = _owner_key(owner)
        keys = self.conn.keys
        return [
            self._live(everyone=True),
            self._live(owner),
            self._index(owner),
            keys.key("tasks", "kept", part),
            keys.key("tasks", "size", part),
            keys.key("tasks", "all"),
            keys.key("tasks", "ends"),
            keys.key("tasks", "sizes"),
        ]

    @property
    def _base(self) -> str:
        """``<prefix>{tasks}:``: the scripts make another owner's keys from it (same slot)."""
        return self.conn.keys.key("tasks", "")

    def _runner(self, runner: str) -> str:
        return self.conn.keys.key("tasks", "runner", runner)

    @property
    def feed(self) -> str:
        """The key of the change stream."""
        return self.conn.keys.key("tasks", "changes")

    # ------------------------------------------------------------------ TaskStore

    async def create(self, record: TaskRecord, *, max_live: int, max_live_per_owner: int) -> None:
        self._ensure_reader()
        task_id = record["id"]
        owner = record.get("owner")
        now = now_ms()
        expiry = expires_at(record) or now + MAX_TTL_MS
        record["runner"] = self.runner
        data = orjson.dumps(record)
        ttl = _ttl(record, now)
        args = [
            self._base,
            now,
            max_live,
            max_live_per_owner,
            task_id,
            expiry,
            int(record["created"]),
            now - MAX_TTL_MS,
            MAX_TTL_MS,
            ttl,  # (the owner's keys: as long as the records they list, in progress ones past their TTL included)
            now + ttl,
            len(data),
            self.max_records_per_owner,
            self.max_bytes_per_owner,
            _owner_key(owner),
            self.max_records,
            self.max_bytes,
        ]
        async with self.conn.guard("task store"):
            reply = await self._create(keys=self._owner_keys(owner), args=args)
            refused = int(reply[0])
            if not refused:
                await self.conn.client.set(self._runner(self.runner), b"1", px=self._runner_ms())
                await self.conn.client.set(self._record(task_id), data, px=ttl)
                self._ensure_beat()
        if refused == 1:
            raise TaskLimitReached(
                f"the server has {max_live} tasks in progress, as many as it allows (max_tasks): retry later"
            )
        if refused == 2:
            raise TaskLimitReached(
                f"{max_live_per_owner} tasks of yours are in progress, as many as this server allows per caller "
                "(max_tasks_per_principal): wait for one to finish or cancel one"
            )
        if refused == 3:
            raise kept_refused(self.max_records_per_owner)
        if refused == 4:
            raise total_refused(self.max_records)
        await self._evicted(reply[1:])
        await self._changed(task_id)

    async def _evicted(self, ids: list[Any]) -> None:
        """Delete the records a script evicted (it took them off the owner's keys) and tell their waiters."""
        if not ids:
            return
        names = [i.decode() if isinstance(i, bytes) else str(i) for i in ids]
        async with self.conn.guard("task store"):
            for task_id in names:  # (records of several slots: one UNLINK each)
                await self.conn.client.unlink(self._record(task_id))
        for task_id in names:
            logger.info("task %s evicted: the tasks kept are past the store's bounds", task_id[:8])
            await self._changed(task_id)

    async def get(self, task_id: str) -> TaskRecord | None:
        self._ensure_reader()
        async with self.conn.guard("task store"):
            raw = await self.conn.client.get(self._record(task_id))
        record = _load(raw)
        if record is not None and not is_terminal(record):
            return await self._unless_orphaned(task_id, record)
        return record

    async def _unless_orphaned(self, task_id: str, record: TaskRecord) -> TaskRecord:
        """``record``, or, when the store that created it stopped beating (its worker was killed mid-task), the
        record ended ``failed``. Not while this worker may have missed the beats itself (Redis failed it lately)."""
        runner = record.get("runner")
        if not isinstance(runner, str) or runner == self.runner:
            return record
        if time.monotonic() - self.conn.last_failed_at < self.runner_timeout:
            return record
        async with self.conn.guard("task store"):
            if await self.conn.client.exists(self._runner(runner)):
                return record

        def fail(r: TaskRecord) -> bool:
            if is_terminal(r) or r.get("runner") != runner:
                return False
            r["status"] = FAILED
            r["error"] = {"code": INTERNAL_ERROR, "message": GONE}
            if r.get("message") is None:
                r["message"] = GONE
            r["requests"] = {}
            r["answers"] = {}
            r["updated"] = now_ms()
            return True

        logger.warning("task %s: %s (no beat for %.0fs): recorded failed", task_id[:8], GONE, self.runner_timeout)
        return await self.update(task_id, fail) or record

    def _runner_ms(self) -> int:
        return max(1, int(self.runner_timeout * 1000))

    def _ensure_beat(self) -> None:
        if self._beat is None and not self._closed:
            self._beat = asyncio.get_running_loop().create_task(self._beat_forever())

    async def _beat_forever(self) -> None:
        """Renew this store's runner mark (the tasks it created run on this worker) until it closes."""
        key = self._runner(self.runner)
        while not self._closed:
            await asyncio.sleep(self.runner_timeout / 4)
            with contextlib.suppress(Exception):
                async with self.conn.guard("task store"):
                    await self.conn.client.set(key, b"1", px=self._runner_ms())

    async def update(self, task_id: str, change: Change) -> TaskRecord | None:
        self._ensure_reader()
        from redis.exceptions import WatchError

        key = self._record(task_id)
        for _ in range(UPDATE_RETRIES):
            async with self.conn.guard("task store"), self.conn.client.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(key)
                    before = _load(await pipe.get(key))
                    if before is None:
                        return None
                    draft: TaskRecord = orjson.loads(orjson.dumps(before))
                    if not change(draft):
                        await pipe.unwatch()  # type: ignore[no-untyped-call]
                        return draft
                    pipe.multi()  # type: ignore[no-untyped-call]
                    if is_terminal(draft) and not is_terminal(before):  # kept as its (final) ttl says from now on
                        pipe.set(key, orjson.dumps(draft), px=_ttl(draft, now_ms()))
                    else:
                        pipe.set(key, orjson.dumps(draft), keepttl=True)
                    await pipe.execute()
                except WatchError:
                    continue
            if is_terminal(draft) and not is_terminal(before):
                now = now_ms()
                keep = _ttl(draft, now)  # (a record kept longer than granted: its owner's keys last as long)
                owner = draft.get("owner")
                args = [
                    self._base,
                    task_id,
                    now + keep,
                    len(orjson.dumps(draft)),
                    self.max_bytes_per_owner,
                    keep,
                    now,
                    _owner_key(owner),
                    self.max_bytes,
                ]
                async with self.conn.guard("task store"):
                    evicted = await self._ended(keys=self._owner_keys(owner), args=args)
                await self._evicted(evicted)
            await self._changed(task_id)
            return draft
        raise RuntimeError(f"task {task_id[:8]}: the record kept changing under {UPDATE_RETRIES} attempts")

    async def delete(self, task_id: str) -> None:
        record = await self.get(task_id)
        async with self.conn.guard("task store"):
            await self.conn.client.unlink(self._record(task_id))
            if record is not None:
                await self._forget(keys=self._owner_keys(record.get("owner")), args=[self._base, task_id])
        await self._changed(task_id)

    async def list(self, owner: str | None, after: tuple[int, str] | None, limit: int) -> list[TaskRecord]:
        self._ensure_reader()
        if owner is None:  # (anonymous tasks are indexed, for their bound, but nobody may list them)
            return []
        index = self._index(owner)
        low = after[0] if after is not None else "-inf"
        out: list[TaskRecord] = []
        offset = 0
        client = self.conn.client
        while len(out) < limit:
            async with self.conn.guard("task store"):
                batch = await client.zrangebyscore(index, low, "+inf", start=offset, num=limit * 2 + 8)
                if not batch:
                    break
                ids = [b.decode() if isinstance(b, bytes) else str(b) for b in batch]
                async with client.pipeline(transaction=False) as pipe:  # (records of several slots: no MGET)
                    for task_id in ids:
                        pipe.get(self._record(task_id))
                    raws = await pipe.execute()
            offset += len(batch)
            gone: list[str] = []
            for task_id, raw in zip(ids, raws, strict=True):
                record = _load(raw)
                if record is None:
                    gone.append(task_id)
                elif record.get("owner") == owner and after_cursor(record, after):
                    out.append(record)
                    if len(out) >= limit:
                        break
            if gone:
                async with self.conn.guard("task store"):
                    await client.zrem(index, *gone)
        return out

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        return self._listeners.subscribe(listener)

    async def aclose(self) -> None:
        self._closed = True
        self._listeners.clear()
        if self._beat is not None:
            self._beat.cancel()
            with contextlib.suppress(BaseException):
                await self._beat
            self._beat = None
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
            self._reader = None
        if self._owns:
            await self.conn.aclose()

    # ------------------------------------------------------------------ the change feed

    async def _changed(self, task_id: str) -> None:
        self._listeners.tell(task_id)  # this worker's waiters at once; the others through the stream
        try:
            async with self.conn.guard("task store"):
                await self.conn.client.xadd(self.feed, {b"t": task_id}, maxlen=FEED_LENGTH, approximate=True)
                await self.conn.client.pexpire(self.feed, MAX_TTL_MS)
        except Exception as exc:  # the change is stored; other workers read it at their next look
            logger.warning("task %s: could not announce the change: %s", task_id[:8], exc)

    def _ensure_reader(self) -> None:
        if self._reader is None and not self._closed and self._listeners:
            self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        """Follow the change stream from now on; every listener hears of every task that changed on any worker."""
        client, block = self.conn.blocking()
        block_ms = int(block * 1000)
        position = "$"
        delay = 0.05
        while not self._closed:
            try:
                reply = await client.xread({self.feed: position}, count=256, block=block_ms)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis went away: read on once it is back (waiters read their records anyway)
                if isinstance(exc, self.conn.errors):
                    self.conn.failed(exc)
                logger.warning("task store: the change stream is unreachable (%s); retrying in %.2fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            delay = 0.05
            for entry_id, fields in _stream_entries(reply):
                position = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
                value = fields.get(b"t") if isinstance(fields, dict) else None
                if value is None:
                    continue
                task_id = value.decode() if isinstance(value, bytes) else str(value)
                for listener in list(self._listeners):
                    try:
                        listener(task_id)
                    except Exception:
                        logger.exception("task store: a listener failed")


def _stream_entries(reply: Any) -> list[tuple[Any, Any]]:
    """The entries of a one-stream XREAD reply (RESP2 list or RESP3 dict)."""
    if not reply:
        return []
    if isinstance(reply, dict):
        return list(next(iter(reply.values()))[0])
    return list(reply[0][1])


def _owner_key(owner: str | None) -> str:
    """A fixed-size key part naming ``owner`` (principals and session bindings are arbitrary text)."""
    return hashlib.sha256(("" if owner is None else owner).encode()).hexdigest()[:32] if owner is not None else "-"


def _ttl(record: TaskRecord, now: int) -> int:
    """Milliseconds from ``now`` until the record may go (:func:`~mcpkit.tasks.model.kept_until`), within bounds."""
    end = kept_until(record)
    return max(1, min(MAX_TTL_MS, (end - now) if end is not None else MAX_TTL_MS))


def _load(raw: Any) -> TaskRecord | None:
    if raw is None:
        return None
    record = orjson.loads(raw)
    return record if isinstance(record, dict) else None


__all__ = ["RedisTaskStore"]
