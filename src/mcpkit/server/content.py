"""Content: the blocks tools and prompts return, and the conversion of Python values into them.

A leaf of ``mcpkit.server``: it imports nothing of the server package (only ``mcpkit.protocol``), so tools,
prompts, resources, completions, context and schema all take their content helpers from here without importing
each other.

Return values (see :func:`to_content`): ``str`` → text; ``bytes`` → an image/audio block when the bytes say so,
else an embedded blob; :class:`Image`/:class:`Audio` helpers; MCP content models or dicts; resource contents
(embedded); :class:`File` (a file's bytes or text, embedded); :class:`ResourceLink`; a list of any of these;
anything else → its JSON as text.
"""

from __future__ import annotations

import base64
import mimetypes
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson

from ..protocol.jsonrpc import dumps_wide
from ..protocol.versions import Features

if TYPE_CHECKING:
    from types import ModuleType

    from ..protocol import types as t

JSONDict = dict[str, Any]

_CONTENT_TYPES = frozenset(("text", "image", "audio", "resource", "resource_link"))
DEFAULT_FILE_BYTES = 2 * 1024 * 1024


# pydantic and the protocol models are imported only when needed, so a stdio server answers initialize before
# they load: a value can only be a pydantic model (or an MCP model) once pydantic (or mcpkit.protocol.types) is
# imported, which is what these helpers check.


