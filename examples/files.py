"""A file-resources server: exposes one directory read-only and refuses anything outside it.

    python examples/files.py /path/to/folder        # stdio; defaults to the current directory
    FILES_ROOT=/path mcpkit run examples/files.py

Each file is a resource at ``file:///<relative path>`` through the template ``file:///{+path}``; text files come
back as text, everything else as a base64 blob. Paths that escape the root (``..``, absolute paths, symlinks
pointing outside) are refused as "not found", never read.
"""

from __future__ import annotations

import mimetypes
import os
import sys
from pathlib import Path
from urllib.parse import quote

from mcpkit import MCPKit, ResourceLink, ResourceNotFound, ToolError

MAX_BYTES = 5 * 1024 * 1024


def create_app(root: str | os.PathLike[str]) -> MCPKit:
    base = Path(root).resolve()
    if not base.is_dir():
        raise NotADirectoryError(f"{str(root)!r} is not a directory: name the folder to serve")
    app = MCPKit("files", version="1.0.0", instructions=f"Read-only access to the files under {base}.")

    def resolve(relative: str) -> Path:
        """The path ``relative`` names inside ``base``; ValueError when it would leave the root."""
        candidate = (base / relative.lstrip("/")).resolve()
        if candidate != base and base not in candidate.parents:
            raise ValueError(f"{relative!r} is outside the served directory")
        return candidate

    def file_uri(relative: str) -> str:
        # percent-encoded, so that a name with a space, "?", "#" or "%" is a valid URI that reads back this file
        return "file:///" + quote(relative, safe="/")

    @app.resource("file:///{+path}", name="file")
    def read_file(path: str) -> dict[str, str] | bytes:
        """A file under the served directory (text, or a base64 blob when it is not UTF-8)."""
        uri = file_uri(path)
        try:
            target = resolve(path)
        except ValueError:
            raise ResourceNotFound(uri) from None
        if not target.is_file() or target.stat().st_size > MAX_BYTES:
            raise ResourceNotFound(uri)
        data = target.read_bytes()
        mime = mimetypes.guess_type(target.name)[0]
        try:
            return {"uri": uri, "mimeType": mime or "text/plain", "text": data.decode("utf-8")}
        except UnicodeDecodeError:
            return data

    @app.tool(annotations={"readOnlyHint": True})
    def list_files(directory: str = "", pattern: str = "*") -> list[ResourceLink]:
        """List files in a directory of the served tree, as resource links.

        Args:
            directory: A directory relative to the root ("" for the root itself).
            pattern: A glob pattern such as "*.md".
        """
        try:
            folder = resolve(directory)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        if not folder.is_dir():
            raise ToolError(f"{directory!r} is not a directory")
        try:
            matches = sorted(folder.glob(pattern))
        except (ValueError, NotImplementedError) as exc:  # "" or an absolute pattern: glob cannot use it
            raise ToolError(f"pattern {pattern!r} cannot be used: {exc}") from None
        links = []
        for p in matches:
            if p.is_file() and (p.resolve() == base or base in p.resolve().parents):
                mime = mimetypes.guess_type(p.name)[0] or "application/octet-stream"
                links.append(
                    ResourceLink(
                        uri=file_uri(p.relative_to(base).as_posix()), name=p.name, mime_type=mime, size=p.stat().st_size
                    )
                )
        return links

    return app


if __name__ == "__main__":
    try:
        app = create_app(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("FILES_ROOT", "."))
    except NotADirectoryError as exc:
        sys.exit(f"files.py: {exc}")
    app.run()
else:
    app = create_app(os.environ.get("FILES_ROOT", "."))
