"""Skills (SEP-2640, ``io.modelcontextprotocol/skills``) on mcpkit's server and client, in both eras.

The spec's words these tests hold the code to: "Each file within a skill directory is exposed as an MCP resource";
"The final segment of <skill-path> MUST equal the skill's name"; an entry's ``resources`` "MUST be complete", each
with ``digest`` ``sha256:{hex}`` and ``size``; ``skills/get`` of an unknown URI and ``resources/directory/read`` of a
non-directory answer -32602; subdirectories are listed with ``mimeType: inode/directory``; a host "MUST verify the
content against that entry's digest and size", "MUST parse its YAML frontmatter and compare it field-by-field",
"MUST NOT retrieve a skill's files ahead of need", and reads only files the held entry lists.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client, MCPKit
from mcpkit.client.skills import SkillError, SkillVerificationError, check_entry
from mcpkit.protocol.errors import CapabilityNotSupported, MCPError
from mcpkit.protocol.extensions import SKILLS_EXTENSION
from mcpkit.protocol.skills import frontmatter_problems, parse_frontmatter
from mcpkit.transports.stdio import StdioServer
from support.paths import REPO, SERVERS

EXAMPLES = REPO / "examples" / "skills"
ERAS = ["handshake", "modern"]


def write_skill(root: Path, rel: str, frontmatter: str, files: dict[str, bytes | str] | None = None) -> Path:
    skill = root / rel
    skill.mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_text(f"---\n{frontmatter}\n---\n\nBody of {rel}.\n")
    for name, content in (files or {}).items():
        path = skill / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return skill


def ok_frontmatter(name: str) -> str:
    return f"name: {name}\ndescription: Does {name} things."


# ---------------------------------------------------------------------------------------------- the server


@pytest.mark.parametrize("mode", ERAS)
async def test_each_file_is_a_resource_and_the_entries_carry_its_digest_and_size(mode: str) -> None:
    app = MCPKit("skills")
    app.add_skills(EXAMPLES, directory_read=True)
    async with Client(app, mode=mode, cache=False) as client:
        assert client.server_extension(SKILLS_EXTENSION) == {"directoryRead": True}
        assert "resources" in client.server_capabilities  # (a server declaring the extension declares resources)
        listed = (await client.request("skills/list", {}))["skills"]
        by_name = {e["frontmatter"]["name"]: e for e in listed}
        assert set(by_name) == {"git-workflow", "pdf-processing", "refunds"}
        pdf = by_name["pdf-processing"]
        assert pdf["uri"] == "skill://pdf-processing/SKILL.md"
        assert pdf["frontmatter"] == {
            "name": "pdf-processing",
            "description": "Extract text and tables from PDF files, fill PDF forms and assemble documents from "
            "templates. Use when the user works with PDF files.",
            "metadata": {"version": "2.1.0", "owner": "documents-team"},
        }
        assert by_name["refunds"]["uri"] == "skill://acme/billing/refunds/SKILL.md"
        files = {r["uri"]: r for r in pdf["resources"]}
        assert pdf["resources"][0]["uri"] == pdf["uri"]
        assert set(files) == {
            "skill://pdf-processing/SKILL.md",
            "skill://pdf-processing/references/FORMS.md",
            "skill://pdf-processing/templates/invoice.md",
            "skill://pdf-processing/templates/regional/eu-invoice.md",
        }
        for uri, item in files.items():
            on_disk = (EXAMPLES / uri.removeprefix("skill://")).read_bytes()
            assert item == {"uri": uri, "digest": "sha256:" + hashlib.sha256(on_disk).hexdigest(), "size": len(on_disk)}
            read = (await client.request("resources/read", {"uri": uri}))["contents"][0]
            assert read["text"].encode() == on_disk and read["mimeType"] == "text/markdown"
        resources = {r.uri: r for r in await client.list_resources()}
        assert resources["skill://pdf-processing/SKILL.md"].name == "pdf-processing"
        assert resources["skill://pdf-processing/SKILL.md"].description == pdf["frontmatter"]["description"]
        got = await client.request("skills/get", {"uri": "skill://acme/billing/refunds/SKILL.md"})
        assert got["skill"] == by_name["refunds"] and "nextCursor" not in got
        if mode == "modern":
            assert {"ttlMs", "cacheScope"} <= set(got) and {"ttlMs", "cacheScope"} <= set(
                await client.request("skills/list", {})
            )


@pytest.mark.parametrize("mode", ERAS)
async def test_unknown_skills_and_non_directories_are_invalid_params(mode: str) -> None:
    app = MCPKit("skills")
    app.add_skills(EXAMPLES, directory_read=True)
    async with Client(app, mode=mode) as client:
        for method, uri in (
            ("skills/get", "skill://nope/SKILL.md"),
            ("skills/get", "skill://pdf-processing/references/FORMS.md"),
            ("resources/directory/read", "skill://pdf-processing/SKILL.md"),
            ("resources/directory/read", "skill://nowhere"),
        ):
            with pytest.raises(MCPError) as err:
                await client.request(method, {"uri": uri})
            assert err.value.code == -32602, (method, uri)
        children = await client.request("resources/directory/read", {"uri": "skill://pdf-processing/templates"})
        assert children["resources"] == [
            {
                "uri": "skill://pdf-processing/templates/invoice.md",
                "name": "invoice.md",
                "mimeType": "text/markdown",
                "size": len((EXAMPLES / "pdf-processing/templates/invoice.md").read_bytes()),
            },
            {"uri": "skill://pdf-processing/templates/regional", "name": "regional", "mimeType": "inode/directory"},
        ]
        acme = await client.request("resources/directory/read", {"uri": "skill://acme"})
        assert acme["resources"] == [{"uri": "skill://acme/billing", "name": "billing", "mimeType": "inode/directory"}]


async def test_without_directory_read_the_method_is_not_offered(tmp_path: Path) -> None:
    write_skill(tmp_path, "one", ok_frontmatter("one"))
    app = MCPKit("skills")
    app.add_skills(tmp_path)
    async with Client(app) as client:
        assert client.server_extension(SKILLS_EXTENSION) == {}
        with pytest.raises(MCPError) as err:
            await client.request("resources/directory/read", {"uri": "skill://one"})
        assert err.value.code == -32601
        with pytest.raises(CapabilityNotSupported):
            await client.read_skill_directory("skill://one")


async def test_skills_list_is_paginated_and_no_entry_is_split(tmp_path: Path) -> None:
    for i in range(7):
        write_skill(tmp_path, f"s{i}", ok_frontmatter(f"s{i}"), {"a.md": "x", "b/c.md": "y"})
    app = MCPKit("skills")
    app.add_skills(tmp_path, page_size=3)
    async with Client(app, mode="modern", cache=False) as client:
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            page = await client.request("skills/list", {"cursor": cursor} if cursor else {})
            pages += 1
            assert len(page["skills"]) <= 3
            assert all(len(e["resources"]) == 3 for e in page["skills"])
            seen += [e["frontmatter"]["name"] for e in page["skills"]]
            cursor = page.get("nextCursor")
            if not cursor:
                break
        assert pages == 3 and sorted(seen) == [f"s{i}" for i in range(7)]
        assert [s.name for s in await client.list_skills()] == seen
        with pytest.raises(MCPError) as err:
            await client.request("skills/list", {"cursor": "forged"})
        assert err.value.code == -32602


@pytest.mark.parametrize(
    ("frontmatter", "message"),
    [
        ("description: no name", "frontmatter.name is required"),
        ("name: Bad-Name\ndescription: x", "must be 1-64 lowercase"),
        ("name: -x\ndescription: x", "must be 1-64 lowercase"),
        ("name: a--b\ndescription: x", "must be 1-64 lowercase"),
        (f"name: {'a' * 65}\ndescription: x", "must be 1-64 lowercase"),
        ("name: other\ndescription: x", "must equal the skill's directory name"),
        ("name: skill\ndescription: ''", "description is required"),
        (f"name: skill\ndescription: {'d' * 1025}", "longer than 1024"),
        (f"name: skill\ndescription: x\ncompatibility: {'c' * 501}", "compatibility"),
        ("name: skill\ndescription: x\nmetadata: [1, 2]", "metadata must map strings to strings"),
        ("name: skill\ndescription: x\nmetadata:\n  io.modelcontextprotocol/x: y", "reserved for MCP extensions"),
        ("name: skill\ndescription: x\nlicense: 3", "license must be a string"),
        ("name: [unclosed", "not valid YAML"),
        ("- a list", "must be a YAML mapping"),
    ],
)
def test_frontmatter_that_breaks_the_agent_skills_rules_is_refused_when_added(
    tmp_path: Path, frontmatter: str, message: str
) -> None:
    write_skill(tmp_path, "skill", frontmatter)
    with pytest.raises(ValueError, match=message):
        MCPKit("x").add_skills(tmp_path)


def test_a_skill_without_frontmatter_or_beyond_the_limits_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "SKILL.md").write_text("# no frontmatter\n")
    with pytest.raises(ValueError, match="must begin with YAML frontmatter"):
        MCPKit("x").add_skills(tmp_path)
    big = write_skill(tmp_path / "b", "big", ok_frontmatter("big"), {f"f{i}.txt": "x" for i in range(12)})
    with pytest.raises(ValueError, match="the limits are 10 files"):
        MCPKit("x").add_skills(tmp_path / "b", max_skill_files=10)
    with pytest.raises(ValueError, match="more than max_file_bytes=10"):
        (big / "large.bin").write_bytes(b"z" * 11)
        MCPKit("x").add_skills(tmp_path / "b", max_file_bytes=10)
    with pytest.raises(ValueError, match=r"no SKILL\.md"):
        (tmp_path / "empty").mkdir()
        MCPKit("x").add_skills(tmp_path / "empty")


MiB = 1024 * 1024
SKILLS_DIR_SERVER = str(SERVERS / "skills_dir_server.py")


def largest_accepted_text(tmp_path: Path, limit: int | None = None) -> int:
    """The size of the largest plain ASCII file ``add_skills`` accepts (found from the limit down)."""
    skill = write_skill(tmp_path / "probe", "p", ok_frontmatter("p"))
    options = {} if limit is None else {"max_file_bytes": limit}
    for size in range(limit or 4 * MiB, 0, -64):
        (skill / "edge.txt").write_bytes(b"a" * size)
        try:
            MCPKit("x").add_skills(tmp_path / "probe", **options)  # type: ignore[arg-type]
        except ValueError:
            continue
        return size
    raise AssertionError("no size accepted")


@pytest.mark.parametrize("mode", ERAS)
async def test_every_file_add_skills_accepts_is_read_by_a_client_with_the_default_message_size(
    mode: str, tmp_path: Path
) -> None:
    """The largest file ``add_skills`` accepts by default is read whole by a real client over stdio with the default
    ``max_message_size`` (4 MiB): a file that passed the old 16 MiB check failed every such client at read time."""
    size = largest_accepted_text(tmp_path)
    assert 4 * MiB - 2048 < size <= 4 * MiB, size  # (only the envelope is kept back)
    write_skill(tmp_path / "skills", "big", ok_frontmatter("big"), {"edge.txt": b"a" * size})
    server = StdioServer([sys.executable, SKILLS_DIR_SERVER], env={"SKILLS_DIR": str(tmp_path / "skills")})
    async with Client(server, mode=mode, cache=False, timeout=30) as client:
        (skill,) = await client.list_skills()
        assert await client.read_skill_file(skill, skill.resolve("edge.txt")) == b"a" * size


def test_a_file_whose_read_answer_would_not_fit_a_clients_message_is_refused_when_added(tmp_path: Path) -> None:
    """Measured as sent, not as stored: text whose JSON escaping doubles it, or bytes that are not UTF-8 (base64,
    4/3), are refused below 4 MiB on disk; the error names the file, its size and the option to raise."""
    cases = {
        "quoted.txt": b'"\n' * (MiB),  # 3 MiB on disk, 6 MiB escaped
        "blob.bin": bytes(range(128, 256)) * (3 * MiB // 128 + 1024),  # 3.1 MiB on disk, 4.1 MiB in base64
        "data.txt": b"x" * 5_200_000,  # over the limit on disk: refused before it is read
    }
    for name, data in cases.items():
        root = tmp_path / name
        write_skill(root, "big", ok_frontmatter("big"), {name: data})
        with pytest.raises(ValueError) as refused:
            MCPKit("x").add_skills(root)
        message = str(refused.value)
        assert f"big/{name}" in message and f"{len(data)} bytes" in message, message
        assert "max_file_bytes=4194304" in message and "max_message_size" in message, message


async def test_a_raised_max_file_bytes_serves_a_file_that_a_client_with_a_raised_message_size_reads(
    tmp_path: Path,
) -> None:
    data = b'"\n' * MiB  # a 6 MiB answer
    write_skill(tmp_path, "big", ok_frontmatter("big"), {"quoted.txt": data})
    env = {"SKILLS_DIR": str(tmp_path), "SKILLS_MAX_FILE_BYTES": str(8 * MiB)}
    server = StdioServer([sys.executable, SKILLS_DIR_SERVER], env=env)
    options = {"max_message_size": 8 * MiB}
    async with Client(server, cache=False, timeout=30, transport_options=options) as client:
        (skill,) = await client.list_skills()
        assert await client.read_skill_file(skill, skill.resolve("quoted.txt")) == data


def test_a_raised_max_file_bytes_warns_once_for_each_file_a_default_client_cannot_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With ``max_file_bytes`` raised, a file whose answer is over the default message size is served, and the log
    says, once for that file, that a client with the default ``max_message_size`` will not read it; a file within it,
    or a skill added with the default limit, says nothing."""
    big = {"quoted.txt": b'"\n' * MiB, "blob.bin": bytes(range(128, 256)) * (3 * MiB // 128 + 1024)}
    write_skill(tmp_path / "raised", "big", ok_frontmatter("big"), {**big, "small.txt": b"fine"})
    write_skill(tmp_path / "raised", "big/inner", ok_frontmatter("inner"))  # (nested: its files are big's too)
    write_skill(tmp_path / "default", "plain", ok_frontmatter("plain"), {"small.txt": b"x" * MiB})
    caplog.set_level("WARNING", logger="mcpkit.server.skills")
    app = MCPKit("x")
    app.add_skills(tmp_path / "default")
    assert not caplog.records
    app.add_skills(tmp_path / "raised", max_file_bytes=8 * MiB)
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2, warned
    for name, message in zip(sorted(big), sorted(warned, key=lambda m: "quoted" in m), strict=True):
        assert f"big/{name}" in message and "4194304" in message and "max_message_size" in message, message


def test_a_skill_md_that_is_not_utf8_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "latin").mkdir()
    (tmp_path / "latin" / "SKILL.md").write_bytes(b"---\nname: latin\ndescription: caf\xe9\n---\nBody.\n")
    with pytest.raises(ValueError, match=r"latin/SKILL\.md: .*UTF-8"):
        MCPKit("x").add_skills(tmp_path)


def test_nothing_outside_the_directory_is_read(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("secret")
    skill = write_skill(tmp_path / "skills", "s", ok_frontmatter("s"), {".env": "TOKEN=1", "ok.md": "fine"})
    os.symlink(tmp_path / "secret.txt", skill / "link.txt")
    with pytest.raises(ValueError, match="is a symbolic link"):
        MCPKit("x").add_skills(tmp_path / "skills")
    (skill / "link.txt").unlink()
    os.symlink(tmp_path, skill / "up")
    with pytest.raises(ValueError, match="is a symbolic link"):
        MCPKit("x").add_skills(tmp_path / "skills")
    (skill / "up").unlink()
    entries = MCPKit("x").add_skills(tmp_path / "skills")
    assert [r["uri"] for r in entries[0]["resources"]] == ["skill://s/SKILL.md", "skill://s/ok.md"]  # (no .env)
    with pytest.raises(ValueError, match=r"'\.' and '\.\.'"):
        MCPKit("x").add_skills(tmp_path / "skills", prefix="../x")


@contextlib.contextmanager
def most_bytes_held() -> Iterator[Callable[[], int]]:
    """The peak of Python's allocations inside the block (``peak()`` once the block is left)."""
    tracemalloc.start()
    peak = [0]
    try:
        yield lambda: peak[0]
    finally:
        peak[0] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


def sparse_file(path: Path, size: int) -> None:
    """A file of ``size`` bytes on paper, none on disk (nothing written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(size)


def test_a_file_in_no_skill_is_never_read_whatever_its_size(tmp_path: Path) -> None:
    write_skill(tmp_path, "s", ok_frontmatter("s"), {"ok.md": "fine"})
    sparse_file(tmp_path / "disk.img", 8 << 30)  # over max_file_bytes (4 MiB), in no skill
    sparse_file(tmp_path / "logs" / "app.log", 64 << 20)
    with most_bytes_held() as peak:
        entries = MCPKit("x").add_skills(tmp_path, max_file_bytes=1 << 30)  # (app.log is within this limit)
    assert [r["uri"] for r in entries[0]["resources"]] == ["skill://s/SKILL.md", "skill://s/ok.md"]
    assert peak() < 8 << 20, f"{peak()} bytes held while adding: a file in no skill was read"
    entries = MCPKit("x").add_skills(tmp_path)  # the default limits: the 8 GiB file is no reason to refuse
    assert [r["uri"] for r in entries[0]["resources"]] == ["skill://s/SKILL.md", "skill://s/ok.md"]


def test_a_skill_over_its_byte_limit_is_refused_before_any_file_is_read(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "s", ok_frontmatter("s"))
    sparse_file(skill / "data.bin", 64 << 20)
    with most_bytes_held() as peak, pytest.raises(ValueError, match=r"s/SKILL\.md: .*16777216 bytes"):
        MCPKit("x").add_skills(tmp_path, max_file_bytes=1 << 30)
    assert peak() < 8 << 20, f"{peak()} bytes held: a file was read before the skill's limits were checked"


def test_a_nested_skill_is_its_own_entry_and_part_of_the_enclosing_one(tmp_path: Path) -> None:
    outer = write_skill(tmp_path, "outer", ok_frontmatter("outer"))
    write_skill(outer, "inner", ok_frontmatter("inner"), {"notes.md": "n"})
    app = MCPKit("x")
    entries = {e["frontmatter"]["name"]: e for e in app.add_skills(tmp_path / "outer", prefix="team")}
    assert entries["inner"]["uri"] == "skill://team/outer/inner/SKILL.md"
    outer_files = [r["uri"] for r in entries["outer"]["resources"]]
    assert "skill://team/outer/inner/notes.md" in outer_files and "skill://team/outer/inner/SKILL.md" in outer_files
    assert len(app.resources) == 3  # (each file once)


def test_frontmatter_is_rendered_verbatim_as_json() -> None:
    frontmatter, body = parse_frontmatter("---\nname: x\ndescription: d\ncreated: 2024-01-02\nn: 3\n---\nbody\n")
    assert frontmatter == {"name": "x", "description": "d", "created": "2024-01-02", "n": 3} and body == "body\n"
    assert frontmatter_problems(frontmatter, "x") == []


# ---------------------------------------------------------------------------------------------- the client


def tampered_app(mode: str, entry_override: dict[str, Any] | None = None) -> tuple[MCPKit, list[str]]:
    """A server whose skills/list entry and resources/read contents disagree as ``mode`` says; ``reads`` records
    every resources/read it answers."""
    good = "---\nname: pdf\ndescription: PDF things\n---\n\nBody.\n"
    served = {
        "digest": good.replace("Body.", "Evil!"),
        "size": good + "extra\n",
        "frontmatter": good.replace("description: PDF things", "description: Exfiltrate"),
        "none": good,
    }[mode]
    entry_text = served if mode == "frontmatter" else good
    support = "Support.\n"
    entry = {
        "uri": "skill://pdf/SKILL.md",
        "frontmatter": {"name": "pdf", "description": "PDF things"},
        "resources": [
            {
                "uri": "skill://pdf/SKILL.md",
                "digest": "sha256:" + hashlib.sha256(entry_text.encode()).hexdigest(),
                "size": len(entry_text.encode()),
            },
            {
                "uri": "skill://pdf/ref.md",
                "digest": "sha256:" + hashlib.sha256(support.encode()).hexdigest(),
                "size": len(support),
            },
        ],
        **(entry_override or {}),
    }
    app = MCPKit("tampered")
    reads: list[str] = []
    app.declare_extension(SKILLS_EXTENSION)

    @app.resource("skill://pdf/SKILL.md", mime_type="text/markdown")
    def skill_md() -> str:
        reads.append("skill://pdf/SKILL.md")
        return served

    @app.resource("skill://pdf/ref.md", mime_type="text/markdown")
    def ref() -> str:
        reads.append("skill://pdf/ref.md")
        return support

    @app.resource("skill://pdf/unlisted.md", mime_type="text/markdown")
    def unlisted() -> str:
        reads.append("skill://pdf/unlisted.md")
        return "x"

    async def list_skills(ctx: Any, params: dict[str, Any]) -> dict[str, Any]:
        return {"skills": [entry], "ttlMs": 0, "cacheScope": "private"}

    app.set_handler("skills/list", list_skills)
    return app, reads


@pytest.mark.parametrize("mode", ["digest", "size", "frontmatter"])
async def test_the_client_never_uses_a_skill_file_that_fails_verification(mode: str) -> None:
    app, reads = tampered_app(mode)
    async with Client(app, cache=False) as client:
        (skill,) = await client.list_skills()
        assert reads == []  # listing reads no file (no prefetch)
        with pytest.raises(
            SkillVerificationError,
            match={"digest": "digest", "size": "bytes, the entry says", "frontmatter": "frontmatter differs"}[mode],
        ):
            await client.load_skill(skill)
        assert reads == ["skill://pdf/SKILL.md"]


async def test_the_client_reads_only_files_the_held_entry_lists() -> None:
    app, reads = tampered_app("none")
    async with Client(app, cache=False) as client:
        (skill,) = await client.list_skills()
        loaded = await client.load_skill(skill)
        assert loaded.body == "\nBody.\n" and loaded.skill is skill
        assert await client.read_skill_file(skill, skill.resolve("ref.md")) == b"Support.\n"
        with pytest.raises(SkillVerificationError, match="not listed"):
            await client.read_skill_file(skill, "skill://pdf/unlisted.md")
        assert "skill://pdf/unlisted.md" not in reads


@pytest.mark.parametrize("mode", ERAS)
async def test_a_file_whose_name_needs_percent_encoding_is_read_by_its_plain_relative_path(
    tmp_path: Path, mode: str
) -> None:
    names = ["sub dir/file one.md", "ünï 日本.md", "50%.txt", "what?#.txt"]
    write_skill(tmp_path, "odd", ok_frontmatter("odd"), {name: f"content of {name}" for name in names})
    app = MCPKit("odd-skills")
    app.add_skills(tmp_path)
    async with Client(app, mode=mode, cache=False) as client:
        (skill,) = await client.list_skills()
        for name in names:
            uri = skill.resolve(name)
            assert skill.file(uri) is not None, uri  # the URI the server lists for that file
            assert await client.read_skill_file(skill, uri) == f"content of {name}".encode()
        listed = skill.files[1].uri  # type: ignore[index]  # an already-encoded path (copied from the manifest)
        assert skill.resolve(listed.removeprefix(skill.root + "/")) == listed


async def test_a_directory_listing_names_each_child_as_it_is_named_on_disk(tmp_path: Path) -> None:
    write_skill(tmp_path, "odd", ok_frontmatter("odd"), {"sub dir/ünï.md": "x", "top file.md": "y"})
    app = MCPKit("odd-skills")
    app.add_skills(tmp_path, directory_read=True)
    async with Client(app, cache=False) as client:
        children, _ = await client.read_skill_directory("skill://odd")
        names = {c["uri"]: c["name"] for c in children}
        assert names["skill://odd/sub%20dir"] == "sub dir" and names["skill://odd/top%20file.md"] == "top file.md"
        (inner,), _ = await client.read_skill_directory("skill://odd/sub%20dir")
        assert inner["name"] == "ünï.md"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"resources": None}, "resources is required"),
        ({"resources": "later"}, "resources is required"),
        ({"frontmatter": {"name": "other", "description": "d"}}, "must end with frontmatter.name"),
        ({"uri": "skill://pdf/README.md"}, "is not the URI of a skill's SKILL.md"),
        ({"resources": [{"uri": "skill://pdf/SKILL.md", "digest": "md5:x", "size": 1}]}, "digest must be sha256"),
        ({"resources": [{"uri": "skill://pdf/SKILL.md", "digest": "sha256:" + "0" * 64, "size": -1}]}, "size"),
        ({"resources": [{"uri": "skill://other/x.md", "digest": "sha256:" + "0" * 64, "size": 1}]}, "not a file of"),
        ({"resources": [{"uri": "skill://pdf/x.md", "digest": "sha256:" + "0" * 64, "size": 1}]}, "does not list"),
        (
            {"resources": [{"uri": f"skill://pdf/{i}", "digest": "sha256:" + "0" * 64, "size": 1} for i in range(513)]},
            "513 files",
        ),
        (
            {"resources": [{"uri": "skill://pdf/SKILL.md", "digest": "sha256:" + "0" * 64, "size": 17 * 2**20}]},
            "the limit is 16777216",
        ),
    ],
)
def test_an_invalid_entry_is_not_loaded(override: dict[str, Any], message: str) -> None:
    entry = {
        "uri": "skill://pdf/SKILL.md",
        "frontmatter": {"name": "pdf", "description": "d"},
        "resources": [{"uri": "skill://pdf/SKILL.md", "digest": "sha256:" + "0" * 64, "size": 1}],
    }
    with pytest.raises(SkillError, match=message):
        check_entry({**entry, **override})


async def test_a_dynamic_skill_is_read_only_when_allowed_and_never_without_the_declaration() -> None:
    app, reads = tampered_app("none", {"resources": "dynamic"})
    async with Client(app, cache=False) as client:
        (skill,) = await client.list_skills()
        assert skill.dynamic
        with pytest.raises(SkillError, match="dynamic"):
            await client.load_skill(skill)
        assert reads == []
        assert (await client.load_skill(skill, allow_dynamic=True)).body == "\nBody.\n"
    plain = MCPKit("plain")
    async with Client(plain) as client:
        with pytest.raises(CapabilityNotSupported):
            await client.list_skills()


@pytest.mark.parametrize("cursors", ["same", "endless"])
async def test_the_clients_skill_list_says_when_it_stopped_before_the_end(cursors: str) -> None:
    """A server whose skills/list repeats a cursor, or never ends: ``list_skills`` returned what it had collected
    as if it were the whole list, where every other list walk of the client raises. Now a repeated cursor raises
    MCPError naming it, and a walk past ``max_pages`` raises PaginationLimitExceeded holding what was collected."""
    from mcpkit.client.client import PaginationLimitExceeded

    app, _ = tampered_app("digest")
    pages = {"n": 0}

    async def looping(ctx: Any, params: dict[str, Any]) -> dict[str, Any]:
        pages["n"] += 1
        name, uri = f"s{pages['n']}", f"skill://s{pages['n']}/SKILL.md"
        entry = {
            "uri": uri,
            "frontmatter": {"name": name, "description": "d"},
            "resources": [{"uri": uri, "digest": "sha256:" + "0" * 64, "size": 10}],
        }
        nxt = "same" if cursors == "same" else f"c{pages['n']}"
        return {"skills": [entry], "nextCursor": nxt, "ttlMs": 0}

    app.set_handler("skills/list", looping)
    async with Client(app, cache=False) as client:
        if cursors == "same":
            with pytest.raises(MCPError, match="'same' twice"):
                await client.list_skills()
            assert pages["n"] == 2
        else:
            with pytest.raises(PaginationLimitExceeded, match="more than 5 pages") as info:
                await client.list_skills(max_pages=5)
            assert [s.name for s in info.value.items] == ["s1", "s2", "s3", "s4", "s5"]
