"""``ctx.elicit`` asks for scalars, choices, dataclasses and TypedDicts with the restricted flat schema each revision
allows (spec, client/elicitation: 2025-06-18 "StringSchema | NumberSchema | BooleanSchema | EnumSchema", a default
only on a boolean, titles only as the legacy ``enumNames``; 2025-11-25 and 2026-07-28: defaults on every primitive,
titled single-select ``oneOf`` of ``const``/``title``, multi-select arrays), and hands the answer back in the type
asked for, as a result that narrows on its action. Real client and server, both eras; every requested schema is
checked against the revision's official schema (tests/support/oracle.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import sys
from typing import Any, Literal, NotRequired, Required, TypedDict

import pytest

from mcpkit import (
    AcceptedElicitation,
    CancelledElicitation,
    Client,
    Context,
    DeclinedElicitation,
    ElicitationParams,
    InputHandlerError,
    MCPKit,
)
from mcpkit.client.lowlevel import ClientSession
from mcpkit.client.results import ElicitationContentError
from mcpkit.transports.memory import create_memory_pair
from support.oracle import validate_def, validate_message

REVISIONS = ("2025-06-18", "2025-11-25", "2026-07-28")


class Color(enum.Enum):
    RED = "#ff0000"
    GREEN = "#00ff00"


@dataclasses.dataclass
class Seat:
    row: int
    window: bool = False


class Contact(TypedDict):
    email: str
    age: int


def make_app() -> MCPKit:
    app = MCPKit("forms")

    @app.tool
    async def ask(kind: str, ctx: Context) -> str:
        """Ask one question of the given kind; return what came back and its Python type."""
        asked: dict[str, Any] = {
            "bool": bool,
            "str": str,
            "int": int,
            "float": float,
            "literal": Literal["tea", "coffee"],
            "enum": Color,
            "choices": ["small", "large"],
            "dataclass": Seat,
            "typeddict": Contact,
            "confirm": None,
            "multi": list[Color],
        }
        result = await ctx.elicit(f"question {kind}", asked[kind])
        if isinstance(result, AcceptedElicitation):
            data = result.data
            shown = dataclasses.asdict(data) if dataclasses.is_dataclass(data) else data
            if isinstance(shown, enum.Enum):
                shown = shown.name
            if isinstance(shown, list):
                shown = [x.name if isinstance(x, enum.Enum) else x for x in shown]
            return json.dumps({"type": type(data).__name__, "data": shown})
        assert isinstance(result, (DeclinedElicitation, CancelledElicitation)) and result.data is None
        return result.action

    return app


ANSWERS: dict[str, dict[str, Any]] = {
    "bool": {"value": True},
    "str": {"value": "hello"},
    "int": {"value": 42},
    "float": {"value": 2.5},
    "literal": {"value": "coffee"},
    "enum": {"value": "#00ff00"},
    "choices": {"value": "large"},
    "dataclass": {"row": 7},
    "typeddict": {"email": "a@b.c", "age": 3},
    "confirm": {},
    "multi": {"value": ["#ff0000", "#00ff00"]},
}
EXPECTED = {
    "bool": {"type": "bool", "data": True},
    "str": {"type": "str", "data": "hello"},
    "int": {"type": "int", "data": 42},
    "float": {"type": "float", "data": 2.5},
    "literal": {"type": "str", "data": "coffee"},
    "enum": {"type": "Color", "data": "GREEN"},
    "choices": {"type": "str", "data": "large"},
    "dataclass": {"type": "Seat", "data": {"row": 7, "window": False}},
    "typeddict": {"type": "dict", "data": {"email": "a@b.c", "age": 3}},
    "confirm": {"type": "NoneType", "data": None},
    "multi": {"type": "list", "data": ["RED", "GREEN"]},
}


def _kind(params: ElicitationParams) -> str:
    return params.message.removeprefix("question ")


def _check_on_the_wire(params: ElicitationParams, revision: str) -> None:
    """The elicitation request as sent is valid for the revision's official schema."""
    if revision == "2026-07-28":  # an input request of an InputRequiredResult: method and params, no envelope
        validate_def({"method": "elicitation/create", "params": params.wire}, revision, "ElicitRequest")
    else:
        msg = {"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": params.wire}
        validate_message(msg, revision, sender="server")


