"""The client program the official MCP conformance suite runs for its client scenarios.

The suite starts it as ``python examples/conformance_client.py <server-url>`` with ``MCP_CONFORMANCE_SCENARIO``
(which scenario), ``MCP_CONFORMANCE_PROTOCOL_VERSION`` (0.2 suites: the revision under test) and, for some
scenarios, ``MCP_CONFORMANCE_CONTEXT`` (JSON). It does what each scenario expects of a client, with mcpkit's
high-level :class:`~mcpkit.client.client.Client`, and exits non-zero when the scenario is unknown or fails. The
``auth/*`` scenarios connect through :class:`mcpkit.auth.OAuthClient`, configured from the scenario's context.

    MCP_CONFORMANCE_SCENARIO=tools_call python examples/conformance_client.py http://localhost:3000/mcp
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from mcpkit.client.client import Client
from mcpkit.client.skills import SkillError
from mcpkit.protocol.versions import LATEST_HANDSHAKE, is_modern

logger = logging.getLogger("conformance-client")
Scenario = Callable[[str], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(*names: str) -> Callable[[Scenario], Scenario]:
    def register(fn: Scenario) -> Scenario:
        for name in names:
            SCENARIOS[name] = fn
        return fn

    return register


def protocol_version() -> str:
    return os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION") or LATEST_HANDSHAKE


def context() -> dict[str, Any]:
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    if not raw:
        return {}
    data = json.loads(raw)
    return data if isinstance(data, dict) else {}


def sampling_handler(params: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": {"type": "text", "text": "This is a response from the mcpkit conformance client"},
        "model": "mcpkit-conformance-model",
        "stopReason": "endTurn",
    }


def elicitation_handler(params: dict[str, Any]) -> dict[str, Any]:
    """Accept; the client fills the requested schema's defaults into the content (SEP-1034)."""
    schema = params.get("requestedSchema") or {}
    props = schema.get("properties") if isinstance(schema, dict) else None
    content: dict[str, Any] = {}
    if isinstance(props, dict) and "confirmed" in props:
        content["confirmed"] = True
    return {"action": "accept", "content": content}


def make_client(url: str, *, version: str | None = None, **options: Any) -> Client:
    v = version or protocol_version()
    return Client(
        url,
        mode="modern" if is_modern(v) else "handshake",
        protocol_version=v,
        client_info={"name": "mcpkit-conformance-client", "version": "1.0.0"},
        roots=["file:///test/root"],
        sampling_handler=sampling_handler,
        elicitation_handler=elicitation_handler,
        validate_output=False,
        reconnect=False,
        timeout=30.0,
        **options,
    )


def stub_arguments(schema: Any) -> dict[str, Any]:
    """Values for a tool's required arguments (enough for the mocks, which check headers and names)."""
    args: dict[str, Any] = {}
    if not isinstance(schema, dict):
        return args
    props = schema.get("properties") or {}
    for name in schema.get("required") or []:
        prop = props.get(name) if isinstance(props, dict) else None
        kind = prop.get("type") if isinstance(prop, dict) else None
        args[name] = {"number": 1, "integer": 1, "boolean": True, "array": [], "object": {}}.get(str(kind), "test")
    return args


# ---------------------------------------------------------------------------------------------- scenarios


@scenario("initialize")
async def initialize(url: str) -> None:
    async with make_client(url, version=LATEST_HANDSHAKE) as client:
        if "tools" not in client.server_capabilities:
            return  # this mock declares no capabilities: the handshake is the test
        tools = await client.list_tools()
        if tools:
            await client.call_tool(tools[0].name, stub_arguments(tools[0].input_schema), raise_on_error=False)


@scenario("tools_call")
async def tools_call(url: str) -> None:
    async with make_client(url) as client:
        await client.list_tools()
        result = await client.call_tool("add_numbers", {"a": 5, "b": 3}, raise_on_error=False)
        logger.info("add_numbers -> %s", result.text)


@scenario("elicitation-sep1034-client-defaults", "elicitation-defaults")
async def elicitation_defaults(url: str) -> None:
    async with make_client(url) as client:
        await client.list_tools()
        await client.call_tool("test_client_elicitation_defaults", {}, raise_on_error=False)


