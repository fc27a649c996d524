"""Files as resources: one file (:meth:`Files.add_file`) or the files of a folder (:meth:`Files.add_directory`).

A file is read when a client reads it (never cached), in a worker thread. What a client can read is exactly what
was listed: each file is a static resource under its own URI, so no URI a client writes can walk out of the folder
(``..``, ``%2e%2e``, a second root) — there is no template to match it against. The read itself is checked again,
because the folder can change under the server: the final component is opened without following a symlink (unless
``follow_symlinks=True``), the file opened must still be a regular file (a FIFO put in its place does not hang the
read; a device is refused) and, on a platform that can tell (``/proc/self/fd``), its real path must still be under
the folder's real path (a directory on the way swapped for a symlink is caught). Any of these failing reads as
"resource not found", the answer for a file that is gone; a file grown past ``max_file_size`` is an internal error
saying so.

Bounds (docs/security.md): ``max_files`` listed per folder (default 10,000; past it a warning names how many were
left out), at most ``MAX_SCANNED`` directory entries looked at per scan, ``MAX_DEPTH`` folder levels,
``max_file_size`` bytes read per file (default 2 MiB, so a binary file's base64 fits the default 4 MiB message),
``SNIFF_BYTES`` read per file at a scan to tell text from binary when the file name says nothing, a poll no more
often than every ``MIN_POLL_S`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

from ..protocol.errors import InternalError, ResourceNotFound
from .content import DEFAULT_FILE_BYTES, is_text_type, mime_by_name
from .resources import Resource, ResourceTemplate, to_contents
from .visibility import pop_labels

if TYPE_CHECKING:
    from .context import Context
    from .lifespan import LifespanHolder

JSONDict = dict[str, Any]
logger: logging.Logger = logging.getLogger("mcpkit.server.files")

DEFAULT_MAX_FILES = 10_000
DEFAULT_MAX_FILE_SIZE = DEFAULT_FILE_BYTES
MAX_SCANNED = 200_000
MAX_DEPTH = 32
SNIFF_BYTES = 1024
MIN_POLL_S = 0.5


def guess_mime(path: Path, head: bytes | None) -> str:
    """The MIME type of a file: by its name, else ``text/plain`` when its first bytes are UTF-8 without NUL (``head``;
    None: not read), else ``application/octet-stream``."""
    mime = mime_by_name(path.name)
    if mime is not None:
        return mime
    if head is not None and b"\x00" not in head:
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < len(head) - 3:  # (a character cut at the end of the sniffed bytes is not a fault)
                return "application/octet-stream"
        return "text/plain"
    return "application/octet-stream"


def mime_of(path: str | os.PathLike[str], follow_symlinks: bool = False) -> str:
    """:func:`guess_mime` of the file at ``path``, reading its first ``SNIFF_BYTES`` only when its name says
    nothing."""
    p = Path(path)
    if mime_by_name(p.name) is not None:
        return guess_mime(p, None)
    head = None
    with contextlib.suppress(OSError):
        fd = os.open(p, _open_flags(follow_symlinks))
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                head = os.read(fd, SNIFF_BYTES)
        finally:
            os.close(fd)
    return guess_mime(p, head)


def _open_flags(follow_symlinks: bool) -> int:
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    return flags


def _opened_path(fd: int, path: Path) -> str:
    """The real path of the file open as ``fd`` (``/proc/self/fd``), else of ``path`` (a platform without it)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)


def read_file(path: Path, uri: str, max_size: int, root: str | None, follow_symlinks: bool) -> bytes:
    """The bytes of the regular file ``path`` (at most ``max_size``), checked as the module docs say; raises
    :class:`ResourceNotFound` (``uri``) or :class:`InternalError` (too large)."""
    try:
        fd = os.open(path, _open_flags(follow_symlinks))
    except OSError:  # gone, a symlink where none may be (ELOOP), no permission: not there for the client
        raise ResourceNotFound(uri) from None
    with os.fdopen(fd, "rb", closefd=True) as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ResourceNotFound(uri)
        if root is not None:
            real = _opened_path(fd, path)
            if real != root and not real.startswith(root + os.sep):
                raise ResourceNotFound(uri)
        if st.st_size > max_size:
            raise InternalError(f"{uri}: the file has {st.st_size} bytes, more than this server reads ({max_size})")
        data = f.read(max_size + 1)
    if len(data) > max_size:
        raise InternalError(f"{uri}: the file has more than {max_size} bytes, more than this server reads")
    return data


