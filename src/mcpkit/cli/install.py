"""``mcpkit install HOST server.py``: put a server into an MCP host's configuration file.

Hosts and where their configuration lives (per the hosts' own documentation; ``--config`` names another file):

============== ============ ====================================================================== ==============
host           scope        file                                                                   servers under
============== ============ ====================================================================== ==============
claude-desktop (one)        macOS ``~/Library/Application Support/Claude/claude_desktop_config.json``, ``mcpServers``
                            Windows ``%APPDATA%\\Claude\\claude_desktop_config.json``, elsewhere
                            ``$XDG_CONFIG_HOME/Claude/claude_desktop_config.json`` (``~/.config``)
claude-code    user         ``~/.claude.json``                                                     ``mcpServers``
claude-code    project      ``.mcp.json`` in the current directory                                 ``mcpServers``
claude-code    local        ``~/.claude.json``, under ``projects.<current directory>``             ``mcpServers``
cursor         user         ``~/.cursor/mcp.json``                                                 ``mcpServers``
cursor         project      ``.cursor/mcp.json`` in the current directory                          ``mcpServers``
vscode         user         the user profile's ``mcp.json`` (``Code/User/mcp.json`` in the         ``servers``
                            configuration folder of the OS, as for Claude Desktop)
vscode         project      ``.vscode/mcp.json`` in the current directory                          ``servers``
gemini-cli     user         ``~/.gemini/settings.json``                                            ``mcpServers``
gemini-cli     project      ``.gemini/settings.json`` in the current directory                     ``mcpServers``
windsurf       user         ``~/.codeium/windsurf/mcp_config.json``                                ``mcpServers``
codex          user         ``$CODEX_HOME/config.toml`` (``~/.codex``), TOML                       ``mcp_servers``
codex          project      ``.codex/config.toml`` in the current directory (a trusted project)    ``mcp_servers``
goose          (one)        ``$XDG_CONFIG_HOME/goose/config.yaml`` (``~/.config``, macOS too);     ``extensions``
                            Windows ``%APPDATA%\\Block\\goose\\config\\config.yaml``; YAML
============== ============ ====================================================================== ==============

The entry runs the server with the Python that runs ``mcpkit install`` (so it finds the same packages):
``<python> -m mcpkit run /abs/path/server.py[:obj]``; with ``--with PKG`` it runs through uv
(``uv run --no-project --python <python> --with PKG python -m mcpkit run ...``) so the extra packages are
there without installing them into the environment. ``--env KEY=VALUE`` and ``--env-file`` set the server's
environment.

The file is merged, never replaced: the other servers and every other key stay as they were. An existing entry of
the same name is updated (and said so): the keys mcpkit writes (``command``, ``args``, ``type``, ``env`` when given;
goose's ``cmd``, ``envs``, ``enabled``...) are replaced, the keys the user added to it (Gemini CLI's ``trust`` or
``timeout``, a ``disabled`` flag, an ``envFile``, Codex's ``tool_timeout_sec``...) stay where they were, and the
keys that reached it over HTTP (:data:`REMOTE_KEYS`, a ``type`` other than ``stdio``), which would contradict the
command, go. The same entry again changes nothing (no write, no backup). The original
is copied next to it first (``<file>.<time>.bak``, never over an earlier backup), the new file is written whole and
then moved into place (a symbolic link stays one: the file it points to is updated). A file that is not plain JSON
(comments, trailing commas) is left alone: the command prints the entry to add by hand instead. ``--dry-run``
shows what would be written. Codex's TOML is edited in place, its comments kept; goose's YAML is written whole
(:mod:`mcpkit.cli.install_formats`). goose and Codex file an entry under a key they make of the name
(:func:`host_key`); an ``--env`` goose would drop (:data:`GOOSE_REFUSED_ENV`) is refused.
"""

from __future__ import annotations

import copy
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .install_formats import FORMATS, FileFormat

__all__ = ["HOSTS", "InstallError", "Installed", "config_path", "install", "server_entry"]

HOSTS = ("claude-desktop", "claude-code", "cursor", "vscode", "gemini-cli", "windsurf", "codex", "goose")