@scenario("sse-retry")
async def sse_retry(url: str) -> None:
    async with make_client(url, version=LATEST_HANDSHAKE) as client:
        await client.list_tools()
        result = await client.call_tool("test_reconnection", {}, raise_on_error=False)
        logger.info("test_reconnection -> %s", result.text)


@scenario("request-metadata")
async def request_metadata(url: str) -> None:
    async with make_client(url) as client:
        if "tools" not in client.server_capabilities:
            await client.ping() if not client.modern else await client.discover()
            return  # the mock declares no tools: the (retried) requests' metadata is the test
        await client.list_tools()
        await client.call_tool("add_numbers", {"a": 2, "b": 3}, raise_on_error=False)


@scenario("sep-2322-client-request-state")
async def request_state(url: str) -> None:
    async with make_client(url) as client:
        await client.list_tools()
        for name in ("test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state", "test_mrtr_no_result_type"):
            await client.call_tool(name, {}, raise_on_error=False)


@scenario("http-standard-headers")
async def standard_headers(url: str) -> None:
    async with make_client(url) as client:
        tools = await client.list_tools()
        for tool in tools:
            await client.call_tool(tool.name, stub_arguments(tool.input_schema), raise_on_error=False)
        for resource in await client.list_resources():
            await client.read_resource(resource.uri)
        for prompt in await client.list_prompts():
            args = {a.name: "test" for a in prompt.arguments or [] if a.required}
            await client.get_prompt(prompt.name, args)


@scenario("http-custom-headers")
async def custom_headers(url: str) -> None:
    calls = context().get("toolCalls") or []
    async with make_client(url) as client:
        await client.list_tools()
        for call in calls:
            await client.call_tool(call["name"], call.get("arguments") or {}, raise_on_error=False)


@scenario("http-invalid-tool-headers")
async def invalid_tool_headers(url: str) -> None:
    async with make_client(url) as client:
        tools = await client.list_tools()  # tools with invalid x-mcp-header annotations are dropped here
        for tool in tools:
            args = stub_arguments(tool.input_schema)
            await client.call_tool(tool.name, args, raise_on_error=False)


@scenario("sep-2640-client-no-prefetch")
async def skills_listed(url: str) -> None:
    """Build the skill registry from skills/list: entries only, no file is read before a skill is loaded."""
    async with make_client(url) as client:
        skills = await client.list_skills()
        logger.info("skills: %s", [(s.name, s.uri, len(s.files or ())) for s in skills])


@scenario("sep-2640-client-verify-digest", "sep-2640-client-verify-size", "sep-2640-client-verify-frontmatter")
async def skills_loaded(url: str) -> None:
    """Load each listed skill (its SKILL.md verified by size, digest and frontmatter), then read its other files;
    a skill that fails verification is not used, and none of its files is read."""
    async with make_client(url) as client:
        for skill in await client.list_skills():
            try:
                await client.load_skill(skill)
            except SkillError as exc:
                logger.warning("skill %s not loaded: %s", skill.uri, exc)
                continue
            for file in skill.files or ():
                if file.uri != skill.uri:
                    await client.read_skill_file(skill, file.uri)


@scenario("json-schema-ref-no-deref")
async def ref_no_deref(url: str) -> None:
    async with make_client(url, version=LATEST_HANDSHAKE) as client:
        tools = await client.list_tools()
        logger.info("tools: %s", [t.name for t in tools])


@scenario("json-schema-2020-12-preservation")
async def schema_preservation(url: str) -> None:
    async with make_client(url) as client:
        tools = {t.name: t for t in await client.list_tools()}
        tool = tools.get("json_schema_2020_12_tool")
        schema = tool.input_schema if tool is not None else {}
        await client.call_tool("json_schema_echo", {"schema": schema}, raise_on_error=False)


# ---------------------------------------------------------------------------------------------- authorization

CIMD_URL = "https://conformance-test.local/client-metadata.json"  # the harness serves this Client ID Metadata Document


# the scenarios of a machine client (no user): the client credentials extension
MACHINE_SCENARIOS = ("auth/client-credentials-jwt", "auth/client-credentials-basic")


