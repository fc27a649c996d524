"""W3C Trace Context in ``_meta``: reading ``traceparent``/``tracestate`` a peer sent (untrusted input, checked and
bounded) and writing them.

The 2026-07-28 specification reserves ``traceparent``, ``tracestate`` and ``baggage`` in ``_meta`` for
OpenTelemetry trace context, in the W3C formats (https://www.w3.org/TR/trace-context/); the same keys are read in
every revision (``_meta`` of request params exists in all of them). What is read here:

- ``traceparent``: ``<version>-<trace id>-<parent id>-<flags>`` in lowercase hex; version ``ff`` is invalid, version
  ``00`` is exactly 55 characters, a later version may append fields after a ``-`` (read up to 512 characters, the
  fields known to version 00 only); an all-zero trace id or parent id is invalid. Anything else: no context.
- ``tracestate``: only with a valid ``traceparent``; at most 512 characters and 32 list members are read, each
  ``key=value`` checked against the W3C grammar; a member that does not pass is dropped, the others kept.
- ``baggage`` is never read (it would carry a stranger's data into this process's context and beyond).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
MAX_TRACEPARENT = 512
MAX_TRACESTATE = 512
MAX_TRACESTATE_MEMBERS = 32

_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
_KEY = re.compile(r"^(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})$")
_VALUE = re.compile(r"^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$")


class TraceParent(NamedTuple):
    """A valid ``traceparent``: its trace id, parent (span) id and flags as numbers."""

    trace_id: int
    span_id: int
    flags: int

    @property
    def sampled(self) -> bool:
        """The ``sampled`` flag."""
        return bool(self.flags & 1)

    def header(self) -> str:
        """The version-00 text."""
        return format_traceparent(self.trace_id, self.span_id, self.flags)


def parse_traceparent(value: Any) -> TraceParent | None:
    """The ``traceparent`` in ``value`` when it is valid (see the module docstring), else None."""
    if type(value) is not str or len(value) > MAX_TRACEPARENT:
        return None
    found = _TRACEPARENT.match(value)
    if found is None:
        return None
    version, trace, span, flags, rest = found.groups()
    if version == "ff" or (version == "00" and rest is not None):
        return None
    trace_id, span_id = int(trace, 16), int(span, 16)
    if trace_id == 0 or span_id == 0:
        return None
    return TraceParent(trace_id, span_id, int(flags, 16) if version == "00" else int(flags, 16) & 1)


def parse_tracestate(value: Any) -> list[tuple[str, str]]:
    """The valid list members of a ``tracestate`` (at most 32, from its first 512 characters), in order."""
    if type(value) is not str:
        return []
    members: list[tuple[str, str]] = []
    seen: set[str] = set()
    for raw in value[:MAX_TRACESTATE].split(","):
        member = raw.strip(" \t")
        if not member:
            continue
        key, eq, val = member.partition("=")
        if not eq or key in seen or not _KEY.match(key) or not _VALUE.match(val):
            continue
        seen.add(key)
        members.append((key, val))
        if len(members) == MAX_TRACESTATE_MEMBERS:
            break
    return members


def format_traceparent(trace_id: int, span_id: int, flags: int) -> str:
    """A version-00 ``traceparent``."""
    return f"00-{trace_id:032x}-{span_id:016x}-{flags & 0xFF:02x}"


def incoming(meta: Any) -> tuple[TraceParent, list[tuple[str, str]]] | None:
    """The trace context in a request's ``_meta`` (None when there is no valid ``traceparent``)."""
    if type(meta) is not dict:
        return None
    parent = parse_traceparent(meta.get(TRACEPARENT))
    if parent is None:
        return None
    return parent, parse_tracestate(meta.get(TRACESTATE))


__all__ = [
    "MAX_TRACEPARENT",
    "MAX_TRACESTATE",
    "MAX_TRACESTATE_MEMBERS",
    "TRACEPARENT",
    "TRACESTATE",
    "TraceParent",
    "format_traceparent",
    "incoming",
    "parse_traceparent",
    "parse_tracestate",
]
