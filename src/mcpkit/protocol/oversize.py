"""The request id of a message too large to be read, recovered from its first and last bytes.

A transport that refuses an over-long message answers it with -32600. JSON-RPC wants that answer to carry the
request's id when it can be detected, and a client waits for the answer to *its* id (the TypeScript SDK then waits
out its request timeout). The message itself is never parsed; only a few hundred bytes of its start (``head``) and
end (``tail``) are kept, and an id is taken from them only when it is certain:

- the head must open a JSON object whose first complete top-level members include ``"method"`` and neither
  ``"result"`` nor ``"error"`` (a request: a response's id is never answered);
- the id is a top-level ``"id"`` member among those first complete members (mcpkit and the Python SDK write it
  first), or else the last member of the object, read from the tail (the TypeScript SDK writes it last): in valid
  JSON the last ``}`` closes the top-level object, so a ``"id": <value>`` just before it is a top-level member;
- the id is an integer (at most 16 digits) or a string of at most :data:`MAX_ID_CHARS` characters without escapes.

Anything else (an id in the middle of a long message, a notification, bytes that are not JSON) gives None, and the
answer carries ``id: null`` as before.
"""

from __future__ import annotations

import json
import re

#: Bytes of the start and of the end of an over-long message that a transport keeps to look for its id.
KEEP_BYTES = 512
#: Longest string id recovered (a longer one is not looked for: the answer then has ``id: null``).
MAX_ID_CHARS = 128

_WS = " \t\r\n"
_DECODER = json.JSONDecoder()
_TAIL_ID = re.compile(
    rb'[,{][ \t\r\n]*"id"[ \t\r\n]*:[ \t\r\n]*(-?(?:0|[1-9][0-9]{0,15})|"[^"\\\x00-\x1f]{0,%d}")[ \t\r\n]*}[ \t\r\n]*\Z'
    % (MAX_ID_CHARS * 4)  # (bytes: a character is up to 4 of them; the length in characters is checked after)
)


def recover_request_id(head: bytes, tail: bytes) -> int | str | None:
    """The id of the request whose message starts with ``head`` and ends with ``tail``, when it can be told for
    certain from them (see the module's docstring); None otherwise."""
    members = _leading_members(head.decode("utf-8", "replace"))
    if members is None or "method" not in members or "result" in members or "error" in members:
        return None
    if "id" in members:
        return _usable(members["id"])
    m = _TAIL_ID.search(tail)
    if m is None:
        return None
    try:
        return _usable(json.loads(m.group(1)))
    except ValueError:  # (not UTF-8)
        return None


def _usable(value: object) -> int | str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if -(10**16) < value < 10**16 else None
    if isinstance(value, str):
        return value if len(value) <= MAX_ID_CHARS else None
    return None


def _leading_members(text: str) -> dict[str, object] | None:
    """The top-level members of the object that ``text`` begins, as far as they are complete in it (a member counts
    once the ``,`` or ``}`` after its value is seen, so a number cut by the end of ``text`` is never taken); None
    when ``text`` does not begin an object."""
    n = len(text)
    i = _skip(text, 0)
    if i >= n or text[i] != "{":
        return None
    members: dict[str, object] = {}
    i += 1
    while True:
        i = _skip(text, i)
        if i >= n or text[i] != '"':
            return members
        try:
            key, i = _DECODER.raw_decode(text, i)
        except ValueError:  # the key is cut (or invalid)
            return members
        i = _skip(text, i)
        if i >= n or text[i] != ":":
            return members
        try:
            value, i = _DECODER.raw_decode(text, _skip(text, i + 1))
        except ValueError:  # the value is cut by the end of the head (a long "params")
            return members
        i = _skip(text, i)
        if i >= n or text[i] not in ",}":
            return members
        members[str(key)] = value
        if text[i] == "}":
            return members
        i += 1


def _skip(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i] in _WS:
        i += 1
    return i
