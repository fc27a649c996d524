"""Skills of a mounted server (``app.mount(other, prefix=...)``): served as skills by the app it is mounted in, under
the mount's prefix, in both eras; what a host checks of them (complete manifests, digests, the name ending the skill
path) holds through the prefix."""

from __future__ import annotations

import pytest

from mcpkit import Client, MCPKit
from mcpkit.protocol.errors import MCPError
from mcpkit.protocol.extensions import SKILLS_EXTENSION
from support.paths import REPO

EXAMPLES = REPO / "examples" / "skills"
ERAS = ["handshake", "modern"]


def _skills_app() -> MCPKit:
    app = MCPKit("team-skills")
    app.add_skills(EXAMPLES, directory_read=True)
    return app


@pytest.mark.parametrize("mode", ERAS)
async def test_a_mounted_servers_skills_are_served_as_skills_under_its_prefix(mode: str) -> None:
    """Mounting a Skills server served its files as resources (``skill://team/...``) but no ``skills/list``,
    ``skills/get`` or ``resources/directory/read`` (-32601) and no extension declaration: its skills were lost."""
    parent = MCPKit("parent")
    parent.mount(_skills_app(), prefix="team")
    async with Client(parent, mode=mode) as client:
        assert (client.server_capabilities or {})["extensions"][SKILLS_EXTENSION] == {"directoryRead": True}
        skills = {skill.uri: skill for skill in await client.list_skills()}  # (each entry checked by the client)
        assert "skill://team/pdf-processing/SKILL.md" in skills
        assert "skill://team/acme/billing/refunds/SKILL.md" in skills
        pdf = await client.get_skill("skill://team/pdf-processing/SKILL.md")
        assert pdf.name == "pdf-processing"
        assert all(f.uri.startswith("skill://team/pdf-processing/") for f in pdf.files or ())
        loaded = await client.load_skill(pdf)  # (read at the prefixed URI, its digest and size verified)
        assert loaded.body.strip()
        forms = await client.read_skill_file(pdf, pdf.resolve("references/FORMS.md"))
        assert forms
        children, _ = await client.read_skill_directory("skill://team/pdf-processing/templates")
        assert children and all(c["uri"].startswith("skill://team/pdf-processing/templates/") for c in children)
        with pytest.raises(MCPError) as info:
            await client.get_skill("skill://pdf-processing/SKILL.md")  # (the mounted server's own URI)
        assert info.value.code == -32602


async def test_skills_of_the_app_and_of_servers_mounted_at_any_depth_are_listed_together() -> None:
    parent, middle = MCPKit("parent"), MCPKit("middle")
    middle.mount(_skills_app(), prefix="inner")
    parent.mount(middle, prefix="outer")
    async with Client(parent) as client:
        uris = {skill.uri for skill in await client.list_skills()}
        assert "skill://outer/inner/git-workflow/SKILL.md" in uris
        skill = await client.get_skill("skill://outer/inner/git-workflow/SKILL.md")
        assert (await client.load_skill(skill)).skill.name == "git-workflow"


async def test_unmounting_the_last_server_with_skills_withdraws_the_extension() -> None:
    parent = MCPKit("parent")
    parent.mount(_skills_app(), prefix="team")
    parent.unmount("team")
    async with Client(parent) as client:
        assert SKILLS_EXTENSION not in ((client.server_capabilities or {}).get("extensions") or {})
        with pytest.raises(MCPError) as info:
            await client.request("skills/list", {})
        assert info.value.code == -32601


async def test_skills_added_to_a_server_after_it_was_mounted_are_served_too() -> None:
    parent, child = MCPKit("parent"), MCPKit("child")
    parent.mount(child, prefix="late")
    child.add_skills(EXAMPLES / "git-workflow")
    async with Client(parent) as client:
        assert [skill.uri for skill in await client.list_skills()] == ["skill://late/git-workflow/SKILL.md"]
