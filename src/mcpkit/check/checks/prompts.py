"""prompts/list and prompts/get, completion/complete and logging/setLevel."""

from __future__ import annotations

import re

from ..wire import Wire
from ._base import (
    JSON,
    CheckerBase,
    error_code,
    is_int,
    result_of,
    shortened,
)


class PromptChecks(CheckerBase):
    """prompts/list and prompts/get, completion/complete and logging/setLevel."""

    async def check_prompts(self, wire: Wire) -> None:
        r = self.report
        resp = await self.call(wire, "prompts/list", {})
        self.capability_matches("M058", "prompts", "prompts/list", resp)
        if result_of(resp) is None:
            for req in ("M059", "M060", "M061", "M062", "M063", "A019"):
                r.skip(req, "the server offers no prompts")
            return
        prompts = await self.list_all(wire, "prompts/list", "prompts", "M059") or []
        self.prompts = prompts
        bad = [shortened(p, 100) for p in prompts if not isinstance(p, dict) or not isinstance(p.get("name"), str)]
        if bad:
            r.fail("M060", f"prompt(s) without a name: {'; '.join(bad[:3])}", "prompts/list")
        elif prompts:
            r.ok("M060", f"all {len(prompts)} prompt(s) have a name", "prompts/list")
            if any({"description", "arguments"} & set(p) for p in prompts):
                r.ok("A019", "prompts carry description/arguments", "prompts/list")
            else:
                r.skip("A019", "no prompt carries a description or arguments (optional)", "prompts/list")
        else:
            r.skip("M060", "prompts/list is empty")
        await self.check_invalid_cursor(wire, "prompts/list")
        called = 0
        for prompt in prompts[:4]:
            if not isinstance(prompt, dict) or not isinstance(prompt.get("name"), str):
                continue
            args = {
                a["name"]: "test"
                for a in prompt.get("arguments") or []
                if isinstance(a, dict) and a.get("required") and isinstance(a.get("name"), str)
            }
            resp = await self.call(wire, "prompts/get", {"name": prompt["name"], "arguments": args})
            res = result_of(resp)
            label = f"prompts/get {prompt['name']}"
            if res is None:
                r.skip("M061", f"{label} -> error {error_code(resp)} (arguments we guessed may be wrong)")
                continue
            called += 1
            messages = res.get("messages")
            if not isinstance(messages, list):
                r.fail("M061", f"{label}: no messages array: {resp.short() if resp else ''}", "prompts/get")
                continue
            r.ok("M061", f"{label}: messages[{len(messages)}]", "prompts/get")
            bad_msgs = [
                shortened(m, 100)
                for m in messages
                if not isinstance(m, dict)
                or m.get("role") not in ("user", "assistant")
                or not isinstance(m.get("content"), dict)
            ]
            if bad_msgs:
                r.fail("M062", f"{label}: message(s) without a valid role and content: {'; '.join(bad_msgs[:2])}")
            else:
                r.ok("M062", f"{label}: every message has role and content", "prompts/get")
            contents = [m["content"] for m in messages if isinstance(m, dict) and isinstance(m.get("content"), dict)]
            self.judge_content("M063", label, contents, allow_link=self.feats.resource_links)
        if not called and prompts:
            r.skip("M062", "no prompt could be fetched")

    async def check_completion(self, wire: Wire) -> None:
        r = self.report
        ref: JSON | None = None
        arg = ""
        for prompt in self.prompts:
            args = prompt.get("arguments") if isinstance(prompt, dict) else None
            if not isinstance(prompt, dict) or not isinstance(prompt.get("name"), str) or not isinstance(args, list):
                continue
            if args and isinstance(args[0], dict) and isinstance(args[0].get("name"), str):
                ref, arg = {"type": "ref/prompt", "name": prompt["name"]}, args[0]["name"]
                break
        if ref is None:
            for tpl in self.templates:
                if not isinstance(tpl, dict):
                    continue
                m = re.search(r"\{[+#./;?&]?([A-Za-z0-9_]+)", str(tpl.get("uriTemplate", "")))
                if m:
                    ref, arg = {"type": "ref/resource", "uri": tpl["uriTemplate"]}, m.group(1)
                    break
        if ref is None:
            r.skip("M088", "no prompt argument or template variable to complete")
            r.skip("M089", "nothing to complete")
            r.skip("A026", "nothing to complete")
            return
        resp = await self.call(wire, "completion/complete", {"ref": ref, "argument": {"name": arg, "value": ""}})
        if self.feats.completions_capability:
            self.capability_matches("M088", "completions", "completion/complete", resp)
        res = result_of(resp)
        if res is None:
            r.skip("M089", f"completion/complete refused ({error_code(resp)})")
            r.skip("A026", f"completion/complete refused ({error_code(resp)})")
            return
        comp = res.get("completion")
        values = comp.get("values") if isinstance(comp, dict) else None
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            r.fail("M089", f"completion result without a values array of strings: {resp.short() if resp else ''}")
            return
        if len(values) > 100:
            r.fail("M089", f"completion returned {len(values)} values (at most 100 allowed)", "completion/complete")
        else:
            r.ok("M089", f"completion/complete {shortened(ref, 80)} {arg}='' -> {len(values)} value(s)", "completion")
        assert isinstance(comp, dict)
        if "total" in comp:
            if is_int(comp["total"]):
                r.ok("A026", f"completion total = {comp['total']}", "completion/complete")
            else:
                r.fail("A026", f"completion total is not an integer: {comp['total']!r}", "completion/complete")
        else:
            r.skip("A026", "the completion result has no total (optional)")

    async def check_logging(self, wire: Wire) -> None:
        resp = await self.call(wire, "logging/setLevel", {"level": "debug"})
        self.capability_matches("M087", "logging", "logging/setLevel", resp)
        if "logging" in self.caps and result_of(resp) is not None and set(result_of(resp) or {}) - {"_meta"}:
            self.report.fail("M087", f"logging/setLevel result is not empty: {resp.short() if resp else ''}")
