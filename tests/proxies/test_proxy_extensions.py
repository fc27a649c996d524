"""Extensions through a proxy: what a plain proxy relays of its upstream's Skills and MCP Apps extensions (their
declarations and the Skills methods), and what a gateway declares of its members'."""

from __future__ import annotations

from pathlib import Path

import pytest

import mcpkit
from mcpkit import Client, MCPKit
from mcpkit.protocol.errors import MCPError
from support.paths import REPO
from support.toolkit import ERAS

pytestmark = pytest.mark.timeout(60)
REPO_EXAMPLES = REPO / "examples"


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("upstream_mode", ["handshake", "modern"])
async def test_a_proxy_serves_its_upstreams_skills_and_declares_the_extensions_it_declares(
    mode: str, upstream_mode: str
) -> None:
    """A proxy of a Skills server left the extension out of its capabilities and answered ``skills/list``,
    ``skills/get`` and ``resources/directory/read`` with -32601: the skills' files were there as resources, but no
    client could find them as skills or check them against their manifest. An Apps server's extension was left out
    of the capabilities too."""
    upstream = MCPKit("skills-and-apps")
    upstream.add_skills(REPO_EXAMPLES / "skills", directory_read=True)
    upstream.add_view("ui://board/view", html="<!doctype html><html><body>board</body></html>")
    proxy = mcpkit.proxy(upstream, client_options={"mode": upstream_mode})
    async with Client(proxy, mode=mode) as client:
        extensions = (client.server_capabilities or {}).get("extensions") or {}
        assert extensions == {
            "io.modelcontextprotocol/skills": {"directoryRead": True},
            "io.modelcontextprotocol/ui": {},
        }
        skills = {skill.name: skill for skill in await client.list_skills()}
        assert {"git-workflow", "pdf-processing", "refunds"} <= set(skills)
        pdf = await client.get_skill("skill://pdf-processing/SKILL.md")
        loaded = await client.load_skill(pdf)  # (size, digest and frontmatter checked against the manifest)
        assert loaded.skill.name == "pdf-processing" and loaded.body.strip()
        children, _ = await client.read_skill_directory("skill://pdf-processing/templates")
        assert children and all(c["uri"].startswith("skill://pdf-processing/templates/") for c in children)
        with pytest.raises(MCPError) as info:
            await client.get_skill("skill://nothing/SKILL.md")
        assert info.value.code == -32602


@pytest.mark.parametrize("mode", ERAS)
async def test_a_gateway_serves_its_members_skills_under_their_prefixes(mode: str, tmp_path: Path) -> None:
    """A gateway declared no Skills extension and answered ``skills/list`` with -32601, though its members' skill
    files were there as resources under its prefixes. It now merges its members' lists (one member's page per
    request, as its other lists) with each entry's URIs under the member's prefix, where its files are read, and
    routes ``skills/get`` and ``resources/directory/read`` by that prefix; what a host checks still holds."""
    apps = MCPKit("apps")
    apps.add_view("ui://board/view", html="<!doctype html><html><body>board</body></html>")
    team = MCPKit("team")
    team.add_skills(REPO_EXAMPLES / "skills", directory_read=True, page_size=1)
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "SKILL.md").write_text("---\nname: extra\ndescription: One more.\n---\nBody.\n")
    (extra / "notes.txt").write_text("notes")
    more = MCPKit("more")
    more.add_skills(extra)
    gateway = mcpkit.proxy({"apps": apps, "team": team, "plain": MCPKit("plain"), "more": more})
    async with Client(gateway, mode=mode) as client:
        extensions = (client.server_capabilities or {}).get("extensions") or {}
        assert extensions == {
            "io.modelcontextprotocol/skills": {"directoryRead": True},
            "io.modelcontextprotocol/ui": {},
        }
        first = await client.request("skills/list", {})
        assert len(first["skills"]) == 1 and first.get("nextCursor")  # (a member's page)
        skills = {skill.name: skill for skill in await client.list_skills()}
        assert set(skills) == {"git-workflow", "pdf-processing", "refunds", "extra"}
        for skill in skills.values():
            head = "skill://more/" if skill.name == "extra" else "skill://team/"
            assert skill.uri.startswith(head) and all(f.uri.startswith(head) for f in skill.files or ()), skill.raw
        assert skills["refunds"].uri == "skill://team/acme/billing/refunds/SKILL.md"
        pdf = await client.get_skill("skill://team/pdf-processing/SKILL.md")
        assert pdf.raw == skills["pdf-processing"].raw
        loaded = await client.load_skill(pdf)  # (size, digest and frontmatter checked, read through the gateway)
        assert loaded.skill.name == "pdf-processing" and loaded.body.strip()
        forms = await client.read_skill_file(pdf, pdf.resolve("references/FORMS.md"))
        assert forms == (REPO_EXAMPLES / "skills" / "pdf-processing" / "references" / "FORMS.md").read_bytes()
        assert await client.read_skill_file(skills["extra"], skills["extra"].resolve("notes.txt")) == b"notes"
        children, _ = await client.read_skill_directory("skill://team/pdf-processing/templates")
        assert children and all(c["uri"].startswith("skill://team/pdf-processing/templates/") for c in children)
        for unknown in ("skill://nobody/x/SKILL.md", "skill://team/nothing/SKILL.md"):
            with pytest.raises(MCPError) as info:
                await client.get_skill(unknown)
            assert info.value.code == -32602


async def test_a_gateway_of_one_member_lists_its_skills_under_its_prefix() -> None:
    team = MCPKit("team")
    team.add_skills(REPO_EXAMPLES / "skills")
    async with Client(mcpkit.proxy({"team": team})) as client:
        skills = await client.list_skills()
        assert len(skills) == 3 and all(s.uri.startswith("skill://team/") for s in skills)
        loaded = await client.load_skill(next(s for s in skills if s.name == "refunds"))
        assert loaded.skill.uri == "skill://team/acme/billing/refunds/SKILL.md"


async def test_a_gateway_of_members_without_skills_declares_only_the_apps_of_its_members() -> None:
    apps = MCPKit("apps")
    apps.add_view("ui://board/view", html="<!doctype html><html><body>board</body></html>")
    gateway = mcpkit.proxy({"apps": apps, "plain": MCPKit("plain")})
    async with Client(gateway) as client:
        assert (client.server_capabilities or {}).get("extensions") == {"io.modelcontextprotocol/ui": {}}
        with pytest.raises(MCPError) as info:
            await client.request("skills/list", {})
        assert info.value.code == -32601
