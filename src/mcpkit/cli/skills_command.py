"""``mcpkit skills TARGET [SKILL]``: the skills a server publishes (the ``io.modelcontextprotocol/skills``
extension), and one skill loaded as a host loads it.

Without SKILL, the skills ``skills/list`` returns, checked (name, description, URI, files, size; an invalid entry is
reported, not shown): nothing is read. With SKILL (a name or the URI of its ``SKILL.md``), its ``SKILL.md`` is read
and verified against the entry (size, SHA-256 digest, frontmatter) before it is printed; ``--files`` lists its
manifest, ``--file PATH`` prints one of its files (relative to the skill), verified the same way (with ``--json``: as
``text``, or ``blob`` in base64 when it is not UTF-8). A file that fails
verification is never printed: the command exits 1 and says why.
"""

from __future__ import annotations

import base64
import sys
from typing import Any

import click

from .client_io import CLIError, described, print_json, print_table, stderr_console, stdout_console
from .connecting import JSON_HELP, TARGET_HELP, collect, connection_options, guard, run_client

__all__ = ["register", "skills_command"]


@click.command("skills", epilog=TARGET_HELP)
@connection_options
@click.argument("skill", required=False)
@click.option("--files", "show_files", is_flag=True, help="List the skill's files (its manifest).")
@click.option("--file", "file_path", metavar="PATH", help="Print this file of the skill (verified), not SKILL.md.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def skills_command(
    target: str, skill: str | None, show_files: bool, file_path: str | None, as_json: bool, **kw: Any
) -> None:
    """List the skills of the server at TARGET, or load SKILL (a name or a SKILL.md URI), verified."""
    from ..client.skills import SkillError

    async def listing(c: Any) -> tuple[list[Any], list[str]]:
        from ..client.skills import SkillsClient

        skills_client = SkillsClient(c)
        found = await skills_client.list_skills()
        return found, skills_client.skipped

    async def load(c: Any) -> tuple[Any, Any, bytes | None]:
        if skill is not None and "://" in skill:
            entry = await c.get_skill(skill)
        else:
            matches = [s for s in await c.list_skills() if s.name == skill]
            if not matches:
                raise CLIError(f"no skill named {skill!r} (mcpkit skills TARGET lists them)")
            if len(matches) > 1:
                raise CLIError(
                    f"{len(matches)} skills are named {skill!r}: give the URI of one ({matches[0].uri}, ...)"
                )
            entry = matches[0]
        loaded = await c.load_skill(entry)
        data = await c.read_skill_file(entry, entry.resolve(file_path)) if file_path else None
        return entry, loaded, data

    def go() -> None:
        if skill is None:
            found, skipped = run_client(collect(target, **kw), target, listing)
            for why in skipped:
                stderr_console().print(f"skipped an invalid entry: {why}", markup=False)
            if as_json:
                print_json([s.raw for s in found], machine=True)
                return
            from ..client.safe import text

            print_table(
                f"{len(found)} skills",
                [("Name", {"style": "bold cyan"}), ("URI", {"overflow": "fold"}), ("Files", {}), ("Description", {})],
                [
                    [
                        text(s.name, one_line=True),
                        text(s.uri, one_line=True),
                        text("dynamic" if s.dynamic else f"{len(s.files)} ({s.size} B)", one_line=True),
                        described(None, s.description),
                    ]
                    for s in found
                ],
            )
            return
        try:
            entry, loaded, data = run_client(collect(target, **kw), target, load)
        except SkillError as exc:
            raise CLIError(str(exc)) from None
        if as_json:
            out: dict[str, Any] = {"skill": entry.raw, "verified": True}
            if data is None:
                out["text"] = loaded.text
            else:
                try:
                    out["text"] = data.decode("utf-8")
                except UnicodeDecodeError:  # (its exact bytes, as resources/read gives a binary file)
                    out["blob"] = base64.b64encode(data).decode("ascii")
            print_json(out, machine=True)
            return
        if show_files:
            from ..client.safe import text

            print_table(
                f"{entry.name}: {len(entry.files or ())} files",
                [("URI", {"overflow": "fold"}), ("Size", {}), ("Digest", {"style": "green"})],
                [[text(f.uri, one_line=True), text(str(f.size)), text(f.digest)] for f in entry.files or ()],
            )
            return
        if data is not None:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            return
        from ..client.safe import text

        stderr_console().print(
            f"{entry.uri}: verified ({len(loaded.text.encode())} bytes, frontmatter as listed)", markup=False
        )
        stdout_console().print(text(loaded.text))

    guard(go)


def register(group: click.Group) -> None:
    """Add ``mcpkit skills`` to the ``mcpkit`` click group."""
    group.add_command(skills_command)
