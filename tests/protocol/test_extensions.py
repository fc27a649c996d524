"""The extension mechanism: ``capabilities.extensions`` declared and negotiated by server and client in both eras
(the core spec's extension framework: each side declares ``{id: settings}`` in its capabilities; an empty object
means no settings), ``ctx.client_supports_extension(id)`` in handlers, and tool/resource/prompt ``_meta`` carried
in every revision (no revision's schema forbids it) and into ``resources/read`` contents."""

from __future__ import annotations

from typing import Any

import pytest

from mcpkit import Client, Context, MCPKit
from mcpkit.protocol import versions
from mcpkit.protocol.extensions import (
    UI_EXTENSION,
    Extensions,
    check_extension_id,
    declared_settings,
    declares,
)
from support.oracle import REVISIONS, validate_def

ERAS = ["handshake", "modern"]
UI_SETTINGS = {"mimeTypes": ["text/html;profile=mcp-app"]}


def probe_app() -> MCPKit:
    app = MCPKit("ext-probe")
    app.declare_extension("com.example/everywhere", {"level": 2})
    app.declare_extension("com.example/modern-only", versions=versions.MODERN_VERSIONS)

    @app.tool
    def probe(ctx: Context) -> dict[str, Any]:
        """What the client declared, as the handler sees it."""
        return {
            "ui": ctx.client_extension(UI_EXTENSION),
            "supportsUi": ctx.client_supports_extension(UI_EXTENSION),
            "supportsOther": ctx.client_supports_extension("com.example/other"),
            "low": ctx.request_context.client_supports_extension(UI_EXTENSION),
        }

    return app


@pytest.mark.parametrize("revision", REVISIONS)
async def test_the_server_declares_its_extensions_in_every_revision_it_applies_to(revision: str) -> None:
    app = probe_app()
    async with Client(app, protocol_version=revision) as client:
        declared = client.server_capabilities.get("extensions")
        if versions.is_modern(revision):
            assert declared == {"com.example/everywhere": {"level": 2}, "com.example/modern-only": {}}
            validate_def(
                {
                    "supportedVersions": [revision],
                    "capabilities": client.server_capabilities,
                    "resultType": "complete",
                    "ttlMs": 0,
                    "cacheScope": "public",
                },
                revision,
                "DiscoverResult",
            )
        else:
            assert declared == {"com.example/everywhere": {"level": 2}}  # (the modern-only one is left out)
            validate_def(client.server_capabilities, revision, "ServerCapabilities")
        assert client.server_extension("com.example/everywhere") == {"level": 2}
        assert client.server_supports_extension("com.example/everywhere")
        assert not client.server_supports_extension("com.example/absent")


@pytest.mark.parametrize("mode", ERAS)
async def test_a_handler_sees_the_extensions_the_client_declared_in_both_eras(mode: str) -> None:
    app = probe_app()
    async with Client(app, mode=mode, extensions={UI_EXTENSION: UI_SETTINGS}) as client:
        data = (await client.call_tool("probe", {})).data
        assert data == {"ui": UI_SETTINGS, "supportsUi": True, "supportsOther": False, "low": True}
        declared = client.session.capabilities(client.session.features)["extensions"]
        tasks = {"io.modelcontextprotocol/tasks": {}} if mode == "modern" else {}  # (every client takes tasks)
        assert declared == {UI_EXTENSION: UI_SETTINGS, **tasks}
    async with Client(app, mode=mode) as plain:
        data = (await plain.call_tool("probe", {})).data
        assert data == {"ui": None, "supportsUi": False, "supportsOther": False, "low": False}
        assert plain.session.capabilities(plain.session.features).get("extensions") == (tasks or None)


async def test_a_client_extension_declared_later_reaches_the_next_modern_request() -> None:
    app = probe_app()
    async with Client(app, mode="modern") as client:
        assert (await client.call_tool("probe", {})).data["supportsUi"] is False
        client.declare_extension(UI_EXTENSION, UI_SETTINGS)
        assert (await client.call_tool("probe", {})).data["ui"] == UI_SETTINGS


@pytest.mark.parametrize("mode", ERAS)
async def test_a_client_extension_limited_to_some_revisions_is_declared_in_those_only(mode: str) -> None:
    app = probe_app()
    client = Client(app, mode=mode)
    client.declare_extension(UI_EXTENSION, UI_SETTINGS, versions=versions.MODERN_VERSIONS)
    async with client:
        assert (await client.call_tool("probe", {})).data["supportsUi"] is (mode == "modern")


@pytest.mark.parametrize("mode", ERAS)
async def test_settings_that_are_not_an_object_are_no_declaration(mode: str) -> None:
    """The schema makes each extension's settings a JSON object: a client that sends ``true`` has declared
    nothing a server may rely on."""
    app = probe_app()
    caps = {"extensions": {UI_EXTENSION: True}}

    class OddClient(Client):
        def _new_session(self, conn: Any) -> Any:
            session = super()._new_session(conn)
            session.capabilities = lambda feats=None: caps  # type: ignore[method-assign]
            session._meta_cache = None
            return session

    async with OddClient(app, mode=mode) as client:
        sent = client.session.capabilities(client.session.features)
        assert sent == caps
        assert (await client.call_tool("probe", {})).data["supportsUi"] is False


