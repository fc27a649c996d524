"""OpenAPI -> MCP: ``MCPKit.from_openapi`` against a real FastAPI app on 127.0.0.1, from its OpenAPI 3.1 document
and from an OpenAPI 3.0 one, served over stdio and Streamable HTTP in both protocol eras."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpkit import Client, MCPKit
from mcpkit.protocol.errors import MCPError
from mcpkit.server.openapi import RESOURCES_FOR_GET, OpenAPIError, Route
from mcpkit.server.openapi.document import Document
from mcpkit.server.openapi.http import APIError, Caller
from mcpkit.server.openapi.operations import Reader
from support.asgi import serve_asgi
from support.paths import SERVERS
from support.toolkit import ERAS, TRANSPORTS, serve_http

sys.path.insert(0, str(SERVERS))

import openapi_api
import petstore_api

from support.typecheck import mypy_strict

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@contextlib.asynccontextmanager
async def api() -> AsyncIterator[tuple[str, Any]]:
    """The test API on 127.0.0.1: its base URL and the app (``app.state.seen`` holds what reached it)."""
    app = openapi_api.build_api()
    async with serve_asgi(app) as port:
        yield f"http://127.0.0.1:{port}", app


async def document(base: str, version: str) -> dict[str, Any]:
    if version == "3.0":
        return openapi_api.OPENAPI_30
    async with httpx.AsyncClient() as http:
        return (await http.get(f"{base}/openapi.json")).json()


@contextlib.asynccontextmanager
async def connect(
    base: str, version: str, transport: str, mode: str, *, resources: bool = False, **options: Any
) -> AsyncIterator[Client]:
    """A client of the MCP server built from the API's ``version`` document, over ``transport`` in ``mode``."""
    if transport == "stdio":
        argv = [sys.executable, str(SERVERS / "openapi_server.py"), base, version]
        async with Client(argv + (["--resources"] if resources else []), mode=mode) as client:
            yield client
        return
    spec = await document(base, version)
    async with httpx.AsyncClient(base_url=base, headers={"X-API-Key": openapi_api.API_KEY}) as http:
        routes = RESOURCES_FOR_GET if resources else ()
        app = MCPKit.from_openapi(spec, client=http, routes=routes, timeout=5, **options)
        async with serve_http(app) as url, Client(url, mode=mode) as client:
            yield client


BOTH = pytest.mark.parametrize("transport", TRANSPORTS)
ERA = pytest.mark.parametrize("mode", ERAS)
VERSIONS = pytest.mark.parametrize("version", ["3.1", "3.0"])


# ---------------------------------------------------------------------------------------------- over the wire


@BOTH
@ERA
@VERSIONS
async def test_operations_become_tools_whose_calls_reach_the_api(transport: str, mode: str, version: str) -> None:
    async with api() as (base, served), connect(base, version, transport, mode) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert {"listPets", "createPet", "getPet", "whoami", "addNote"} <= set(tools)
        create = tools["createPet"]
        assert set(create.input_schema["properties"]) == {"name", "tag", "age"}  # the JSON body, one argument each
        assert create.input_schema["required"] == ["name"]
        assert create.input_schema["additionalProperties"] is False
        assert create.annotations is not None and create.annotations.read_only_hint is False
        assert tools["listPets"].annotations is not None and tools["listPets"].annotations.read_only_hint is True
        assert "pet_id" in tools["getPet"].input_schema["required"]

        made = await client.call_tool("createPet", {"name": "Bo", "tag": "dog"})
        assert not made.is_error
        assert made.structured["name"] == "Bo" and made.structured["id"] == 4  # checked against outputSchema
        got = await client.call_tool("getPet", {"pet_id": 4})
        assert got.structured["tag"] == "dog"
        listed = await client.call_tool("listPets", {"limit": 2, "tag": ["dog", "cat"]})
        assert [p["name"] for p in listed.structured["result"]] == ["Rex", "Tom"]  # an array answer, wrapped
        assert served.state.seen[-1]["query"] == "limit=2&tag=dog&tag=cat"  # form style, exploded
        missing = await client.call_tool("getPet", {"pet_id": 99})
        assert missing.is_error and "HTTP 404" in missing.text and "no pet 99" in missing.text
        note = await client.call_tool("addNote", {"title": "hi", "body": "there"})
        assert not note.is_error and '"title":"hi"' in note.text.replace(" ", "")
        assert served.state.seen[-1]["headers"]["content-type"] == "application/x-www-form-urlencoded"


