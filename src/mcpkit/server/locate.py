"""Finding the server object in a module the user named (``server.py[:name]``): one rule for the ``mcpkit``
command and the testing kit. ``name`` is a dotted attribute path (a factory, a callable that is not a server, is
called without arguments); without one, ``app``, ``mcp`` or ``server``, else the module's only server."""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any

#: The names looked for when the user names no object.
DEFAULT_NAMES = ("app", "mcp", "server")


class ServerNotFound(Exception):
    """The module holds no server under that name (or none, or several); the message says what was looked for."""


def is_server(obj: Any) -> bool:
    """An mcpkit server object (a low-level ``Server`` or an ``MCPKit`` app)."""
    from .lowlevel import Server

    return isinstance(obj, Server)


def find_server(module: ModuleType, name: str, shown: str, error: type[Exception] = ServerNotFound) -> Any:
    """The server object ``name`` of ``module`` (``shown`` is how the user named the module), else the default
    names, else its only server; otherwise ``error`` with a message that says how to name one."""
    if name:
        obj: Any = module
        for part in name.split("."):
            if not hasattr(obj, part):
                raise error(f"{shown} has no object named {name!r}")
            obj = getattr(obj, part)
        if callable(obj) and not is_server(obj):
            try:
                signature = inspect.signature(obj)
            except (TypeError, ValueError):  # (no signature to read: call it and see)
                signature = None
            if signature is not None:
                try:
                    signature.bind()
                except TypeError:
                    raise error(
                        f"{shown}:{name} takes arguments {signature}: name the server object, or a factory that "
                        "makes it without arguments"
                    ) from None
            obj = obj()  # a factory
        if not is_server(obj):
            raise error(f"{shown}:{name} is a {type(obj).__name__}, not an mcpkit server")
        return obj
    for candidate in DEFAULT_NAMES:
        obj = getattr(module, candidate, None)
        if is_server(obj):
            return obj
    found = [value for value in vars(module).values() if is_server(value)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise error(f"{shown} defines no mcpkit server (looked for {', '.join(DEFAULT_NAMES)} or any server)")
    raise error(f"{shown} defines several servers: name one, {shown}:NAME")


__all__ = ["DEFAULT_NAMES", "ServerNotFound", "find_server", "is_server"]