async def test_a_server_extension_declared_while_serving_reaches_the_next_discover() -> None:
    """The next server/discover shows it, and the client then knows it (server_supports_extension, the
    capabilities its own checks read)."""
    app = probe_app()
    async with Client(app, mode="modern", cache=False) as client:
        app.extensions["com.example/late"] = {"x": True}  # (the mapping form: every revision)
        assert not client.server_supports_extension("com.example/late")
        discovered = await client.discover()
        assert discovered.capabilities["extensions"]["com.example/late"] == {"x": True}
        assert client.server_supports_extension("com.example/late")
        assert client.server_extension("com.example/late") == {"x": True}
        del app.extensions["com.example/late"]
        assert "com.example/late" not in (await client.discover()).capabilities["extensions"]
        assert not client.server_supports_extension("com.example/late")


def test_extension_identifiers_and_settings_are_checked_when_declared() -> None:
    assert check_extension_id("io.modelcontextprotocol/ui") == "io.modelcontextprotocol/ui"
    for bad in ("ui", "io.modelcontextprotocol", "/ui", "io/ui", "io.model context/ui", "io..x/ui", "x" * 300):
        with pytest.raises(ValueError, match="not an extension identifier"):
            check_extension_id(bad)
    app = MCPKit("x")
    with pytest.raises(ValueError, match="not an extension identifier"):
        app.declare_extension("tasks")
    with pytest.raises(TypeError, match="JSON object"):
        app.declare_extension("com.example/a", ["not", "an", "object"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="versions is empty"):
        app.declare_extension("com.example/a", versions=[])
    with pytest.raises(ValueError, match="not an extension identifier"):
        Client(app, extensions={"nope": {}})


def test_the_registry_keeps_one_capabilities_object_per_revision_until_it_changes() -> None:
    changes: list[int] = []
    ext = Extensions(lambda: changes.append(1))
    ext.declare("com.example/a", {"n": 1})
    ext.declare("com.example/b", versions=["2026-07-28"])
    first = ext.for_version("2025-11-25")
    assert first == {"com.example/a": {"n": 1}} and ext.for_version("2025-11-25") is first
    assert ext.for_version("2026-07-28") == {"com.example/a": {"n": 1}, "com.example/b": {}}
    del ext["com.example/a"]
    assert ext.for_version("2025-11-25") is None and len(changes) == 3
    assert ext.versions_of("com.example/b") == frozenset({"2026-07-28"})
    assert declared_settings({"extensions": {"com.example/b": {"k": 1}}}, "com.example/b") == {"k": 1}
    assert not declares({"extensions": []}, "com.example/b") and not declares(None, "com.example/b")


def meta_app() -> MCPKit:
    app = MCPKit("meta")

    @app.tool(meta={"com.example/tool": 1})
    def tagged() -> str:
        return "ok"

    @app.resource("note://one", meta={"com.example/res": {"a": 1}}, mime_type="text/plain")
    def one() -> str:
        return "one"

    @app.resource("note://own", meta={"com.example/res": 1, "shared": "resource"})
    def own() -> dict[str, Any]:
        return {"uri": "note://own", "text": "x", "_meta": {"shared": "content"}}

    @app.resource("note://item/{n}", meta={"com.example/tpl": True})
    def item(n: int) -> str:
        return f"item {n}"

    @app.prompt(meta={"com.example/prompt": "p"})
    def hello() -> str:
        return "hello"

    return app


@pytest.mark.parametrize("revision", REVISIONS)
async def test_tool_resource_and_prompt_meta_is_sent_in_every_revision(revision: str) -> None:
    async with Client(meta_app(), protocol_version=revision) as client:
        tools = await client.request("tools/list", {})
        tool = tools["tools"][0]
        assert tool["_meta"] == {"com.example/tool": 1}
        validate_def(tool, revision, "Tool")
        resources = (await client.request("resources/list", {}))["resources"]
        assert {r["uri"]: r["_meta"] for r in resources} == {
            "note://one": {"com.example/res": {"a": 1}},
            "note://own": {"com.example/res": 1, "shared": "resource"},
        }
        for r in resources:
            validate_def(r, revision, "Resource")
        template = (await client.request("resources/templates/list", {}))["resourceTemplates"][0]
        assert template["_meta"] == {"com.example/tpl": True}
        validate_def(template, revision, "ResourceTemplate")
        prompt = (await client.request("prompts/list", {}))["prompts"][0]
        assert prompt["_meta"] == {"com.example/prompt": "p"}
        validate_def(prompt, revision, "Prompt")


@pytest.mark.parametrize("revision", REVISIONS)
async def test_a_resource_meta_reaches_the_contents_resources_read_returns(revision: str) -> None:
    async with Client(meta_app(), protocol_version=revision, cache=False) as client:
        read = await client.request("resources/read", {"uri": "note://one"})
        assert read["contents"] == [
            {"uri": "note://one", "mimeType": "text/plain", "text": "one", "_meta": {"com.example/res": {"a": 1}}}
        ]
        validate_def(read["contents"][0], revision, "TextResourceContents")
        own = await client.request("resources/read", {"uri": "note://own"})
        assert own["contents"][0]["_meta"] == {"com.example/res": 1, "shared": "content"}  # (the content's wins)
        templated = await client.request("resources/read", {"uri": "note://item/3"})
        assert templated["contents"][0]["_meta"] == {"com.example/tpl": True}
        again = await client.request("resources/read", {"uri": "note://one"})
        assert again["contents"][0]["_meta"] == {"com.example/res": {"a": 1}}  # (the registered meta is not changed)
