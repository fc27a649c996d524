"""Skills on the server (``io.modelcontextprotocol/skills``, SEP-2640): ``app.add_skills(path)`` publishes a
directory of Agent Skills. Mixed into :class:`~mcpkit.server.app.MCPKit`.

    app.add_skills("skills/", directory_read=True)

Every directory under ``path`` that holds a ``SKILL.md`` is a skill (``path`` itself may be one; skills may nest).
Each file becomes a resource ``skill://<skill-path>/<file-path>`` (``<skill-path>`` is the directory's path under
``path``, after an optional ``prefix``; its last segment is the skill's name), read with ``resources/read``: text
when it is UTF-8, else a base64 blob, its bytes exactly those the manifest's digest covers. The server answers
``skills/list`` (paginated, ``page_size`` entries a page) and ``skills/get``, and with ``directory_read=True``
``resources/directory/read`` for every directory of the served tree. It declares the extension
(``{"directoryRead": true}`` when enabled).

What is checked when the skills are added, so nothing wrong is ever served: each ``SKILL.md``'s frontmatter (YAML,
the Agent Skills rules, ``name`` equal to its directory), the per-skill limits (512 files, 16 MiB), each file's
``resources/read`` answer (``max_file_bytes``, 4 MiB by default: the largest message a client reads by default, so
any client can read every file served), and that nothing is read outside ``path``: symbolic links are refused, and
so are hidden files (names starting with a dot), which are skipped. A ``ValueError`` names the file and the
problem. Sizes and counts come from ``stat`` before anything is read, and only the files of a skill are read: a file
in no skill is neither read nor counted.
"""

from __future__ import annotations

import logging
import mimetypes
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import orjson

from ..engine import DEFAULT_MAX_MESSAGE_SIZE
from ..protocol.errors import InvalidParams
from ..protocol.extensions import SKILLS_EXTENSION
from ..protocol.skills import (
    DIRECTORY_MIME_TYPE,
    MAX_SKILL_BYTES,
    MAX_SKILL_FILES,
    SKILL_FILE,
    SKILL_MIME_TYPE,
    FrontmatterError,
    digest,
    frontmatter_problems,
    parse_frontmatter,
    path_segment,
)
from .prefixes import prefixed_uri, unprefixed_uri

JSONDict = dict[str, Any]
logger: logging.Logger = logging.getLogger("mcpkit.server.skills")

__all__ = ["ANSWER_ENVELOPE", "DEFAULT_MAX_FILE_BYTES", "Skills", "SkillsCatalog"]

#: The largest ``resources/read`` answer of one file: the largest message every transport's client reads by default.
DEFAULT_MAX_FILE_BYTES = DEFAULT_MAX_MESSAGE_SIZE
#: What a file's ``resources/read`` answer holds beside its content and URI: the JSON-RPC envelope, the request's
#: id, a ``_meta``, an SSE event's framing.
ANSWER_ENVELOPE = 1024
#: Most files in skills one ``add_skills`` takes (every skill together; files in no skill are not counted).
MAX_TREE_FILES = 10_000
_MIME = {".md": SKILL_MIME_TYPE, ".markdown": SKILL_MIME_TYPE, ".py": "text/x-python", ".sh": "text/x-shellscript"}


@dataclass
class _File:
    uri: str
    name: str
    data: bytes
    mime: str

    def __post_init__(self) -> None:
        # (hashed once: every skills/list and skills/get hashed every file of every entry again, 16 MiB a skill)
        self._manifest = {"uri": self.uri, "digest": digest(self.data), "size": len(self.data)}

    def manifest(self) -> JSONDict:
        return dict(self._manifest)


@dataclass
class _Skill:
    uri: str
    root: str
    frontmatter: JSONDict
    files: list[_File]

    def entry(self) -> JSONDict:
        return {"uri": self.uri, "frontmatter": self.frontmatter, "resources": [f.manifest() for f in self.files]}


def _mime(path: Path) -> str:
    return _MIME.get(path.suffix.lower()) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"