def is_model(value: Any) -> bool:
    """Whether ``value`` is a pydantic model instance (without importing pydantic)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(value, pydantic.BaseModel)


def dump_model(value: Any) -> Any:
    """Wire form of a model (camelCase, no None fields); anything else unchanged."""
    if is_model(value):
        return value.model_dump(by_alias=True, exclude_none=True, mode="json")
    return value


def loaded_types() -> ModuleType | None:
    """``mcpkit.protocol.types`` if something imported it (else no value can be one of its models)."""
    return sys.modules.get("mcpkit.protocol.types")


def _content_models() -> tuple[type, ...]:
    t = loaded_types()
    if t is None:
        return ()
    return (t.TextContent, t.ImageContent, t.AudioContent, t.EmbeddedResource, t.ResourceLink)


def resource_contents_models() -> tuple[type, ...]:
    """The pydantic resource contents models (text, blob), or () while the protocol types are not loaded."""
    t = loaded_types()
    return () if t is None else (t.TextResourceContents, t.BlobResourceContents)


class _Media:
    kind = "image"
    default_mime = "image/png"

    def __init__(
        self,
        data: bytes | None = None,
        *,
        path: str | Path | None = None,
        mime_type: str | None = None,
        annotations: JSONDict | t.Annotations | None = None,
    ) -> None:
        if (data is None) == (path is None):
            raise ValueError(f"{type(self).__name__}: give exactly one of data= or path=")
        if path is not None:
            p = Path(path)
            data = p.read_bytes()
            mime_type = mime_type or mimetypes.guess_type(p.name)[0]
        assert data is not None
        self.data: bytes = bytes(data)
        self.mime_type: str = mime_type or sniff_mime(self.data) or self.default_mime
        self.annotations = annotations

    def to_content(self) -> JSONDict:
        block: JSONDict = {
            "type": self.kind,
            "data": base64.b64encode(self.data).decode("ascii"),
            "mimeType": self.mime_type,
        }
        if self.annotations is not None:
            block["annotations"] = dump_model(self.annotations)
        return block


class Image(_Media):
    """An image to return from a tool or a prompt: ``Image(png_bytes)`` or ``Image(path="chart.png")``."""


class Audio(_Media):
    """Audio to return from a tool or a prompt: ``Audio(wav_bytes)`` or ``Audio(path="clip.wav")``."""

    kind = "audio"
    default_mime = "audio/wav"


class File:
    """A file to return from a tool or a prompt, embedded as a resource: ``File(path="report.pdf")`` or
    ``File(data, name="notes.md")``. Text (a text MIME type whose bytes are UTF-8) is sent as ``text``, anything
    else as a base64 ``blob``. ``mime_type``: by default from the name, else from the bytes (``sniff_mime``), else
    ``application/octet-stream``. ``uri``: by default ``file:///<name>`` (the name only: the server's own path is
    not told). A ``path`` is read at once, at most ``max_bytes`` (2 MiB by default, so the base64 of a binary file
    fits a client's default 4 MiB message; a larger file is a ``ValueError`` naming its size)."""

    def __init__(
        self,
        data: bytes | str | None = None,
        *,
        path: str | Path | None = None,
        name: str | None = None,
        mime_type: str | None = None,
        uri: str | None = None,
        annotations: JSONDict | t.Annotations | None = None,
        max_bytes: int = DEFAULT_FILE_BYTES,
    ) -> None:
        if (data is None) == (path is None):
            raise ValueError("File: give exactly one of data= or path=")
        if path is not None:
            p = Path(path)
            with p.open("rb") as f:
                raw = f.read(max_bytes + 1)
            if len(raw) > max_bytes:
                raise ValueError(f"File: {p.name} has more than {max_bytes} bytes (max_bytes={max_bytes})")
            name = name or p.name
        else:
            assert data is not None
            raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
            if mime_type is None and isinstance(data, str) and (name is None or mime_by_name(name) is None):
                mime_type = "text/plain"
        self.data: bytes = raw
        self.name: str | None = name
        self.mime_type: str = (
            mime_type or (mime_by_name(name) if name else None) or sniff_mime(raw) or "application/octet-stream"
        )
        self.uri: str = uri or ("file:///" + quote(name) if name else "mcpkit://file")
        self.annotations = annotations

    def to_content(self) -> JSONDict:
        """The ``resource`` content block (an embedded resource)."""
        resource: JSONDict = {"uri": self.uri, "mimeType": self.mime_type}
        text = None
        if is_text_type(self.mime_type):
            try:
                text = self.data.decode("utf-8")
            except UnicodeDecodeError:
                text = None
        if text is not None:
            resource["text"] = text
        else:
            resource["blob"] = base64.b64encode(self.data).decode("ascii")
        block: JSONDict = {"type": "resource", "resource": resource}
        if self.annotations is not None:
            block["annotations"] = dump_model(self.annotations)
        return block


# MIME types outside text/* whose content is text (sent as text, not base64)
_TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/x-sh",
        "application/sql",
        "application/graphql",
        "image/svg+xml",
    }
)
# names the mimetypes module of some platforms does not know
_EXTRA_TYPES = {
    ".md": "text/markdown",
    ".toml": "application/toml",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
}


def is_text_type(mime: str) -> bool:
    """Whether content of this MIME type is text (sent as ``text``, not a base64 ``blob``)."""
    return mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml"))


def mime_by_name(name: str) -> str | None:
    """The MIME type a file name implies (None when it says nothing)."""
    dot = name.rfind(".")
    extra = _EXTRA_TYPES.get(name[dot:].lower()) if dot >= 0 else None
    return extra or mimetypes.guess_type(name, strict=False)[0]


def sniff_mime(data: bytes) -> str | None:
    """The MIME type of common image/audio formats from their magic bytes."""
    head = data[:16]
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "audio/wav"
    if head.startswith(b"ID3") or head[:2] in (b"\xff\xfb", b"\xff\xf3"):
        return "audio/mpeg"
    if head.startswith(b"OggS"):
        return "audio/ogg"
    if head.startswith(b"fLaC"):
        return "audio/flac"
    return None


def json_text(value: Any) -> str:
    """``value`` (a model, or anything JSON can encode) as the JSON text of a text content block."""
    if is_model(value):
        return str(value.model_dump_json(by_alias=True, exclude_none=True))
    try:
        return orjson.dumps(value, default=_default).decode()
    except TypeError as exc:  # (an integer beyond 64 bits: written by the standard library instead)
        return dumps_wide(value, exc, _default).decode()