@pytest.mark.parametrize("revision", REVISIONS)
async def test_scalars_choices_dataclasses_and_typeddicts_come_back_in_the_type_asked(revision: str) -> None:
    seen: dict[str, ElicitationParams] = {}

    def user(params: ElicitationParams) -> dict[str, Any]:
        seen[_kind(params)] = params
        return ANSWERS[_kind(params)]

    async with Client(make_app(), protocol_version=revision, elicitation_handler=user) as client:
        for kind, expected in EXPECTED.items():
            result = await client.call_tool("ask", {"kind": kind})
            if kind == "multi" and revision == "2025-06-18":
                assert result.is_error and "multi-select field needs protocol 2025-11-25" in result.text
                continue
            assert not result.is_error, (kind, result.text)
            assert json.loads(result.text) == expected, kind
    for params in seen.values():
        _check_on_the_wire(params, revision)


@pytest.mark.parametrize("revision", REVISIONS)
async def test_each_form_is_the_one_its_revision_allows(revision: str) -> None:
    schemas: dict[str, Any] = {}

    def user(params: ElicitationParams) -> dict[str, Any]:
        schemas[_kind(params)] = params.requested_schema
        return ANSWERS[_kind(params)]

    async with Client(make_app(), protocol_version=revision, elicitation_handler=user) as client:
        for kind in ("bool", "int", "enum", "choices", "dataclass", "confirm"):
            await client.call_tool("ask", {"kind": kind})
    assert schemas["bool"] == {"type": "object", "properties": {"value": {"type": "boolean"}}, "required": ["value"]}
    assert schemas["int"]["properties"]["value"] == {"type": "integer"}
    assert schemas["choices"]["properties"]["value"] == {"type": "string", "enum": ["small", "large"]}
    assert schemas["confirm"] == {"type": "object", "properties": {}}
    seat = schemas["dataclass"]
    assert seat["required"] == ["row"] and seat["properties"]["row"] == {"type": "integer"}
    assert seat["properties"]["window"] == {"type": "boolean", "default": False}
    color = schemas["enum"]["properties"]["value"]
    if revision == "2025-06-18":  # titles only as the legacy enumNames
        assert color == {"type": "string", "enum": ["#ff0000", "#00ff00"], "enumNames": ["Red", "Green"]}
    else:  # TitledSingleSelectEnumSchema
        assert color == {
            "type": "string",
            "oneOf": [{"const": "#ff0000", "title": "Red"}, {"const": "#00ff00", "title": "Green"}],
        }


async def test_defaults_are_sent_only_where_the_revision_has_them() -> None:
    app = MCPKit("defaults")

    @dataclasses.dataclass
    class Order:
        size: Literal["S", "M"] = "M"
        count: int = 1
        gift: bool = True

    @app.tool
    async def order(ctx: Context) -> str:
        await ctx.elicit("Order?", Order)
        return "ok"

    props: dict[str, Any] = {}
    for revision in ("2025-06-18", "2025-11-25"):
        asked: list[ElicitationParams] = []
        async with Client(app, protocol_version=revision, elicitation_handler=asked.append) as client:
            await client.call_tool("order")
        assert asked[0].requested_schema is not None
        props[revision] = asked[0].requested_schema["properties"]
    assert props["2025-06-18"] == {
        "size": {"type": "string", "enum": ["S", "M"]},
        "count": {"type": "integer"},
        "gift": {"type": "boolean", "default": True},
    }
    assert props["2025-11-25"] == {
        "size": {"type": "string", "default": "M", "enum": ["S", "M"]},
        "count": {"type": "integer", "default": 1},
        "gift": {"type": "boolean", "default": True},
    }


@pytest.mark.parametrize("revision", ("2025-11-25", "2026-07-28"))
async def test_declined_and_cancelled_answers_carry_no_data(revision: str) -> None:
    answers = iter([{"action": "decline"}, {"action": "cancel"}])
    async with Client(make_app(), protocol_version=revision, elicitation_handler=lambda p: next(answers)) as client:
        assert (await client.call_tool("ask", {"kind": "bool"})).text == "decline"
        assert (await client.call_tool("ask", {"kind": "bool"})).text == "cancel"


