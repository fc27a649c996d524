"""A gateway (``mcpkit.proxy({"prefix": target, ...})``): its prefixes are checked as a mount's are and never
shadow one another, and every resource URI a member hands out (in a tool's result, a prompt's messages) is the
gateway's, so the client reads it back through the gateway."""

from __future__ import annotations

from typing import Any

import pytest

import mcpkit
from mcpkit import Client, MCPKit
from mcpkit.protocol import types as t
from support.toolkit import ERAS, serve_http

pytestmark = pytest.mark.timeout(60)


def _member(name: str, tool: str) -> MCPKit:
    app = MCPKit(name)

    @app.tool(name=tool)
    def answer() -> str:
        return f"from {name}"

    return app


@pytest.mark.parametrize("prefixes", [("a", "a_b"), ("a_b", "a"), ("x", "x_y_z")])
def test_a_gateway_refuses_a_prefix_that_would_take_another_members_names(prefixes: tuple[str, str]) -> None:
    """With members "a" and "a_b", the name "a_b_x" is a's "b_x" or a_b's "x": the gateway routed it to whichever
    came first, so the other member's tool was listed but unreachable. Such prefixes are refused."""
    first, second = prefixes
    with pytest.raises(ValueError, match=f"'{first}'.*'{second}'|'{second}'.*'{first}'"):
        mcpkit.proxy({first: _member("one", "x"), second: _member("two", "x")})


@pytest.mark.parametrize("prefix", ["", "a/b", "s:p", " a", "a b", "_a", "x" * 65])
def test_a_gateway_prefix_follows_the_mount_prefix_rule(prefix: str) -> None:
    """A prefix is put in names and in URIs' authority (``scheme://<prefix>/...``): "a/b" or "s:p" made URIs the
    gateway could not route back, "" names starting with "_"."""
    with pytest.raises(ValueError, match="prefix"):
        mcpkit.proxy({prefix: _member("one", "x"), "ok": _member("two", "y")})


async def test_prefixes_that_only_share_a_beginning_route_each_name_to_its_member() -> None:
    gateway = mcpkit.proxy({"ab": _member("one", "x"), "a": _member("two", "x")})
    async with Client(gateway) as client:
        assert {t.name for t in await client.list_tools()} == {"ab_x", "a_x"}
        assert (await client.call_tool("ab_x", {})).text == "from one"
        assert (await client.call_tool("a_x", {})).text == "from two"


def _library() -> MCPKit:
    app = MCPKit("library")

    @app.resource("books://shelf/{title}")
    def book(title: str) -> str:
        return f"the text of {title}"

    @app.tool()
    def find(title: str):  # type: ignore[no-untyped-def]  # (no outputSchema: the list is the content)
        """A link to the book and the book itself."""
        uri = f"books://shelf/{title}"
        return [
            t.ResourceLink(uri=uri, name=title),
            t.EmbeddedResource(resource=t.TextResourceContents(uri=uri, text=f"the text of {title}")),
            t.TextContent(text="found"),
        ]

    @app.prompt()
    def read_aloud(title: str) -> list[dict[str, Any]]:
        uri = f"books://shelf/{title}"
        return [{"role": "user", "content": {"type": "resource", "resource": {"uri": uri, "text": "..."}}}]

    return app


@pytest.mark.parametrize("mode", ERAS)
async def test_resource_uris_in_a_members_results_are_the_gateways_and_read_back_through_it(mode: str) -> None:
    """A member's tool returns a resource link and an embedded resource naming its own URI; through the gateway
    they name the gateway's (``books://lib/shelf/...``), which ``resources/read`` routes back to the member (the
    member's own URI was "Unknown resource" at the gateway)."""
    gateway = mcpkit.proxy({"lib": _library(), "other": _member("other", "x")})
    async with serve_http(gateway) as url, Client(url, mode=mode) as client:
        result = await client.call_tool("lib_find", {"title": "dune"})
        link, embedded, text = result.content
        assert link.type == "resource_link" and link.uri == "books://lib/shelf/dune"
        assert embedded.type == "resource" and embedded.resource.uri == "books://lib/shelf/dune"
        assert text.type == "text" and text.text == "found"
        read = await client.read_resource(link.uri)
        assert read.contents[0].uri == "books://lib/shelf/dune" and read.contents[0].text == "the text of dune"
        prompt = await client.get_prompt("lib_read_aloud", {"title": "dune"})
        assert prompt.messages[0].content.resource.uri == "books://lib/shelf/dune"
