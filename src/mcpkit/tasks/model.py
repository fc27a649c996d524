"""What a task is, independent of where it is kept and of the wire form it is read in.

A task record is one JSON-able dict (so a shared store keeps it as one value), its keys short and fixed:

======== =========================================================================================
key      meaning
======== =========================================================================================
id       the task id: 192 random bits from the OS's CSPRNG, URL-safe text
owner    who may reach it (``p:<principal>``, ``s:<session binding>``, or None: the id alone)
method   the request it runs (``tools/call``; on a client: ``sampling/createMessage``, ...)
name     the tool's name (informative)
status   working, input_required, completed, failed, cancelled (the last three are terminal)
message  the status message, or None
created  creation time, milliseconds since the epoch; ``updated``: the last change
ttl      how long it is kept from its creation, in milliseconds (always bounded here; a task still running at
         its end is stopped, recorded ``failed`` and kept a grace period longer: its ``ttl`` grows)
poll     the polling interval suggested to the requestor, in milliseconds
result   the request's result (``completed``)
error    the JSON-RPC error object (``failed``)
requests the input requests outstanding, ``{key: {"method", "params"}}``
answers  answers delivered and not yet taken by the runner, ``{key: {"result": ...} | {"error": ...}}``
asked    how many input requests it made (their keys are never reused)
asking   which 2025-11-25 ``tasks/result`` asks each outstanding request now, ``{key: {"by", "until"}}`` (a token
         and the end of its lease, in milliseconds): one asker across workers
progress the last progress report ``{"progress", "total"?, "message"?}``, or None
======== =========================================================================================

The stored status is the 2026-07-28 extension's: a tool call that returned ``isError: true`` is ``completed``.
The 2025-11-25 form shows it as ``failed`` (:func:`legacy_status`).
"""

from __future__ import annotations

import base64
import secrets
import time
from datetime import UTC, datetime
from typing import Any

JSONDict = dict[str, Any]
TaskRecord = dict[str, Any]

WORKING = "working"
INPUT_REQUIRED = "input_required"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
TERMINAL = frozenset((COMPLETED, FAILED, CANCELLED))
STATUSES = frozenset((WORKING, INPUT_REQUIRED, COMPLETED, FAILED, CANCELLED))

#: how long the record of a task stopped at the end of its time to live is kept after that (milliseconds; the
#: default of ``TaskEngine(overrun_grace_ms=)``), so a requestor waiting on it, or polling soon after, reads why it
#: failed instead of an unknown task
TASK_OVERRUN_GRACE_MS = 60_000
#: how long a store keeps the record of a task still in progress past the end of its time to live (milliseconds):
#: the time its engine has to record it stopped (then the record's ``ttl`` covers the grace above); the record of
#: a task whose worker died goes then
STOP_MARGIN_MS = 5_000
#: the longest task id accepted in a request (ours are 32 characters): anything longer is unknown at once
MAX_TASK_ID_LENGTH = 256
#: ``_meta`` key under which a task's last progress report rides on its ``tasks/get`` answer (an mcpkit
#: convention: neither form of the protocol carries progress on a task's state)
PROGRESS_META = "dev.mcpkit/progress"


def new_task_id() -> str:
    """A fresh task id: 24 bytes from ``secrets`` (the OS's CSPRNG), URL-safe base64 (32 characters)."""
    return secrets.token_urlsafe(24)


def now_ms() -> int:
    """Milliseconds since the epoch (task timestamps are wall-clock: they travel in ISO 8601)."""
    return int(time.time() * 1000)


