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
``<prefix>{tasks}:changes``           a Redis stream: the id of each task that changed (capped, ~10,000 entries)
``<prefix>{tasks}:runner:<runner>``   one per worker that created tasks, renewed while it lives (expires
                                      ``runner_timeout`` after its last beat); each record names its runner
====================================  ========================================================================

Creating a task is one script on the ``{tasks}`` keys (the caps on tasks in progress are checked and the place
reserved atomically; the owner's tasks kept are counted, its oldest finished one evicted past the bound), then the
record's ``SET``: both before the task id is returned, so a ``tasks/get`` on any worker finds it. A task that
ends is weighed by another script (its record's bytes; past the owner's byte budget its oldest finished tasks are
evicted); an evicted record is deleted at once and reads as unknown, as an expired one does. A change is an
optimistic transaction (``WATCH`` the record, ``SET ... KEEPTTL``), retried on a conflict, then an ``XADD`` to the
change stream, which every worker's store follows (``XREAD BLOCK``) to wake what waits on that task (a runner
waiting for an answer, a ``tasks/result`` waiting for the end, a cancellation reaching the worker that runs the
task). A worker cut off from Redis meanwhile reads every record it waits on again when it
is back (waiters read again every few seconds anyway).

The ``{tasks}`` keys share one Redis Cluster slot (one node holds them; the records spread over all). Every key
expires: records at their TTL, the sets with the longest TTL granted; entries of a worker that died mid-task leave
the sets when their score passes, and the task itself reads ``failed`` ("the worker running the task is gone") on
any other worker once that worker's runner mark has expired. Every command goes through the connection's guard:
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
from ...tasks.store import MAX_BYTES_PER_OWNER, MAX_RECORDS_PER_OWNER, Change, Listener, Listeners, kept_refused
from .connection import DEFAULT_TIMEOUT, OnConnection, RedisConnection, connection_for

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

# Shared by the scripts on one owner's keys: KEYS[3] its index (by creation), KEYS[4] its kept set (by end),
# KEYS[5] its sizes, KEYS[2] its tasks in progress.
_OWNER_LIB = """
local function forget(id)
  redis.call('ZREM', KEYS[4], id)
  redis.call('ZREM', KEYS[3], id)
  local size = redis.call('HGET', KEYS[5], id)
  if size then
    redis.call('HDEL', KEYS[5], id)
    redis.call('HINCRBY', KEYS[5], '*', -tonumber(size))
  end
end
local function forget_ended(now)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)) do forget(id) end
end
-- the owner's oldest finished task kept (not `but`), by creation; its tasks in progress are skipped (at most the
-- cap on them), and index entries of records no longer kept are dropped on the way
local function oldest_finished(but)
  local start = 0
  while true do
    local ids = redis.call('ZRANGE', KEYS[3], start, start + 63)
    if #ids == 0 then return nil end
    for _, id in ipairs(ids) do
      if not redis.call('ZSCORE', KEYS[4], id) then
        redis.call('ZREM', KEYS[3], id)
        start = start - 1
      elseif id ~= but and not redis.call('ZSCORE', KEYS[2], id) then
        return id
      end
    end
    start = start + #ids
  end
end
local function over_budget(budget, but, evicted)
  while (tonumber(redis.call('HGET', KEYS[5], '*')) or 0) > budget do
    local id = oldest_finished(but)
    if not id then return end
    forget(id)
    table.insert(evicted, id)
  end
end
local function keep_keys(ttl)
  for i = 3, 5 do
    if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
  end
end
"""

# KEYS: live (all), live (owner), index, kept, sizes (owner). ARGV: now, max live, max live per owner, id, expiry,
# created, index floor (entries older than this are expired whatever they were), live sets' ttl ms, the owner's
# keys' ttl ms (as long as the record may be kept), when the record goes, its bytes, max kept per owner, max bytes
# per owner. Returns {0, evicted ids...}, or {1} / {2}: a cap on tasks in progress, {3}: the owner's kept tasks at
# the bound, none finished.
_CREATE = (
    _OWNER_LIB
    + """
local now = tonumber(ARGV[1])
local id = ARGV[4]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return {1} end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then return {2} end
forget_ended(now)
local evicted = {0}
if redis.call('ZCARD', KEYS[4]) >= tonumber(ARGV[12]) then
  local oldest = oldest_finished(nil)
  if not oldest then return {3} end
  forget(oldest)
  table.insert(evicted, oldest)
end
redis.call('ZADD', KEYS[1], ARGV[5], id)
redis.call('ZADD', KEYS[2], ARGV[5], id)
redis.call('PEXPIRE', KEYS[1], ARGV[8])
redis.call('PEXPIRE', KEYS[2], ARGV[8])
redis.call('ZADD', KEYS[3], ARGV[6], id)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[7])
redis.call('ZADD', KEYS[4], ARGV[10], id)
redis.call('HSET', KEYS[5], id, ARGV[11])
redis.call('HINCRBY', KEYS[5], '*', tonumber(ARGV[11]))
over_budget(tonumber(ARGV[13]), id, evicted)
keep_keys(tonumber(ARGV[9]))
return evicted
"""
)

