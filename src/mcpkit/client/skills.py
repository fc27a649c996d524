"""Skills on the client (``io.modelcontextprotocol/skills``, SEP-2640): list and get a server's skills, and read
their files verified, as the spec's host rules say.

    async with Client(target) as client:
        skills = await client.list_skills()                  # entries only: nothing is read ahead of need
        skill = skills[0]
        loaded = await client.load_skill(skill)              # its SKILL.md, verified
        guide = await client.read_skill_file(skill, skill.uri.replace("SKILL.md", "references/GUIDE.md"))

The rules applied: ``skills/list`` and ``skills/get`` only once the server declared the extension
(``CapabilityNotSupported`` otherwise); an entry that is invalid (see :func:`mcpkit.protocol.skills.entry_problems`:
missing fields, a name that does not end its path, an incomplete or malformed manifest, over the per-skill limits)
is a :class:`SkillError` and is not loaded; a file is read only when asked for (no prefetch), only if the held
entry lists it, and used only if its size and SHA-256 digest match the entry (:class:`SkillVerificationError`
otherwise: the content is not returned); a ``SKILL.md`` must also carry exactly the entry's frontmatter. A skill
whose ``resources`` is ``"dynamic"`` offers no integrity: it is loaded only with ``allow_dynamic=True``.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any, Protocol

from ..protocol.errors import CapabilityNotSupported, MCPError
from ..protocol.extensions import SKILLS_EXTENSION
from ..protocol.skills import (
    MAX_SKILL_BYTES,
    MAX_SKILL_FILES,
    SKILL_FILE,
    FrontmatterError,
    digest,
    entry_problems,
    parse_frontmatter,
    path_segment,
    skill_root,
)
from .results import PaginationLimitExceeded

JSONDict = dict[str, Any]

__all__ = ["LoadedSkill", "Skill", "SkillError", "SkillVerificationError", "SkillsClient"]

#: Most pages one :meth:`SkillsClient.list_skills` walks.
MAX_SKILL_PAGES = 100


class SkillError(Exception):
    """A skill entry that must not be loaded (invalid, over the limits, or dynamic when that is not allowed)."""


class SkillVerificationError(SkillError):
    """A file that does not match the held entry (size, digest, frontmatter, or not listed): never used."""


@dataclass(frozen=True)
class SkillFile:
    """One file of a skill's manifest."""

    uri: str
    digest: str
    size: int


@dataclass(frozen=True)
class Skill:
    """A skill entry, checked: its ``SKILL.md`` URI, its frontmatter (verbatim) and its files (None: dynamic)."""

    uri: str
    frontmatter: JSONDict
    files: tuple[SkillFile, ...] | None
    raw: JSONDict

    @property
    def name(self) -> str:
        return str(self.frontmatter["name"])

    @property
    def description(self) -> str:
        return str(self.frontmatter["description"])

    @property
    def root(self) -> str:
        """The skill's directory URI (relative references resolve against it)."""
        return self.uri[: -len(SKILL_FILE) - 1]

    @property
    def dynamic(self) -> bool:
        return self.files is None

    @property
    def size(self) -> int:
        """The bytes of all its files (0 for a dynamic skill)."""
        return sum(f.size for f in self.files or ())

    def file(self, uri: str) -> SkillFile | None:
        """The manifest's entry for ``uri`` (None when the skill does not list it)."""
        return next((f for f in self.files or () if f.uri == uri), None)

    def resolve(self, relative: str) -> str:
        """The URI of a path relative to the skill's root (``references/GUIDE.md``, ``sub dir/ünï.md``): its segments
        percent-encoded as in the URIs servers list. A path the manifest lists only as written (already encoded, or
        a server that does not encode) resolves to that URI."""
        path = relative.lstrip("/")
        encoded = f"{self.root}/" + "/".join(path_segment(p) for p in path.split("/"))
        plain = f"{self.root}/{path}"
        if encoded != plain and self.file(encoded) is None and self.file(plain) is not None:
            return plain
        return encoded


@dataclass(frozen=True)
class LoadedSkill:
    """A skill whose ``SKILL.md`` was read and verified: its text and the body after the frontmatter."""

    skill: Skill
    text: str
    body: str