class SkillsCatalog:
    """The skills one server publishes, and the handlers of ``skills/list``, ``skills/get`` and
    ``resources/directory/read`` (see the module docstring)."""

    def __init__(self, paginate: Callable[..., tuple[list[Any], str | None]], page_size: int, app: Any = None) -> None:
        self._paginate = paginate
        self._app = app  # (whose mounted servers' skills are served too: see served_catalogs)
        self.page_size = page_size
        self.skills: dict[str, _Skill] = {}
        self.directories: dict[str, dict[str, JSONDict]] = {}  # directory URI -> {child URI: Resource}
        self.directory_read = False
        self.ttl_ms = 0
        self.cache_scope = "public"

    def _cache(self) -> JSONDict:
        return {"ttlMs": self.ttl_ms, "cacheScope": self.cache_scope}

    def _catalogs(self) -> list[tuple[Callable[[str], str], Callable[[str], str | None], SkillsCatalog]]:
        return list(served_catalogs(self._app)) if self._app is not None else [(_same, _same, self)]

    def entries(self) -> list[JSONDict]:
        """Every skill served: this catalog's, then those of the servers mounted in its app, by the app's URIs."""
        out: dict[str, JSONDict] = {}
        for outer, _, catalog in self._catalogs():
            for skill in catalog.skills.values():
                entry = _relinked(skill.entry(), outer)
                out.setdefault(entry["uri"], entry)
        return list(out.values())

    async def list_skills(self, ctx: Any, params: JSONDict) -> JSONDict:
        skills = self.entries()
        page, cursor = self._paginate("skills", skills, params, self.page_size, lambda e: e["uri"])
        result: JSONDict = {"skills": page, **self._cache()}
        if cursor is not None:
            result["nextCursor"] = cursor
        return result

    async def get_skill(self, ctx: Any, params: JSONDict) -> JSONDict:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise InvalidParams("skills/get: uri must be a string")
        for outer, inner, catalog in self._catalogs():
            own = inner(uri)
            skill = catalog.skills.get(own) if own is not None else None
            if skill is not None:
                return {"skill": _relinked(skill.entry(), outer), **self._cache()}
        raise InvalidParams(f"No skill is served at {uri[:300]}", {"uri": uri[:300]})

    async def read_directory(self, ctx: Any, params: JSONDict) -> JSONDict:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise InvalidParams("resources/directory/read: uri must be a string")
        asked = uri.rstrip("/") if uri.endswith("/") and "://" in uri[:-1] else uri
        items: list[JSONDict] | None = None
        for outer, inner, catalog in self._catalogs():
            own = inner(asked)
            children = catalog.directories.get(own) if own is not None and catalog.directory_read else None
            if children is not None:
                items = [{**child, "uri": outer(child["uri"])} for child in children.values()]
                break
        if items is None:
            raise InvalidParams(f"{uri[:300]} is not a directory resource", {"uri": uri[:300]})
        page, cursor = self._paginate("dir:" + uri, items, params, self.page_size, lambda r: r["uri"])
        result: JSONDict = {"resources": page}
        if cursor is not None:
            result["nextCursor"] = cursor
        return result

    def _add_directory_entries(self, uri: str) -> None:
        """Register ``uri`` (a file or a directory) as the child of each directory above it, up to the scheme."""
        scheme, _, path = uri.partition("://")
        parts = path.split("/")
        for depth in range(len(parts) - 1, 0, -1):
            parent = f"{scheme}://{'/'.join(parts[:depth])}"
            child = f"{scheme}://{'/'.join(parts[: depth + 1])}"
            siblings = self.directories.setdefault(parent, {})
            if child in siblings:
                break
            if child != uri:
                siblings[child] = {"uri": child, "name": unquote(parts[depth]), "mimeType": DIRECTORY_MIME_TYPE}
                self.directories.setdefault(child, {})


def _same(uri: str) -> str:
    return uri


def _relinked(entry: JSONDict, outer: Callable[[str], str]) -> JSONDict:
    """A skill's entry by the serving app's URIs (``outer``: a mount's prefix put in)."""
    if outer is _same:
        return entry
    resources = [{**item, "uri": outer(item["uri"])} for item in entry["resources"]]
    return {**entry, "uri": outer(entry["uri"]), "resources": resources}