def _default(obj: Any) -> Any:
    if is_model(obj):
        return dump_model(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, bytes):
        return base64.b64encode(obj).decode("ascii")
    return str(obj)


def _is_content_like(value: Any) -> bool:
    if isinstance(value, (str, bytes, _Media, File, *_content_models(), *resource_contents_models())):
        return True
    return isinstance(value, dict) and value.get("type") in _CONTENT_TYPES


def is_content_value(value: Any) -> bool:
    """A content object (not a plain str/bytes), or a non-empty list that holds one: sent as content even when
    the return annotation is structured (``-> list[Any]`` returning images)."""
    if isinstance(value, (list, tuple)):
        return bool(value) and all(_is_content_like(v) for v in value) and any(is_content_value(v) for v in value)
    return _is_content_like(value) and not isinstance(value, (str, bytes))


def to_content(value: Any, *, blob_uri: str = "mcpkit://result") -> list[JSONDict]:
    """Convert a function's return value into a list of content blocks (wire form)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        mime = sniff_mime(data)
        if mime is not None:
            return [(Image if mime.startswith("image/") else Audio)(data, mime_type=mime).to_content()]
        return [
            {
                "type": "resource",
                "resource": {
                    "uri": blob_uri,
                    "mimeType": "application/octet-stream",
                    "blob": base64.b64encode(data).decode("ascii"),
                },
            }
        ]
    if isinstance(value, (_Media, File)):
        return [value.to_content()]
    if is_model(value):
        if isinstance(value, _content_models()):
            return [dump_model(value)]
        if isinstance(value, resource_contents_models()):
            return [{"type": "resource", "resource": dump_model(value)}]
    if isinstance(value, dict) and value.get("type") in _CONTENT_TYPES:
        return [value]
    if isinstance(value, (list, tuple)) and value and all(_is_content_like(v) for v in value):
        out: list[JSONDict] = []
        for v in value:
            out.extend(to_content(v, blob_uri=blob_uri))
        return out
    return [{"type": "text", "text": json_text(value)}]


def annotations_for(annotations: Any, feats: Features) -> Any:
    """``annotations`` as the revision ``feats`` defines them: without ``lastModified`` before 2025-06-18 (a copy;
    the object itself when nothing is taken out)."""
    if feats.annotations_last_modified or not isinstance(annotations, dict) or "lastModified" not in annotations:
        return annotations
    return {k: v for k, v in annotations.items() if k != "lastModified"}


def downgrade_content(blocks: list[JSONDict], feats: Features) -> list[JSONDict]:
    """Replace content a revision does not know (audio before 2025-03-26, resource links before 2025-06-18) and
    take out the annotation it does not define (``lastModified`` before 2025-06-18)."""
    if feats.audio and feats.resource_links and feats.annotations_last_modified:
        return blocks
    out: list[JSONDict] = []
    for b in blocks:
        kind = b.get("type")
        if kind == "audio" and not feats.audio:
            out.append(
                {"type": "text", "text": f"[audio content ({b.get('mimeType')}) not supported by {feats.version}]"}
            )
        elif kind == "resource_link" and not feats.resource_links:
            out.append({"type": "text", "text": f"Resource: {b.get('uri')} ({b.get('name')})"})
        else:
            annotations = b.get("annotations")
            shaped = annotations_for(annotations, feats)
            out.append(b if shaped is annotations else {**b, "annotations": shaped})
    return out


__all__ = [
    "DEFAULT_FILE_BYTES",
    "Audio",
    "File",
    "Image",
    "annotations_for",
    "is_text_type",
    "mime_by_name",
    "downgrade_content",
    "dump_model",
    "is_content_value",
    "is_model",
    "loaded_types",
    "sniff_mime",
    "to_content",
]
