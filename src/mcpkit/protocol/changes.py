"""Which change notifications are the same change, for the queues that coalesce them. Free of pydantic: the
server's built-ins import it, and a server of plain tools never loads pydantic."""

from __future__ import annotations

from typing import Any


def change_key(method: str, params: dict[str, Any]) -> object:
    """What makes two change notifications the same change (None: each counts on its own), for the queues that
    coalesce them (a server's listen stream, a client's watch): a list's ``list_changed``, or
    ``resources/updated`` of one URI. Task notifications carry state, so they never coalesce."""
    if method == "notifications/resources/updated":
        uri = params.get("uri")
        return (method, uri) if isinstance(uri, str) else None
    if method.endswith("/list_changed"):
        return method
    return None


__all__ = ["change_key"]
