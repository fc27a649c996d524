"""What a test names as "the server": a server object, a file (``server.py[:name]``) or an import path
(``package.module[:name]``), loaded in this process, or turned into the command line that serves it over stdio in a
subprocess.

A file or module without ``:name`` is searched for ``app``, ``mcp`` or ``server``, else its one server object; a
name that is a factory (a callable that is not a server) is called without arguments.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from ..server import locate
from ..server.locate import DEFAULT_NAMES, is_server

_FILE_MODULE_PREFIX = "mcpkit_testing_"


class ServerLoadError(Exception):
    """The server could not be found or imported; the message says what was looked for and how to name it."""


def split_spec(spec: str) -> tuple[str, str]:
    """``"where[:name]"`` -> (where, name); a Windows drive letter (``C:\\...``) is not a separator."""
    where, sep, name = spec.rpartition(":")
    if not sep or (len(where) == 1 and where.isalpha()) or "/" in name or "\\" in name:
        return spec, ""
    return where, name


def is_file_spec(where: str) -> bool:
    """Whether ``where`` names a file (a path or a ``.py`` name) rather than a module to import."""
    return where.endswith(".py") or os.sep in where or "/" in where or Path(where).is_file()


def load_module(where: str) -> ModuleType:
    """Import ``where``: a ``.py`` file (once per path, under a private name, its directory put on ``sys.path``
    so it can import its siblings) or a dotted module path."""
    if not is_file_spec(where):
        try:
            return importlib.import_module(where)
        except ImportError as exc:
            raise ServerLoadError(f"cannot import the server module {where!r}: {exc}") from exc
    file = Path(where).resolve()
    if file.is_dir():
        file = file / "server.py"
    if not file.is_file():
        raise ServerLoadError(f"no such server file: {where}")
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) and Path(module.__file__ or "").resolve() == file:
            return module  # already imported (by the tests, by name): the same objects, not a second copy
    name = _FILE_MODULE_PREFIX + "".join(c if c.isalnum() else "_" for c in str(file))
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ServerLoadError(f"cannot import {where}")
    module = importlib.util.module_from_spec(spec)
    parent = str(file.parent)
    if parent not in sys.path:
        sys.path.insert(0, parent)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(name, None)
        raise ServerLoadError(f"{where} failed while being imported: {type(exc).__name__}: {exc}") from exc
    return module


def find_server(module: ModuleType, name: str, shown: str) -> Any:
    """The server object ``name`` of ``module`` (a dotted attribute path; a factory is called), else the default
    names, else its only server (:func:`mcpkit.server.locate.find_server`)."""
    return locate.find_server(module, name, shown, ServerLoadError)


def load_server(server: Any) -> Any:
    """The server object for ``server``: itself when it is one, else loaded from its file or import path."""
    if is_server(server):
        return server
    if isinstance(server, os.PathLike):
        server = os.fspath(server)
    if not isinstance(server, str):
        raise ServerLoadError(
            f"a server is an mcpkit server object, a file ('server.py[:app]') or an import path "
            f"('package.module:app'), not a {type(server).__name__}"
        )
    where, name = split_spec(server)
    return find_server(load_module(where), name, where)


def _where_defined(obj: Any) -> tuple[ModuleType, str] | None:
    """The module and the module-level name under which ``obj`` is defined, if any (so a subprocess can import
    it again)."""
    for module in list(sys.modules.values()):
        if module is None or not getattr(module, "__file__", None):
            continue
        try:
            names = [key for key, value in vars(module).items() if value is obj]
        except Exception:
            continue
        if names:
            preferred = [n for n in names if n in DEFAULT_NAMES]
            return module, (preferred or names)[0]
    return None


def stdio_spec(server: Any) -> str:
    """A spec a fresh interpreter can load ``server`` from: its file or import path as given, or, for an object,
    the file (or importable module) that defines it at module level and the name it has there."""
    if isinstance(server, os.PathLike):
        server = os.fspath(server)
    if isinstance(server, str):
        where, name = split_spec(server)
        if is_file_spec(where):
            where = str(Path(where).resolve())
        return f"{where}:{name}" if name else where
    found = _where_defined(server)
    if found is None:
        raise ServerLoadError(
            "stdio runs the server in a subprocess, which must be able to import it: define the server at module "
            "level, or give it as a file ('server.py:app') or an import path ('package.module:app'); or leave "
            "stdio out (@pytest.mark.mcp(transports=[...]) or --mcp-transports)"
        )
    module, name = found
    modname = module.__name__
    if modname != "__main__" and not modname.startswith(_FILE_MODULE_PREFIX):
        try:
            importable = importlib.util.find_spec(modname) is not None
        except (ImportError, ValueError):
            importable = False
        if importable:
            return f"{modname}:{name}"
    return f"{Path(module.__file__ or '').resolve()}:{name}"


def stdio_command(server: Any) -> list[str]:
    """The argv that serves ``server`` over stdio in a fresh interpreter (this one: ``sys.executable``)."""
    return [sys.executable, "-m", "mcpkit.testing._serve", stdio_spec(server)]


def subprocess_env() -> dict[str, str]:
    """``PYTHONPATH`` for that subprocess: this process's import path, so it finds what the tests import (pytest
    puts the test directories on ``sys.path``; a fresh interpreter would not have them)."""
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    if "" in sys.path or "." in sys.path:
        paths.insert(0, os.getcwd())
    return {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


__all__ = [
    "ServerLoadError",
    "is_server",
    "load_module",
    "load_server",
    "stdio_command",
    "stdio_spec",
    "subprocess_env",
]
