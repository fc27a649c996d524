"""The one rule by which a server's listen stream and a client's watch hold the changes a slow reader has not
taken yet (``mcpkit.protocol.changes.PendingChanges``)."""

from __future__ import annotations

import pytest

from mcpkit.protocol.changes import PendingChanges
from mcpkit.server.lowlevel import Server

UPDATED = "notifications/resources/updated"
TOOLS = "notifications/tools/list_changed"


def drained(changes: PendingChanges) -> list[str]:
    out = []
    while (change := changes.pop()) is not None:
        out.append(change[1].get("uri", change[0]))
    return out


def test_every_change_is_kept_while_there_is_room_repeats_included() -> None:
    changes = PendingChanges(4)
    for uri in ("a", "a", "b", "a"):
        assert changes.add(UPDATED, {"uri": uri})
    assert drained(changes) == ["a", "a", "b", "a"]


def test_a_full_queue_merges_equal_changes_and_only_distinct_ones_overflow() -> None:
    changes = PendingChanges(3)
    for uri in ("a", "b", "a"):
        assert changes.add(UPDATED, {"uri": uri})
    assert changes.add(UPDATED, {"uri": "b"})  # equal to one waiting: merged into it
    assert changes.add(TOOLS, {})  # room made by merging the two "a"
    assert len(changes) == 3
    assert not changes.add(UPDATED, {"uri": "c"})  # three distinct wait: it cannot be kept
    assert drained(changes) == ["a", "b", TOOLS]


def test_task_notifications_never_merge() -> None:
    changes = PendingChanges(1)
    assert changes.add("notifications/tasks/status", {"taskId": "t"})
    assert not changes.add("notifications/tasks/status", {"taskId": "t"})


def test_a_queue_size_below_one_is_refused_when_the_server_is_made() -> None:
    with pytest.raises(ValueError, match="listen_queue_size"):
        Server("s", "1", listen_queue_size=0)
    with pytest.raises(ValueError, match="maxsize"):
        PendingChanges(0)


def test_a_queue_full_by_bytes_merges_equal_changes_and_counts_the_bytes_it_keeps() -> None:
    """The byte bound (a client's watch) acts as the count bound: merging the equal ones waiting frees their bytes,
    one change larger than the bound waits alone, and what is popped or cleared no longer counts."""
    changes = PendingChanges(10, maxbytes=100)
    for uri in ("a", "a", "b"):
        assert changes.add(UPDATED, {"uri": uri}, 30)
    assert changes.add(UPDATED, {"uri": "c"}, 30)  # 120 > 100: the second "a" is merged into the first to make room
    assert changes.size == 90 and len(changes) == 3
    assert changes.add(UPDATED, {"uri": "b"}, 30)  # equal to one waiting: merged, no bytes added
    assert not changes.add(TOOLS, {}, 11)  # 101 bytes of distinct changes: it cannot be kept
    assert changes.size == 90
    assert drained(changes) == ["a", "b", "c"] and changes.size == 0
    assert changes.add(UPDATED, {"uri": "big"}, 500)  # nothing waits: it goes alone
    assert not changes.add(UPDATED, {"uri": "d"}, 1)
    changes.clear()
    assert changes.size == 0 and changes.add(UPDATED, {"uri": "d"}, 100)
    with pytest.raises(ValueError, match="maxbytes"):
        PendingChanges(1, maxbytes=0)