class FileResource(Resource):
    """A static resource whose content is a file, read at each ``resources/read`` in a worker thread (see the
    module docs for the checks). ``root``: the real path of the folder the file must stay in (None: no such
    check, a file added by itself)."""

    reads_itself: ClassVar[bool] = True

    def __init__(
        self,
        uri: str,
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: JSONDict | Any | None = None,
        icons: Sequence[JSONDict | Any] | None = None,
        meta: JSONDict | None = None,
        ttl_ms: int | None = None,
        cache_scope: str | None = None,
        max_file_size: int = DEFAULT_MAX_FILE_SIZE,
        root: str | None = None,
        follow_symlinks: bool = False,
    ) -> None:
        if not isinstance(max_file_size, int) or max_file_size < 1:
            raise ValueError("max_file_size must be an integer >= 1")
        self.path: Path = Path(path)
        self.max_file_size: int = max_file_size
        self.root: str | None = root
        self.follow_symlinks: bool = follow_symlinks
        super().__init__(
            uri,
            name=name or self.path.name,
            title=title,
            description=description,
            mime_type=mime_type or guess_mime(self.path, None),
            size=size,
            annotations=annotations,
            icons=icons,
            meta=meta,
            ttl_ms=ttl_ms,
            cache_scope=cache_scope,
        )

    async def read(self, ctx: Context | None) -> list[JSONDict]:
        data = await asyncio.to_thread(
            read_file, self.path, self.uri, self.max_file_size, self.root, self.follow_symlinks
        )
        mime = self.mime_type or "application/octet-stream"
        value: str | bytes = data
        if is_text_type(mime):
            try:
                value = data.decode("utf-8")
            except UnicodeDecodeError:
                value = data  # (named as text, but not UTF-8: sent as the bytes it is)
        return self._with_meta(to_contents(value, self.uri, mime))


def _serve(app: Any, item: FileResource, replace: bool, labels: tuple[Any, Any, bool]) -> None:
    """Register ``item`` with the labels :func:`~mcpkit.server.visibility.pop_labels` took out of its options."""
    tags, scopes, enabled = labels
    app.add_resource(item.uri, item, replace=replace, tags=tags, scopes=scopes, enabled=enabled)


@dataclass(frozen=True)
class _Seen:
    path: Path
    rel: str
    size: int
    mtime_ns: int
    mime: str