@BOTH
@ERA
@VERSIONS
async def test_the_clients_credentials_pass_through_and_are_never_arguments(
    transport: str, mode: str, version: str
) -> None:
    async with api() as (base, served), connect(base, version, transport, mode) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert tools["whoami"].input_schema["properties"] == {}  # X-API-Key: the apiKey scheme's header, hidden
        result = await client.call_tool("whoami", {})
        assert not result.is_error, result.text
        assert served.state.seen[-1]["headers"]["x-api-key"] == openapi_api.API_KEY
        refused = await client.call_tool("whoami", {"X-API-Key": "forged"})
        assert refused.is_error and "Invalid arguments for tool 'whoami'" in refused.text  # as any tool says it
        assert served.state.seen[-1]["path"] == "/whoami"  # the forged call never went out


@ERA
async def test_the_token_the_mcp_client_presented_never_reaches_the_api(mode: str) -> None:
    async with api() as (base, served):
        spec = await document(base, "3.1")
        async with httpx.AsyncClient(base_url=base) as http:
            app = MCPKit.from_openapi(spec, client=http)
            token = {"Authorization": "Bearer for-the-mcp-server-only", "Cookie": "mcp=secret"}
            async with serve_http(app) as url, Client(url, mode=mode, headers=token) as client:
                assert not (await client.call_tool("getPet", {"pet_id": 1})).is_error
                assert not (await client.call_tool("echo", {})).is_error
        sent = [s["headers"] for s in served.state.seen if s["path"] != "/openapi.json"]
        assert len(sent) == 2
        assert all("authorization" not in h and "secret" not in h.get("cookie", "") for h in sent)


@BOTH
@ERA
async def test_get_operations_become_resources_and_templates_by_route_rule(transport: str, mode: str) -> None:
    async with api() as (base, _), connect(base, "3.1", transport, mode, resources=True) as client:
        tools = {t.name for t in await client.list_tools()}
        assert "stats" not in tools and "getPet" not in tools and "createPet" in tools
        assert "openapi://pet-store/stats" in {r.uri for r in await client.list_resources()}
        templates = {t.uri_template for t in await client.list_resource_templates()}
        assert {"openapi://pet-store/pets/{pet_id}", "openapi://pet-store/pets{?limit,tag}"} <= templates
        stats = await client.read_resource("openapi://pet-store/stats")
        assert stats.contents[0].mime_type == "application/json" and '"count":3' in stats.contents[0].text
        pet = await client.read_resource("openapi://pet-store/pets/2")
        assert '"name":"Tom"' in pet.contents[0].text
        cats = await client.read_resource("openapi://pet-store/pets?limit=5&tag=cat")
        assert '"Tom"' in cats.contents[0].text and '"Rex"' not in cats.contents[0].text
        for absent in ("openapi://pet-store/pets/99", "openapi://pet-store/pets/not-a-number"):
            with pytest.raises(MCPError) as caught:
                await client.read_resource(absent)
            assert "not found" in caught.value.message.lower()


@BOTH
@ERA
async def test_header_and_cookie_parameters_are_arguments_sent_where_they_belong(transport: str, mode: str) -> None:
    async with api() as (base, served), connect(base, "3.1", transport, mode) as client:
        result = await client.call_tool("echo", {"x-trace": "t-1", "session": "abc"})
        assert result.structured == {"trace": "t-1", "session": "abc"}
        assert served.state.seen[-1]["headers"]["cookie"] == "session=abc"
        smuggled = await client.call_tool("echo", {"x-trace": "a\r\nX-Evil: 1"})
        assert smuggled.is_error and "line break" in smuggled.text


async def test_a_forwarded_cookie_joins_a_cookie_argument_as_one_cookie_header() -> None:
    """``forward_headers=("cookie",)`` beside an operation's own cookie parameter: the two go in one ``Cookie``
    header joined the way cookies are (``; ``), not the way other repeated headers are (``, ``), which would make
    the argument's value ``abc, sso=1``."""
    async with api() as (base, served), httpx.AsyncClient(base_url=base) as http:
        spec = await document(base, "3.1")
        app = MCPKit.from_openapi(spec, client=http, forward_headers=("cookie",))
        async with serve_http(app) as url, Client(url, headers={"Cookie": "sso=1"}) as client:
            result = await client.call_tool("echo", {"session": "abc"})
            assert result.structured == {"trace": None, "session": "abc"}
            assert served.state.seen[-1]["headers"]["cookie"] == "session=abc; sso=1"