def check_entry(raw: object, *, max_files: int = MAX_SKILL_FILES, max_bytes: int = MAX_SKILL_BYTES) -> Skill:
    """A :class:`Skill` from one entry, or :class:`SkillError` saying everything wrong with it."""
    problems = entry_problems(raw, max_files=max_files, max_bytes=max_bytes)
    if problems:
        uri = raw.get("uri") if isinstance(raw, dict) else None
        raise SkillError(f"skill entry {uri!r} cannot be loaded: " + "; ".join(problems))
    assert isinstance(raw, dict)
    resources = raw["resources"]
    files = None if resources == "dynamic" else tuple(SkillFile(r["uri"], r["digest"], r["size"]) for r in resources)
    return Skill(raw["uri"], dict(raw["frontmatter"]), files, raw)


def content_bytes(contents: list[JSONDict], uri: str) -> bytes:
    """The raw bytes of ``uri`` in a ``resources/read`` result's ``contents`` (text as UTF-8, a blob decoded)."""
    mine = [c for c in contents if c.get("uri") == uri] or (contents if len(contents) == 1 else [])
    if not mine:
        raise SkillVerificationError(f"resources/read of {uri} returned no content for it")
    content = mine[0]
    if isinstance(content.get("text"), str):
        return str(content["text"]).encode("utf-8")
    if isinstance(content.get("blob"), str):
        try:
            return base64.b64decode(content["blob"], validate=True)
        except (binascii.Error, ValueError):
            raise SkillVerificationError(f"{uri}: the blob is not base64") from None
    raise SkillVerificationError(f"{uri}: the content has neither text nor blob")


class _Requester(Protocol):
    async def request(self, method: str, params: JSONDict | None = None) -> JSONDict: ...

    def server_extension(self, extension_id: str) -> JSONDict | None: ...


class SkillsClient:
    """The skill operations of a :class:`~mcpkit.client.client.Client` (``client.list_skills()`` and the others
    call these)."""

    def __init__(self, client: _Requester) -> None:
        self._client = client

    def declared(self) -> JSONDict:
        """The server's settings of the extension; ``CapabilityNotSupported`` when it did not declare it."""
        settings = self._client.server_extension(SKILLS_EXTENSION)
        if settings is None:
            raise CapabilityNotSupported(f"the server does not declare the {SKILLS_EXTENSION} extension")
        return settings

    async def list_skills_page(self, cursor: str | None = None) -> tuple[list[JSONDict], str | None]:
        """One page of ``skills/list``: the raw entries (check them with :func:`check_entry`) and the next cursor."""
        self.declared()
        result = await self._client.request("skills/list", {"cursor": cursor} if cursor else {})
        entries = result.get("skills")
        if not isinstance(entries, list):
            raise SkillError("skills/list answered without a skills list")
        nxt = result.get("nextCursor")
        return entries, nxt if isinstance(nxt, str) and nxt else None

    async def list_skills(self, *, max_pages: int = MAX_SKILL_PAGES) -> list[Skill]:
        """Every skill the server lists, checked; an invalid entry is skipped (``skipped`` has why). A cursor the
        server returns twice raises :class:`~mcpkit.protocol.errors.MCPError`; more than ``max_pages`` pages raise
        :class:`~mcpkit.client.results.PaginationLimitExceeded` (``items``: the skills collected)."""
        out: list[Skill] = []
        self.skipped: list[str] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(max_pages):
            entries, cursor = await self.list_skills_page(cursor)
            for raw in entries:
                try:
                    out.append(check_entry(raw))
                except SkillError as exc:
                    self.skipped.append(str(exc))
            if cursor is None:
                return out
            if cursor in seen:
                raise MCPError(f"skills/list: the server returned the cursor {cursor!r} twice (pagination loop)")
            seen.add(cursor)
        raise PaginationLimitExceeded(f"skills/list: more than {max_pages} pages", out)

    async def get_skill(self, uri: str) -> Skill:
        """``skills/get``: the skill whose ``SKILL.md`` is at ``uri``, checked (a server answers -32602 for a URI
        that is not one of its skills)."""
        self.declared()
        if skill_root(uri) is None:
            raise SkillError(f"{uri!r} is not the URI of a SKILL.md")
        result = await self._client.request("skills/get", {"uri": uri})
        skill = check_entry(result.get("skill"))
        if skill.uri != uri:
            raise SkillError(f"skills/get of {uri} answered with the entry of {skill.uri}")
        return skill

    async def read_skill_file(self, skill: Skill, uri: str, *, allow_dynamic: bool = False) -> bytes:
        """Read one file of ``skill`` and verify it against the entry (see the module docstring)."""
        if skill.files is None:
            if not allow_dynamic:
                raise SkillError(f"{skill.uri} is dynamic: its files have no digests (allow_dynamic=True to read)")
            if not uri.startswith(skill.root + "/"):
                raise SkillVerificationError(f"{uri} is not a file of {skill.uri}")
            result = await self._client.request("resources/read", {"uri": uri})
            data = content_bytes(result.get("contents") or [], uri)
            if len(data) > MAX_SKILL_BYTES:
                raise SkillVerificationError(f"{uri} is larger than {MAX_SKILL_BYTES} bytes")
            return data
        listed = skill.file(uri)
        if listed is None:
            raise SkillVerificationError(f"{uri} is not listed in the entry of {skill.uri}: it is not read")
        result = await self._client.request("resources/read", {"uri": uri})
        data = content_bytes(result.get("contents") or [], uri)
        if len(data) != listed.size:
            raise SkillVerificationError(f"{uri} is {len(data)} bytes, the entry says {listed.size}: not used")
        if digest(data) != listed.digest:
            raise SkillVerificationError(f"{uri} does not match its digest {listed.digest}: not used")
        return data

    async def load_skill(self, skill: Skill | str, *, allow_dynamic: bool = False) -> LoadedSkill:
        """Read the skill's ``SKILL.md`` (``skill``: a checked entry, or a ``SKILL.md`` URI fetched with
        ``skills/get``), verified: size, digest, and its frontmatter field by field against the entry's."""
        if isinstance(skill, str):
            skill = await self.get_skill(skill)
        data = await self.read_skill_file(skill, skill.uri, allow_dynamic=allow_dynamic)
        try:
            text = data.decode("utf-8")
            frontmatter, body = parse_frontmatter(text)
        except (UnicodeDecodeError, FrontmatterError) as exc:
            raise SkillVerificationError(f"{skill.uri}: {exc}") from None
        if frontmatter != skill.frontmatter:
            fields = sorted(
                k for k in {*frontmatter, *skill.frontmatter} if frontmatter.get(k) != skill.frontmatter.get(k)
            )
            raise SkillVerificationError(f"{skill.uri}: its frontmatter differs from the entry's ({', '.join(fields)})")
        return LoadedSkill(skill, text, body)

    async def read_directory(self, uri: str, cursor: str | None = None) -> tuple[list[JSONDict], str | None]:
        """``resources/directory/read`` (only when the server declared ``directoryRead``): one page of a directory's
        direct children and the next cursor."""
        if self.declared().get("directoryRead") is not True:
            raise CapabilityNotSupported("the server does not declare directoryRead for skills")
        params: JSONDict = {"uri": uri}
        if cursor:
            params["cursor"] = cursor
        result = await self._client.request("resources/directory/read", params)
        items = result.get("resources")
        nxt = result.get("nextCursor")
        return (items if isinstance(items, list) else []), (nxt if isinstance(nxt, str) and nxt else None)


