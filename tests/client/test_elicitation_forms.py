"""What the client accepts as an elicitation form and what it sends back: a form is flat (every field a primitive,
a multi-select or a nullable one of them), checked before the user's handler sees it; an answer carries no null
a server would refuse. Real servers: the official TypeScript SDK's (``tests/support/interop/ts_elicit_server.mjs``,
whose ``ElicitResultSchema`` refuses nulls), the official Python SDK's (``peers/sdk_elicit.py``), and mcpkit's in
process."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client, Context, MCPKit
from mcpkit.client.results import InputHandlerError
from mcpkit.protocol.errors import MCPError
from support.paths import INTEROP, SERVERS, TESTS

pytestmark = pytest.mark.timeout(90)

TS_ELICIT = INTEROP / "ts_elicit_server.mjs"
NAME = {"type": "string"}
NULLABLE = {"anyOf": [{"type": "string"}, {"type": "null"}]}


@pytest.fixture
def ts_elicit(node_bin: Path) -> list[str]:
    if not (TESTS / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.skip("the TypeScript SDK is not installed in tests/node_modules")
    return [str(node_bin), str(TS_ELICIT)]


def _asking_server() -> MCPKit:
    """Its tool ``ask`` elicits the schema given as its argument and answers the content it got, or the error."""
    server = MCPKit("asking")

    @server.tool()
    async def ask(schema: dict[str, Any], ctx: Context) -> str:
        try:
            result = await ctx.elicit("Fill in the form", schema)
        except MCPError as exc:
            return json.dumps({"code": exc.code, "message": exc.message})
        return json.dumps({"action": result.action, "content": result.content})

    return server


@pytest.mark.parametrize("nick", [NULLABLE, {"type": "string"}], ids=["nullable", "plain"])
async def test_a_null_for_a_field_that_is_not_required_is_left_out_of_the_answer(
    ts_elicit: list[str], nick: dict[str, Any]
) -> None:
    """A handler answered ``{"nick": None}`` for an optional field. With a nullable schema the null went to the
    server, and the TypeScript SDK refused the whole answer (content values are strings, numbers, booleans or
    lists of strings); with a plain one the client refused the answer itself. A null for a field that is not
    required means no value: it is now left out, and both servers get the user's answer."""
    schema = {"type": "object", "properties": {"name": NAME, "nick": nick}, "required": ["name"]}
    async with Client(ts_elicit, elicitation_handler=lambda p: {"name": "Ada", "nick": None}, timeout=30) as client:
        result = await client.call_tool("ask", {"schema": json.dumps(schema)})
    assert not result.is_error, result.text
    assert json.loads(result.text) == {"action": "accept", "content": {"name": "Ada"}}


async def test_a_null_for_a_required_field_whose_schema_does_not_allow_it_is_refused_by_the_client(
    ts_elicit: list[str],
) -> None:
    schema = {"type": "object", "properties": {"name": NAME}, "required": ["name"]}
    async with Client(ts_elicit, elicitation_handler=lambda p: {"name": None}, timeout=30) as client:
        result = await client.call_tool("ask", {"schema": json.dumps(schema)})
    assert result.is_error and "refused" in result.text and "at name" in result.text, result.text


async def test_a_null_for_a_required_field_whose_schema_allows_null_is_sent() -> None:
    """Servers of the official Python SDK (1.x) ask ``Optional`` fields without a default as required and
    nullable (``anyOf`` with null): there the null is what the server asks for, and it goes."""
    schema = {
        "type": "object",
        "properties": {"x": NULLABLE, "y": {"type": ["string", "null"]}},
        "required": ["x", "y"],
    }
    async with Client(
        _asking_server(), mode="handshake", elicitation_handler=lambda p: {"x": None, "y": None}
    ) as client:
        result = await client.call_tool("ask", {"schema": schema})
    assert json.loads(result.text) == {"action": "accept", "content": {"x": None, "y": None}}


