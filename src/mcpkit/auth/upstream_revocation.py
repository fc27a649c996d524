"""The revocations at the upstream provider of an OAuth proxy (:mod:`mcpkit.auth.upstream_login`): when the proxy
revokes a grant, that sign-in's upstream tokens are revoked at the provider's RFC 7009 revocation endpoint, in the
background (the answer that revoked the grant does not wait for a slow provider), at most
:data:`REVOCATION_CONCURRENCY` at a time per process, at most ``max_queued`` waiting or running (past it, one is
tried once in the request that revoked its grant, and left to the sweep below when it must be tried again).

What the provider answers decides what follows (RFC 7009 §2.2): 200 is done (a token it no longer knows too); a
503, any other 5xx, a 429 or no answer at all (the network, the provider's ``timeout``) is tried again after a
pause (:class:`RevocationRetry`: doubling, or the ``Retry-After`` it named, within a number of attempts and a total
time); any other answer (400 ``unsupported_token_type``, ``invalid_client``...) is final: the same request would be
refused again.

Nothing is lost when the process dies: each revocation is recorded, sealed, in the proxy's storage
(:class:`~mcpkit.auth.upstream_state.RevocationRecordStorage`: with Redis, shared by the replicas) before it is
tried, and dropped once done or failed for good. The replica trying it holds a lease on the record, renewed while
it lives; every half lease each replica sweeps the storage and takes over (a batch at a time, as far as its queue
has room) the records whose lease ended: their replica died.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import logging
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from .._asgi import Receive
from .upstream import UpstreamError, UpstreamProvider, UpstreamTokens
from .upstream_state import InMemoryUpstreamState, RevocationRecordStorage, Sealer, state_key

logger: logging.Logger = logging.getLogger(__name__)

__all__ = [
    "MAX_REVOCATION_RECORDS",
    "REVOCATION_CONCURRENCY",
    "REVOCATION_LEASE_MARGIN",
    "REVOCATION_TAKEOVER_BATCH",
    "RevocationRetry",
    "UpstreamRevocations",
]

#: upstream revocations being tried at once in the background, per process (a revocation waiting for its next try
#: holds no slot)
REVOCATION_CONCURRENCY: int = 4

#: how long the lease of a replica on a recorded revocation outlives the provider's ``timeout`` (seconds): a
#: replica renews its leases every half of that; a record whose lease ended is taken over by another replica
REVOCATION_LEASE_MARGIN: float = 5.0

#: records of pending revocations one sweep takes over at most (and never more than the queue has room for)
REVOCATION_TAKEOVER_BATCH: int = 100

#: records of pending revocations kept in the storage, all replicas together: past it a revocation is still tried,
#: in memory only (``counts["unrecorded"]``, a warning line)
MAX_REVOCATION_RECORDS: int = 10_000


@dataclass(frozen=True)
class RevocationRetry:
    """How a revocation the provider could not take now (a 5xx, a 429, no answer) is tried again: at most
    ``attempts`` tries by one replica, the first pause ``first_delay`` seconds, doubling up to ``max_delay``
    (80-100 % of it), or the provider's ``Retry-After`` (at most ``max_delay``); never a try that would start more
    than ``deadline`` seconds after the revocation was asked (a record taken over after that is tried once)."""

    attempts: int = 6
    first_delay: float = 1.0
    max_delay: float = 60.0
    deadline: float = 300.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.first_delay <= 0 or self.max_delay < self.first_delay or self.deadline <= 0:
            raise ValueError("RevocationRetry needs attempts >= 1, 0 < first_delay <= max_delay and deadline > 0")

    def pause(self, retry: int, retry_after: float | None) -> float:
        """The pause before try ``retry + 1`` (``retry`` >= 1), the provider's ``Retry-After`` honoured."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay)
        return min(self.first_delay * 2.0 ** (retry - 1), self.max_delay) * random.uniform(0.8, 1.0)


def _retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds from now: delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - time.time() if when.tzinfo is not None else None


def _verdict(status: int, headers: Mapping[str, str]) -> tuple[str, float | None]:
    """What an answer of the revocation endpoint means: ``done``, ``again`` (with the ``Retry-After`` it named, in
    seconds) or ``final`` (RFC 7009 §2.2: 200 for any token, 503 to be tried later; an error is final)."""
    if status == 200:
        return "done", None
    if status == 429 or 500 <= status <= 599:
        return "again", _retry_after(headers.get("retry-after"))
    return "final", None