class SkillMethods:
    """The skill methods of :class:`~mcpkit.client.client.Client` (``client.list_skills()`` and the others; each
    is the :class:`SkillsClient` operation of the same name)."""

    async def list_skills(self: _Requester, *, max_pages: int = MAX_SKILL_PAGES) -> list[Skill]:
        """Every skill the server lists (``skills/list``, all pages, at most ``max_pages``), each entry checked;
        nothing is read."""
        return await SkillsClient(self).list_skills(max_pages=max_pages)

    async def get_skill(self: _Requester, uri: str) -> Skill:
        """``skills/get``: the checked entry of the skill whose ``SKILL.md`` is at ``uri``."""
        return await SkillsClient(self).get_skill(uri)

    async def load_skill(self: _Requester, skill: Skill | str, *, allow_dynamic: bool = False) -> LoadedSkill:
        """The skill's ``SKILL.md``, read and verified against its entry (size, digest, frontmatter)."""
        return await SkillsClient(self).load_skill(skill, allow_dynamic=allow_dynamic)

    async def read_skill_file(self: _Requester, skill: Skill, uri: str, *, allow_dynamic: bool = False) -> bytes:
        """One file the skill's entry lists, read and verified (size and digest)."""
        return await SkillsClient(self).read_skill_file(skill, uri, allow_dynamic=allow_dynamic)

    async def read_skill_directory(
        self: _Requester, uri: str, cursor: str | None = None
    ) -> tuple[list[JSONDict], str | None]:
        """``resources/directory/read`` of a skill directory: one page of its children and the next cursor."""
        return await SkillsClient(self).read_directory(uri, cursor)