#: keys of an entry that reach its server over HTTP (JSON hosts, Codex's, goose's): the entry mcpkit writes runs a
#: command, so an old entry's would contradict it (a host could still connect to the old URL); they go with it (so
#: does a ``type`` other than ``stdio``)
REMOTE_KEYS: frozenset[str] = frozenset(
    {"url", "httpUrl", "serverUrl", "uri", "headers", "http_headers", "env_http_headers", "bearer_token_env_var"}
)
SCOPES: dict[str, tuple[str, ...]] = {
    "claude-desktop": ("user",),
    "claude-code": ("user", "project", "local"),
    "cursor": ("user", "project"),
    "vscode": ("user", "project"),
    "gemini-cli": ("user", "project"),
    "windsurf": ("user",),
    "codex": ("user", "project"),
    "goose": ("user",),
}
#: where each host keeps its servers in its file (``mcpServers`` when not named)
SERVERS_KEY = {"vscode": "servers", "codex": "mcp_servers", "goose": "extensions"}
_JSON = FileFormat()


class InstallError(Exception):
    """The server cannot be installed as asked (the message says why and what to do). ``usage``: the command line
    names nothing usable (no such file, a server that does not load): exit code 2, as ``mcpkit run`` says it."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


def _config_home(home: Path) -> Path:
    """The OS's per-user configuration folder: macOS Application Support, Windows %APPDATA%, else XDG."""
    if sys.platform == "darwin":
        return home / "Library" / "Application Support"
    if sys.platform == "win32":
        appdata = os.environ.get("APPDATA")
        return Path(appdata) if appdata else home / "AppData" / "Roaming"
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return Path(xdg) if xdg else home / ".config"


def config_path(host: str, scope: str = "user", *, home: Path | None = None, cwd: Path | None = None) -> Path:
    """Where ``host`` keeps its MCP servers for ``scope`` on this OS."""
    home = home or Path.home()
    cwd = cwd or Path.cwd()
    if host not in SCOPES:
        raise InstallError(f"unknown host {host!r} (one of {', '.join(HOSTS)}, or mcp-json)")
    if scope not in SCOPES[host]:
        raise InstallError(f"{host} has no {scope!r} scope (one of {', '.join(SCOPES[host])})")
    if host == "claude-desktop":
        return _config_home(home) / "Claude" / "claude_desktop_config.json"
    if host == "claude-code":
        return cwd / ".mcp.json" if scope == "project" else home / ".claude.json"
    if host == "cursor":
        return cwd / ".cursor" / "mcp.json" if scope == "project" else home / ".cursor" / "mcp.json"
    if host == "gemini-cli":
        return (cwd if scope == "project" else home) / ".gemini" / "settings.json"
    if host == "windsurf":
        return home / ".codeium" / "windsurf" / "mcp_config.json"
    if host == "codex":
        if scope == "project":
            return cwd / ".codex" / "config.toml"
        codex_home = os.environ.get("CODEX_HOME")
        return (Path(codex_home) if codex_home else home / ".codex") / "config.toml"
    if host == "goose":
        if sys.platform == "win32":
            return _config_home(home) / "Block" / "goose" / "config" / "config.yaml"
        xdg = os.environ.get("XDG_CONFIG_HOME")  # (goose keeps to XDG on macOS too)
        return (Path(xdg) if xdg else home / ".config") / "goose" / "config.yaml"
    return cwd / ".vscode" / "mcp.json" if scope == "project" else _config_home(home) / "Code" / "User" / "mcp.json"


#: what goose refuses to set in an extension's ``envs`` (it drops them with a warning at start, so the server would
#: run without them): the variables that steer which binaries and libraries a process loads
GOOSE_REFUSED_ENV = frozenset(
    {
        "PATH",
        "PATHEXT",
        "SYSTEMROOT",
        "WINDIR",
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
        "LD_AUDIT",
        "LD_DEBUG",
        "LD_BIND_NOW",
        "LD_ASSUME_KERNEL",
        "DYLD_LIBRARY_PATH",
        "DYLD_INSERT_LIBRARIES",
        "DYLD_FRAMEWORK_PATH",
        "PYTHONPATH",
        "PYTHONHOME",
        "NODE_OPTIONS",
        "RUBYOPT",
        "GEM_PATH",
        "GEM_HOME",
        "CLASSPATH",
        "GO111MODULE",
        "GOROOT",
        "APPINIT_DLLS",
        "SESSIONNAME",
        "COMSPEC",
        "TEMP",
        "TMP",
        "LOCALAPPDATA",
        "USERPROFILE",
        "HOMEDRIVE",
        "HOMEPATH",
    }
)


