"""A traffic recorder on the engine's message tap, with the questions a test asks of it.

Give it to a client (``Client(..., tap=traffic)``: every transport, the server in or out of process) or to a server
(``server.add_tap(traffic)``: every session, every transport)::

    traffic = Traffic()
    async with Client(app, tap=traffic) as client:
        await client.call_tool("add", {"a": 1, "b": 2})
    traffic.assert_sent("tools/call", {"name": "add"})
    assert traffic.methods("out")[-1] == "tools/call"
    traffic.assert_no_errors()

Directions are the tapped side's: ``"out"`` is what it sent, ``"in"`` what it received. The recorder is bounded
(events and bytes: :class:`~mcpkit.engine.tap.TapRecorder`); when it had to let old events go, the failure
messages of its assertions say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from ..engine.tap import OUT, TapEvent, TapRecorder

DEFAULT_MAX_EVENTS = 10_000
"""Events a :class:`Traffic` keeps by default (the oldest go first)."""
DEFAULT_MAX_BYTES = 32 * 1024 * 1024
"""Message bytes a :class:`Traffic` keeps by default."""


def _loads(event: TapEvent) -> Any:
    data = event.message.data
    if not data:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return data.decode("utf-8", "replace")


def _items(message: Any) -> list[Any]:
    return message if isinstance(message, list) else [message]


def _contains(whole: Any, part: Any) -> bool:
    """``part`` is in ``whole``: equal, or for dicts every key of ``part`` present with a contained value."""
    if isinstance(part, Mapping):
        return isinstance(whole, Mapping) and all(k in whole and _contains(whole[k], v) for k, v in part.items())
    return bool(whole == part)


class Traffic(TapRecorder):
    """Every JSON-RPC message a client or server sent and received, kept for a test to assert on.

    Args:
        max_events: events kept at most (default 10,000).
        max_bytes: message bytes kept at most (default 32 MiB).
    """

    def __init__(self, max_events: int = DEFAULT_MAX_EVENTS, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        super().__init__(max_events, max_bytes)

    # ------------------------------------------------------------------ reading

    def json(self, direction: str | None = None) -> list[Any]:
        """Each message kept, parsed (a batch is a list), oldest first; ``direction``: ``"in"`` or ``"out"``."""
        return [_loads(e) for e in self if direction is None or e.direction == direction]

    def entries(self, direction: str | None = None) -> list[tuple[TapEvent, Any]]:
        """Each event kept with its message parsed, oldest first (the event says the direction, the peer, the
        time)."""
        return [(e, _loads(e)) for e in self if direction is None or e.direction == direction]

    def _messages(self, direction: str | None, want: str, method: str | None) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for message in self.json(direction):
            for item in _items(message):
                if not isinstance(item, dict):
                    continue
                kind = (
                    ("request" if "id" in item else "notification")
                    if "method" in item
                    else ("error" if "error" in item else "result")
                )
                if kind == want and (method is None or item.get("method") == method):
                    found.append(item)
        return found

    def requests(self, method: str | None = None, direction: str | None = None) -> list[dict[str, Any]]:
        """The requests kept (parsed), of ``method`` if given, in ``direction`` if given."""
        return self._messages(direction, "request", method)

    def notifications(self, method: str | None = None, direction: str | None = None) -> list[dict[str, Any]]:
        """The notifications kept (parsed), of ``method`` if given, in ``direction`` if given."""
        return self._messages(direction, "notification", method)

    def errors(self, direction: str | None = None) -> list[dict[str, Any]]:
        """The error responses kept (parsed), in ``direction`` if given."""
        return self._messages(direction, "error", None)

    def results(self, direction: str | None = None) -> list[dict[str, Any]]:
        """The successful responses kept (parsed), in ``direction`` if given."""
        return self._messages(direction, "result", None)

    def methods(self, direction: str | None = None) -> list[str]:
        """The method of each request and notification kept, in order (batch members included)."""
        return [
            item["method"]
            for message in self.json(direction)
            for item in _items(message)
            if isinstance(item, dict) and isinstance(item.get("method"), str)
        ]

    def answer_to(self, request: Mapping[str, Any]) -> dict[str, Any] | None:
        """The response (result or error) to ``request`` (a request as :meth:`requests` returns it): the first
        later message in the other direction carrying its id."""
        rid = request.get("id")
        sent_by: str | None = None  # (each side numbers its own requests: the other side's may carry this id too)
        for event in self:
            for item in _items(_loads(event)):
                if not isinstance(item, dict):
                    continue
                if sent_by is None:
                    if item == request:
                        sent_by = event.direction
                elif event.direction != sent_by and "method" not in item and item.get("id") == rid:
                    return item
        return None

    # ------------------------------------------------------------------ asserting

    def transcript(self, limit: int = 40, width: int = 160) -> str:
        """The last ``limit`` messages, one line each (``>>`` sent, ``<<`` received), cut to ``width``."""
        events = self.events[-limit:]
        lines = []
        if self.dropped or len(self) > len(events):
            lines.append(f"... ({self.dropped + len(self) - len(events)} earlier message(s) not shown)")
        for event in events:
            arrow = ">>" if event.direction == OUT else "<<"
            text = event.message.data.decode("utf-8", "replace") if event.message.data else f"<{event.kind}>"
            lines.append(f"{event.peer} {arrow} {text if len(text) <= width else text[: width - 3] + '...'}")
        return "\n".join(lines) if lines else "(no messages)"

    def _fail(self, what: str) -> AssertionError:
        note = (
            f"\n({self.dropped} older message(s) were let go to stay within the recorder's bounds)"
            if self.dropped
            else ""
        )
        return AssertionError(f"{what}{note}\nthe traffic:\n{self.transcript()}")

    def assert_sent(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The first request or notification of ``method`` the tapped side sent whose params contain ``params``
        (a nested subset); an ``AssertionError`` showing the traffic when there is none."""
        __tracebackhide__ = True  # (pytest shows the test's line, not this one)
        return self._assert(OUT, method, params)

    def assert_received(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """As :meth:`assert_sent`, for what the tapped side received."""
        __tracebackhide__ = True  # (pytest shows the test's line, not this one)
        return self._assert("in", method, params)

    def _assert(self, direction: str, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        for item in [*self.requests(method, direction), *self.notifications(method, direction)]:
            if params is None or _contains(item.get("params") or {}, params):
                return item
        verb = "sent" if direction == OUT else "received"
        wanted = f" with params containing {dict(params)!r}" if params else ""
        raise self._fail(f"no {method} was {verb}{wanted}")

    def assert_not_sent(self, method: str) -> None:
        """Fail when the tapped side sent a request or notification of ``method``."""
        __tracebackhide__ = True  # (pytest shows the test's line, not this one)
        if self.requests(method, OUT) or self.notifications(method, OUT):
            raise self._fail(f"{method} was sent")

    def assert_no_errors(self) -> None:
        """Fail when any error response passed, either way."""
        __tracebackhide__ = True  # (pytest shows the test's line, not this one)
        errors = self.errors()
        if errors:
            shown = "\n".join(orjson.dumps(e).decode()[:300] for e in errors[:10])
            raise self._fail(f"{len(errors)} error response(s):\n{shown}")


__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_EVENTS", "Traffic"]
