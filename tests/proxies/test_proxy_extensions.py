"""Extensions through a proxy: what a plain proxy relays of its upstream's Skills and MCP Apps extensions (their
declarations and the Skills methods), and what a gateway declares of its members'."""

from __future__ import annotations

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


async def test_a_gateway_declares_no_skills_it_cannot_serve_but_the_apps_of_its_members() -> None:
    """A gateway does not merge its members' skills (their entries would need its prefixes): it declares no Skills
    extension, so a client knows at once; an Apps member's extension is declared (its tools' view links carry the
    gateway's prefix)."""
    apps = MCPKit("apps")
    apps.add_view("ui://board/view", html="<!doctype html><html><body>board</body></html>")
    skills = MCPKit("skills")
    skills.add_skills(REPO_EXAMPLES / "skills")
    gateway = mcpkit.proxy({"apps": apps, "skills": skills})
    async with Client(gateway) as client:
        assert (client.server_capabilities or {}).get("extensions") == {"io.modelcontextprotocol/ui": {}}