@pytest.mark.parametrize("revision", ("2025-11-25", "2026-07-28"))
async def test_an_answer_that_does_not_fit_the_type_is_a_tool_error_the_model_can_read(revision: str) -> None:
    app = MCPKit("strict")

    @app.tool
    async def how_many(ctx: Context) -> int:
        answer = await ctx.elicit("How many?", int)
        return answer.data if answer.action == "accept" else 0

    # mcpkit's Client checks content against the requested schema before sending it; a bare session does not
    async def careless(params: ElicitationParams) -> dict[str, Any]:
        return {"action": "accept", "content": {"value": "many"}}

    client_end, server_end = create_memory_pair()
    serving = asyncio.get_running_loop().create_task(app.serve(server_end))
    try:
        async with ClientSession(client_end, protocol_version=revision, elicitation_handler=careless) as session:
            result = await session.call_tool("how_many")
    finally:
        serving.cancel()
    assert (
        result.is_error
        and "the user's answer does not fit int ('many'): Input should be a valid integer" in result.text
    )


def test_a_type_that_cannot_be_a_form_field_is_refused_before_anything_is_sent() -> None:
    from mcpkit.protocol.versions import features
    from mcpkit.server.elicitation import elicitation_form

    @dataclasses.dataclass
    class Nested:
        seat: Seat

    with pytest.raises(TypeError, match=r"elicitation field 'seat': Seat cannot be asked in a form"):
        elicitation_form(Nested, features("2025-11-25"))
    with pytest.raises(TypeError, match="elicitation choices are strings"):
        elicitation_form(Literal[1, 2], features("2025-11-25"))


@pytest.mark.parametrize("revision", REVISIONS)
async def test_a_tool_that_catches_every_exception_around_elicit_still_asks(revision: str) -> None:
    """``except Exception`` around ``ctx.elicit`` (a tool guarding against a client that cannot answer) does not
    swallow the 2026-07-28 round trip: the question reaches the client and the tool gets the answer, in every
    revision (in 2026-07-28 the asking unwinds the tool as an InputRequiredResult, like a cancellation)."""
    app = MCPKit("guarded")

    @app.tool
    async def greet(ctx: Context) -> str:
        try:
            answer = await ctx.elicit("name?", str)
        except Exception as exc:
            return f"could not ask: {type(exc).__name__}"
        return f"hello {answer.data}" if isinstance(answer, AcceptedElicitation) else answer.action

    async with Client(app, protocol_version=revision, elicitation_handler=lambda p: {"value": "Ada"}) as client:
        result = await client.call_tool("greet", {})
        assert not result.is_error and result.text == "hello Ada", result.text


async def test_input_asked_by_a_method_that_cannot_ask_is_an_internal_error_and_the_session_goes_on() -> None:
    """Only tools/call, prompts/get and resources/read may answer with an InputRequiredResult; a handler of another
    method that asks (here a resource list) gets -32603, and the session goes on."""
    from mcpkit import MCPError
    from mcpkit.server.lowlevel import InputRequired

    app = MCPKit("asks")

    @app.tool
    def ping_tool() -> str:
        return "pong"

    async def asking_list(ctx: Any, params: Any) -> Any:
        raise InputRequired({"q": {"method": "elicitation/create", "params": {"message": "?"}}})

    app.set_handler("resources/list", asking_list)
    async with Client(app, protocol_version="2026-07-28") as client:
        with pytest.raises(MCPError) as raised:
            await client.session.request("resources/list", {})
        assert raised.value.code == -32603
        assert (await client.call_tool("ping_tool", {})).text == "pong"


class _Signup(TypedDict, total=False):
    email: Required[str]
    nickname: str


class _Profile(TypedDict):
    name: str
    bio: NotRequired[str]


class _Street(TypedDict):
    street: str


class _Letter(TypedDict):
    to: str
    address: _Street


