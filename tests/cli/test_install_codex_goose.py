"""``mcpkit install codex|goose``: the two hosts whose files are not JSON. Codex's ``config.toml`` is edited in place
(the user's comments and layout stay, an entry written in a form the edit cannot replace is refused, never
guessed); goose's ``config.yaml`` is rewritten with its other settings kept. Each written entry starts the server
(the real command it names, asked for its tools)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcpkit import Client, StdioServer
from mcpkit.cli.install_formats import TOMLFormat
from support.paths import REPO

WEATHER = str(REPO / "examples" / "weather.py")

CODEX_BEFORE = """\
# my Codex settings
model = "o3"  # the model I like

[mcp_servers.other]
command = "node"
args = ["/opt/other/server.js"]

[mcp_servers.other.env]
TOKEN = "keep-me"

[[profiles.fast]]
model = "o4-mini"
"""

GOOSE_BEFORE = """\
GOOSE_PROVIDER: anthropic
GOOSE_MODEL: claude-sonnet-4
extensions:
  developer:
    enabled: true
    type: builtin
    name: developer
    timeout: 300
"""


def mcpkit(*args: str, home: Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "APPDATA", "CODEX_HOME")}
    environ.update({"HOME": str(home), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "mcpkit.cli.main", "install", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=environ,
    )


async def tools_of(command: str, args: list[str], env: dict[str, str] | None) -> list[str]:
    async with Client(StdioServer([command, *args], env=env or None), mode="handshake") as client:
        return [t.name for t in await client.list_tools()]


async def test_codex_config_is_edited_in_place_and_its_entry_starts_the_server(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    file = codex_home / "config.toml"
    file.write_text(CODEX_BEFORE)
    proc = mcpkit(
        "codex", WEATHER, "-e", "UNITS=metric", home=tmp_path, cwd=tmp_path, env={"CODEX_HOME": str(codex_home)}
    )
    assert proc.returncode == 0, proc.stderr
    assert f"added 'weather' in {file}" in proc.stdout and "codex mcp list" in proc.stdout
    text = file.read_text()
    assert text.startswith(CODEX_BEFORE)  # comments, layout and the other tables as they were
    document = tomllib.loads(text)
    before = tomllib.loads(CODEX_BEFORE)
    entry = document["mcp_servers"].pop("weather")
    assert document == before
    assert entry["env"] == {"UNITS": "metric"} and entry["args"][-1] == str(Path(WEATHER).resolve())
    assert "get_weather" in await tools_of(entry["command"], entry["args"], entry["env"])
    (backup,) = codex_home.glob("config.toml.*.bak")
    assert backup.read_text() == CODEX_BEFORE

    again = mcpkit(
        "codex", WEATHER, "-e", "UNITS=metric", home=tmp_path, cwd=tmp_path, env={"CODEX_HOME": str(codex_home)}
    )
    assert again.returncode == 0 and "unchanged" in again.stdout
    assert file.read_text() == text and len(list(codex_home.glob("*.bak"))) == 1

    # a changed entry replaces its tables where they stood; what follows them stays after them
    file.write_text(text + '\n[mcp_servers.last]\ncommand = "z"\n')
    changed = mcpkit(
        "codex", WEATHER, "-e", "UNITS=imperial", home=tmp_path, cwd=tmp_path, env={"CODEX_HOME": str(codex_home)}
    )
    assert changed.returncode == 0 and "replaced 'weather'" in changed.stdout, changed.stderr
    document = tomllib.loads(file.read_text())
    assert document["mcp_servers"]["weather"]["env"] == {"UNITS": "imperial"}
    assert list(document["mcp_servers"]) == ["other", "weather", "last"]
    assert file.read_text().startswith(CODEX_BEFORE)


def test_codex_project_scope_creates_a_private_file_and_dry_run_shows_the_toml(tmp_path: Path) -> None:
    dry = mcpkit("codex", WEATHER, "--scope", "project", "--dry-run", home=tmp_path, cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert "[mcp_servers.weather]" in dry.stdout and not (tmp_path / ".codex").exists()
    proc = mcpkit("codex", WEATHER, "--scope", "project", home=tmp_path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    file = tmp_path / ".codex" / "config.toml"
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert list(tomllib.loads(file.read_text())["mcp_servers"]) == ["weather"]
    assert file.read_text().startswith("[mcp_servers.weather]\n")


@pytest.mark.parametrize(
    "written",
    [
        '[mcp_servers]\nweather = { command = "old" }\n',  # an inline table
        'mcp_servers.weather.command = "old"\n',  # dotted keys at the top
        'model = "o3\nbroken',  # not TOML at all
    ],
)
def test_codex_entries_the_edit_cannot_replace_are_refused_and_the_file_is_left_alone(
    written: str, tmp_path: Path
) -> None:
    file = tmp_path / ".codex" / "config.toml"
    file.parent.mkdir()
    file.write_text(written)
    proc = mcpkit("codex", WEATHER, home=tmp_path, cwd=tmp_path)
    assert proc.returncode != 0
    assert "it was left as it is" in proc.stderr and "[mcp_servers.weather]" in proc.stderr  # the entry, by hand
    assert file.read_text() == written and not list(file.parent.glob("*.bak"))


async def test_goose_config_keeps_its_settings_and_its_extension_starts_the_server(tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    file = xdg / "goose" / "config.yaml"
    file.parent.mkdir(parents=True)
    file.write_text(GOOSE_BEFORE)
    proc = mcpkit(
        "goose", WEATHER, "-e", "UNITS=metric", home=tmp_path, cwd=tmp_path, env={"XDG_CONFIG_HOME": str(xdg)}
    )
    assert proc.returncode == 0, proc.stderr
    assert f"added 'weather' in {file}" in proc.stdout
    document = yaml.safe_load(file.read_text())
    entry = document["extensions"].pop("weather")
    assert document == yaml.safe_load(GOOSE_BEFORE)
    assert entry["type"] == "stdio" and entry["enabled"] is True and entry["name"] == "weather"
    assert entry["envs"] == {"UNITS": "metric"} and entry["timeout"] > 0
    assert "get_weather" in await tools_of(entry["cmd"], entry["args"], entry["envs"])
    again = mcpkit(
        "goose", WEATHER, "-e", "UNITS=metric", home=tmp_path, cwd=tmp_path, env={"XDG_CONFIG_HOME": str(xdg)}
    )
    assert again.returncode == 0 and "unchanged" in again.stdout


def test_goose_default_path_is_under_dot_config_and_a_non_mapping_file_is_refused(tmp_path: Path) -> None:
    proc = mcpkit("goose", WEATHER, home=tmp_path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert list(yaml.safe_load((tmp_path / ".config" / "goose" / "config.yaml").read_text())["extensions"]) == [
        "weather"
    ]
    bad = tmp_path / "list.yaml"
    bad.write_text("- a\n- b\n")
    refused = mcpkit("goose", WEATHER, "--config", str(bad), home=tmp_path, cwd=tmp_path)
    assert refused.returncode != 0 and "it was left as it is" in refused.stderr
    assert bad.read_text() == "- a\n- b\n"


@pytest.mark.parametrize(
    "entry",
    [
        {"command": "py", "args": ["-m", "x"], "env": {"A B": 'quote " and \\ back', "NL": "a\nb\tc\x01\x7f"}},
        {"command": "ünïcode ☃", "args": [], "env": {}},
        {"command": "x", "startup_timeout_sec": 30, "tool_timeout_sec": 1.5, "enabled": False},
        {"command": "x", "nested": {"deeper": {"k": [1, 2]}, "flat": "v"}},
    ],
)
def test_the_toml_edit_round_trips_any_entry(entry: dict[str, Any]) -> None:
    fmt = TOMLFormat()
    for original in (b"", CODEX_BEFORE.encode()):
        document = fmt.load(original) if original else {}
        document.setdefault("mcp_servers", {})["my server.v2"] = entry
        text = fmt.dump(document, original or None, ("mcp_servers", "my server.v2"))
        assert tomllib.loads(text.decode()) == document
        assert text.decode().startswith(original.decode())


def test_codex_over_an_entry_of_the_same_name_keeps_the_keys_the_user_added_and_drops_its_url(tmp_path: Path) -> None:
    """Reinstalling into Codex kept none of the entry's other keys (its timeouts, the tools it enables); and an
    entry that reached the server over HTTP kept its URL and headers beside the new command. Now the keys the user
    added stay, those of an HTTP server go, the file's comments stay, and the same install again writes nothing."""
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    file = codex_home / "config.toml"
    old = (
        '[mcp_servers.weather]\nurl = "https://mcp.example/mcp"\nbearer_token_env_var = "WX_TOKEN"\n'
        'startup_timeout_sec = 20\ntool_timeout_sec = 90.5\nenabled_tools = ["get_weather"]\n\n'
        '[mcp_servers.weather.http_headers]\nX-Region = "eu"\n\n[mcp_servers.weather.env]\nOLD = "1"\n'
    )
    file.write_text(CODEX_BEFORE + "\n" + old)
    env = {"CODEX_HOME": str(codex_home)}
    proc = mcpkit("codex", WEATHER, "-e", "UNITS=metric", home=tmp_path, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "replaced 'weather'" in proc.stdout, proc.stdout
    assert "keeping its startup_timeout_sec, tool_timeout_sec, enabled_tools" in proc.stdout, proc.stdout
    text = file.read_text()
    assert text.startswith(CODEX_BEFORE)
    entry = tomllib.loads(text)["mcp_servers"]["weather"]
    assert set(entry) == {"startup_timeout_sec", "tool_timeout_sec", "enabled_tools", "command", "args", "env"}
    assert (entry["startup_timeout_sec"], entry["tool_timeout_sec"], entry["enabled_tools"]) == (
        20,
        90.5,
        ["get_weather"],
    )
    assert entry["env"] == {"UNITS": "metric"} and entry["args"][-1] == str(Path(WEATHER).resolve())
    for args in (["-e", "UNITS=metric"], []):  # (again; and without --env, which writes no env)
        again = mcpkit("codex", WEATHER, *args, home=tmp_path, cwd=tmp_path, env=env)
        assert again.returncode == 0 and "unchanged" in again.stdout, again.stdout + again.stderr
        assert file.read_text() == text and len(list(codex_home.glob("*.bak"))) == 1


def test_goose_over_an_extension_of_the_same_name_keeps_the_keys_the_user_added(tmp_path: Path) -> None:
    """goose: the keys mcpkit writes (cmd, args, envs, enabled, timeout...) are replaced, the user's others stay
    (``env_keys``, ``available_tools``), an SSE extension's ``uri`` and ``headers`` go, and its ``envs`` stay when
    the command gives none."""
    xdg = tmp_path / "xdg"
    file = xdg / "goose" / "config.yaml"
    file.parent.mkdir(parents=True)
    old = {
        "enabled": False,
        "type": "sse",
        "name": "weather",
        "uri": "https://mcp.example/sse",
        "headers": {"X-Key": "k"},
        "envs": {"KEEP": "1"},
        "env_keys": ["WX_TOKEN"],
        "available_tools": ["get_weather"],
        "timeout": 60,
    }
    file.write_text(
        GOOSE_BEFORE + yaml.safe_dump({"extensions": {"weather": old}}, sort_keys=False)[len("extensions:\n") :]
    )
    env = {"XDG_CONFIG_HOME": str(xdg)}
    proc = mcpkit("goose", WEATHER, home=tmp_path, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "keeping its envs, env_keys, available_tools" in proc.stdout, proc.stdout
    document = yaml.safe_load(file.read_text())
    entry = document["extensions"]["weather"]
    assert "developer" in document["extensions"]
    assert not {"uri", "headers"} & set(entry)
    assert entry["type"] == "stdio" and entry["enabled"] is True and entry["timeout"] == 300
    assert (entry["envs"], entry["env_keys"], entry["available_tools"]) == (
        {"KEEP": "1"},
        ["WX_TOKEN"],
        ["get_weather"],
    )
    written = file.read_text()
    again = mcpkit("goose", WEATHER, home=tmp_path, cwd=tmp_path, env=env)
    assert again.returncode == 0 and "unchanged" in again.stdout, again.stdout + again.stderr
    assert file.read_text() == written
    given = mcpkit("goose", WEATHER, "-e", "UNITS=metric", home=tmp_path, cwd=tmp_path, env=env)
    assert given.returncode == 0 and "replaced 'weather'" in given.stdout, given.stderr
    assert yaml.safe_load(file.read_text())["extensions"]["weather"]["envs"] == {"UNITS": "metric"}


def test_goose_files_an_extension_under_its_own_key_for_the_name_and_keeps_the_name_as_given(tmp_path: Path) -> None:
    """goose looks an extension up by a key made from its name (lower case, blanks dropped, other characters
    ``_``): a name written as the key itself would be a second, unreachable extension beside goose's own."""
    xdg = tmp_path / "xdg"
    env = {"XDG_CONFIG_HOME": str(xdg)}
    proc = mcpkit("goose", WEATHER, "--name", "My Weather.v2", home=tmp_path, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "added 'My Weather.v2' (as 'myweather_v2', the key goose makes of the name)" in proc.stdout, proc.stdout
    extensions = yaml.safe_load((xdg / "goose" / "config.yaml").read_text())["extensions"]
    assert list(extensions) == ["myweather_v2"] and extensions["myweather_v2"]["name"] == "My Weather.v2"
    again = mcpkit("goose", WEATHER, "--name", "My Weather.v2", home=tmp_path, cwd=tmp_path, env=env)
    assert again.returncode == 0 and "unchanged" in again.stdout, again.stdout + again.stderr


@pytest.mark.parametrize("variable", ["PATH", "PYTHONPATH", "ld_preload"])
def test_goose_refuses_an_env_variable_goose_would_drop_and_leaves_the_file(tmp_path: Path, variable: str) -> None:
    """goose drops (with only a warning in its log) the envs that steer which binaries and libraries load: the
    server would start without them, so the install says so instead of writing an entry that does not work."""
    xdg = tmp_path / "xdg"
    file = xdg / "goose" / "config.yaml"
    file.parent.mkdir(parents=True)
    file.write_text(GOOSE_BEFORE)
    proc = mcpkit(
        "goose", WEATHER, "-e", f"{variable}=/opt/x", home=tmp_path, cwd=tmp_path, env={"XDG_CONFIG_HOME": str(xdg)}
    )
    assert proc.returncode != 0 and variable in proc.stderr and "goose" in proc.stderr, proc.stderr
    assert file.read_text() == GOOSE_BEFORE


def test_codex_files_a_name_its_own_commands_would_refuse_under_a_key_they_accept(tmp_path: Path) -> None:
    """``codex mcp get|remove`` refuse a server name with other characters than letters, digits and ``-_:@/.``
    (checked against codex 0.171.0): such a name is filed under a key with ``_`` in their place."""
    codex_home = tmp_path / "codex"
    env = {"CODEX_HOME": str(codex_home)}
    proc = mcpkit("codex", WEATHER, "--name", "My Weather v2.1", home=tmp_path, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "(as 'My_Weather_v2.1'" in proc.stdout, proc.stdout
    servers = tomllib.loads((codex_home / "config.toml").read_text())["mcp_servers"]
    assert list(servers) == ["My_Weather_v2.1"]
    plain = mcpkit("codex", WEATHER, "--name", "wx@team/a:b", home=tmp_path, cwd=tmp_path, env=env)
    assert plain.returncode == 0 and "(as " not in plain.stdout, plain.stdout
    assert "wx@team/a:b" in tomllib.loads((codex_home / "config.toml").read_text())["mcp_servers"]
