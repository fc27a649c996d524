"""Authorization of a protected Streamable HTTP server, seen as a client without credentials sees it: the 401 and
its ``WWW-Authenticate`` challenge (M030), the RFC 9728 Protected Resource Metadata at the challenge's URL and the
well-known locations (S008), the authorization server's RFC 8414 / OpenID metadata (S011) with PKCE S256 and https
endpoints (M031) and client registration (S010, A016), an invalid token refused with 401 (M038) and a token in the
query string refused (M037).

The checker fetches metadata under the OAuth client's SSRF rule (:func:`mcpkit.auth.client_discovery.fetch_refusal`:
https only, loopback excepted; no private or link-local address the MCP server is not on itself; a
``resource_metadata`` URL is used only on the server's own origin), reads each document up to 256 KiB, and never
sends the ``--token`` anywhere but the MCP server's origin.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ...auth.challenges import parse_www_authenticate
from ..wire_http import origin_of
from ._base import CLIENT_INFO, JSON, CheckerBase, shortened

if TYPE_CHECKING:
    import httpx  # (imported when an HTTP target is probed: checking a stdio server needs only the cli extra)

MAX_DOCUMENT = 256 * 1024
INVALID_TOKEN = "mcpkit-check-invalid-token"
_PRM = "/.well-known/oauth-protected-resource"


class AuthChecks(CheckerBase):
    """The authorization rules of a protected HTTP server (only when it answers 401 without credentials)."""

    def _initialize_body(self, rid: int) -> JSON:
        params = {"protocolVersion": self.version, "capabilities": {}, "clientInfo": CLIENT_INFO}
        return {"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": params}

    async def _post(self, client: httpx.AsyncClient, url: str, authorization: str | None) -> tuple[int, dict[str, str]]:
        import httpx

        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        headers.update({k: v for k, v in self.headers.items() if k.lower() != "authorization"})
        if authorization is not None:
            headers["Authorization"] = authorization
        async with client.stream("POST", url, content=json.dumps(self._initialize_body(1)), headers=headers) as resp:
            status, got = resp.status_code, {k.lower(): v for k, v in resp.headers.items()}
            if resp.headers.get("mcp-session-id") and 200 <= status < 300:  # a session was opened: end it
                await resp.aclose()
                h = dict(headers, **{"Mcp-Session-Id": resp.headers["mcp-session-id"]})
                h.pop("Content-Type", None)
                try:
                    await client.delete(url, headers=h)
                except httpx.HTTPError:
                    pass
            return status, got

    async def _document(self, client: httpx.AsyncClient, url: str) -> tuple[JSON | None, str]:
        """A metadata document: (the JSON object, "") or (None, why not)."""
        import httpx

        from ...auth.client_discovery import fetch_refusal
        from ...transports.http.client_support import ResponseTooLarge, read_capped

        refusal = await fetch_refusal(url, str(self.target), what="metadata URL")
        if refusal is not None:
            return None, f"not fetched: {refusal}"
        try:
            async with client.stream("GET", url, headers={"Accept": "application/json"}) as resp:
                if resp.status_code != 200:
                    return None, f"HTTP {resp.status_code}"
                body = await read_capped(resp, MAX_DOCUMENT)
        except ResponseTooLarge:
            return None, f"larger than {MAX_DOCUMENT} bytes"
        except httpx.HTTPError as exc:
            return None, f"{type(exc).__name__}: {exc}"
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError):
            return None, "not JSON"
        return (doc, "") if isinstance(doc, dict) else (None, "not a JSON object")

    async def check_auth(self) -> bool:
        """Probe without credentials. Returns True when the target requires authorization (the report then
        judges the auth rules, and the other checks run only with ``--token``/``auth``)."""
        from ..._extras import require

        require("httpx", "mcpkit check")  # (one line naming the http extra when it is missing)
        import httpx

        r = self.report
        url = str(self.target)
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout, connect=10.0), follow_redirects=False) as c:
            try:
                status, headers = await self._post(c, url, None)
            except httpx.HTTPError:
                return False  # unreachable: the handshake check says so
            if status not in (401, 403):
                return False
            self.report.protected = True
            r.info["authorization"] = f"required (HTTP {status} without a token)"
            challenge = headers.get("www-authenticate", "")
            scheme, params = parse_www_authenticate(challenge) if challenge else ("", {})
            if status == 401:
                r.ok("M030", f"initialize without a token -> 401 (WWW-Authenticate: {shortened(challenge, 160)})")
            else:
                r.fail("M030", f"initialize without a token -> {status}, not 401 Unauthorized", "auth")
            if scheme != "bearer":
                r.fail("M030", f"the 401 has no Bearer WWW-Authenticate challenge: {challenge!r}", "auth")
            await self.judge_metadata(c, url, params)
            bad, _ = await self._post(c, url, f"Bearer {INVALID_TOKEN}")
            if bad == 401:
                r.ok("M038", "an invalid bearer token -> 401", "auth")
            else:
                r.fail("M038", f"an invalid bearer token -> HTTP {bad} (must be 401)", "auth")
            token = self.token or INVALID_TOKEN
            sep = "&" if urlsplit(url).query else "?"
            in_query, _ = await self._post(c, f"{url}{sep}access_token={token}", None)
            what = "the --token" if self.token else "a token"
            if 400 <= in_query < 500:
                r.ok("M037", f"{what} in the query string (no header) -> HTTP {in_query}: refused", "auth")
            else:
                r.fail("M037", f"{what} in the query string (no header) -> HTTP {in_query}: accepted", "auth")
        return True

    async def judge_metadata(self, client: httpx.AsyncClient, url: str, params: dict[str, str]) -> None:
        """S008 (Protected Resource Metadata), S011 (AS metadata), M031 (PKCE S256, https), S010/A016 (registration)."""
        r = self.report
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        path = parts.path.rstrip("/")
        locations: list[tuple[str, str]] = []
        named = params.get("resource_metadata")
        if named:
            if origin_of(named) == origin_of(url):
                locations.append(("the challenge's resource_metadata", named))
            else:
                r.fail("S008", f"the challenge names resource_metadata on another origin: {named!r} (not fetched)")
        if path:
            locations.append(("the path-aware well-known URI", origin + _PRM + path))
        locations.append(("the root well-known URI", origin + _PRM))
        prm: JSON | None = None
        found = []
        for where, location in locations:
            doc, why = await self._document(client, location)
            if doc is None:
                r.info[f"PRM at {where}"] = why
                continue
            found.append(where)
            prm = prm or doc
        if prm is None:
            r.fail("S008", f"no Protected Resource Metadata (RFC 9728) at {', '.join(u for _, u in locations)}")
            issuer = origin  # the 2025-03-26 authorization base URL
        else:
            servers = prm.get("authorization_servers")
            resource = prm.get("resource")
            if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
                r.fail("S008", f"Protected Resource Metadata without authorization_servers: {shortened(prm, 200)}")
                return
            if not isinstance(resource, str) or origin_of(resource) != origin_of(url):
                r.fail("S008", f"Protected Resource Metadata names resource {resource!r}, not this server")
            else:
                r.ok(
                    "S008",
                    f"Protected Resource Metadata at {' and '.join(found)}: resource {resource}, "
                    f"authorization server {servers[0]}",
                    "auth",
                )
            issuer = servers[0]
        await self.judge_as_metadata(client, issuer, legacy=prm is None)

    async def judge_as_metadata(self, client: httpx.AsyncClient, issuer: str, *, legacy: bool) -> None:
        from ...auth.client_discovery import fetch_refusal

        r = self.report
        parts = urlsplit(issuer)
        origin = f"{parts.scheme}://{parts.netloc}"
        path = parts.path.rstrip("/")
        if path:
            urls = [
                origin + "/.well-known/oauth-authorization-server" + path,
                origin + "/.well-known/openid-configuration" + path,
                origin + path + "/.well-known/openid-configuration",
            ]
        else:
            urls = [origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"]
        meta: JSON | None = None
        tried = []
        for u in urls:
            doc, why = await self._document(client, u)
            if doc is not None:
                meta = doc
                break
            tried.append(f"{u}: {why}")
        if meta is None:
            r.fail("S011", f"no authorization server metadata for {issuer}: {'; '.join(tried)}", "auth")
            return
        if not legacy and meta.get("issuer") != issuer:
            r.fail("S011", f"the metadata's issuer {meta.get('issuer')!r} is not {issuer!r}", "auth")
        else:
            r.ok("S011", f"authorization server metadata for {issuer}: {shortened(sorted(meta), 160)}", "auth")
        problems = []
        methods = meta.get("code_challenge_methods_supported")
        if not isinstance(methods, list) or "S256" not in methods:
            problems.append(f"code_challenge_methods_supported {methods!r} lacks S256")
        for key in ("authorization_endpoint", "token_endpoint", "registration_endpoint"):
            value = meta.get(key)
            if value is not None and (not isinstance(value, str) or await fetch_refusal(value, issuer, what=key)):
                problems.append(f"{key} {value!r} is not https (nor loopback)")
        grants: Any = meta.get("response_types_supported")
        if isinstance(grants, list) and "token" in grants:
            problems.append("the implicit grant (response type 'token') is offered; OAuth 2.1 removed it")
        if problems:
            r.fail("M031", "; ".join(problems), "auth")
        else:
            r.ok("M031", f"PKCE {methods} advertised, endpoints over https or loopback", "auth")
        if isinstance(meta.get("registration_endpoint"), str):
            r.ok("A016", f"dynamic client registration at {meta['registration_endpoint']}", "auth")
            r.ok("S010", "dynamic client registration (RFC 7591) offered", "auth")
        elif meta.get("client_id_metadata_document_supported") is True:
            r.skip("A016", "no registration_endpoint (client ID metadata documents instead)")
            r.ok("S010", "client ID metadata documents, the successor of DCR since 2025-11-25", "auth")
        else:
            r.skip("A016", "no registration_endpoint")
            r.fail("S010", "neither dynamic client registration nor client ID metadata documents is offered", "auth")
