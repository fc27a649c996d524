"""tools/list and tools/call: listing, pagination, calls and their results."""

from __future__ import annotations

from typing import Any

from ..wire import Incoming, Wire
from ._base import (
    JSON,
    UNSAFE_TOOL,
    CheckerBase,
    error_code,
    error_of,
    result_of,
    sample_arguments,
    shortened,
)


class ToolChecks(CheckerBase):
    """tools/list and tools/call: listing, pagination, calls and their results."""

    async def check_tools(self, wire: Wire) -> None:
        r = self.report
        resp = await self.call(wire, "tools/list", {})
        self.capability_matches("M065", "tools", "tools/list", resp)
        if result_of(resp) is None:
            for req in ("M066", "M067", "M068", "M069", "A020"):
                r.skip(req, "the server offers no tools")
            return
        tools = await self.list_all(wire, "tools/list", "tools", "M066") or []
        self.tools = tools
        bad, undescribed = [], []
        for tool in tools:
            if not isinstance(tool, dict):
                bad.append(f"not an object: {shortened(tool)}")
                continue
            # every revision's schema.ts: `name` and `inputSchema` are required, `description?` is optional: a tool
            # without one is valid (a warning, as M067's words ask for it), one that is not a string is malformed
            missing = [] if isinstance(tool.get("name"), str) and tool["name"] else ["name"]
            if "description" in tool and not isinstance(tool["description"], str):
                missing.append("description (a string when present)")
            elif not tool.get("description"):
                undescribed.append(str(tool.get("name", "?")))
            schema = tool.get("inputSchema")
            if not isinstance(schema, dict) or schema.get("type") != "object":
                missing.append("inputSchema (an object schema)")
            if missing:
                bad.append(f"{tool.get('name', '?')}: missing {', '.join(missing)}")
        if not tools:
            r.skip("M067", "tools/list is empty")
        elif bad:
            r.fail("M067", f"{len(bad)} of {len(tools)} tool(s): " + "; ".join(bad[:4]), "tools/list")
        elif undescribed:
            r.warn(
                "M067",
                f"{len(undescribed)} of {len(tools)} tool(s) without a description ({', '.join(undescribed[:4])}): "
                "requirement M067 asks for one; the official schema makes it optional",
                "tools/list",
            )
        else:
            r.ok("M067", f"all {len(tools)} tool(s) have name, description and an object inputSchema", "tools/list")
        if any(isinstance(t, dict) and "annotations" in t for t in tools):
            r.ok("A020", "tools carry annotations", "tools/list")
        elif tools:
            r.skip("A020", "no tool carries annotations (optional)", "tools/list")
        await self.check_invalid_cursor(wire, "tools/list")
        # call the tools that look side-effect free and whose required arguments we can fill in
        candidates = [t for t in tools if isinstance(t, dict) and _looks_safe(t)]
        candidates.sort(key=lambda t: "progress" not in t["name"].lower())  # stable: progress reporters first
        candidates = candidates[:8]
        if not candidates:
            r.skip("M068", "no tool looks safe to call black-box (all names suggest side effects or client requests)")
            r.skip("M069", "no tool called")
        for i, tool in enumerate(candidates):
            args = sample_arguments(tool.get("inputSchema"))
            token = f"chk-progress-{i}"
            params = {"name": tool["name"], "arguments": args, "_meta": {"progressToken": token}}
            resp = await self.call(wire, "tools/call", params, timeout=self.timeout * 2)
            self.progress_tokens[token] = resp
            self.judge_call(tool["name"], args, resp)
        resp = await self.call(wire, "tools/call", {"name": "mcpkit-check-no-such-tool", "arguments": {}})
        if resp is not None and (error_of(resp) is not None or (result_of(resp) or {}).get("isError") is True):
            r.ok(
                "S021",
                f"calling an unknown tool -> {'error ' + str(error_code(resp)) if error_of(resp) else 'isError'}",
            )
        elif resp is not None:
            r.fail("S021", f"calling an unknown tool succeeded: {resp.short()}", "unknown tool")

    def judge_call(self, name: str, args: JSON, resp: Incoming | None) -> None:
        r = self.report
        label = f"tools/call {name} {shortened(args, 60)}"
        if resp is None:
            r.fail("M068", f"{label}: no response within {self.timeout * 2:.0f}s", "tools/call")
            return
        res = result_of(resp)
        if res is None:
            # a protocol error for our synthesized arguments is not a shape fault
            r.skip("M068", f"{label} -> error {error_code(resp)} (arguments we guessed may be wrong)", "tools/call")
            return
        if res.get("resultType") == "input_required":
            r.skip("M068", f"{label} asks the client for input first (input_required)", "tools/call")
            return
        content = res.get("content")
        if not isinstance(content, list):
            r.fail("M068", f"{label}: result has no content array: {resp.short()}", "tools/call")
            return
        if "isError" not in res:
            r.warn(
                "M068",
                f"{label}: content array present but no isError flag (requirement M068 asks for it; the official "
                "schema makes it optional, default false)",
                "tools/call",
            )
        elif not isinstance(res["isError"], bool):
            r.fail("M068", f"{label}: isError is not a boolean: {res['isError']!r}", "tools/call")
        else:
            r.ok("M068", f"{label}: content[{len(content)}] and isError={res['isError']}", "tools/call")
        self.judge_content("M069", label, content, allow_link=self.feats.resource_links)


def _looks_safe(tool: dict[str, Any]) -> bool:
    """Whether a black-box check may call this tool: its name suggests no side effect (nor a request to the client,
    nor a long wait), and its annotations do not say it changes things: a tool declared destructive
    (``destructiveHint: true``) or not read-only (``readOnlyHint: false``) is never called, whatever its name."""
    name = tool.get("name")
    if not isinstance(name, str) or UNSAFE_TOOL.search(name):
        return False
    hints = tool.get("annotations")
    if not isinstance(hints, dict):
        return True
    return hints.get("destructiveHint") is not True and hints.get("readOnlyHint") is not False