# ---------------------------------------------------------------------------------------------- bounds and origin


@BOTH
@ERA
async def test_a_path_argument_never_leaves_its_segment(transport: str, mode: str) -> None:
    """A path argument is one segment: what would change the path is encoded, and a value holding ``/`` (or ``\\``)
    is refused before anything is sent, since the API decodes even ``%2F`` before it routes (the model would reach
    ``/files/{name}/delete`` with ``{"name": "a/delete"}``)."""
    async with api() as (base, served), connect(base, "3.1", transport, mode) as client:
        before = len(served.state.seen)
        for name in ("..%2Fadmin", "?q=1#frag", "%5C..", "a;b=c"):
            assert not (await client.call_tool("getFile", {"name": name})).is_error
        for name in ("..", ".", ""):
            refused = await client.call_tool("getFile", {"name": name})
            assert refused.is_error and "cannot be" in refused.text
        for name in ("a/delete", "../admin", "a/../../stats", "//203.0.113.9/x", "a\\delete", "/"):
            refused = await client.call_tool("getFile", {"name": name})
            assert refused.is_error and "cannot hold" in refused.text, name
        paths = [s["path"] for s in served.state.seen[before:]]
        assert len(paths) == 4 and all(p.startswith("/files/") and p.count("/") == 2 for p in paths), paths


async def test_a_path_parameter_named_in_path_slashes_takes_a_path_whose_parts_are_checked() -> None:
    """``path_slashes=("name",)``: the operator says the API takes a path there (FastAPI's ``/files/{name:path}``,
    which its document shows as ``/files/{name}``); its ``/`` are sent as they are and reach the handler whole,
    while an empty, ``.`` or ``..`` part, or a ``\\``, is still refused."""
    async with api() as (base, served), connect(base, "3.1", "http", "handshake", path_slashes=("name",)) as client:
        before = len(served.state.seen)
        assert (await client.call_tool("getFile", {"name": "docs/a b.txt"})).structured == {"name": "docs/a b.txt"}
        for name in ("docs/../secret", "docs//x", "./x", "docs/", "a\\b"):
            refused = await client.call_tool("getFile", {"name": name})
            assert refused.is_error and "cannot hold" in refused.text, name
        assert [s["path"] for s in served.state.seen[before:]] == ["/files/docs/a%20b.txt"]


@BOTH
@ERA
async def test_answers_are_bounded_in_size_and_time_and_redirects_not_followed(transport: str, mode: str) -> None:
    async with api() as (base, _), connect(base, "3.1", transport, mode) as client:
        big = await client.call_tool("big", {})
        assert big.is_error and "larger than" in big.text
        started = time.monotonic()

        async def timed(name: str) -> tuple[Any, float]:
            late = await client.call_tool(name, {})
            return late, time.monotonic() - started

        # no answer / an answer trickling in, a byte every 0.2 s: 5 s in all, each bounded on its own (at once: the
        # test waited the 5 s twice in each of its four cells)
        for late, took in await asyncio.gather(timed("slow"), timed("drip")):
            assert late.is_error and "did not answer within 5 s" in late.text
            assert took < 9
        away = await client.call_tool("away", {})
        assert away.is_error and "not followed" in away.text


async def test_the_bounds_are_settable() -> None:
    async with api() as (base, _):
        spec = await document(base, "3.1")
        async with httpx.AsyncClient(base_url=base) as http:
            app = MCPKit.from_openapi(spec, client=http, timeout=0.5, max_response_bytes=10)
            async with Client(app) as client:
                small = await client.call_tool("getPet", {"pet_id": 1})
                assert small.is_error and "larger than 10 bytes" in small.text
                started = time.monotonic()
                late = await client.call_tool("drip", {})
                assert late.is_error and "0.5 s" in late.text and time.monotonic() - started < 3


