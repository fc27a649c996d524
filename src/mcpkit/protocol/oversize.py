"""The request id of a message too large to be read, found while its bytes stream past.

A transport that refuses an over-long message answers it with -32600. JSON-RPC wants that answer to carry the
request's id when it can be detected, and a client waits for the answer to *its* id (the TypeScript SDK then waits
out its request timeout). The message is never kept: a :class:`RequestIdScanner` is fed its bytes as they arrive and
follows only the structure of the JSON text (the nesting depth, where strings begin and end, the top-level keys), in
bounded memory whatever the message's length, so the ``"id"`` member of the top-level object is found wherever it is.
Strings, numbers and anything nested at depth two or more are skipped by regular expressions and byte counts that
run in C; Python code runs per top-level member and per chunk, not per byte.

An id is taken only when it is certain: the message opens a JSON object; its top-level members include ``"method"``
and neither ``"result"`` nor ``"error"`` (a request: a response's id is never answered); its top-level ``"id"`` is an
integer (at most :data:`MAX_ID_BYTES` digits) or a string of at most :data:`MAX_ID_CHARS` characters. An ``"id"``
inside a string value or a nested object never counts. Anything else (a notification, bytes that are not a JSON
object, an id of another type) gives None, and the answer carries ``id: null``.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate, count
from operator import sub

#: Longest string id recovered (a longer one is not kept: the answer then has ``id: null``).
MAX_ID_CHARS = 128
#: Longest id text kept while scanning (a string id of MAX_ID_CHARS characters of 4 bytes, with its quotes).
MAX_ID_BYTES = MAX_ID_CHARS * 4 + 2
_MAX_KEY_BYTES = 64  # a longer top-level key is none of those looked for

_STRING_REST = re.compile(rb'(?:[^"\\]++|\\.)*+', re.S)  # a string's body up to its closing quote (or the chunk end)
_NESTED = re.compile(rb'(?:[^"\\]++|"(?:[^"\\]++|\\.)*+")*+', re.S)  # up to a string the chunk cuts (or a stray \)
_STRINGS = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.S)
_NEXT_BRACKET = re.compile(rb'(?:[^"\\{}\[\]]++|"(?:[^"\\]++|\\.)*+")*+', re.S)
_SPACE = re.compile(rb"[ \t\r\n]*+")
# top-level members none of whose keys is looked for (a key without escapes, a value that is a number, a literal, a
# string or a container with no other inside), each with its comma: skipped together, in C
_OTHER_MEMBERS = re.compile(
    rb'(?:[ \t\r\n]*+"(?!(?:id|method|result|error)")[^"\\]*+"[ \t\r\n]*+:[ \t\r\n]*+'
    rb'(?:"(?:[^"\\]++|\\.)*+"|[-+.0-9A-Za-z]++|[\[{](?:[^"\\{}\[\]]++|"(?:[^"\\]++|\\.)*+")*+[\]}])'
    rb"[ \t\r\n]*+,)*+",
    re.S,
)
_SCALAR = re.compile(rb"[^ \t\r\n,:{}\[\]\"]*+")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"{}[]")
_STEPS = bytes.maketrans(b"{[}]", b"\x02\x02\x00\x00")  # an opening bracket 2, a closing one 0 (+1 -1, offset by 1)


def _balance(brackets: bytes) -> tuple[int, int]:
    """(how far the depth falls below its start, how far it ends above that low) along ``brackets``: the pairs
    that close each other are removed a level per pass (a few passes for usual data); beyond a few levels, a walk
    of the prefix sums, in C either way."""
    for _ in range(8):
        shorter = brackets.replace(b"{}", b"").replace(b"[]", b"")
        if len(shorter) == len(brackets):
            rest = shorter.lstrip(b"}]")
            if b"}" not in rest and b"]" not in rest:
                return len(shorter) - len(rest), len(rest)
            break  # (brackets that do not match: not JSON; the walk below still follows the depth)
        brackets = shorter
    lowest = min(0, *map(sub, accumulate(brackets.translate(_STEPS)), count(1)))
    return -lowest, 2 * (brackets.count(b"{") + brackets.count(b"[")) - len(brackets) - lowest


# states at depth 0 and 1 (at depth 2 and more only the nesting is followed)
_START, _KEY, _KEY_OR_END, _COLON, _VALUE, _SCALAR_VALUE, _AFTER, _DONE = range(8)
_LOOKED_FOR = ("id", "method", "result", "error")


class RequestIdScanner:
    """Feed it the bytes of one message, in any chunks (:meth:`feed`), then ask :meth:`request_id`. Keeps a few
    hundred bytes at most, whatever it is fed."""

    __slots__ = ("_capture", "_depth", "_escape", "_id", "_in_string", "_key", "_keys", "_state", "_taking")

    def __init__(self) -> None:
        self._state = _START
        self._depth = 0
        self._in_string = False
        self._escape = False  # inside a string, the chunk ended just after a backslash
        self._capture: bytearray | None = None  # the key or id text being read (None: not kept)
        self._taking = ""  # what the capture is: "key", "id" or ""
        self._key: str | None = None  # the top-level key whose value comes next
        self._keys: set[str] = set()  # the keys of _LOOKED_FOR seen at the top level
        self._id: bytes | None = None  # the text of the top-level id's value (b"" when it cannot be an id)

    def request_id(self) -> int | str | None:
        """The id of the request fed so far, when it is certain (see the module's docstring); None otherwise."""
        keys = self._keys
        if self._id is None or "method" not in keys or "result" in keys or "error" in keys:
            return None
        try:
            value = json.loads(self._id)
        except ValueError:  # (cut, not UTF-8, an integer of thousands of digits)
            return None
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, str) and len(value) <= MAX_ID_CHARS:
            return value
        return None

    def feed(self, data: bytes) -> None:
        """Follow ``data``, the next bytes of the message."""
        i, n = 0, len(data)
        while i < n and self._state != _DONE:
            if self._in_string:
                i = self._string(data, i, n)
            elif self._depth >= 2:
                i = self._nested(data, i, n)
            else:
                i = self._top(data, i, n)

    # ------------------------------------------------------------------ strings

    def _string(self, data: bytes, i: int, n: int) -> int:
        if self._escape:  # the byte the backslash escapes
            self._escape = False
            self._keep(data, i, i + 1)
            return i + 1
        e = data.find(b'"', i)
        if e == -1:
            e = n
        if data.find(b"\\", i, e) != -1:  # escapes: the closing quote is the first not escaped
            e = _STRING_REST.match(data, i).end()  # type: ignore[union-attr]
        if e == n:
            self._keep(data, i, e)
            return n
        if data[e] == 0x5C:  # a backslash that ends the chunk
            self._keep(data, i, e + 1)
            self._escape = True
            return n
        self._keep(data, i, e + 1)  # (with the closing quote)
        self._in_string = False
        if self._depth < 2:
            self._string_closed()
        return e + 1

    def _keep(self, data: bytes, i: int, e: int) -> None:
        cap = self._capture
        if cap is None:
            return
        if len(cap) + e - i > (MAX_ID_BYTES if self._taking == "id" else _MAX_KEY_BYTES):
            self._capture = None  # too long to be what is looked for
            if self._taking == "id":
                self._id = b""
            return
        cap += data[i:e]

    def _string_closed(self) -> None:
        cap, taking = self._capture, self._taking
        self._capture, self._taking = None, ""
        if self._state == _KEY:
            key = None
            if cap is not None:
                try:
                    key = json.loads(bytes(cap))
                except ValueError:
                    key = None
            self._key = key if key in _LOOKED_FOR else None
            if self._key is not None:
                self._keys.add(self._key)
            self._state = _COLON
        else:  # a string value at the top level
            if taking == "id" and cap is not None:
                self._id = bytes(cap)
            self._state = _AFTER

    # ------------------------------------------------------------------ depth 2 and more

    def _nested(self, data: bytes, i: int, n: int) -> int:
        """Skip what is nested: whole stretches of the chunk when their brackets cannot close the top-level
        member's value (counted in C), bracket by bracket only on the stretch where it ends."""
        if data.find(b"\\", i) == -1:  # no escapes: strings are between pairs of quotes
            e = n if data.count(b'"', i) % 2 == 0 else data.rfind(b'"', i)
            outside = b"".join(data[i:e].split(b'"')[::2])
        else:
            e = _NESTED.match(data, i).end()  # type: ignore[union-attr]
            outside = _STRINGS.sub(b"", data[i:e])
        brackets = outside.translate(None, _NOT_BRACKETS)
        if brackets:
            drop, rise = _balance(brackets)
            if self._depth - drop > 1:  # never back at the top level in this stretch
                self._depth += rise - drop
            else:
                return self._nested_slowly(data, i, e)
        if e == n:
            return n
        if data[e] == 0x22:  # a string the chunk cuts
            self._in_string = True
            return e + 1
        self._state = _DONE  # a backslash outside a string: not JSON
        return n

    def _nested_slowly(self, data: bytes, i: int, e: int) -> int:
        while True:
            i = _NEXT_BRACKET.match(data, i, e).end()  # type: ignore[union-attr]
            if i >= e:
                return e
            c = data[i]
            i += 1
            if c == 0x7B or c == 0x5B:
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth == 1:
                    self._state = _AFTER
                    return i

    # ------------------------------------------------------------------ depth 0 and 1

    def _top(self, data: bytes, i: int, n: int) -> int:
        state = self._state
        if state == _SCALAR_VALUE:  # a number (or true, false, null) the previous chunk cut
            return self._scalar(data, i, n)
        i = _SPACE.match(data, i).end()  # type: ignore[union-attr]
        if i == n:
            return n
        c = data[i]
        if state == _START:
            if c != 0x7B:
                self._state = _DONE  # not a JSON object
                return n
            self._depth, self._state = 1, _KEY_OR_END
        elif state in (_KEY, _KEY_OR_END):
            e = _OTHER_MEMBERS.match(data, i).end()  # type: ignore[union-attr]
            if e > i:
                self._state = _KEY
                return e
            if c == 0x22:
                self._in_string, self._state = True, _KEY
                self._capture, self._taking = bytearray(b'"'), "key"
            elif c == 0x7D and state == _KEY_OR_END:
                self._depth, self._state = 0, _DONE
            else:
                self._state = _DONE
        elif state == _COLON:
            self._state = _VALUE if c == 0x3A else _DONE
        elif state == _VALUE:
            taking = self._key == "id"
            if c == 0x22:
                self._in_string = True  # (in state _VALUE: _string_closed moves on to _AFTER)
                if taking:
                    self._capture, self._taking = bytearray(b'"'), "id"
            elif c == 0x7B or c == 0x5B:
                self._depth = 2
                if taking:
                    self._id = b""  # an object or an array: not an id
            else:
                self._state = _SCALAR_VALUE
                if taking:
                    self._capture, self._taking = bytearray(), "id"
                return self._scalar(data, i, n)
        else:  # _AFTER
            if c == 0x2C:
                self._state = _KEY
            elif c == 0x7D:
                self._depth, self._state = 0, _DONE
            else:
                self._state = _DONE
        return i + 1

    def _scalar(self, data: bytes, i: int, n: int) -> int:
        e = _SCALAR.match(data, i).end()  # type: ignore[union-attr]
        self._keep(data, i, e)
        if e == n:
            return n
        if self._taking == "id":
            self._id = bytes(self._capture) if self._capture is not None else b""
        self._capture, self._taking = None, ""
        self._state = _AFTER
        return e