# A task ended. KEYS: as _CREATE's. ARGV: id, when the record goes now, its bytes now, max bytes per owner, the
# owner's keys' ttl ms, now. Returns the ids evicted.
_ENDED = (
    _OWNER_LIB
    + """
local id = ARGV[1]
redis.call('ZREM', KEYS[1], id)
redis.call('ZREM', KEYS[2], id)
if redis.call('ZSCORE', KEYS[4], id) then
  redis.call('ZADD', KEYS[4], ARGV[2], id)
  local before = tonumber(redis.call('HGET', KEYS[5], id)) or 0
  redis.call('HSET', KEYS[5], id, ARGV[3])
  redis.call('HINCRBY', KEYS[5], '*', tonumber(ARGV[3]) - before)
end
forget_ended(tonumber(ARGV[6]))
local evicted = {}
over_budget(tonumber(ARGV[4]), id, evicted)
keep_keys(tonumber(ARGV[5]))
return evicted
"""
)

# A task deleted. KEYS: as _CREATE's. ARGV: id.
_FORGET = (
    _OWNER_LIB
    + """
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
forget(ARGV[1])
return 0
"""
)


class RedisTaskStore(OnConnection):
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
    ) -> None:
        if runner_timeout <= 0:
            raise ValueError("runner_timeout must be positive")
        if min(max_records_per_owner, max_bytes_per_owner) < 1:
            raise ValueError("max_records_per_owner and max_bytes_per_owner must be positive")
        self.max_records_per_owner = max_records_per_owner
        self.max_bytes_per_owner = max_bytes_per_owner
        self.conn: RedisConnection
        self.conn, self._owns = connection_for(redis, prefix=prefix, cluster=cluster, timeout=timeout)
        self._create = self.conn.client.register_script(_CREATE)
        self._ended = self.conn.client.register_script(_ENDED)
        self._forget = self.conn.client.register_script(_FORGET)
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
        """The keys of ``owner``'s scripts: tasks in progress (all, its own), its index, kept set and sizes."""
        part = _owner_key(owner)
        keys = self.conn.keys
        return [
            self._live(everyone=True),
            self._live(owner),
            self._index(owner),
            keys.key("tasks", "kept", part),
            keys.key("tasks", "size", part),
        ]

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
            now,
            max_live,
            max_live_per_owner,
            task_id,
            expiry,
            int(record["created"]),
            now - MAX_TTL_MS,
            MAX_TTL_MS,
            _ttl(record, now, granted=True),  # (the owner's keys: as long as the last record they list)
            now + ttl,
            len(data),
            self.max_records_per_owner,
            self.max_bytes_per_owner,
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
            logger.info("task %s evicted: its owner's tasks kept are past the store's bounds", task_id[:8])
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
                args = [task_id, now + keep, len(orjson.dumps(draft)), self.max_bytes_per_owner, keep, now]
                async with self.conn.guard("task store"):
                    evicted = await self._ended(keys=self._owner_keys(draft.get("owner")), args=args)
                await self._evicted(evicted)
            await self._changed(task_id)
            return draft
        raise RuntimeError(f"task {task_id[:8]}: the record kept changing under {UPDATE_RETRIES} attempts")

    async def delete(self, task_id: str) -> None:
        record = await self.get(task_id)
        async with self.conn.guard("task store"):
            await self.conn.client.unlink(self._record(task_id))
            if record is not None:
                await self._forget(keys=self._owner_keys(record.get("owner")), args=[task_id])
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


def _ttl(record: TaskRecord, now: int, *, granted: bool = False) -> int:
    """Milliseconds from ``now`` until the record may go (:func:`~mcpkit.tasks.model.kept_until`; ``granted``: the
    end of its time to live), within bounds."""
    end = expires_at(record) if granted else kept_until(record)
    return max(1, min(MAX_TTL_MS, (end - now) if end is not None else MAX_TTL_MS))


def _load(raw: Any) -> TaskRecord | None:
    if raw is None:
        return None
    record = orjson.loads(raw)
    return record if isinstance(record, dict) else None


__all__ = ["RedisTaskStore"]