async def test_a_request_outside_the_allowed_origins_is_never_sent() -> None:
    async with api() as (base, served):
        doc = Document({"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {}})
        op = Reader(doc).read("get", "/stats", {"operationId": "s"}, {}, lambda n: n)
        op.path = "@203.0.113.9/stats"  # (what a malformed document would do to the URL: another host)
        async with httpx.AsyncClient() as http:
            caller = Caller(http, base, timeout=2)
            with pytest.raises(APIError, match="allowed origins"):
                await caller.call(op, {})
            op.path = "/stats"
            assert (await caller.call(op, {})).ok
        assert [s["path"] for s in served.state.seen] == ["/stats"]


async def test_an_answer_that_breaks_its_documented_schema_is_an_error() -> None:
    async with api() as (base, _):
        spec = openapi_api.liar_documented_as_stats(await document(base, "3.1"))
        async with httpx.AsyncClient(base_url=base) as http, Client(MCPKit.from_openapi(spec, client=http)) as c:
            result = await c.call_tool("liar", {})
            assert result.is_error and "does not match its documented schema" in result.text
            unchecked = MCPKit.from_openapi(spec, client=http, validate_output=False, output_schemas=False)
            async with Client(unchecked) as raw:
                assert not (await raw.call_tool("liar", {})).is_error


async def test_other_answers_become_text_image_content() -> None:
    async with api() as (base, _):
        spec = await document(base, "3.1")
        async with httpx.AsyncClient(base_url=base) as http, Client(MCPKit.from_openapi(spec, client=http)) as c:
            text = await c.call_tool("text", {})
            assert text.text == "plain words" and text.structured is None
            image = await c.call_tool("image", {})
            assert image.content[0].type == "image" and image.content[0].mime_type == "image/png"


# ---------------------------------------------------------------------------------------------- the document


def _read(spec: dict[str, Any], method: str, path: str, **options: Any) -> Any:
    doc = Document(spec)
    item = spec["paths"][path]
    return Reader(doc, **options).read(method, path, item[method], item, lambda n: n)


def test_openapi_30_schemas_are_converted_to_json_schema_2020_12() -> None:
    create = _read(openapi_api.OPENAPI_30, "post", "/pets")
    props = create.input_schema["properties"]
    assert props["tag"]["type"] == ["string", "null"]  # nullable
    assert props["age"] == {"type": ["integer", "null"], "minimum": 0}  # exclusiveMinimum: false dropped
    assert props["name"]["examples"] == ["Rex"] and "example" not in props["name"]
    listing = _read(openapi_api.OPENAPI_30, "get", "/pets")
    assert listing.input_schema["properties"]["limit"]["exclusiveMinimum"] == 0  # the number form
    assert "minimum" not in listing.input_schema["properties"]["limit"]
    out = listing.output_schema
    assert out["properties"]["result"]["items"] == {"$ref": "#/$defs/Pet"} and listing.wrap_result
    assert set(out["$defs"]) == {"Pet", "PetIn"}  # every schema the answer reaches
    pet = out["$defs"]["Pet"]["allOf"][1]
    assert pet.get("required") == ["id"]  # readOnly: still required in what the API answers
    get = _read(openapi_api.OPENAPI_30, "get", "/pets/{pet_id}")
    assert get.input_schema["required"] == ["pet_id"]  # a path-level parameter through $ref


def test_read_only_properties_are_not_arguments_and_recursive_schemas_work() -> None:
    spec = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "components": {
            "schemas": {
                "Node": {
                    "type": "object",
                    "required": ["id", "label"],
                    "properties": {
                        "id": {"type": "integer", "readOnly": True},
                        "label": {"type": "string"},
                        "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
                    },
                }
            }
        },
        "paths": {
            "/nodes": {
                "post": {
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}},
                    },
                    "responses": {
                        "200": {
                            "description": "",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}},
                        }
                    },
                }
            }
        },
    }
    op = _read(spec, "post", "/nodes")
    assert set(op.input_schema["properties"]) == {"label", "children"} and op.input_schema["required"] == ["label"]
    assert op.input_schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert op.input_schema["$defs"]["Node"]["required"] == ["label"]
    assert op.output_schema["$defs"]["Node"]["required"] == ["id", "label"]
    assert op.name == "post_nodes"
    import jsonschema_rs

    jsonschema_rs.validator_for(op.input_schema).validate({"label": "a", "children": [{"label": "b"}]})


def test_colliding_names_take_their_location() -> None:
    spec = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/items/{id}": {
                "put": {
                    "operationId": "put item",
                    "parameters": [
                        {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                        {"name": "id", "in": "query", "schema": {"type": "string"}},
                    ],
                    "requestBody": {
                        "content": {"application/json": {"schema": {"type": "object", "properties": {"name": {}}}}}
                    },
                    "responses": {"204": {"description": "done"}},
                }
            }
        },
    }
    op = _read(spec, "put", "/items/{id}")
    assert set(op.input_schema["properties"]) == {"id", "id_query", "name"}
    assert op.name == "put_item" and op.output_schema is None


