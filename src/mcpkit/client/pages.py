"""Walking a paginated list (``tools/list``, ``resources/list``, ...) to its end, bounded in pages, items and the
memory the items take, and refusing a server that sends the same cursor twice."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..protocol.errors import MCPError
from ..protocol.jsonrpc import JSONDict
from .results import PaginationLimitExceeded, parsed_size


async def walk(
    fetch: Callable[[str | None], Awaitable[JSONDict]], method: str, key: str, pages: int, limit: int, max_bytes: int
) -> list[JSONDict]:
    """Every item under ``key`` of the pages ``fetch(cursor)`` gives (the first with None), following
    ``nextCursor``; :class:`PaginationLimitExceeded` (with what was collected) past ``pages`` pages, ``limit``
    items or ``max_bytes`` of estimated memory (``Client(max_list_bytes=...)``)."""
    items: list[JSONDict] = []
    cursor: str | None = None
    seen: set[str] = set()
    size = 0
    for _ in range(pages):
        page = await fetch(cursor)
        batch = page.get(key) or []
        if not isinstance(batch, list):
            raise MCPError(f"{method}: {key!r} is not a list")
        size += parsed_size(batch)
        if size > max_bytes:
            raise PaginationLimitExceeded(
                f"{method}: the pages would take more than {max_bytes} bytes of memory "
                "(raise Client(max_list_bytes=...) to allow more)",
                items,
            )
        items.extend(batch)
        if len(items) > limit:
            raise PaginationLimitExceeded(f"{method}: more than {limit} items", items[:limit])
        nxt = page.get("nextCursor")
        if not isinstance(nxt, str) or not nxt:
            return items
        size += 50 + len(nxt)  # (the cursors seen are kept too)
        if nxt in seen:
            raise MCPError(f"{method}: the server returned the cursor {nxt!r} twice (pagination loop)")
        seen.add(nxt)
        cursor = nxt
    raise PaginationLimitExceeded(f"{method}: more than {pages} pages", items)
