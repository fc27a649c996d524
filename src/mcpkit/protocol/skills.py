"""Skills (``io.modelcontextprotocol/skills``, SEP-2640): the rules both sides apply.

A skill is a directory with a ``SKILL.md`` that begins with YAML frontmatter (the Agent Skills format: ``name`` and
``description`` required). A server serves each file of it as a resource, ``skill://<skill-path>/<file-path>``, the
final segment of ``<skill-path>`` being the skill's ``name``; ``skills/list`` and ``skills/get`` return entries::

    {"uri": "skill://git-workflow/SKILL.md",
     "frontmatter": {"name": "git-workflow", "description": "..."},       # verbatim, every field the author wrote
     "resources": [{"uri": "...", "digest": "sha256:<64 hex>", "size": 2314}, ...]}   # or "dynamic"

This module parses and checks frontmatter (:func:`parse_frontmatter`, :func:`frontmatter_problems`: the Agent Skills
rules), checks an entry (:func:`entry_problems`: the shape, the name rule, the manifest's completeness and format, the
per-skill limits) and computes digests (:func:`digest`). The YAML is read with PyYAML's safe loader (the ``skills``
extra) with timestamps left as strings, so frontmatter stays plain JSON.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

JSONDict = dict[str, Any]

SKILL_FILE = "SKILL.md"
DIRECTORY_MIME_TYPE = "inode/directory"
SKILL_MIME_TYPE = "text/markdown"
#: Per-skill limits every host must accept (and servers should not exceed).
MAX_SKILL_FILES = 512
MAX_SKILL_BYTES = 16 * 1024 * 1024
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
#: Largest frontmatter block read (characters).
MAX_FRONTMATTER = 64 * 1024
RESERVED_METADATA_PREFIX = "io.modelcontextprotocol/"

NAME = re.compile(r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_FRONTMATTER = re.compile(r"^\ufeff?---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", re.S)


class FrontmatterError(ValueError):
    """A ``SKILL.md`` whose frontmatter is missing, is not YAML, or breaks the Agent Skills rules."""


def _yaml() -> Any:
    try:
        import yaml
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "reading SKILL.md frontmatter needs the Python package 'yaml' (PyYAML): pip install 'mcpkit[skills]'",
            name="yaml",
        ) from None
    return yaml


def _loader() -> Any:
    yaml = _yaml()

    class _PlainLoader(yaml.SafeLoader):  # type: ignore[name-defined,misc]
        """SafeLoader whose timestamps stay strings (frontmatter is rendered as JSON, verbatim)."""

    _PlainLoader.yaml_implicit_resolvers = {
        key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    return _PlainLoader


def parse_frontmatter(text: str) -> tuple[JSONDict, str]:
    """``(frontmatter, body)`` of a ``SKILL.md``; :class:`FrontmatterError` when it has no frontmatter block, the
    block is not a YAML mapping, or holds a value JSON cannot carry."""
    found = _FRONTMATTER.match(text)
    if found is None:
        raise FrontmatterError("SKILL.md must begin with YAML frontmatter between '---' lines")
    block = found[1]
    if len(block) > MAX_FRONTMATTER:
        raise FrontmatterError(f"the frontmatter is longer than {MAX_FRONTMATTER} characters")
    yaml = _yaml()
    try:
        value = yaml.load(block, Loader=_loader())
    except yaml.YAMLError as exc:
        raise FrontmatterError(f"the frontmatter is not valid YAML: {exc}") from None
    if not isinstance(value, dict):
        raise FrontmatterError("the frontmatter must be a YAML mapping")
    _check_json(value, "frontmatter")
    return value, text[found.end() :]


def _check_json(value: Any, where: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise FrontmatterError(f"{where}: key {key!r} is not a string")
            _check_json(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_json(item, f"{where}[{i}]")
    elif not (value is None or isinstance(value, (str, bool, int, float))):
        raise FrontmatterError(f"{where}: a {type(value).__name__} is not a JSON value")


def frontmatter_problems(frontmatter: Mapping[str, Any], directory: str | None = None) -> list[str]:
    """What breaks the Agent Skills rules in ``frontmatter`` (empty: nothing): ``name`` 1-64 of ``a-z 0-9 -``,
    no leading, trailing or doubled hyphen, equal to the skill's ``directory`` name when given; ``description``
    1-1024 characters; ``compatibility`` at most 500; ``metadata`` a map of strings; ``license`` and
    ``allowed-tools`` strings."""
    problems: list[str] = []
    name = frontmatter.get("name")
    if not isinstance(name, str) or not name:
        problems.append("frontmatter.name is required (a string)")
    elif len(name) > MAX_NAME or not NAME.match(name):
        problems.append(
            f"frontmatter.name {name!r} must be 1-64 lowercase letters, digits and hyphens, without a leading, "
            "trailing or doubled hyphen"
        )
    elif directory is not None and name != directory:
        problems.append(f"frontmatter.name {name!r} must equal the skill's directory name {directory!r}")
    description = frontmatter.get("description")
    if not isinstance(description, str) or not description.strip():
        problems.append("frontmatter.description is required (a non-empty string)")
    elif len(description) > MAX_DESCRIPTION:
        problems.append(f"frontmatter.description is longer than {MAX_DESCRIPTION} characters")
    compatibility = frontmatter.get("compatibility")
    if compatibility is not None and (not isinstance(compatibility, str) or len(compatibility) > MAX_COMPATIBILITY):
        problems.append(f"frontmatter.compatibility must be a string of at most {MAX_COMPATIBILITY} characters")
    metadata = frontmatter.get("metadata")
    if metadata is not None and (
        not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values())
    ):
        problems.append("frontmatter.metadata must map strings to strings")
    elif isinstance(metadata, dict):
        reserved = [k for k in metadata if str(k).startswith(RESERVED_METADATA_PREFIX)]
        if reserved:
            problems.append(f"frontmatter.metadata keys {reserved} use the prefix reserved for MCP extensions")
    for key in ("license", "allowed-tools"):
        if key in frontmatter and not isinstance(frontmatter[key], str):
            problems.append(f"frontmatter.{key} must be a string")
    return problems


def digest(data: bytes) -> str:
    """``sha256:<64 lowercase hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def path_segment(name: str) -> str:
    """One file or directory name as a segment of a skill URI: percent-encoded (UTF-8) where RFC 3986 requires it
    (space, ``?``, ``#``, ``%``, ``/``, non-ASCII), so ``ünï.md`` is ``%C3%BCn%C3%AF.md``."""
    return quote(name, safe="-._~!$&'()*+,;=@")


