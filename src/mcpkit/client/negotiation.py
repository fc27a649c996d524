"""How a :class:`~mcpkit.client.lowlevel.ClientSession` settles the era and the protocol version: the 2026-07-28
``server/discover`` probe (modes ``auto`` and ``modern``), else the ``initialize`` handshake; in ``auto`` mode a probe
unanswered for ``discover_timeout`` does not end the probe: a server slow to start may answer it late and refuse the
``initialize`` sent meanwhile, and then its late answer decides."""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from ..protocol import versions
from ..protocol.errors import MODERN_ERROR_CODES, UNSUPPORTED_PROTOCOL_VERSION, MCPError, RequestTimeout
from ..protocol.jsonrpc import JSONDict
from .results import ModernEraRefused, refuses_the_modern_era

logger: logging.Logger = logging.getLogger("mcpkit.client")


class ClientSession(Protocol):
    """What negotiating asks of a :class:`~mcpkit.client.lowlevel.ClientSession` (typed here by this protocol, so
    this module does not import ``lowlevel`` back)."""

    @property
    def mode(self) -> str: ...

    @property
    def pinned_version(self) -> str | None: ...

    @property
    def discover_timeout(self) -> float: ...

    async def _discover(self, version: str, timeout: float | None) -> JSONDict: ...

    async def _use_modern(self, result: JSONDict, version: str) -> None: ...

    async def _initialize(self) -> None: ...


class _ProbeLate(Exception):
    """The auto mode's ``server/discover`` probe went unanswered for ``discover_timeout`` (still pending)."""

    def __init__(self, probe: asyncio.Future[JSONDict]) -> None:
        super().__init__("server/discover unanswered")
        self.probe = probe


async def negotiate(session: ClientSession) -> None:
    """Settle ``session``'s era and protocol version (see the module's docs); raises what the server's refusal
    or the transport raised."""
    probe: asyncio.Future[JSONDict] | None = None
    try:
        if await _negotiate_modern(session):
            return
    except _ProbeLate as late:
        probe = late.probe
    if probe is None:
        await session._initialize()
        return
    # The probe went unanswered for discover_timeout: the server may only be slow to start (uvx/npx fetching a
    # package, a loaded machine) and answer it late, then refuse the initialize sent meanwhile. Either answer
    # decides: the handshake when the server takes it, else the probe's late answer.
    try:
        await session._initialize()
    except MCPError:
        result = await _late_answer(session, probe)
        version = session.pinned_version or versions.LATEST
        if result is None or version not in (result.get("supportedVersions") or ()):
            raise
        logger.debug("server/discover answered after %ss, initialize refused: 2026-07-28", session.discover_timeout)
        await session._use_modern(result, version)
    finally:
        if not probe.done():
            probe.cancel()
        elif not probe.cancelled():
            probe.exception()  # (retrieved: a late error answer is not an error to log)


async def _late_answer(session: ClientSession, probe: asyncio.Future[JSONDict]) -> JSONDict | None:
    """The late probe's answer (waiting for it up to ``discover_timeout`` more), None when it brings none."""
    if not probe.done():
        await asyncio.wait({probe}, timeout=session.discover_timeout)
    if not probe.done() or probe.cancelled() or probe.exception() is not None:
        return None
    result = probe.result()
    return result if isinstance(result, dict) else None


async def _negotiate_modern(session: ClientSession) -> bool:
    """Try the 2026-07-28 era (auto, modern modes): True when it is in use. Raises :class:`_ProbeLate` when the
    auto mode's probe went unanswered for ``discover_timeout`` (still pending: see :func:`negotiate`)."""
    if session.mode in ("auto", "modern"):
        version = session.pinned_version or versions.LATEST
        try:
            if session.mode == "auto":
                probe = asyncio.ensure_future(session._discover(version, timeout=None))
                try:
                    await asyncio.wait({probe}, timeout=session.discover_timeout)
                except BaseException:
                    probe.cancel()
                    raise
                if not probe.done():
                    raise _ProbeLate(probe)
                result = probe.result()
            else:
                result = await session._discover(version, timeout=None)
        except MCPError as exc:
            if exc.code == UNSUPPORTED_PROTOCOL_VERSION and isinstance(exc.data, dict):
                supported = exc.data.get("supported") or []
                mine = versions.latest_of(v for v in supported if v in versions.MODERN_VERSIONS)
                if mine is not None:
                    await session._use_modern(await session._discover(mine, timeout=None), mine)
                    return True
            if session.mode == "modern" and refuses_the_modern_era(exc):
                raise ModernEraRefused(exc, pinned=session.pinned_version is not None) from exc
            if session.mode == "modern" or exc.code in MODERN_ERROR_CODES:
                raise
        except RequestTimeout:
            if session.mode == "modern":
                raise
        else:
            if isinstance(result.get("supportedVersions"), list) and version in result["supportedVersions"]:
                await session._use_modern(result, version)
                return True
            if session.mode == "modern":
                raise MCPError(f"server does not support {version}: {result.get('supportedVersions')}")
    return False