def host_key(host: str, name: str) -> str:
    """The key ``host`` files a server named ``name`` under. goose looks an extension up by a key it makes from
    the name (lower case, blanks dropped, any character but letters, digits, ``_`` and ``-`` made ``_``); Codex's
    own commands (``codex mcp get|remove``) refuse a name of other characters than letters, digits and
    ``-_:@/.``, so those become ``_``. The other hosts take the name as it is."""
    if host == "goose":
        return "".join(
            c if (c.isascii() and c.isalnum()) or c in "_-" else "_" for c in name if not c.isspace()
        ).lower()
    if host == "codex":
        return "".join(c if (c.isascii() and c.isalnum()) or c in "-_:@/." else "_" for c in name)
    return name


def server_entry(
    spec: str,
    *,
    host: str = "mcp-json",
    with_packages: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    python: str | None = None,
) -> dict[str, Any]:
    """The entry that starts ``spec`` (``path/to/server.py[:object]``) for ``host``."""
    path, colon, obj = spec.partition(":")
    if len(path) == 1 and colon and obj[:1] in ("\\", "/"):  # C:\\... on Windows: keep it whole
        path, colon, obj = spec, "", ""
    file = Path(path).expanduser()
    if not file.is_file():
        raise InstallError(f"no such file: {path}", usage=True)
    target = str(file.resolve()) + (f":{obj}" if colon and obj else "")
    interpreter = python or sys.executable
    run = ["-m", "mcpkit", "run", target]
    if with_packages:
        uv = shutil.which("uv")
        if uv is None:
            raise InstallError(
                "--with needs uv (https://docs.astral.sh/uv/), which is not on PATH: install uv, or install the "
                f"packages into this environment instead (pip install {' '.join(with_packages)})"
            )
        args = ["run", "--no-project", "--python", interpreter]
        for pkg in with_packages:
            args += ["--with", pkg]
        command, args = uv, [*args, "python", *run]
    else:
        command, args = interpreter, run
    if host == "goose":  # (install() adds the name: goose repeats it in the entry)
        refused = sorted(k for k in env or {} if k.upper() in GOOSE_REFUSED_ENV)
        if refused:
            raise InstallError(
                f"goose ignores these variables in an extension's envs (it refuses to override them): "
                f"{', '.join(refused)}; set them in the environment goose itself runs in instead",
                usage=True,
            )
        return {
            "enabled": True,
            "type": "stdio",
            "cmd": command,
            "args": args,
            "envs": dict(env or {}),
            "timeout": 300,
            "description": f"{Path(path).stem} (mcpkit)",
        }
    entry: dict[str, Any] = {"command": command, "args": args}
    if host in ("claude-code", "vscode"):
        entry = {"type": "stdio", **entry}
    if env:
        entry["env"] = dict(env)
    return entry


def read_env_file(path: str) -> dict[str, str]:
    """``KEY=VALUE`` lines (``#`` comments, blank lines and an ``export`` prefix allowed; quotes removed)."""
    out: dict[str, str] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InstallError(f"cannot read {path}: {exc.strerror}") from None
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].strip()
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise InstallError(f"{path}, line {n}: expected KEY=VALUE")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key.strip()] = value
    return out


@dataclass
class Installed:
    """What :func:`install` did (or, with ``dry_run``, would do)."""

    path: Path
    name: str
    entry: dict[str, Any]
    document: dict[str, Any]
    replaced: bool
    backup: Path | None
    written: bool
    unchanged: bool = False  # the file already held this entry as it is: nothing was written
    text: str = ""  # the file as written (or, with ``dry_run``, as it would be)
    kept: tuple[str, ...] = ()  # the keys the replaced entry had that mcpkit does not write: kept in ``entry``
    key: str = ""  # the key the entry is filed under (:func:`host_key`: the name, but for goose and Codex)