def served_catalogs(
    app: Any,
) -> Iterator[tuple[Callable[[str], str], Callable[[str], str | None], SkillsCatalog]]:
    """Every skills catalog ``app`` serves, each with how its URIs become ``app``'s and back (None: not one of
    its URIs): ``app``'s own, then those of the servers mounted in it, at any depth, under their prefixes."""
    own: SkillsCatalog | None = app._skills
    if own is not None:
        yield _same, _same, own
    for prefix, mount in list(app._mounts.items()):
        for outer, inner, catalog in served_catalogs(mount.child):
            if prefix is None:
                yield outer, inner, catalog
                continue

            def up(uri: str, outer: Callable[[str], str] = outer, prefix: str = prefix) -> str:
                return prefixed_uri(prefix, outer(uri))

            def down(uri: str, inner: Callable[[str], str | None] = inner, prefix: str = prefix) -> str | None:
                mine = unprefixed_uri(prefix, uri)
                return inner(mine) if mine is not None else None

            yield up, down, catalog


class Skills:
    """``add_skills`` for :class:`~mcpkit.server.app.MCPKit` (see the module docstring)."""

    extensions: Any
    add_resource: Callable[..., Any]
    set_handler: Callable[..., None]
    remove_handler: Callable[[str], None]
    _paginator: Any
    _mounted_in: list[tuple[Any, Any]]
    _skills: SkillsCatalog | None = None

    def add_skills(
        self,
        path: str | os.PathLike[str],
        *,
        prefix: str | None = None,
        scheme: str = "skill",
        directory_read: bool = False,
        page_size: int = 50,
        ttl_ms: int = 0,
        cache_scope: str = "public",
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_skill_files: int = MAX_SKILL_FILES,
        max_skill_bytes: int = MAX_SKILL_BYTES,
    ) -> list[JSONDict]:
        """Publish the skills under ``path`` (see the module docstring); returns their entries. ``prefix``: skill
        path segments before each skill's own (``"acme/billing"``); ``scheme``: the URI scheme (``skill``).

        ``max_file_bytes`` bounds what reading one file sends: its ``resources/read`` answer (the text JSON-escaped,
        or the bytes in base64 when they are not UTF-8, with the envelope). The default, 4 MiB, is the largest
        message a client of any transport reads by default (``max_message_size``): a file whose answer would not fit
        is refused here, naming it, rather than failing every client at read time. Raise it with the clients'
        ``max_message_size``."""
        root = Path(path)
        if not root.is_dir():
            raise ValueError(f"skills directory {str(root)!r} not found")
        if not scheme.isalnum() or not scheme[0].isalpha():
            raise ValueError(f"scheme {scheme!r} must be letters and digits, starting with a letter")
        base_parts = [p for p in (prefix or "").strip("/").split("/") if p]
        for part in base_parts:
            if part in (".", ".."):
                raise ValueError(f"prefix {prefix!r}: '.' and '..' are not path segments")
        found = _walk(root.resolve(), max_file_bytes)
        skill_dirs = sorted(d for d, files in found.items() if SKILL_FILE in files)
        if not skill_dirs:
            raise ValueError(f"no SKILL.md under {str(root)!r}: a skill is a directory with a SKILL.md")
        catalog = self._skills_catalog()
        catalog.page_size = page_size
        catalog.ttl_ms, catalog.cache_scope = ttl_ms, cache_scope
        top = root.resolve()
        base = top.parent if SKILL_FILE in found.get(top, {}) else top  # (path itself a skill: its name leads)
        new: list[_Skill] = []
        files: dict[str, _File] = {}
        measured: set[str] = set()  # (the files whose resources/read answer was measured)
        unreadable: list[tuple[Path, int]] = []  # (file, answer): over what a client reads by default
        for skill_dir in skill_dirs:
            rel = skill_dir.relative_to(base).parts
            skill_path = "/".join(path_segment(p) for p in (*base_parts, *rel))
            skill_root = f"{scheme}://{skill_path}"
            where = str(skill_dir / SKILL_FILE)
            skill_md = f"{skill_root}/{SKILL_FILE}"
            if skill_md not in files:
                md_path = skill_dir / SKILL_FILE
                data = _read(md_path, found[skill_dir][SKILL_FILE])
                files[skill_md] = _File(skill_md, SKILL_FILE, data, _mime(md_path))
            try:
                text = files[skill_md].data.decode("utf-8", errors="strict")
            except UnicodeDecodeError as exc:
                raise ValueError(f"{where}: a SKILL.md must be UTF-8 text (byte {exc.start} is not)") from None
            try:
                frontmatter, _ = parse_frontmatter(text)
            except FrontmatterError as exc:
                raise ValueError(f"{where}: {exc}") from None
            problems = frontmatter_problems(frontmatter, rel[-1])
            if problems:
                raise ValueError(f"{where}: " + "; ".join(problems))
            if f"{skill_root}/{SKILL_FILE}" in catalog.skills:
                raise ValueError(f"{where}: a skill is already served at {skill_root}/{SKILL_FILE}")
            paths: list[tuple[str, str, Path, int]] = []  # (uri, name, path, size): measured, not read yet
            total = 0
            for directory, sizes in found.items():
                if directory != skill_dir and skill_dir not in directory.parents:
                    continue
                sub = directory.relative_to(skill_dir).parts
                for name, size in sizes.items():
                    uri = "/".join([skill_root, *(path_segment(p) for p in (*sub, name))])
                    paths.append((uri, name, directory / name, size))
                    total += len(files[uri].data) if uri in files else size
            if len(paths) > max_skill_files or total > max_skill_bytes:
                raise ValueError(
                    f"{where}: the skill has {len(paths)} files of {total} bytes in all; the limits are "
                    f"{max_skill_files} files and {max_skill_bytes} bytes (max_skill_files, max_skill_bytes)"
                )
            members: list[_File] = []
            for uri, name, file_path, size in paths:  # (within the limits: now read, each file once)
                item = files.get(uri) or _File(uri, name, _read(file_path, size), _mime(file_path))
                if uri not in measured:
                    answer = _check_answer(item, file_path, max_file_bytes)
                    if answer > DEFAULT_MAX_MESSAGE_SIZE:  # (max_file_bytes raised)
                        unreadable.append((file_path, answer))
                    measured.add(uri)
                files[uri] = item
                members.append(item)
            members.sort(key=lambda f: (f.uri != skill_md, f.uri))
            new.append(_Skill(f"{skill_root}/{SKILL_FILE}", skill_root, frontmatter, members))
        for item in files.values():  # (every check passed: now register)
            is_skill_md = item.name == SKILL_FILE
            skill = next((s for s in new if s.uri == item.uri), None) if is_skill_md else None
            try:
                content: str | bytes = item.data.decode("utf-8")
            except UnicodeDecodeError:
                content = item.data
            self.add_resource(
                item.uri,
                content,
                name=skill.frontmatter["name"] if skill is not None else item.name,
                description=skill.frontmatter["description"] if skill is not None else None,
                mime_type=item.mime,
            )
            catalog._add_directory_entries(item.uri)
            parent = item.uri.rsplit("/", 1)[0]
            catalog.directories.setdefault(parent, {})[item.uri] = {
                "uri": item.uri,
                "name": item.name,
                "mimeType": item.mime,
                "size": len(item.data),
            }
        for skill in new:
            catalog.skills[skill.uri] = skill
        catalog.directory_read = catalog.directory_read or directory_read
        self._refresh_skills()
        for file_path, answer in unreadable:  # (served, as asked: said once for each file, here)
            logger.warning(
                "%r: its resources/read answer is %d bytes, more than the %d bytes a client reads by default: "
                "a client reads it only with max_message_size raised (mcpkit skills: --max-message-size)",
                str(file_path),
                answer,
                DEFAULT_MAX_MESSAGE_SIZE,
            )
        return [s.entry() for s in new]

    def _skills_catalog(self) -> SkillsCatalog:
        if self._skills is None:
            self._skills = SkillsCatalog(self._paginator.page, 50, self)
        return self._skills

    def _refresh_skills(self) -> None:
        """Serve ``skills/*`` and declare the extension while this app or a server mounted in it has skills (again
        up the apps this one is mounted into): called when skills are added and when servers are (un)mounted."""
        catalogs = [catalog for _, _, catalog in served_catalogs(self) if catalog.skills]
        if catalogs:
            catalog = self._skills_catalog()
            self.set_handler("skills/list", catalog.list_skills)
            self.set_handler("skills/get", catalog.get_skill)
            directory_read = any(c.directory_read for c in catalogs)
            if directory_read:
                self.set_handler("resources/directory/read", catalog.read_directory)
            self.extensions.declare(SKILLS_EXTENSION, {"directoryRead": True} if directory_read else {})
        elif self._skills is not None:
            for method in ("skills/list", "skills/get", "resources/directory/read"):
                self.remove_handler(method)
            self.extensions.pop(SKILLS_EXTENSION, None)
        for parent, _ in list(self._mounted_in):
            parent._refresh_skills()

    @property
    def skills(self) -> list[JSONDict]:
        """The entries of the published skills (what ``skills/list`` returns), those of mounted servers too."""
        return self._skills.entries() if self._skills is not None else []


