"""``mcpkit skills TARGET [SKILL]`` as a person runs it: the real command, a real stdio server."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

from support.paths import REPO

SKILLS = str(REPO / "examples" / "skills" / "server.py")
TAMPERED = str(REPO / "tests" / "support" / "servers" / "skills_tampered_server.py")


def mcpkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpkit.cli.main", *args], capture_output=True, text=True, timeout=60, cwd=REPO
    )


def test_the_skills_are_listed_and_nothing_is_read() -> None:
    run = mcpkit("skills", SKILLS, "--json")
    assert run.returncode == 0, run.stderr
    entries = json.loads(run.stdout)
    assert {e["frontmatter"]["name"] for e in entries} == {"git-workflow", "pdf-processing", "refunds"}
    table = mcpkit("skills", SKILLS)
    assert table.returncode == 0 and "3 skills" in table.stdout and "pdf-processing" in table.stdout


def test_a_skill_is_loaded_verified_and_its_files_read_by_relative_path() -> None:
    run = mcpkit("skills", SKILLS, "pdf-processing")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("---\nname: pdf-processing") and "verified" in run.stderr
    by_uri = mcpkit("skills", SKILLS, "skill://acme/billing/refunds/SKILL.md", "--files")
    assert by_uri.returncode == 0 and "refunds: 2 files" in by_uri.stdout
    loaded = json.loads(mcpkit("skills", SKILLS, "skill://acme/billing/refunds/SKILL.md", "--json").stdout)
    assert loaded["verified"] and loaded["text"].startswith("---\nname: refunds")
    assert [r["uri"] for r in loaded["skill"]["resources"]][1] == "skill://acme/billing/refunds/examples/email.md"
    form = mcpkit("skills", SKILLS, "pdf-processing", "--file", "references/FORMS.md")
    on_disk = (REPO / "examples/skills/pdf-processing/references/FORMS.md").read_text()
    assert form.returncode == 0 and form.stdout == on_disk


def test_a_skill_that_fails_verification_is_never_printed() -> None:
    run = mcpkit("skills", TAMPERED, "pdf")
    assert run.returncode == 1
    assert "does not match its digest" in run.stderr or "bytes, the entry says" in run.stderr
    assert "curl" not in run.stdout + run.stderr
    missing = mcpkit("skills", SKILLS, "nope")
    assert missing.returncode == 1 and "no skill named 'nope'" in missing.stderr
    plain = mcpkit("skills", str(REPO / "examples" / "apps" / "server.py"))
    assert plain.returncode == 1 and "io.modelcontextprotocol/skills" in plain.stderr


def test_a_binary_file_in_json_is_its_exact_bytes_in_base64(tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "pics"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: pics\ndescription: Pictures.\n---\nBody.\n")
    data = bytes(range(256)) * 4  # not UTF-8
    (skill / "logo.bin").write_bytes(data)
    server = tmp_path / "server.py"
    server.write_text(f"from mcpkit import MCPKit\napp = MCPKit('pics')\napp.add_skills({str(skill.parent)!r})\n")
    run = mcpkit("skills", str(server), "pics", "--file", "logo.bin", "--json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert "text" not in out and base64.b64decode(out["blob"]) == data
    text = json.loads(mcpkit("skills", str(server), "pics", "--json").stdout)
    assert text["text"].startswith("---\nname: pics") and "blob" not in text


def test_a_file_over_the_default_message_size_is_read_with_max_message_size(tmp_path: Path) -> None:
    """A server that raised ``max_file_bytes`` serves a file whose answer is over 4 MiB: the command says which
    option reads it, and reads it whole with that option."""
    skill = tmp_path / "big"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: big\ndescription: Big.\n---\nBody.\n")
    data = b'"' * (3 << 20)  # (6 MiB once JSON-escaped)
    (skill / "quoted.txt").write_bytes(data)
    server = f"{sys.executable} {REPO / 'tests' / 'support' / 'servers' / 'skills_dir_server.py'}"
    env = ("-e", f"SKILLS_DIR={tmp_path}", "-e", f"SKILLS_MAX_FILE_BYTES={8 << 20}")
    refused = mcpkit("skills", server, *env, "big", "--file", "quoted.txt")
    assert refused.returncode == 1 and "--max-message-size" in refused.stderr, refused.stderr
    read = [sys.executable, "-m", "mcpkit.cli.main", "skills", server, *env, "big", "--file", "quoted.txt"]
    run = subprocess.run([*read, "--max-message-size", str(8 << 20)], capture_output=True, timeout=60, cwd=REPO)
    assert run.returncode == 0 and run.stdout == data, run.stderr
