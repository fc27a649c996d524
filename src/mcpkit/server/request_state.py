"""Integrity-protected ``requestState`` for multi round-trip requests (2026-07-28).

The state passes through the client, so it is attacker-controlled input: it is sealed with HMAC-SHA256, carries
an expiry and a digest of the originating request, and anything that fails verification is rejected with -32602.
Several keys may be configured (the first signs, all verify) so a fleet of workers can share and rotate them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import time
from collections.abc import Sequence
from typing import Any

import orjson

from ..hosting import MAX_KEYS as MAX_KEYS
from ..hosting import MIN_KEY_BYTES as MIN_KEY_BYTES
from ..hosting import check_key_ring
from ..protocol.errors import InvalidParams

_PREFIX = "v1."


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def request_digest(method: str, params: dict[str, Any] | None) -> str:
    """A digest of the salient parameters of a request: the state is only valid for the same request."""
    p = params or {}
    if method == "resources/read":
        salient: Any = p.get("uri")
    else:
        salient = [p.get("name"), p.get("arguments")]
    raw = orjson.dumps([method, salient], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(raw).hexdigest()[:32]


# MAX_KEYS (hosting): keys a ring holds at most (a forged state costs one HMAC per key)


def _checked(keys: Sequence[bytes]) -> list[bytes]:
    return check_key_ring(keys, source="requestState keys")


class RequestStateSealer:
    """Seal and open ``requestState`` strings.

    Args:
        keys: the key ring: secret keys (bytes, at least :data:`MIN_KEY_BYTES` = 32 each, at most
            :data:`MAX_KEYS`). The first signs; all verify, so a new key is rolled out first as a verifying one, then
            moved first, and the old one dropped once what it sealed has expired (``ttl``). Default: a random key per
            process, fine for one worker; every worker serving one endpoint needs the same ring (:meth:`adopt`, or
            ``MCPKIT_STATE_KEYS``).
        ttl: seconds a sealed state stays valid.
        max_size: largest accepted state string (bounds the work an attacker can cause).
    """

    def __init__(self, keys: list[bytes] | None = None, *, ttl: float = 600.0, max_size: int = 256 * 1024) -> None:
        self.keys: list[bytes] = _checked(keys) if keys else [os.urandom(32)]
        self.generated: bool = not keys  # a random key of this process: shared keys may replace it (adopt)
        self.ttl = ttl
        self.max_size = max_size

    def adopt(self, keys: Sequence[bytes]) -> bool:
        """Use the shared key ring ``keys`` unless this sealer was given keys of its own; True when taken. (List
        cursors of an ``MCPKit`` app derive their keys from the same ring.)"""
        if not self.generated:
            return False
        self.keys = _checked(keys)
        self.generated = False
        return True

    def seal(self, payload: dict[str, Any]) -> str:
        """The sealed state of ``payload``; raises :class:`InvalidParams` (-32602) when it would be longer than
        ``max_size``: :meth:`open` would refuse it, and the client's retry would fail as if it had tampered."""
        body = _b64(orjson.dumps({**payload, "exp": int(time.time() + self.ttl)}))
        mac = hmac.new(self.keys[0], body.encode("ascii"), hashlib.sha256).digest()
        token = f"{_PREFIX}{body}.{_b64(mac)}"
        if len(token) > self.max_size:
            raise InvalidParams(
                f"the answers to this request's input rounds are too large to carry in requestState ({len(token)}"
                f" characters sealed, at most {self.max_size}: the server's request_state.max_size)"
            )
        return token

    def open(self, token: object) -> dict[str, Any]:
        """Verify and decode a state; raises :class:`InvalidParams` (-32602) if it is not one we sealed."""
        if not isinstance(token, str) or not token.startswith(_PREFIX) or len(token) > self.max_size:
            raise InvalidParams("invalid requestState")
        try:
            body, mac_text = token[len(_PREFIX) :].rsplit(".", 1)
            mac = _unb64(mac_text)
        except (ValueError, TypeError):
            raise InvalidParams("invalid requestState") from None
        if not any(
            hmac.compare_digest(mac, hmac.new(k, body.encode("ascii"), hashlib.sha256).digest()) for k in self.keys
        ):
            raise InvalidParams("invalid requestState: integrity check failed")
        try:
            payload = orjson.loads(_unb64(body))
        except (ValueError, orjson.JSONDecodeError):
            raise InvalidParams("invalid requestState") from None
        if not isinstance(payload, dict) or not isinstance(payload.get("exp"), int):
            raise InvalidParams("invalid requestState")
        if payload["exp"] < time.time():
            raise InvalidParams("requestState has expired; send the request again without it")
        return payload