@dataclass
class _Job:
    key: str
    tokens: UpstreamTokens
    asked_at: float  # real time: the deadline of its retries counts from it


class UpstreamRevocations:
    """The upstream revocations of one proxy: queued by :meth:`revoke`, retried, recorded in :attr:`records` (the
    storage's once the proxy is bound, its own until then), swept for records of replicas that died. ``counts``:
    ``queued``, ``inline`` (tried in the request: the queue was full), ``done`` (the provider answered 200),
    ``failed`` (a final answer, or out of tries), ``retried`` (tries after the first), ``taken_over`` (records of
    another replica, or of this one's inline tries, swept) and ``unrecorded``."""

    def __init__(
        self, provider: UpstreamProvider, sealer: Sealer, *, max_queued: int, retry: RevocationRetry, keep_for: float
    ) -> None:
        self.provider = provider
        self.max_queued = max_queued
        self.retry = retry
        self.keep_for = keep_for  # the longest a record is kept (real time), tried or not
        self.records: RevocationRecordStorage = InMemoryUpstreamState()
        self.counts: dict[str, int] = dict.fromkeys(
            ("queued", "inline", "done", "failed", "retried", "taken_over", "unrecorded"), 0
        )
        self._sealer = sealer
        self._running: dict[asyncio.Task[None], str] = {}  # -> the key of its record
        self._pausing: set[asyncio.Task[None]] = set()  # (between two tries: drain() does not wait for them)
        self._changed = asyncio.Event()  # a task began a pause or ended
        self._slots = asyncio.Semaphore(REVOCATION_CONCURRENCY)
        self._sweeper: asyncio.Task[None] | None = None

    @property
    def lease(self) -> float:
        """How long a replica's lease on a record lasts unless renewed (seconds)."""
        return self.provider.timeout + REVOCATION_LEASE_MARGIN

    # ------------------------------------------------------------------ asking
    async def revoke(self, family: str, tokens: UpstreamTokens) -> None:
        """Revoke ``tokens`` (of the grant ``family``) at the provider: recorded, then tried in the background;
        with ``max_queued`` waiting or running, tried once here."""
        if not self.provider.revocation_url:
            return
        self.start()
        job = _Job(state_key("revocation", family), tokens, time.time())
        await self._record(job)
        if len(self._running) >= self.max_queued:
            self.counts["inline"] += 1
            logger.warning(
                "%d upstream revocations are already queued (max_queued_revocations): this one is tried in its request",
                len(self._running),
            )
            if (await self._try(job, 1))[0] == "again":  # (its record stays: a sweep takes it over when its lease ends)
                logger.warning("%s could not take a revocation now: it is tried again later", self.provider.name)
            return
        self.counts["queued"] += 1
        self._queue(job)

    async def _record(self, job: _Job) -> None:
        record = {"tokens": dataclasses.asdict(job.tokens), "asked_at": job.asked_at}
        sealed = self._sealer.seal(job.key, orjson.dumps(record))
        try:
            kept = await self.records.put_revocation(
                job.key, sealed, job.asked_at + self.lease, job.asked_at + self.keep_for, MAX_REVOCATION_RECORDS
            )
        except Exception as exc:  # (the storage is down: the revocation is still tried, from memory)
            self.counts["unrecorded"] += 1
            logger.warning("an upstream revocation could not be recorded (%r): a restart loses it", exc)
            return
        if not kept:
            self.counts["unrecorded"] += 1
            logger.warning("an upstream revocation is not recorded (MAX_REVOCATION_RECORDS): a restart loses it")

    def _queue(self, job: _Job) -> None:
        task = asyncio.create_task(self._attempts(job))
        self._running[task] = job.key
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._running.pop(task, None)
        self._pausing.discard(task)
        self._changed.set()

    # ------------------------------------------------------------------ trying
    async def _attempts(self, job: _Job) -> None:
        """Try ``job`` until done, refused for good, or out of tries or time (each try holds one of the
        :data:`REVOCATION_CONCURRENCY` slots; the pauses between them hold none)."""
        try:
            for attempt in range(1, self.retry.attempts + 1):
                async with self._slots:
                    verdict, pause = await self._try(job, attempt)
                if verdict != "again":
                    return
                self.counts["retried"] += 1
                await self._pause(pause)
        except asyncio.CancelledError:  # (the process stops: the record stays for another replica)
            raise
        except Exception:  # (a bug: logged, never an unretrieved task exception; the record stays)
            logger.exception("revoking an upstream token at %s failed", self.provider.name)

    async def _try(self, job: _Job, attempt: int) -> tuple[str, float]:
        """One try: ``done`` or ``final`` (the record dropped, counted), or ``again`` with the pause before the
        next try (``final`` instead when there is no next try within the bounds)."""
        try:
            status, headers, _ = await self.provider.revocation_answer(job.tokens)
        except UpstreamError as exc:
            verdict, retry_after, what = "again", None, exc.description
        else:
            verdict, retry_after = _verdict(status, headers)
            what = f"HTTP {status}"
        pause = 0.0
        if verdict == "again":
            pause = self.retry.pause(attempt, retry_after)
            late = time.time() + pause > job.asked_at + self.retry.deadline
            if attempt >= self.retry.attempts or late:
                verdict = "final"
                what += f", after {attempt} tries" if not late else f", {self.retry.deadline:g} s after it was asked"
        if verdict == "again":
            return verdict, pause
        self.counts["done" if verdict == "done" else "failed"] += 1
        if verdict == "final":
            logger.warning("%s did not revoke an upstream token (%s): given up", self.provider.name, what)
        await self._forget(job.key)
        return verdict, pause

    async def _forget(self, key: str) -> None:
        try:
            await self.records.drop_revocation(key)
        except Exception:  # (a record left is tried again after its lease: the provider answers 200 again)
            logger.exception("the record of a finished upstream revocation could not be dropped")

    # ------------------------------------------------------------------ sweeping
    def start(self) -> None:
        """Start the sweep (once; the lifespan startup does, and the first revocation)."""
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep_forever())

    async def stop(self) -> None:
        """End the sweep and the revocations still waiting or running: their records stay in the storage, for a
        replica to take over when their lease ends (in memory, they are lost with the process)."""
        tasks = [t for t in (self._sweeper, *self._running) if t is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        self._sweeper = None

    async def _sweep_forever(self) -> None:
        while True:
            try:
                await self.sweep()
            except Exception as exc:  # (the storage is down: the next sweep tries again)
                logger.warning("the sweep of recorded upstream revocations failed: %r", exc)
            await asyncio.sleep(self.lease / 2)

    async def sweep(self) -> None:
        """Renew the leases of this replica's revocations, then take over the records whose lease ended."""
        now = time.time()
        until = now + self.lease
        await self.records.renew_revocations(sorted(set(self._running.values())), until)
        room = min(REVOCATION_TAKEOVER_BATCH, self.max_queued - len(self._running))
        if room <= 0:
            return
        for key, sealed in await self.records.claim_revocations(now, until, room):
            data = self._sealer.open(key, sealed)
            if data is None:  # (sealed under another secret, or altered)
                await self._forget(key)
                continue
            record = orjson.loads(data)
            self.counts["taken_over"] += 1
            self._queue(_Job(key, UpstreamTokens(**record["tokens"]), record["asked_at"]))

    # ------------------------------------------------------------------ stopping
    async def _pause(self, seconds: float) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._pausing.add(task)
        self._changed.set()
        try:
            await asyncio.sleep(seconds)
        finally:
            self._pausing.discard(task)

    async def drain(self, timeout: float | None = None) -> None:
        """Wait (at most ``timeout`` seconds) for the revocations in the background that are being tried or wait
        for a slot; not for those pausing between two tries (their records stay for another replica when the
        process ends)."""
        loop = asyncio.get_running_loop()
        end = None if timeout is None else loop.time() + timeout
        while any(task not in self._pausing for task in self._running):
            self._changed.clear()
            left = None if end is None else end - loop.time()
            if left is not None and left <= 0:
                return
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                return

    def lifespan(self, receive: Receive) -> Receive:
        """``receive`` of the ASGI lifespan: the sweep starts with the startup; the shutdown waits for
        :meth:`drain` (bounded by the provider's ``timeout``) and ends the sweep before it is handed on."""

        async def wrapped() -> Any:
            message = await receive()
            if message.get("type") == "lifespan.startup" and self.provider.revocation_url:
                self.start()
            elif message.get("type") == "lifespan.shutdown":
                await self.drain(self.provider.timeout)
                await self.stop()
            return message

        return wrapped