async def credentials_issuer(url: str, ctx: dict[str, Any]) -> str | None:
    """The authorization server the scenario's pre-registered secret or key belongs to. The suite hands them over
    for its own authorization server without naming it, and an ``OAuthClient`` sends confidential credentials
    without ``issuer=`` only to an authorization server on the MCP server's origin (the suite runs its
    authorization server on another port). This harness trusts the suite as a user trusts the provider who issued
    the credentials: it reads the resource metadata and names the authorization server there. None without such
    credentials, or when there is no metadata (the client then applies its own rule)."""
    if not ctx.get("client_id") or not (ctx.get("client_secret") or ctx.get("private_key_pem")):
        return None
    from urllib.parse import urlsplit

    import httpx

    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    async with httpx.AsyncClient(timeout=10) as http:  # the suite's PRM is path-based (RFC 9728 §3.1)
        response = await http.get(origin + "/.well-known/oauth-protected-resource" + parts.path.rstrip("/"))
    try:
        servers = response.json().get("authorization_servers") if response.status_code == 200 else None
    except (ValueError, AttributeError):
        return None
    return servers[0] if isinstance(servers, list) and servers and isinstance(servers[0], str) else None


def oauth_for(url: str, scenario_name: str, ctx: dict[str, Any], issuer: str | None = None) -> Any:
    """The OAuth client the scenario describes, from its context: pre-registered credentials (for ``issuer``), a
    signing key (``private_key_jwt``), a workload identity JWT or an enterprise IdP's ID token (the jwt-bearer
    grant). A headless browser plays the user, who approves. DPoP is on when a server offers it (the default)."""
    from mcpkit.auth import HeadlessBrowser, IdJagExchange, OAuthClient, SigningKey

    browser = HeadlessBrowser()
    options: dict[str, Any] = {}
    if "idp_token_endpoint" in ctx:  # enterprise-managed authorization: an ID-JAG from the IdP, then jwt-bearer
        options["grant_type"] = "jwt_bearer"
        options["assertion"] = IdJagExchange(
            ctx["idp_token_endpoint"], ctx["idp_id_token"], client_id=ctx.get("idp_client_id")
        )
    elif "valid_jwt" in ctx:  # workload identity federation: the platform's JWT is the grant
        options["grant_type"] = "jwt_bearer"
        options["assertion"] = ctx["valid_jwt"]
    elif scenario_name in MACHINE_SCENARIOS:
        options["grant_type"] = "client_credentials"
    if "private_key_pem" in ctx:
        options["private_key"] = SigningKey.from_pem(ctx["private_key_pem"], algorithm=ctx.get("signing_algorithm"))
    return OAuthClient(
        url,
        client_metadata={"client_name": "mcpkit-conformance", "redirect_uris": ["http://127.0.0.1:3999/callback"]},
        redirect_handler=browser.redirect_handler,
        callback_handler=browser.callback_handler,
        client_id=ctx.get("client_id"),
        client_secret=ctx.get("client_secret"),
        issuer=issuer,
        client_metadata_url=CIMD_URL,
        protocol_version=protocol_version(),
        **options,
    )


async def authorization(url: str) -> None:
    """Every ``auth/*`` scenario: connect through OAuth (on the first 401), list the tools, call ``test-tool``."""
    ctx = context()
    auth = oauth_for(url, os.environ.get("MCP_CONFORMANCE_SCENARIO", ""), ctx, await credentials_issuer(url, ctx))
    try:
        async with make_client(url, transport_options={"auth": auth}) as client:
            tools = await client.list_tools()
            if any(t.name == "test-tool" for t in tools):
                await client.call_tool("test-tool", {}, raise_on_error=False)
    finally:
        await auth.aclose()
        for line in auth.log:
            logger.info("oauth: %s", line)


async def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    if len(argv) < 2:
        print("usage: conformance_client.py <server-url>", file=sys.stderr)
        return 2
    url = argv[-1]
    name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    fn = SCENARIOS.get(name) or (authorization if name.startswith("auth/") else None)
    if fn is None:
        print(f"unknown scenario {name!r}; known: {', '.join(sorted(SCENARIOS))}", file=sys.stderr)
        return 1
    await fn(url)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv)))