def skill_root(uri: str) -> str | None:
    """The skill's root directory URI (``skill://a/b`` for ``skill://a/b/SKILL.md``), None when ``uri`` does not name
    a ``SKILL.md`` under a skill path."""
    if not uri.endswith("/" + SKILL_FILE):
        return None
    root = uri[: -len(SKILL_FILE) - 1]
    scheme, sep, path = root.partition("://")
    if not sep or not scheme or not path or path.endswith("/"):
        return None
    return root


def skill_name_of(uri: str) -> str | None:
    """The skill name a ``SKILL.md`` URI carries (its skill path's final segment)."""
    root = skill_root(uri)
    return root.rsplit("/", 1)[-1].rpartition("://")[2] if root is not None else None


def entry_problems(entry: object, *, max_files: int = MAX_SKILL_FILES, max_bytes: int = MAX_SKILL_BYTES) -> list[str]:
    """What makes ``entry`` (one ``Skill`` of ``skills/list`` or ``skills/get``) invalid or unloadable: its fields
    and their types, the name rule, a manifest that is complete (``SKILL.md`` listed), has no duplicate and no file
    outside the skill, digests as ``sha256:<hex>``, sizes as integers, and the per-skill limits."""
    if not isinstance(entry, dict):
        return ["the entry is not an object"]
    problems: list[str] = []
    uri = entry.get("uri")
    frontmatter = entry.get("frontmatter")
    resources = entry.get("resources")
    if not isinstance(uri, str) or skill_root(uri) is None:
        problems.append(f"uri {uri!r} is not the URI of a skill's SKILL.md")
    if not isinstance(frontmatter, dict):
        problems.append("frontmatter is required (an object)")
    else:
        for key in ("name", "description"):
            if not isinstance(frontmatter.get(key), str):
                problems.append(f"frontmatter.{key} is required (a string)")
        if isinstance(uri, str) and frontmatter.get("name") != skill_name_of(uri):
            problems.append(f"the skill path of {uri!r} must end with frontmatter.name {frontmatter.get('name')!r}")
    if resources == "dynamic":
        return problems
    if not isinstance(resources, list):
        problems.append("resources is required: a list of files or the string 'dynamic'")
        return problems
    root = skill_root(uri) if isinstance(uri, str) else None
    seen: set[str] = set()
    total = 0
    for i, item in enumerate(resources):
        if not isinstance(item, dict) or not isinstance(item.get("uri"), str):
            problems.append(f"resources[{i}] has no uri")
            continue
        file_uri = item["uri"]
        if file_uri in seen:
            problems.append(f"resources lists {file_uri!r} twice")
        seen.add(file_uri)
        if root is not None and not file_uri.startswith(root + "/"):
            problems.append(f"resources[{i}] {file_uri!r} is not a file of the skill")
        if not isinstance(item.get("digest"), str) or not DIGEST.match(item["digest"]):
            problems.append(f"resources[{i}].digest must be sha256:<64 lowercase hex>")
        size = item.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            problems.append(f"resources[{i}].size must be a non-negative integer")
        else:
            total += size
    if isinstance(uri, str) and uri not in seen:
        problems.append("resources does not list the skill's SKILL.md (the manifest must be complete)")
    if len(resources) > max_files:
        problems.append(f"the skill has {len(resources)} files (the limit is {max_files})")
    if total > max_bytes:
        problems.append(f"the skill's files add up to {total} bytes (the limit is {max_bytes})")
    return problems


__all__ = [
    "DIRECTORY_MIME_TYPE",
    "MAX_SKILL_BYTES",
    "MAX_SKILL_FILES",
    "SKILL_FILE",
    "FrontmatterError",
    "digest",
    "entry_problems",
    "frontmatter_problems",
    "parse_frontmatter",
    "path_segment",
    "skill_name_of",
    "skill_root",
]
