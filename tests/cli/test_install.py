"""``mcpkit install``: each host's configuration file, written in a temporary home directory by the real command,
parses, keeps what was there (with a backup), and names a command that starts the server (started here with the
client and asked for its tools)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client, StdioServer
from support.paths import REPO

WEATHER = str(REPO / "examples" / "weather.py")
OTHER = {"command": "node", "args": ["/opt/other/server.js"], "env": {"TOKEN": "keep-me"}}

# (host, scope) -> (path under the temporary home or project, key of the servers)
CASES = {
    ("claude-desktop", "user"): ("home", ".config/Claude/claude_desktop_config.json", ("mcpServers",)),
    ("claude-code", "user"): ("home", ".claude.json", ("mcpServers",)),
    ("claude-code", "project"): ("project", ".mcp.json", ("mcpServers",)),
    ("claude-code", "local"): ("home", ".claude.json", ("projects", "<project>", "mcpServers")),
    ("cursor", "user"): ("home", ".cursor/mcp.json", ("mcpServers",)),
    ("cursor", "project"): ("project", ".cursor/mcp.json", ("mcpServers",)),
    ("vscode", "user"): ("home", ".config/Code/User/mcp.json", ("servers",)),
    ("vscode", "project"): ("project", ".vscode/mcp.json", ("servers",)),
    ("gemini-cli", "user"): ("home", ".gemini/settings.json", ("mcpServers",)),
    ("gemini-cli", "project"): ("project", ".gemini/settings.json", ("mcpServers",)),
    ("windsurf", "user"): ("home", ".codeium/windsurf/mcp_config.json", ("mcpServers",)),
}


def mcpkit(*args: str, home: Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "APPDATA")}
    environ.update({"HOME": str(home), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "mcpkit.cli.main", "install", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=environ,
    )


def dig(document: dict[str, Any], keys: tuple[str, ...], project: Path) -> dict[str, Any]:
    node: Any = document
    for key in keys:
        node = node[str(project.resolve()) if key == "<project>" else key]
    assert isinstance(node, dict)
    return node


async def tools_of(entry: dict[str, Any]) -> list[str]:
    server = StdioServer([entry["command"], *entry["args"]], env=entry.get("env"))
    async with Client(server, mode="handshake") as client:
        return [t.name for t in await client.list_tools()]


@pytest.mark.parametrize(("host", "scope"), list(CASES))
async def test_the_config_file_parses_keeps_other_entries_and_starts_the_server(
    host: str, scope: str, tmp_path: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    where, rel, keys = CASES[(host, scope)]
    file = (home if where == "home" else project) / rel
    file.parent.mkdir(parents=True, exist_ok=True)
    before: dict[str, Any] = {"someSetting": {"theme": "dark"}}
    holder: dict[str, Any] = before
    for key in keys:
        holder = holder.setdefault(str(project.resolve()) if key == "<project>" else key, {})
    holder["other"] = OTHER
    file.write_text(json.dumps(before, indent=4))
    os.chmod(file, 0o640)

    proc = mcpkit(host, WEATHER, "--scope", scope, "-e", "WEATHER_UNITS=metric", home=home, cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert f"added 'weather' in {file}" in proc.stdout

    document = json.loads(file.read_text())
    assert document["someSetting"] == {"theme": "dark"}
    servers = dig(document, keys, project)
    assert servers["other"] == OTHER
    entry = servers["weather"]
    assert entry["env"] == {"WEATHER_UNITS": "metric"}
    assert Path(entry["command"]).is_absolute() and entry["args"][-1] == str(Path(WEATHER).resolve())
    if host in ("claude-code", "vscode"):
        assert entry["type"] == "stdio"
    if host == "vscode":
        assert document["inputs"] == []
    assert stat.S_IMODE(file.stat().st_mode) == 0o640  # the file keeps its mode
    (backup,) = file.parent.glob(file.name + ".*.bak")
    assert json.loads(backup.read_text()) == before
    assert "get_weather" in await tools_of(entry)

    again = mcpkit(host, WEATHER, "--scope", scope, "-e", "WEATHER_UNITS=imperial", home=home, cwd=project)
    assert again.returncode == 0 and "replaced 'weather'" in again.stdout
    servers = dig(json.loads(file.read_text()), keys, project)
    assert servers["other"] == OTHER and servers["weather"]["env"] == {"WEATHER_UNITS": "imperial"}


def test_a_new_config_file_is_created_private(tmp_path: Path) -> None:
    proc = mcpkit("cursor", WEATHER, "--name", "wx", home=tmp_path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    file = tmp_path / ".cursor" / "mcp.json"
    assert stat.S_IMODE(file.stat().st_mode) == 0o600  # it may hold the server's secrets (env)
    assert list(json.loads(file.read_text())["mcpServers"]) == ["wx"]
    assert not list(file.parent.glob("*.bak"))


def test_dry_run_changes_nothing_and_a_file_with_comments_is_left_alone(tmp_path: Path) -> None:
    file = tmp_path / ".config" / "Code" / "User" / "mcp.json"
    file.parent.mkdir(parents=True)
    file.write_text('{"servers": {"x": {"command": "x"}}}')
    dry = mcpkit("vscode", WEATHER, "--dry-run", home=tmp_path, cwd=tmp_path)
    assert dry.returncode == 0 and "would write" in dry.stdout and '"weather"' in dry.stdout
    assert file.read_text() == '{"servers": {"x": {"command": "x"}}}'
    commented = '{\n  // mine\n  "servers": {},\n}\n'
    file.write_text(commented)
    proc = mcpkit("vscode", WEATHER, home=tmp_path, cwd=tmp_path)
    assert proc.returncode != 0 and "not plain JSON" in proc.stderr and '"weather"' in proc.stderr
    assert file.read_text() == commented


def test_mcp_json_prints_the_entry_and_an_env_file_fills_its_environment(tmp_path: Path) -> None:
    envfile = tmp_path / ".env"
    envfile.write_text("# secrets\nexport API_KEY='abc'\nREGION=eu\n")
    proc = mcpkit("mcp-json", f"{WEATHER}:app", "--env-file", str(envfile), home=tmp_path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert printed["weather"]["env"] == {"API_KEY": "abc", "REGION": "eu"}
    assert printed["weather"]["args"][-1].endswith("weather.py:app")


async def test_with_packages_run_through_uv(tmp_path: Path) -> None:
    # A stand-in for uv on PATH: `uv run --no-project --python PY --with PKG ... python ARGS` runs PY ARGS (it installs
    # nothing; the real uv layers the packages over PY's environment).
    bindir = tmp_path / "bin"
    bindir.mkdir()
    uv = bindir / "uv"
    uv.write_text(
        "#!/bin/sh\n"
        'py=""; while [ $# -gt 0 ]; do case "$1" in --python) py="$2"; shift 2;; run|--no-project) shift;; '
        '--with) echo "with $2" >> "$(dirname "$0")/with.log"; shift 2;; python) shift; exec "$py" "$@";; '
        "*) shift;; esac; done\n"
    )
    uv.chmod(0o755)
    path = f"{bindir}{os.pathsep}{os.environ['PATH']}"
    missing = mcpkit("cursor", WEATHER, "--with", "httpx", home=tmp_path, cwd=tmp_path, env={"PATH": "/nonexistent"})
    assert missing.returncode != 0 and "--with needs uv" in missing.stderr
    proc = mcpkit(
        "cursor", WEATHER, "--with", "httpx", "--with", "rich>=13", home=tmp_path, cwd=tmp_path, env={"PATH": path}
    )
    assert proc.returncode == 0, proc.stderr
    entry = json.loads((tmp_path / ".cursor" / "mcp.json").read_text())["mcpServers"]["weather"]
    assert entry["command"] == str(uv)
    assert entry["args"][:4] == ["run", "--no-project", "--python", sys.executable]
    assert entry["args"][4:8] == ["--with", "httpx", "--with", "rich>=13"]
    assert "get_weather" in await tools_of(entry)
    assert (bindir / "with.log").read_text().split("\n")[:2] == ["with httpx", "with rich>=13"]


def test_a_server_that_does_not_load_is_not_installed(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    proc = mcpkit("claude-desktop", str(broken), home=tmp_path, cwd=tmp_path)
    assert proc.returncode != 0 and "boom" in proc.stderr and "--name" in proc.stderr
    assert not (tmp_path / ".config").exists()
    assert mcpkit("claude-desktop", str(tmp_path / "nope.py"), home=tmp_path, cwd=tmp_path).returncode != 0


def test_an_empty_server_name_is_refused(tmp_path: Path) -> None:
    """``--name ''`` (or a server named "" or " "): no entry keyed by an empty name is written to a host's file;
    it used to be added (``added '' in ...claude_desktop_config.json``)."""
    server = tmp_path / "server.py"
    server.write_text("from mcpkit import MCPKit\napp = MCPKit(' ')\n")
    for args in (["--name", ""], ["--name", "  "], []):
        proc = mcpkit("claude-desktop", str(server), *args, home=tmp_path, cwd=tmp_path)
        assert proc.returncode != 0 and "name" in proc.stderr and "empty" in proc.stderr, proc.stdout + proc.stderr
    assert not (tmp_path / ".config").exists()


def test_every_install_keeps_the_file_it_replaced_even_several_in_one_second(tmp_path: Path) -> None:
    """Two installs in a row (a setup script adding two servers) used to share one backup name (its time in whole
    seconds): the second backup overwrote the first, and the user's original file was gone."""
    from mcpkit.cli.install import install

    file = tmp_path / "mcp.json"
    original = {"mcpServers": {"other": OTHER}, "theme": "dark"}
    file.write_text(json.dumps(original))
    states = [json.loads(file.read_text())]
    backups = []
    for name in ("a", "b", "c"):
        done = install("cursor", name, {"command": "x"}, path=file)
        assert done.backup is not None
        backups.append(done.backup)
        states.append(json.loads(file.read_text()))
    assert len(set(backups)) == 3
    assert [json.loads(b.read_text()) for b in backups] == states[:3]  # each holds the file as it was before
    assert states[0] == original