async def test_an_official_python_sdk_server_gets_an_answer_without_its_optional_field() -> None:
    """``mcp`` 2.3.0 asks ``nick: str | None = None`` as an optional plain string: a handler's null for it was
    refused by the client (not a string); it is now left out and the server reads its default. A required
    ``str | None`` is asked as a required plain string: a null for it is refused, saying so."""
    pytest.importorskip("mcp.server.mcpserver")
    command = [sys.executable, str(SERVERS / "peers" / "sdk_elicit.py")]
    answers = iter([{"name": "Ada", "nick": None}, {"nick": None}])
    async with Client(command, elicitation_handler=lambda p: next(answers), timeout=30, mode="handshake") as client:
        optional = await client.call_tool("optional", {})
        required = await client.call_tool("required_nullable", {})
    assert json.loads(optional.text) == {"action": "accept", "data": {"name": "Ada", "nick": None}}
    assert required.text.startswith("error:") and "nick" in required.text, required.text


FORMS = {
    "nullable anyOf": NULLABLE,
    "nullable oneOf": {"oneOf": [{"type": "null"}, {"type": "integer", "minimum": 1}]},
    "nullable type list": {"type": ["boolean", "null"]},
    "titled choice": {"type": "string", "oneOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]},
    "legacy titled enum": {"type": "string", "enum": ["a", "b"], "enumNames": ["A", "B"]},
    "multi-select": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
    "titled multi-select": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}]}},
    "number": {"type": "number", "maximum": 3},
}
NOT_FORMS = {
    "object": {"type": "object", "properties": {"deep": {"type": "string"}}},
    "array of numbers": {"type": "array", "items": {"type": "number"}},
    "reference": {"$ref": "#/$defs/Color"},
    "union of two primitives": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    "nullable object": {"anyOf": [{"type": "object"}, {"type": "null"}]},
    "type list of two primitives": {"type": ["string", "integer"]},
    "not a schema": "string",
}


@pytest.mark.parametrize("field", list(FORMS.values()), ids=list(FORMS))
async def test_a_flat_form_reaches_the_handler(field: Any) -> None:
    seen: list[Any] = []
    schema = {"type": "object", "properties": {"f": field}}
    async with Client(_asking_server(), mode="handshake", elicitation_handler=lambda p: seen.append(p) or {}) as client:
        result = await client.call_tool("ask", {"schema": schema})
    assert json.loads(result.text) == {"action": "accept", "content": {}} and len(seen) == 1


@pytest.mark.parametrize("field", list(NOT_FORMS.values()), ids=list(NOT_FORMS))
async def test_a_form_with_a_field_that_is_not_flat_is_refused_before_the_handler_sees_it(field: Any) -> None:
    """The spec allows only primitive top-level fields, but the client handed a nested ``requestedSchema`` to
    the handler, which could render it only wrongly. The client now answers -32602 naming the field."""
    seen: list[Any] = []
    schema = {"type": "object", "properties": {"name": NAME, "bad": field}}
    async with Client(_asking_server(), mode="handshake", elicitation_handler=lambda p: seen.append(p) or {}) as client:
        result = await client.call_tool("ask", {"schema": schema})
    answer = json.loads(result.text)
    assert answer["code"] == -32602 and "'bad'" in answer["message"], answer
    assert not seen


async def test_in_2026_07_28_a_form_that_is_not_flat_fails_the_call_before_the_handler_sees_it() -> None:
    """That era has no error answer to an input request: the call fails with the client's -32602 as the cause."""
    seen: list[Any] = []
    schema = {"type": "object", "properties": {"bad": NOT_FORMS["object"]}}
    async with Client(_asking_server(), mode="modern", elicitation_handler=lambda p: seen.append(p) or {}) as client:
        with pytest.raises(InputHandlerError) as caught:
            await client.call_tool("ask", {"schema": schema})
    cause = caught.value.__cause__
    assert isinstance(cause, MCPError) and cause.code == -32602 and "'bad'" in cause.message
    assert not seen


async def test_a_typescript_server_asking_a_nested_form_gets_an_invalid_params_error(ts_elicit: list[str]) -> None:
    schema = {"type": "object", "properties": {"address": {"type": "object", "properties": {"city": NAME}}}}
    seen: list[Any] = []
    async with Client(ts_elicit, elicitation_handler=lambda p: seen.append(p) or {}, timeout=30) as client:
        result = await client.call_tool("ask", {"schema": json.dumps(schema)})
    assert result.is_error and "-32602" in result.text and "'address'" in result.text, result.text
    assert not seen
