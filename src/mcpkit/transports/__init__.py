"""Transports move framed messages; they never look inside a message beyond what framing needs."""

from .base import Connection

__all__ = ["Connection"]