def test_a_symlinked_config_file_is_updated_where_it_points_and_stays_a_link(tmp_path: Path) -> None:
    """Configuration kept in a dotfiles folder and linked into place: the link was replaced by a plain file, so the
    dotfiles copy never got the server and the link the user made was gone."""
    home, dotfiles = tmp_path / "home", tmp_path / "dotfiles"
    (home / ".cursor").mkdir(parents=True)
    dotfiles.mkdir()
    real = dotfiles / "cursor-mcp.json"
    real.write_text(json.dumps({"mcpServers": {"other": OTHER}}))
    link = home / ".cursor" / "mcp.json"
    link.symlink_to(real)
    proc = mcpkit("cursor", WEATHER, home=home, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert set(json.loads(real.read_text())["mcpServers"]) == {"other", "weather"}


def test_a_config_file_that_cannot_be_read_or_written_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """A configuration path that is a folder, or whose folder is a file (or one the user may not write: a
    ~/.claude.json left owned by root after a sudo run) ended the command with a Python traceback."""
    (tmp_path / ".cursor" / "mcp.json").mkdir(parents=True)
    proc = mcpkit("cursor", WEATHER, home=tmp_path, cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"cannot read {tmp_path / '.cursor' / 'mcp.json'}" in proc.stderr, proc.stderr
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = mcpkit("cursor", WEATHER, "--config", str(blocker / "mcp.json"), home=tmp_path, cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"cannot write {blocker / 'mcp.json'}" in proc.stderr, proc.stderr


def test_installing_the_same_entry_again_writes_nothing_and_makes_no_backup(tmp_path: Path) -> None:
    """A setup script run twice (or a README's command pasted again) said 'replaced' and left one more backup each
    time, for a file that did not change."""
    first = mcpkit("gemini-cli", WEATHER, home=tmp_path, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    file = tmp_path / ".gemini" / "settings.json"
    written, mtime = file.read_bytes(), file.stat().st_mtime_ns
    again = mcpkit("gemini-cli", WEATHER, home=tmp_path, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "'weather' is already in" in again.stdout and "unchanged" in again.stdout
    assert file.read_bytes() == written and file.stat().st_mtime_ns == mtime
    assert not list(file.parent.glob("*.bak"))
    changed = mcpkit("gemini-cli", WEATHER, "-e", "REGION=eu", home=tmp_path, cwd=tmp_path)
    assert changed.returncode == 0 and "replaced 'weather'" in changed.stdout  # (a different entry is written)
    assert len(list(file.parent.glob("*.bak"))) == 1


def test_the_entry_to_add_by_hand_keeps_its_characters(tmp_path: Path) -> None:
    # (a name or path outside ASCII was printed as \\u escapes, which the user then pasted into the file)
    project = tmp_path / "mes serveurs"
    project.mkdir()
    server = project / "météo.py"
    server.write_text("from mcpkit import MCPKit\n\napp = MCPKit('météo')\n", encoding="utf-8")
    file = tmp_path / ".gemini" / "settings.json"
    file.parent.mkdir()
    file.write_text('{\n  // mine\n  "theme": "dark"\n}\n')
    proc = mcpkit("gemini-cli", str(server), home=tmp_path, cwd=tmp_path, env={"PYTHONIOENCODING": "utf-8"})
    assert proc.returncode != 0 and "not plain JSON" in proc.stderr
    assert '"météo": {' in proc.stderr and str(server) in proc.stderr
    assert file.read_text() == '{\n  // mine\n  "theme": "dark"\n}\n'


# a same-name entry as the user left it, per host: keys the host reads that mcpkit does not write, then its own
USER_KEYS: dict[str, dict[str, Any]] = {
    "claude-desktop": {"cwd": "/srv/weather"},
    "claude-code": {"disabled": True},
    "cursor": {"envFile": "/srv/weather/.env"},
    "vscode": {"dev": {"watch": "**/*.py"}, "envFile": "${workspaceFolder}/.env"},
    "gemini-cli": {"trust": True, "timeout": 30000, "includeTools": ["get_weather"]},
    "windsurf": {"disabled": False, "disabledTools": ["get_alerts"]},
}
SAME_NAME_CASES = [(host, "user") for host in USER_KEYS] + [("claude-code", "local")]


@pytest.mark.parametrize(("host", "scope"), SAME_NAME_CASES)
def test_installing_over_an_entry_of_the_same_name_keeps_the_keys_the_user_added(
    host: str, scope: str, tmp_path: Path
) -> None:
    """Installing a server again (a new path, a new Python) replaced its entry whole: the keys the user had added
    to it (Gemini's trust and timeout, a disabled flag, an env file) were lost, kept only in the backup. Now the
    keys mcpkit writes are replaced and the others stay where they were; the same install again writes nothing."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    where, rel, keys = CASES[(host, scope)]
    file = (home if where == "home" else project) / rel
    file.parent.mkdir(parents=True, exist_ok=True)
    user = USER_KEYS[host]
    old = {**user, "command": "/old/python", "args": ["/old/weather.py"], "env": {"OLD": "1"}}
    document: dict[str, Any] = {"theme": "dark"}
    holder = document
    for key in keys:
        holder = holder.setdefault(str(project.resolve()) if key == "<project>" else key, {})
    holder.update({"weather": old, "other": OTHER})
    file.write_text(json.dumps(document, indent=2))

    proc = mcpkit(host, WEATHER, "--scope", scope, "-e", "WEATHER_UNITS=metric", home=home, cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert f"replaced 'weather' in {file}" in proc.stdout, proc.stdout
    assert f"keeping its {', '.join(user)}" in proc.stdout, proc.stdout
    servers = dig(json.loads(file.read_text()), keys, project)
    entry = servers["weather"]
    assert servers["other"] == OTHER
    assert {k: entry[k] for k in user} == user
    assert list(entry)[: len(user)] == list(user)  # (in their place)
    assert entry["env"] == {"WEATHER_UNITS": "metric"}  # (what mcpkit writes is replaced, not merged)
    assert Path(entry["command"]).is_absolute() and entry["command"] != "/old/python"
    assert entry["args"][-1] == str(Path(WEATHER).resolve())
    assert set(entry) == {*user, "command", "args", "env"} | ({"type"} if host in ("claude-code", "vscode") else set())
    written, backups = file.read_bytes(), sorted(file.parent.glob(file.name + ".*.bak"))
    assert len(backups) == 1

    for args in (["-e", "WEATHER_UNITS=metric"], []):  # (again; and without --env, which writes no env)
        again = mcpkit(host, WEATHER, "--scope", scope, *args, home=home, cwd=project)
        assert again.returncode == 0 and "unchanged" in again.stdout, again.stdout + again.stderr
        assert file.read_bytes() == written
        assert sorted(file.parent.glob(file.name + ".*.bak")) == backups


@pytest.mark.parametrize("host", ["claude-code", "gemini-cli", "windsurf"])
def test_installing_over_a_remote_entry_of_the_same_name_drops_what_pointed_at_its_url(
    host: str, tmp_path: Path
) -> None:
    """An entry of the same name that reached the server over HTTP: its URL, headers and transport type would
    contradict the command mcpkit writes (a host could connect to the old URL), so they go; the user's other keys
    stay."""
    remote = {
        "claude-code": {"type": "http", "url": "https://mcp.example/mcp", "headers": {"Authorization": "Bearer t"}},
        "gemini-cli": {"httpUrl": "https://mcp.example/mcp", "headers": {"X-Key": "k"}, "trust": True},
        "windsurf": {"serverUrl": "https://mcp.example/mcp", "disabled": False},
    }[host]
    _, rel, _ = CASES[(host, "user")]
    file = tmp_path / rel
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps({"mcpServers": {"weather": remote}}))
    proc = mcpkit(host, WEATHER, home=tmp_path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    entry = json.loads(file.read_text())["mcpServers"]["weather"]
    kept = {k: v for k, v in remote.items() if k in ("trust", "disabled")}
    assert {k: entry[k] for k in kept} == kept
    assert not {"url", "httpUrl", "serverUrl", "headers"} & set(entry)
    assert entry.get("type", "stdio") == "stdio" and "command" in entry