def _walk(root: Path, max_file_bytes: int) -> dict[Path, dict[str, int]]:
    """The size of every regular file under ``root`` that belongs to a skill (a directory holding a ``SKILL.md``,
    or below one), by directory, from ``stat``: nothing is read here, and a file in no skill is neither counted
    nor measured. Hidden names are skipped; a symlink is an error."""
    out: dict[Path, dict[str, int]] = {}
    in_skill: set[Path] = set()
    count = 0
    for directory, dirs, names in os.walk(root, followlinks=False):
        here = Path(directory)
        for d in list(dirs):
            if d.startswith("."):
                dirs.remove(d)
            elif (here / d).is_symlink():
                raise ValueError(f"{str(here / d)!r} is a symbolic link: skills are read from real files only")
        dirs.sort()
        skill_here = here in in_skill or SKILL_FILE in names
        if skill_here:
            in_skill.update(here / d for d in dirs)
        files: dict[str, int] = {}
        for name in sorted(names):
            if name.startswith("."):
                continue
            path = here / name
            if path.is_symlink():
                raise ValueError(f"{str(path)!r} is a symbolic link: skills are read from real files only")
            if not skill_here or not path.is_file():
                continue
            count += 1
            if count > MAX_TREE_FILES:
                raise ValueError(f"more than {MAX_TREE_FILES} files in the skills under {str(root)!r}")
            size = path.stat().st_size
            if size > max_file_bytes:
                raise ValueError(f"{str(path)!r} is {size} bytes, more than max_file_bytes={max_file_bytes}{_RAISE}")
            files[name] = size
        if files:
            out[here] = files
    return out