def iso(ms: int) -> str:
    """An ISO 8601 UTC timestamp (RFC 3339) of ``ms`` milliseconds since the epoch."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_record(
    *, owner: str | None, method: str, name: str | None, ttl_ms: int, poll_ms: int, task_id: str | None = None
) -> TaskRecord:
    """A task that starts ``working`` now."""
    now = now_ms()
    return {
        "id": task_id or new_task_id(),
        "owner": owner,
        "method": method,
        "name": name,
        "status": WORKING,
        "message": None,
        "created": now,
        "updated": now,
        "ttl": ttl_ms,
        "poll": poll_ms,
        "result": None,
        "error": None,
        "requests": {},
        "answers": {},
        "asked": 0,
        "progress": None,
    }


def expires_at(record: TaskRecord) -> int | None:
    """The end of the task's time to live (milliseconds since the epoch), None if never: a task in progress is
    stopped there, a finished one may be dropped from then on."""
    ttl = record.get("ttl")
    return None if ttl is None else int(record["created"]) + int(ttl)


def kept_until(record: TaskRecord) -> int | None:
    """When a store may drop the record (milliseconds since the epoch), None if never: the end of its time to live,
    and for a task still in progress :data:`STOP_MARGIN_MS` later (the engine stops it at the end and records it
    ``failed``, with a ``ttl`` that keeps that record a while: the record must still be there then)."""
    end = expires_at(record)
    if end is None or is_terminal(record):
        return end
    return end + STOP_MARGIN_MS


def expired(record: TaskRecord, now: int | None = None) -> bool:
    """True once a store may drop the record (:func:`kept_until`)."""
    end = kept_until(record)
    return end is not None and (now if now is not None else now_ms()) >= end


def is_terminal(record: TaskRecord) -> bool:
    return record.get("status") in TERMINAL


def legacy_status(record: TaskRecord) -> str:
    """The status in the 2025-11-25 form: a tool call whose result has ``isError: true`` is ``failed`` there."""
    status = str(record["status"])
    if status == COMPLETED:
        result = record.get("result")
        if isinstance(result, dict) and result.get("isError") is True:
            return FAILED
    return status


def _task(record: TaskRecord, status: str, ttl: str, poll: str) -> JSONDict:
    """The fields both forms of ``Task`` share, with the names of the form's ``ttl`` and poll-interval fields."""
    task: JSONDict = {"taskId": record["id"], "status": status}
    message = record.get("message")
    if message is not None:
        task["statusMessage"] = message
    task["createdAt"] = iso(record["created"])
    task["lastUpdatedAt"] = iso(record["updated"])
    task[ttl] = record.get("ttl")
    if record.get("poll"):
        task[poll] = record["poll"]
    return task


def legacy_task(record: TaskRecord, *, detailed: bool = False) -> JSONDict:
    """The ``Task`` object of 2025-11-25 (``ttl``, ``pollInterval``; no result inlined); ``detailed`` (a
    ``tasks/get`` answer): with the last progress report in ``_meta``."""
    task = _task(record, legacy_status(record), "ttl", "pollInterval")
    if detailed and record.get("progress"):
        task["_meta"] = {PROGRESS_META: record["progress"]}
    return task


def extension_task(record: TaskRecord, *, detailed: bool = False) -> JSONDict:
    """The ``Task`` of the 2026-07-28 extension (``ttlMs``, ``pollIntervalMs``); ``detailed``: the
    ``DetailedTask`` of ``tasks/get`` and ``notifications/tasks``, with the result, the error or the outstanding
    input requests of its status inlined (and the last progress report in ``_meta``)."""
    status = record["status"]
    task = _task(record, status, "ttlMs", "pollIntervalMs")
    if detailed:
        if status == COMPLETED and record.get("result") is not None:
            task["result"] = record["result"]
        elif status == FAILED and record.get("error") is not None:
            task["error"] = record["error"]
        elif status == INPUT_REQUIRED:
            task["inputRequests"] = dict(record.get("requests") or {})
        progress = record.get("progress")
        if progress:
            task["_meta"] = {PROGRESS_META: progress}
    return task


# ------------------------------------------------------------------ list cursors


def list_cursor(record: TaskRecord) -> str:
    """An opaque cursor that continues a listing after ``record`` (listings go by creation time, then id)."""
    raw = f"{int(record['created'])}:{record['id']}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def read_cursor(cursor: str) -> tuple[int, str] | None:
    """The (created, id) a cursor continues after; None when it is not one of ours."""
    if not isinstance(cursor, str) or not cursor or len(cursor) > 512:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        created, task_id = raw.split(":", 1)
        return int(created), task_id
    except (ValueError, UnicodeDecodeError):
        return None


def after_cursor(record: TaskRecord, position: tuple[int, str] | None) -> bool:
    """Whether ``record`` comes after ``position`` in a listing."""
    if position is None:
        return True
    return (int(record["created"]), str(record["id"])) > position


__all__ = [
    "CANCELLED",
    "COMPLETED",
    "FAILED",
    "INPUT_REQUIRED",
    "MAX_TASK_ID_LENGTH",
    "PROGRESS_META",
    "STATUSES",
    "TERMINAL",
    "WORKING",
    "TaskRecord",
    "expired",
    "expires_at",
    "extension_task",
    "is_terminal",
    "iso",
    "legacy_status",
    "legacy_task",
    "list_cursor",
    "new_record",
    "new_task_id",
    "now_ms",
    "read_cursor",
]