@pytest.mark.parametrize("revision", REVISIONS)
async def test_typeddict_forms_keep_required_and_not_required_keys_on_every_python(revision: str) -> None:
    """``typing.TypedDict`` forms with ``Required``/``NotRequired`` keys written as text (this module has ``from
    __future__ import annotations``, which hides them from ``__required_keys__`` before Python 3.12): the form
    says which keys are required and an answer without one is refused, on every Python the package supports."""
    app = MCPKit("typeddict-forms")

    @app.tool
    async def ask(kind: str, ctx: Context) -> str:
        result = await ctx.elicit(kind, {"signup": _Signup, "profile": _Profile}[kind])
        return json.dumps(result.data)

    answers: dict[str, dict[str, Any]] = {}
    seen: dict[str, ElicitationParams] = {}

    def user(params: ElicitationParams) -> dict[str, Any]:
        seen[params.message] = params
        return answers[params.message]

    async with Client(app, protocol_version=revision, elicitation_handler=user) as client:
        for kind, full, missing in [
            ("signup", {"email": "a@b.c", "nickname": "ab"}, {"nickname": "ab"}),
            ("profile", {"name": "Ada"}, {"bio": "x"}),
        ]:
            answers[kind] = full
            result = await client.call_tool("ask", {"kind": kind})
            assert not result.is_error and json.loads(result.text) == full, result.text
            answers[kind] = missing
            try:
                result = await client.call_tool("ask", {"kind": kind})
                refused = result.text if result.is_error else None
            except InputHandlerError as exc:  # (2026-07-28: the client checks its answer before it retries)
                assert isinstance(exc.__cause__, ElicitationContentError)
                refused = str(exc)
            assert refused is not None and "required" in refused, refused
    assert seen["signup"].requested_schema["required"] == ["email"]
    assert seen["profile"].requested_schema["required"] == ["name"]
    for params in seen.values():
        _check_on_the_wire(params, revision)


def test_a_nested_typeddict_is_refused_as_a_nested_field_on_every_python() -> None:
    """A ``typing.TypedDict`` with another one inside is refused for what it is (a form holds nothing nested),
    not with pydantic's "use typing_extensions.TypedDict" on Python before 3.12."""
    from mcpkit.protocol.versions import features
    from mcpkit.server.elicitation import elicitation_form

    with pytest.raises(TypeError, match=r"elicitation field 'address': _Street cannot be asked in a form"):
        elicitation_form(_Letter, features("2025-11-25"))


URL_REQUIRED_SERVER = """
from mcpkit import MCPKit
from mcpkit.protocol.errors import URLElicitationRequired

app = MCPKit("url-required")
done = []


@app.tool
def connect() -> str:
    \"\"\"Needs the user to sign in at a URL first.\"\"\"
    if not done:
        done.append(1)
        item = {"mode": "url", "message": "Sign in", "url": "https://example.com/in", "elicitationId": "e1"}
        raise URLElicitationRequired("sign in first", {"elicitations": [item]})
    return "connected"


app.run()
"""


@pytest.mark.npm
async def test_a_tool_raising_url_elicitation_required_answers_the_32042_error(node_bin: Any, tmp_path: Any) -> None:
    """Spec 2025-11-25 (client/elicitation, "URL Elicitation Required Error"): a request that cannot go on until the
    user finished a URL elicitation is answered with the JSON-RPC error -32042 listing them; the client handles them
    and retries. A tool raising ``URLElicitationRequired`` got an ``isError`` result with the message instead, so
    no client (the TypeScript SDK's, mcpkit's) could ever see the error. 2026-07-28 MUST NOT emit -32042: there it
    stays an error result."""
    from support.paths import INTEROP, TESTS

    script = tmp_path / "url_required.py"
    script.write_text(URL_REQUIRED_SERVER)
    steps = [{"op": "callTool", "name": "connect", "arguments": {}}, {"op": "callTool", "name": "connect"}]
    for client, era in (("ts_client.mjs", []), ("ts_client_v2.mjs", ["--negotiation", "2026-07-28"])):
        proc = await asyncio.create_subprocess_exec(
            str(node_bin),
            str(INTEROP / client),
            *era,
            "--stdio",
            f"{sys.executable} {script}",
            "--script",
            json.dumps({"steps": steps}),
            stdout=asyncio.subprocess.PIPE,
            cwd=str(TESTS),
        )
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        first, second = json.loads(out)["results"]
        if not era:
            assert first["error"]["code"] == -32042, first
            assert first["error"]["data"]["elicitations"][0]["url"] == "https://example.com/in"
        else:
            assert first["isError"] is True and first["content"][0]["text"] == "sign in first"
        assert second["content"][0]["text"] == "connected"

    asked: list[str] = []
    async with Client(
        [sys.executable, str(script)], mode="handshake", elicitation_handler=lambda p: asked.append(p.wire["url"]) or {}
    ) as c:
        assert (await c.call_tool("connect")).text == "connected"  # handed to the handler, then retried
    assert asked == ["https://example.com/in"]