def test_documents_that_cannot_be_used_are_refused_with_a_reason(caplog: pytest.LogCaptureFixture) -> None:
    client = httpx.AsyncClient(base_url="http://127.0.0.1:9")
    with pytest.raises(OpenAPIError, match=r"3\.0 or 3\.1"):
        MCPKit.from_openapi({"swagger": "2.0", "paths": {}}, client=client)
    with pytest.raises(OpenAPIError, match="no base URL"):
        MCPKit.from_openapi({"openapi": "3.1.0", "paths": {}}, client=httpx.AsyncClient())
    loop = {"openapi": "3.1.0", "paths": {"/a": {"$ref": "#/paths/~1a"}}}
    with pytest.raises(OpenAPIError, match="chain longer"):
        MCPKit.from_openapi(loop, client=client)
    external = {
        "openapi": "3.0.0",
        "info": {"title": "ext", "version": "1"},
        "paths": {
            "/x": {"get": {"parameters": [{"$ref": "https://example.com/p.json"}], "responses": {}}},
            "/y": {"get": {"operationId": "y", "responses": {}}},
        },
    }
    with caplog.at_level(logging.WARNING, logger="mcpkit.server.openapi"):
        app = MCPKit.from_openapi(external, client=client)
    assert [t.name for t in app.tools] == ["y"]  # the other operation is left out, with the reason logged
    assert "never fetched" in caplog.text


