"""The stateless era (2026-07-28): server/discover and per-request version checks."""

from __future__ import annotations

from typing import Any

from ...protocol.versions import (
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    V2026_07_28,
)
from ..jsonrpc_rules import names_itself
from ..wire import Incoming, Wire
from ..wire_http import HttpWire
from ._base import (
    JSON,
    UNKNOWN_VERSION,
    CheckerBase,
    error_code,
    error_of,
    result_of,
    shortened,
)


class ModernChecks(CheckerBase):
    """The stateless era (2026-07-28): server/discover and per-request version checks."""

    def check_discover(self, resp: Incoming | None, res: JSON) -> None:
        r = self.report
        problems = []
        if not isinstance(res.get("capabilities"), dict):
            problems.append("capabilities missing")
        meta = res.get("_meta")
        info = res.get("serverInfo") or (meta.get(META_SERVER_INFO) if isinstance(meta, dict) else None)
        if not names_itself(info):
            problems.append("no server info (name and version) in the result or its _meta")
        if problems:
            r.fail("M042", f"server/discover: {'; '.join(problems)}: {resp.short() if resp else ''}", "discover")
        else:
            r.ok("M042", f"server/discover: supportedVersions, capabilities and server info: {shortened(res, 160)}")
            r.ok("M047", f"capabilities declared in server/discover: {shortened(res.get('capabilities'), 160)}")

    def judge_echo_against_discover(self, versions: list[Any]) -> None:
        """M045 once more: a handshake revision ``server/discover`` lists as supported must be echoed when asked."""
        for requested, answered in self.answered_versions.items():
            if requested != answered and requested in versions:
                self.report.fail(
                    "M045",
                    f"server/discover lists {requested} as supported, but initialize asking for it got {answered}",
                    "version echo",
                )

    async def check_modern_version(self, wire: Wire) -> None:
        """M046 in the stateless era: an unsupported version is refused with -32022 naming the supported ones."""
        r = self.report
        resp = await self.call(wire, "server/discover", {"_meta": {META_PROTOCOL_VERSION: UNKNOWN_VERSION}})
        err = error_of(resp)
        data = err.get("data") if err else None
        supported = data.get("supported") if isinstance(data, dict) else None
        if err and err.get("code") == -32022 and isinstance(supported, list) and supported:
            r.ok("M046", f"{UNKNOWN_VERSION} refused with -32022, supported: {supported}", "version")
        else:
            r.fail(
                "M046",
                f"{UNKNOWN_VERSION} should be refused with -32022 and data.supported: "
                f"{resp.short() if resp else 'no response'}",
                "version",
            )
        resp = await self.call(wire, "server/discover", {})
        if result_of(resp) is not None:
            r.ok("M045", f"{V2026_07_28} requested and served", "version")

    async def check_modern_http(self, wire: Wire) -> None:
        """MX04 (an unknown method: 404 with -32601) and MX05 (headers that disagree with the body, or a missing
        one: 400 with -32020) on a stateless Streamable HTTP request."""
        if not isinstance(wire, HttpWire):
            return
        r = self.report
        body: JSON = {"jsonrpc": "2.0", "id": wire.new_id(), "method": "mcpkit-check/no-such-method"}
        body["params"] = wire.with_meta({})
        ex = await wire.post(body)
        codes = [error_code(m) for m in ex.messages]
        if ex.status == 404 and -32601 in codes:
            r.ok("MX04", "an unknown method -> 404 with -32601", "stateless HTTP")
        else:
            r.fail("MX04", f"an unknown method -> {ex.brief(120)} (must be 404 with -32601)", "stateless HTTP")
        for label, headers in (
            ("Mcp-Method: prompts/list on a tools/list body", {"Mcp-Method": "prompts/list"}),
            ("no Mcp-Method header", {"Mcp-Method": ""}),
        ):
            body = {"jsonrpc": "2.0", "id": wire.new_id(), "method": "tools/list", "params": wire.with_meta({})}
            ex = await wire.post(body, headers=headers)
            codes = [error_code(m) for m in ex.messages]
            if ex.status == 400 and -32020 in codes:
                r.ok("MX05", f"{label} -> 400 with -32020", "stateless HTTP")
            else:
                r.fail("MX05", f"{label} -> {ex.brief(120)} (must be 400 with HeaderMismatch -32020)", "stateless HTTP")
