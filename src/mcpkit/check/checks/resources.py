"""resources/list, templates, read and subscribe."""

from __future__ import annotations

import asyncio
from typing import Any

from ..wire import Wire
from ._base import (
    CheckerBase,
    error_code,
    result_of,
    shortened,
)


class ResourceChecks(CheckerBase):
    """resources/list, templates, read and subscribe."""

    async def check_resources(self, wire: Wire, *, subscribe: bool = True) -> None:
        r = self.report
        resp = await self.call(wire, "resources/list", {})
        self.capability_matches("M048", "resources", "resources/list", resp)
        if result_of(resp) is None:
            for req in ("M049", "M050", "M051", "M052", "M053", "M054", "M056", "S022", "A017", "A018"):
                r.skip(req, "the server offers no resources")
            return
        resources = await self.list_all(wire, "resources/list", "resources", "M049") or []
        bad = [
            shortened(res, 100)
            for res in resources
            if not isinstance(res, dict) or not isinstance(res.get("uri"), str) or not isinstance(res.get("name"), str)
        ]
        if bad:
            r.fail("M050", f"{len(bad)} of {len(resources)} resource(s) lack uri or name: {'; '.join(bad[:3])}")
        elif resources:
            r.ok("M050", f"all {len(resources)} resource(s) have uri and name", "resources/list")
        else:
            r.skip("M050", "resources/list is empty")
        if any(isinstance(x, dict) and ({"description", "mimeType", "size"} & set(x)) for x in resources):
            r.ok("A017", "resources carry description/mimeType/size", "resources/list")
        elif resources:
            r.skip("A017", "no resource carries a description, mimeType or size (optional)", "resources/list")
        await self.check_invalid_cursor(wire, "resources/list")
        # read up to two resources: the first, and the first binary-looking one
        picks = [x for x in resources[:1] if isinstance(x, dict)]
        binary = next(
            (x for x in resources if isinstance(x, dict) and not str(x.get("mimeType", "text")).startswith("text")),
            None,
        )
        if binary is not None and binary not in picks:
            picks.append(binary)
        for res in picks:
            await self.read_one(wire, str(res.get("uri")))
        if not picks:
            r.skip("M051", "no resource to read")
        resp = await self.call(wire, "resources/templates/list", {})
        if result_of(resp) is None:
            for req in ("M053", "M054", "A018"):
                r.skip(req, f"resources/templates/list not offered ({error_code(resp)})")
            templates: list[Any] = []
        else:
            templates = await self.list_all(wire, "resources/templates/list", "resourceTemplates", "M053") or []
            bad = [
                shortened(t, 100)
                for t in templates
                if not isinstance(t, dict) or not isinstance(t.get("uriTemplate"), str)
            ]
            if bad:
                r.fail("M054", f"template(s) without uriTemplate: {'; '.join(bad[:3])}", "resources/templates/list")
            elif templates:
                r.ok("M054", f"all {len(templates)} template(s) have a uriTemplate", "resources/templates/list")
                if any({"name", "description", "mimeType"} & set(t) for t in templates):
                    r.ok("A018", "templates carry name/description/mimeType", "resources/templates/list")
                else:
                    r.skip("A018", "no template carries a name, description or mimeType", "resources/templates/list")
            else:
                r.skip("M054", "no resource templates")
                r.skip("A018", "no resource templates")
        self.templates = templates
        if subscribe:
            await self.check_subscribe(wire, resources)

    async def read_one(self, wire: Wire, uri: str) -> None:
        r = self.report
        resp = await self.call(wire, "resources/read", {"uri": uri})
        res = result_of(resp)
        if res is None:
            r.fail(
                "M051", f"resources/read {uri} (a listed resource) failed: {resp.short() if resp else 'no response'}"
            )
            return
        contents = res.get("contents")
        if not isinstance(contents, list):
            r.fail("M051", f"resources/read {uri}: no contents array: {resp.short() if resp else ''}", "resources/read")
            return
        r.ok("M051", f"resources/read {uri}: contents[{len(contents)}]", "resources/read")
        for item in contents:
            if not isinstance(item, dict) or not isinstance(item.get("uri"), str):
                r.fail("M052", f"resources/read {uri}: content item without uri: {shortened(item, 120)}")
            elif not isinstance(item.get("text"), str) and not isinstance(item.get("blob"), str):
                r.fail("M052", f"resources/read {uri}: content item without text or blob: {shortened(item, 120)}")
            else:
                r.ok("M052", f"resources/read {uri}: uri and {'text' if 'text' in item else 'blob'}", "resources/read")
            if isinstance(item, dict):
                if isinstance(item.get("mimeType"), str):
                    r.ok("S022", f"resources/read {uri}: mimeType {item['mimeType']}", "resources/read")
                else:
                    r.warn(
                        "S022",
                        f"resources/read {uri}: content item without mimeType (requirement S022 asks for it; the "
                        "official schema makes it optional, 'if known')",
                        "resources/read",
                    )

    async def check_subscribe(self, wire: Wire, resources: list[Any]) -> None:
        r = self.report
        declared = isinstance(self.caps.get("resources"), dict) and self.caps["resources"].get("subscribe") is True
        uri = next((x["uri"] for x in resources if isinstance(x, dict) and isinstance(x.get("uri"), str)), None)
        if uri is None:
            r.skip("M056", "no resource to subscribe to")
            return
        before = len(wire.notifications)
        resp = await self.call(wire, "resources/subscribe", {"uri": uri})
        if declared and result_of(resp) is not None:
            r.ok("M056", f"resources.subscribe declared and resources/subscribe {uri} accepted", "resources/subscribe")
        elif declared:
            r.fail("M056", f"resources.subscribe declared but subscribe failed: {resp.short() if resp else 'none'}")
        elif result_of(resp) is not None:
            r.fail("M056", f"resources/subscribe accepted but resources.subscribe is not declared: {resp.short()}")
        else:
            r.ok(
                "M056",
                f"resources.subscribe not declared and subscribe refused ({error_code(resp)})",
                "resources/subscribe",
            )
        if not declared or result_of(resp) is None:
            return
        await asyncio.sleep(0.5)
        updates = [
            n
            for n in wire.notifications[before:]
            if isinstance(n.data, dict) and n.data.get("method") == "notifications/resources/updated"
        ]
        if updates:
            r.ok("M055", f"notifications/resources/updated received: {updates[0].short()}", "resources/subscribe")
        # else: no change happened; the report lists M055 as not checkable (a checker cannot change a resource)
        await self.call(wire, "resources/unsubscribe", {"uri": uri})