_RAISE = (
    f" (by default {DEFAULT_MAX_MESSAGE_SIZE} bytes, the largest message a client reads by default, so that every"
    " client can read every file): raise add_skills(max_file_bytes=) and, on the clients that read it, max_message_size"
)


def _check_answer(item: _File, path: Path, max_file_bytes: int) -> int:
    """The size of a file's ``resources/read`` answer: its content as sent (UTF-8 text JSON-escaped, other bytes in
    base64), its URI and MIME type, and :data:`ANSWER_ENVELOPE`; the file refused when that is more than
    ``max_file_bytes``."""
    try:
        text = item.data.decode("utf-8")
    except UnicodeDecodeError:
        kind, content = "not UTF-8: sent in base64", 4 * ((len(item.data) + 2) // 3)
    else:
        kind, content = "text", len(orjson.dumps(text))
    answer = content + len(orjson.dumps(item.uri)) + len(orjson.dumps(item.mime)) + ANSWER_ENVELOPE
    if answer > max_file_bytes:
        raise ValueError(
            f"{str(path)!r} is {len(item.data)} bytes ({kind}); its resources/read answer would be {answer} bytes, "
            f"more than max_file_bytes={max_file_bytes}{_RAISE}"
        )
    return answer


def _read(path: Path, size: int) -> bytes:
    """``path``'s bytes, ``size`` of them as ``stat`` measured (checked against the limits); a file that grew
    since is refused rather than read further (a buffer is never larger than the size measured)."""
    with open(path, "rb") as f:
        data = f.read(size + 1)
    if len(data) > size:
        raise ValueError(f"{str(path)!r} grew while the skills were added (it was {size} bytes)")
    return data