def _merged(old: object, entry: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The entry that replaces ``old`` (of the same name), and the keys of the user's it keeps: ``entry``'s keys
    replace the old ones, the old entry's other keys stay where they were, but those that reached the server over
    HTTP (:data:`REMOTE_KEYS`, a ``type`` other than ``stdio``) go. An environment the command gives none for
    (goose's empty ``envs``) keeps the old one."""
    if not isinstance(old, dict):
        return entry, ()
    merged = {k: v for k, v in old.items() if k not in REMOTE_KEYS and (k != "type" or v == "stdio" or "type" in entry)}
    written = {k: v for k, v in entry.items() if not (k in ("env", "envs") and not v and merged.get(k))}
    kept = tuple(k for k in merged if k not in written)
    merged.update(written)
    return merged, kept


def _servers_of(document: dict[str, Any], host: str, scope: str, cwd: Path) -> dict[str, Any]:
    holder: dict[str, Any] = document
    if host == "claude-code" and scope == "local":
        projects = document.setdefault("projects", {})
        if not isinstance(projects, dict):
            raise InstallError("its 'projects' is not an object")
        holder = projects.setdefault(str(cwd.resolve()), {})
        if not isinstance(holder, dict):
            raise InstallError(f"its project entry for {cwd} is not an object")
    key = SERVERS_KEY.get(host, "mcpServers")
    servers = holder.setdefault(key, {})
    if not isinstance(servers, dict):
        raise InstallError(f"its {key!r} is not an object")
    return servers


def install(
    host: str,
    name: str,
    entry: dict[str, Any],
    *,
    scope: str = "user",
    path: Path | None = None,
    dry_run: bool = False,
    cwd: Path | None = None,
) -> Installed:
    """Merge ``{name: entry}`` into ``host``'s configuration (see the module docstring)."""
    cwd = cwd or Path.cwd()
    file = path or config_path(host, scope, cwd=cwd)
    fmt = FORMATS.get(host, _JSON)
    key = host_key(host, name)
    if host == "goose":  # (goose repeats the name, as given, in the entry)
        entry = {**entry, "name": name}
    by_hand = f"Add this entry to it by hand:\n{fmt.show({SERVERS_KEY.get(host, 'mcpServers'): {key: entry}})}"
    document: Any = {}
    original: bytes | None = None
    if file.exists():
        try:
            original = file.read_bytes()
        except OSError as exc:
            raise InstallError(f"cannot read {file}: {exc.strerror or exc}") from None
        if original.strip():
            try:
                document = fmt.load(original)
            except ValueError:
                hint = " (comments or trailing commas?)" if fmt is _JSON else ""
                raise InstallError(f"{file} is not plain {fmt.name}{hint}: it was left as it is. {by_hand}") from None
        if document is None and fmt is not _JSON:  # (a YAML file of comments only)
            document = {}
        if not isinstance(document, dict):
            raise InstallError(f"{file} does not hold a {fmt.name} object (a mapping): it was left as it is")
    before = copy.deepcopy(document) if original is not None else None
    try:
        servers = _servers_of(document, host, scope, cwd)
    except InstallError as exc:
        raise InstallError(f"{file}: {exc}: it was left as it is") from None
    replaced = key in servers
    entry, kept = _merged(servers.get(key), entry)
    servers[key] = entry
    if host == "vscode" and "inputs" not in document:
        document["inputs"] = []
    if document == before:  # (the same entry again: nothing to write, no backup to keep)
        return Installed(file, name, entry, document, replaced, None, False, unchanged=True, kept=kept, key=key)
    try:
        text = fmt.dump(document, original, (SERVERS_KEY.get(host, "mcpServers"), key)).decode("utf-8")
    except ValueError as exc:
        raise InstallError(f"{file} cannot be edited safely ({exc}): it was left as it is. {by_hand}") from None
    if dry_run:
        return Installed(file, name, entry, document, replaced, None, False, text=text, kept=kept, key=key)
    real = file.resolve() if file.is_symlink() else file  # a linked file (dotfiles) is written where it points
    try:
        done = Installed(file, name, entry, document, replaced, None, True, text=text, kept=kept, key=key)
        return _write(real, original, done)
    except OSError as exc:
        raise InstallError(f"cannot write {file}: {exc.strerror or exc}: it was left as it is") from None


def _write(real: Path, original: bytes | None, done: Installed) -> Installed:
    """Back up ``real`` (when it existed) and replace it with ``done.text``, written whole then moved in place."""
    real.parent.mkdir(parents=True, exist_ok=True)
    if original is not None:
        done.backup = _backup(real, original)
    data = done.text.encode("utf-8")
    tmp = real.with_name(f".{real.name}.mcpkit-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if original is not None:
            shutil.copymode(real, tmp)
        os.replace(tmp, real)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return done


def _backup(file: Path, original: bytes) -> Path:
    """Copy ``original`` (the content of ``file``) to a new ``<file>.<time>[-n].bak`` next to it: never over an
    earlier backup (two installs in one second would otherwise leave only the second one's)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 1000):
        backup = file.with_name(f"{file.name}.{stamp}{'' if n == 1 else f'-{n}'}.bak")
        try:
            fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as fh:
            fh.write(original)
        shutil.copystat(file, backup)
        return backup
    raise InstallError(f"too many backups of {file} this second: it was left as it is")
