"""The file formats of the hosts' configurations for ``mcpkit install`` (:mod:`mcpkit.cli.install`): JSON for most
hosts, TOML for Codex (``[mcp_servers.<name>]`` tables in ``config.toml``) and YAML for goose (``extensions:`` in
``config.yaml``).

Each format reads the file into a document (a ``dict``), and writes the document back with one server's entry set.
JSON and YAML are written whole (a YAML file loses its comments; the backup keeps them, and goose rewrites the file
the same way itself). TOML is edited as text, so the user's comments and layout stay: the entry's tables are
replaced where they stood (or added at the end), and the result is read back and compared with the document
expected: an entry written some other way (an inline table, dotted keys) makes the edit refuse rather than guess.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["FORMATS", "FileFormat", "JSONFormat", "TOMLFormat", "YAMLFormat"]


class FileFormat:
    """How a host's file is read and written (JSON: the base class)."""

    #: the name shown in messages
    name = "JSON"

    def load(self, data: bytes) -> Any:
        """The document in ``data``; ``ValueError`` when it is not this format (or not only this format)."""
        return json.loads(data)

    def show(self, value: Any) -> str:
        """``value`` as this format shows it (dry runs, and entries to add by hand)."""
        return json.dumps(value, indent=2, ensure_ascii=False)

    def dump(self, document: dict[str, Any], original: bytes | None, path: tuple[str, ...]) -> bytes:
        """The new file: ``document`` (where the entry at ``path`` changed) over the ``original`` bytes."""
        return (self.show(document) + "\n").encode("utf-8")


JSONFormat = FileFormat


class YAMLFormat(FileFormat):
    """goose's ``config.yaml``: read and written with PyYAML's safe loader and dumper (the ``cli`` extra)."""

    name = "YAML"

    @staticmethod
    def _yaml() -> Any:
        try:
            import yaml
        except ImportError:  # pragma: no cover - the cli extra brings it
            raise ValueError("reading YAML needs PyYAML: pip install 'mcpkit[cli]'") from None
        return yaml

    def load(self, data: bytes) -> Any:
        yaml = self._yaml()
        try:
            return yaml.safe_load(data.decode("utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise ValueError(str(exc)) from None

    def show(self, value: Any) -> str:
        text: str = self._yaml().safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False)
        return text.rstrip("\n")


_BARE = re.compile(r"[A-Za-z0-9_-]+")
_HEADER = re.compile(r"[ \t]*(\[\[?)")  # a table header line, or an array of tables' ([[x]])


def _toml_key(key: str) -> str:
    return key if _BARE.fullmatch(key) else _toml_string(key)


def _toml_string(text: str) -> str:
    # JSON's escapes are TOML's (\" \\ \b \f \n \r \t \uXXXX), but for DEL, which TOML wants escaped too
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{_toml_key(str(k))} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise ValueError(f"TOML cannot hold a {type(value).__name__}")


def _header_key(line: str) -> list[str] | None:
    """The dotted key of a table header line (``[a."b c".d]  # x`` -> ``["a", "b c", "d"]``; ``[[a.b]]`` too),
    else None."""
    match = _HEADER.match(line)
    if match is None:
        return None
    close = "]" * len(match.group(1))
    i, parts, n = match.end(), [], len(line)
    while True:
        while i < n and line[i] in " \t":
            i += 1
        if i < n and line[i] in "\"'":
            quote, j = line[i], i + 1
            buf: list[str] = []
            while j < n and line[j] != quote:
                if quote == '"' and line[j] == "\\" and j + 1 < n:
                    buf.append(line[j : j + 2])
                    j += 2
                    continue
                buf.append(line[j])
                j += 1
            if j >= n:
                return None
            raw = "".join(buf)
            parts.append(json.loads(f'"{raw}"') if quote == '"' else raw)
            i = j + 1
        else:
            m = _BARE.match(line, i)
            if m is None:
                return None
            parts.append(m.group())
            i = m.end()
        while i < n and line[i] in " \t":
            i += 1
        if i < n and line[i] == ".":
            i += 1
            continue
        return parts if line.startswith(close, i) else None


class TOMLFormat(FileFormat):
    """Codex's ``config.toml``: read with :mod:`tomllib`, the entry's tables edited in the text (see the module
    docstring)."""

    name = "TOML"

    def load(self, data: bytes) -> Any:
        import tomllib

        try:
            return tomllib.loads(data.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(str(exc)) from None

    def show(self, value: Any) -> str:
        return "\n".join(self._tables((), value)).strip("\n")

    def _tables(self, path: tuple[str, ...], table: dict[str, Any]) -> list[str]:
        """``table`` at ``path`` as TOML lines: its plain keys under its header, then each sub-table as a table of
        its own. A dict is a sub-table down to a server's entry (``mcp_servers.<name>``) and wherever it holds a
        dict; deeper, a dict of plain values is an inline table (``env = { KEY = "value" }``)."""

        def is_table(value: Any) -> bool:
            return isinstance(value, dict) and (len(path) < 2 or any(isinstance(x, dict) for x in value.values()))

        plain = [(k, v) for k, v in table.items() if not is_table(v)]
        nested = [(k, v) for k, v in table.items() if is_table(v)]
        lines: list[str] = []
        if path and (plain or not nested):
            lines += ["", "[" + ".".join(_toml_key(p) for p in path) + "]"]
        lines += [f"{_toml_key(str(k))} = {_toml_value(v)}" for k, v in plain]
        for key, sub in nested:
            lines += self._tables((*path, str(key)), sub)
        return lines

    def dump(self, document: dict[str, Any], original: bytes | None, path: tuple[str, ...]) -> bytes:
        entry: Any = document
        for key in path:
            entry = entry[key]
        section = self._tables(path, entry)
        lines = original.decode("utf-8").splitlines() if original else []
        kept: list[str] = []
        at: int | None = None
        skipping = False
        for line in lines:
            header = _header_key(line)
            if header is not None:
                skipping = tuple(header[: len(path)]) == path
                if skipping and at is None:
                    at = len(kept)
            if not skipping:
                kept.append(line)
        if at is None:
            while kept and not kept[-1].strip():
                kept.pop()
            at = len(kept)
        elif not section[0] and at > 0 and not kept[at - 1].strip():
            section = section[1:]  # (a blank line stands there already)
        if at == 0 and section and not section[0]:
            section = section[1:]
        new = kept[:at] + section + ([""] if at < len(kept) and kept[at].strip() else []) + kept[at:]
        text = "\n".join(new) + "\n"
        if self.load(text.encode("utf-8")) != document:
            raise ValueError(f"the entry at {'.'.join(path)} is not written as [tables] only")
        return text.encode("utf-8")


FORMATS: dict[str, FileFormat] = {"codex": TOMLFormat(), "goose": YAMLFormat()}