@dataclass
class DirectoryChanges:
    """What a :meth:`Directory.refresh` found: the URIs added, removed and changed (size or modification time)."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


class Directory:
    """The files of a folder served as resources (made by :meth:`Files.add_directory`). :meth:`refresh` scans the
    folder again: new files are listed, removed ones unlisted (clients get ``notifications/resources/list_changed``)
    and subscribers of a changed file get ``notifications/resources/updated``. With ``poll_s`` the app does that
    every ``poll_s`` seconds while it is served."""

    def __init__(
        self,
        app: Any,
        root: str | os.PathLike[str],
        *,
        uri_prefix: str | None = None,
        include: Iterable[str] = ("*",),
        exclude: Iterable[str] = (),
        hidden: bool = False,
        follow_symlinks: bool = False,
        max_files: int = DEFAULT_MAX_FILES,
        max_file_size: int = DEFAULT_MAX_FILE_SIZE,
        poll_s: float | None = None,
        options: JSONDict | None = None,
    ) -> None:
        path = Path(root)
        if not path.is_dir():
            raise ValueError(f"add_directory: {str(root)!r} is not a folder")
        if not isinstance(max_files, int) or max_files < 1:
            raise ValueError("max_files must be an integer >= 1")
        if not isinstance(max_file_size, int) or max_file_size < 1:
            raise ValueError("max_file_size must be an integer >= 1")
        if poll_s is not None and not poll_s >= MIN_POLL_S:
            raise ValueError(f"poll_s must be at least {MIN_POLL_S} seconds (or None: refresh() when you choose)")
        self.app: Any = app
        self.root: Path = path.resolve()
        self._real_root: str = os.path.realpath(self.root)
        if uri_prefix is None:
            uri_prefix = self.root.as_uri() + "/"
        elif ":" not in uri_prefix:
            raise ValueError(f"uri_prefix {uri_prefix!r} needs a scheme, e.g. 'docs://' or 'file:///srv/docs/'")
        self.uri_prefix: str = uri_prefix
        self.include: tuple[str, ...] = (include,) if isinstance(include, str) else tuple(include)
        self.exclude: tuple[str, ...] = (exclude,) if isinstance(exclude, str) else tuple(exclude)
        self.hidden: bool = hidden
        self.follow_symlinks: bool = follow_symlinks
        self.max_files: int = max_files
        self.max_file_size: int = max_file_size
        self.poll_s: float | None = poll_s
        self.options: JSONDict = dict(options or {})
        self.truncated: bool = False  #: the last scan found more than ``max_files`` files (or ``MAX_SCANNED`` entries)
        self._seen: dict[str, _Seen] = {}
        self._task: asyncio.Task[None] | None = None
        self._lock: asyncio.Lock | None = None

    @property
    def uris(self) -> list[str]:
        """The URIs listed now, in the order of the scan (sorted by path)."""
        return list(self._seen)

    def uri_of(self, rel: str) -> str:
        """The URI of the file at ``rel`` (a ``/``-separated path under the folder)."""
        return self.uri_prefix + quote(rel, safe="/")

    def _wanted(self, rel: str) -> bool:
        return any(fnmatch.fnmatchcase(rel, p) for p in self.include) and not any(
            fnmatch.fnmatchcase(rel, p) for p in self.exclude
        )

    def scan(self) -> dict[str, _Seen]:
        """The files to list (by URI, sorted by path), with no change to what is served: blocking file system work,
        run in a worker thread by :meth:`refresh`."""
        found: dict[str, _Seen] = {}
        scanned = 0
        truncated = False
        stack: list[tuple[Path, str, int]] = [(self.root, "", 0)]
        while stack:
            folder, prefix, depth = stack.pop()
            try:
                with os.scandir(folder) as it:
                    entries = []
                    for entry in it:
                        scanned += 1
                        if scanned > MAX_SCANNED:
                            truncated = True
                            break
                        entries.append(entry)
            except OSError:
                continue  # (a folder that went away or cannot be read: its files are not listed)
            entries.sort(key=lambda e: e.name)
            folders: list[tuple[Path, str, int]] = []
            for entry in entries:
                if not self.hidden and entry.name.startswith("."):
                    continue
                rel = prefix + entry.name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if depth + 1 < MAX_DEPTH:
                            folders.append((Path(entry.path), rel + "/", depth + 1))
                        continue
                    if entry.is_symlink():
                        if not self.follow_symlinks or not self._inside(entry.path):
                            continue
                        st = os.stat(entry.path)
                    else:
                        st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode) or not self._wanted(rel):
                    continue
                if len(found) >= self.max_files:
                    truncated = True
                    continue
                found[self.uri_of(rel)] = _Seen(
                    Path(entry.path), rel, st.st_size, st.st_mtime_ns, mime_of(entry.path, self.follow_symlinks)
                )
            stack.extend(reversed(folders))  # (a folder's own files first, then its folders in name order)
            if truncated and scanned > MAX_SCANNED:
                break
        if truncated and not self.truncated:
            logger.warning(
                "add_directory(%s): more than %d files (or %d entries looked at); the rest are not listed "
                "(raise max_files, or narrow include=)",
                self.root,
                self.max_files,
                MAX_SCANNED,
            )
        self.truncated = truncated
        return dict(sorted(found.items(), key=lambda kv: kv[1].rel))

    def _inside(self, path: str) -> bool:
        real = os.path.realpath(path)
        return real.startswith(self._real_root + os.sep)

    def _resource(self, uri: str, seen: _Seen, options: JSONDict) -> FileResource:
        return FileResource(
            uri,
            seen.path,
            name=seen.rel,
            mime_type=seen.mime,
            size=seen.size,
            max_file_size=self.max_file_size,
            root=self._real_root,
            follow_symlinks=self.follow_symlinks,
            **options,
        )

    def apply(self, found: dict[str, _Seen]) -> DirectoryChanges:
        """Serve what :meth:`scan` found instead of what was served (the app's own registry: no I/O)."""
        changes = DirectoryChanges()
        registry: dict[str, Resource] = self.app._resources
        options = dict(self.options)  # (what builds each file: the options less the labels)
        labels = pop_labels(options)
        for uri in [u for u in self._seen if u not in found]:
            if isinstance(registry.get(uri), FileResource):
                self.app.remove_resource(uri)
            changes.removed.append(uri)
        served: dict[str, _Seen] = {}
        for uri, seen in found.items():
            old = self._seen.get(uri)
            if old is None:
                if uri in registry or uri in self.app._templates:
                    logger.warning("add_directory(%s): %s is already a resource of the app; not listed", self.root, uri)
                    continue
                changes.added.append(uri)
            served[uri] = seen
            if old is not None and (old.size, old.mtime_ns, old.mime) == (seen.size, seen.mtime_ns, seen.mime):
                continue
            if old is not None:
                changes.changed.append(uri)
            _serve(self.app, self._resource(uri, seen, options), old is not None, labels)
        self._seen = served
        return changes

    async def refresh(self) -> DirectoryChanges:
        """Scan the folder again (in a worker thread) and serve what it holds now; subscribers of each changed file
        are told. Returns what changed."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            found = await asyncio.to_thread(self.scan)
            changes = self.apply(found)
            for uri in changes.changed:
                await self.app.notify_resource_updated(uri)
            return changes

    async def _poll(self) -> None:
        assert self.poll_s is not None
        while True:
            await asyncio.sleep(self.poll_s)
            try:
                await self.refresh()
            except Exception:  # (a scan that failed is tried again at the next poll, and said once each time)
                logger.exception("add_directory(%s): the scan failed", self.root)

    async def startup(self) -> None:
        """Start polling (the app's lifespan calls it when serving starts; nothing without ``poll_s``)."""
        if self.poll_s is not None and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._poll())

    async def shutdown(self) -> None:
        """Stop polling (the app's lifespan calls it when serving ends)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class Files:
    """``add_file`` and ``add_directory`` for :class:`~mcpkit.server.app.MCPKit` (see the module docs)."""

    if TYPE_CHECKING:
        _resources: dict[str, Resource]
        _templates: dict[str, ResourceTemplate]
        _lifespan: LifespanHolder
        _background: set[asyncio.Task[None]]

        def add_resource(self, uri: str, source: Any, **options: Any) -> Resource | ResourceTemplate: ...

    def add_file(
        self,
        path: str | os.PathLike[str],
        uri: str | None = None,
        *,
        mime_type: str | None = None,
        max_file_size: int = DEFAULT_MAX_FILE_SIZE,
        replace: bool = False,
        **options: Any,
    ) -> FileResource:
        """Serve the file at ``path`` as the resource ``uri`` (default: its ``file://`` URI), read at each
        ``resources/read``; ``mime_type`` by default from its name (or its first bytes). ``options``: those of
        :meth:`add_resource` (``name``, ``title``, ``description``, ``annotations``, ``icons``, ``meta``,
        ``ttl_ms``, ``cache_scope``, ``tags``, ``scopes``, ``enabled``). A path that is no regular file now is a
        ``ValueError``; one that goes away later reads as "resource not found"."""
        p = Path(path).resolve()
        if not p.is_file():
            raise ValueError(f"add_file: {str(path)!r} is not a file")
        labels = pop_labels(options)
        item = FileResource(
            uri or p.as_uri(),
            p,
            mime_type=mime_type or mime_of(p),
            size=p.stat().st_size,
            max_file_size=max_file_size,
            **options,
        )
        _serve(self, item, replace, labels)
        return item

    def add_directory(
        self,
        root: str | os.PathLike[str],
        *,
        uri_prefix: str | None = None,
        include: Iterable[str] = ("*",),
        exclude: Iterable[str] = (),
        hidden: bool = False,
        follow_symlinks: bool = False,
        max_files: int = DEFAULT_MAX_FILES,
        max_file_size: int = DEFAULT_MAX_FILE_SIZE,
        poll_s: float | None = None,
        **options: Any,
    ) -> Directory:
        """Serve the files under the folder ``root`` as resources, one per file, scanned now (see
        :class:`Directory` and the module docs).

        ``uri_prefix``: what comes before each file's path (percent-encoded) in its URI, by default the folder's
        ``file://`` URI. ``include`` / ``exclude``: ``fnmatch`` patterns matched against the ``/``-separated path
        under the folder (``*`` matches ``/`` too: ``*.md`` is every Markdown file at any depth). Files and folders
        whose names start with a dot are left out unless ``hidden=True``; symlinks unless ``follow_symlinks=True``
        (and then only to files inside the folder). ``poll_s``: scan again every so many seconds while the app is
        served (else call :meth:`Directory.refresh`). ``options``: as for :meth:`add_file`, given to every file."""
        d = Directory(
            self,
            root,
            uri_prefix=uri_prefix,
            include=include,
            exclude=exclude,
            hidden=hidden,
            follow_symlinks=follow_symlinks,
            max_files=max_files,
            max_file_size=max_file_size,
            poll_s=poll_s,
            options=options,
        )
        d.apply(d.scan())
        if poll_s is not None:
            self._lifespan.add_child(d)
            with contextlib.suppress(RuntimeError):  # (an app served now: the poll starts at once)
                task = asyncio.get_running_loop().create_task(self._lifespan.enter_child(d))
                self._background.add(task)
                task.add_done_callback(self._background.discard)
        return d


__all__ = ["DEFAULT_MAX_FILES", "DEFAULT_MAX_FILE_SIZE", "Directory", "DirectoryChanges", "FileResource", "Files"]