def test_yaml_documents_and_route_rules(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "api.yaml"
    path.write_text(yaml.safe_dump(openapi_api.OPENAPI_30))
    client = httpx.AsyncClient(base_url="http://127.0.0.1:9")
    routes = [
        Route(kind="exclude", operations="addNote"),
        Route(kind="resource", methods=["get"], path=r"^/pets", add_tags={"read"}),
        Route(kind="tool", tags="pets", add_tags="pets-tool"),
    ]
    app = MCPKit.from_openapi(str(path), client=client, routes=routes, names={"createPet": "new_pet"})
    assert app.name == "Pet Store 3.0"
    assert sorted(t.name for t in app.tools) == ["new_pet", "whoami"]
    assert app.get_tool("new_pet").tags == frozenset({"pets", "pets-tool"})  # type: ignore[union-attr]
    templates = {t.uri_template: t for t in app.resource_templates}
    assert set(templates) == {"openapi://pet-store-3.0/pets{?limit,tag}", "openapi://pet-store-3.0/pets/{pet_id}"}
    assert all("read" in t.tags for t in templates.values())
    with pytest.raises(ValueError, match="kind"):
        Route(kind="prompt")


def test_the_api_client_is_never_imported_by_the_server_package() -> None:

    code = (
        "import sys, mcpkit, mcpkit.server.app\n"
        "print(sorted(m for m in sys.modules if 'openapi.' in m or m == 'httpx'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


async def test_cancelling_a_call_cancels_its_request() -> None:
    async with api() as (base, _):
        spec = await document(base, "3.1")
        async with httpx.AsyncClient(base_url=base) as http, Client(MCPKit.from_openapi(spec, client=http)) as c:
            task = asyncio.ensure_future(c.call_tool("slow", {}))
            await asyncio.sleep(0.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert not (await c.call_tool("getPet", {"pet_id": 1})).is_error  # the session goes on


def test_an_httpx_async_client_is_the_client_mypy_strict_accepts(tmp_path: Path) -> None:
    """The guide's ``MCPKit.from_openapi(spec, client=httpx.AsyncClient(...))`` passes ``mypy --strict``: the
    client's protocol asks for what httpx offers, not for methods taking any keyword."""
    pytest.importorskip("mypy")
    program = tmp_path / "program.py"
    program.write_text(
        "from typing import Any\n\n"
        "import httpx\n\n"
        "from mcpkit import MCPKit\n\n"
        "def build(spec: dict[str, Any]) -> MCPKit:\n"
        '    api = httpx.AsyncClient(base_url="http://127.0.0.1:8000")\n'
        '    return MCPKit.from_openapi(spec, client=api, name="petstore")\n',
        encoding="utf-8",
    )
    proc = mypy_strict(program, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_schema_that_is_only_a_reference_to_itself_leaves_its_operation_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``A: {$ref: B}``, ``B: {$ref: A}`` describe nothing: the tool was served with ``$defs`` that loop without
    end (any client resolving them spins), and every value passed. The operations that need it are left out with
    the reason in the log, as for a ``$ref`` chain that loops; a recursive schema that says something stays."""
    spec = {
        "openapi": "3.1.0",
        "info": {"title": "loops", "version": "1"},
        "components": {
            "schemas": {
                "A": {"$ref": "#/components/schemas/B"},
                "B": {"$ref": "#/components/schemas/A"},
                "Node": {
                    "type": "object",
                    "properties": {"kids": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}},
                },
            }
        },
        "paths": {
            "/a": {
                "post": {
                    "operationId": "postA",
                    "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/A"}}}},
                    "responses": {},
                }
            },
            "/b": {
                "get": {
                    "operationId": "getB",
                    "parameters": [{"name": "b", "in": "query", "schema": {"$ref": "#/components/schemas/B"}}],
                    "responses": {},
                }
            },
            "/node": {
                "post": {
                    "operationId": "postNode",
                    "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}},
                    "responses": {},
                }
            },
        },
    }
    with caplog.at_level(logging.WARNING, logger="mcpkit.server.openapi"):
        app = MCPKit.from_openapi(spec, client=httpx.AsyncClient(base_url="http://127.0.0.1:9"))
    assert [t.name for t in app.tools] == ["postNode"]
    assert caplog.text.count("only a reference") == 2, caplog.text


def test_names_that_give_two_operations_one_name_are_refused_naming_them() -> None:
    """``names={"a": "x", "b": "x"}`` failed with the app's ``a tool named 'x' is already registered; pass
    replace=True``, which ``from_openapi`` has no way to pass: the refusal names the operations and the option."""
    spec = {
        "openapi": "3.1.0",
        "info": {"title": "dup", "version": "1"},
        "paths": {"/a": {"get": {"operationId": "a", "responses": {}}, "post": {"operationId": "b", "responses": {}}}},
    }
    with pytest.raises(OpenAPIError, match=r"names= calls POST /a 'x', the name of GET /a"):
        MCPKit.from_openapi(spec, client=httpx.AsyncClient(base_url="http://127.0.0.1:9"), names={"a": "x", "b": "x"})


@ERA
async def test_an_api_documented_as_xml_and_json_is_asked_for_json_under_its_relative_server_url(mode: str) -> None:
    """A Petstore 3 shaped document: ``servers: [{url: /v3}]`` and answers documented as XML and JSON. The
    relative server URL is joined to the client's ``base_url`` (requests go to ``/v3/pet/10``, not ``/pet/10``);
    JSON is asked for (``Accept``), so its schema is promised as the output schema and the answer is structured;
    an API that answers XML all the same gives an error result saying so."""
    pets = petstore_api.build_api()
    async with serve_asgi(pets) as port, httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        app = MCPKit.from_openapi(petstore_api.DOCUMENT, client=http, name="petstore", timeout=5)
        async with serve_http(app) as url, Client(url, mode=mode) as client:
            tools = {t.name: t for t in await client.list_tools()}
            for name in ("getPetById", "findPetsByStatus", "getInventory"):
                assert tools[name].output_schema is not None, name
            pet = await client.call_tool("getPetById", {"petId": 10})
            assert not pet.is_error, pet.text
            assert pet.structured == petstore_api.PETS[10]
            assert (await client.call_tool("getInventory", {})).structured == {"available": 1}
            missing = await client.call_tool("getPetById", {"petId": 99})
            assert missing.is_error and "404" in missing.text
            stubborn = await client.call_tool("findPetsByStatus", {"status": "available"})
            assert stubborn.is_error
            assert "application/xml where JSON was documented" in stubborn.text, stubborn.text
    assert pets.state.accepts == ["application/json"] * 4


async def test_a_relative_server_url_is_joined_to_the_clients_base_url_and_an_explicit_one_wins() -> None:
    pets = petstore_api.build_api()
    async with serve_asgi(pets) as port:
        root = f"http://127.0.0.1:{port}"
        for client_base, base_url in ((root, None), (root + "/v3", None), ("http://127.0.0.1:1", root + "/v3")):
            async with httpx.AsyncClient(base_url=client_base) as http:
                app = MCPKit.from_openapi(petstore_api.DOCUMENT, client=http, base_url=base_url, timeout=5)
                async with Client(app) as client:
                    assert (await client.call_tool("getInventory", {})).structured == {"available": 1}
