"""``mcpkit.client.codegen.generate``: JSON Schema to Python types, names made safe, server text that never becomes
code, bounds, the same text every time, and a module that ``mypy --strict`` and ``ruff`` accept."""

from __future__ import annotations

import ast
import importlib.util
import random
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from mcpkit.client.codegen import CodegenError, generate
from support.paths import REPO
from support.typecheck import mypy_strict, ruff_problems

INJECTION = '"""; import os; os._exit(7); """'
HOSTILE_TEXT = f'{INJECTION}\n\\\n\'\'\' "" " \\x00 \x00 \u202e\u2028 end"\\'


def _tool(name: str, properties: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if "required" in extra:
        schema["required"] = extra.pop("required")
    if "defs" in extra:
        schema["$defs"] = extra.pop("defs")
    return {"name": name, "inputSchema": schema, **extra}


def _load(source: str, tmp_path: Path, name: str = "generated_client") -> ModuleType:
    path = tmp_path / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


def _quoted_types(node: ast.AST) -> list[ast.AST]:
    """A string constant that is a type expression (a quoted alias or TypedDict value), parsed."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return [ast.parse(node.value, mode="eval")]
        except SyntaxError:
            return []
    return []


def _field_lines(source: str) -> set[str]:
    return {line.strip() for line in source.splitlines()}


def test_json_schema_types_become_python_types() -> None:
    """Scalars, enum and const as Literal, arrays, maps, nested objects, unions, type lists, nullable, and
    anything not understood as Any."""
    properties = {
        "s": {"type": "string"},
        "i": {"type": "integer"},
        "n": {"type": "number"},
        "b": {"type": "boolean"},
        "z": {"type": "null"},
        "color": {"enum": ["red", "green", None]},
        "one": {"const": 1},
        "flag": {"const": True},
        "floats": {"enum": [1.5, 2.5], "type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "anything": {"type": "array"},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "free": {"type": "object"},
        "point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
        "either": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
        "oneof": {"oneOf": [{"type": "boolean"}, {"type": "boolean"}]},
        "listed": {"type": ["string", "null"]},
        "openapi": {"type": "string", "nullable": True},
        "single": {"allOf": [{"type": "integer"}]},
        "both": {"allOf": [{"type": "integer"}, {"minimum": 1}]},
        "weird": {"type": "quaternion"},
        "yes": True,
        "no": False,
        "remote": {"$ref": "https://example.com/schema.json"},
    }
    source = generate([_tool("shapes", properties, required=["s"])])
    lines = _field_lines(source)
    expected = {
        "s: str",
        "i: NotRequired[int]",
        "n: NotRequired[float]",
        "b: NotRequired[bool]",
        "z: NotRequired[None]",
        'color: NotRequired[Literal["red", "green"] | None]',
        "one: NotRequired[Literal[1]]",
        "flag: NotRequired[Literal[True]]",
        "floats: NotRequired[float]",
        "tags: NotRequired[list[str]]",
        "anything: NotRequired[list[Any]]",
        "counts: NotRequired[dict[str, int]]",
        "free: NotRequired[dict[str, Any]]",
        "point: NotRequired[ShapesInputPoint]",
        "either: NotRequired[str | int | None]",
        "oneof: NotRequired[bool]",
        "listed: NotRequired[str | None]",
        "openapi: NotRequired[str | None]",
        "single: NotRequired[int]",
        "both: NotRequired[Any]",
        "weird: NotRequired[Any]",
        "yes: NotRequired[Any]",
        "no: NotRequired[Any]",
        "remote: NotRequired[Any]",
        "class ShapesInputPoint(TypedDict):",
        "x: float",
    }
    assert expected - lines == set()


def test_refs_become_named_typed_dicts_and_cycles_forward_references(tmp_path: Path) -> None:
    """``$defs`` (and draft-07 ``definitions``) objects are TypedDicts named after the definition, a recursive one
    refers to itself; a cycle through non-object definitions only is Any; the module imports."""
    defs = {
        "Node": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            },
            "required": ["value"],
        },
        "Color": {"enum": ["red", "blue"]},
        "Loop": {"$ref": "#/$defs/Loop"},
        "A": {"anyOf": [{"$ref": "#/$defs/B"}, {"type": "string"}]},
        "B": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "integer"}]},
    }
    tree = _tool(
        "tree",
        {
            "root": {"$ref": "#/$defs/Node"},
            "color": {"$ref": "#/$defs/Color"},
            "loop": {"$ref": "#/$defs/Loop"},
            "ab": {"$ref": "#/$defs/A"},
            "missing": {"$ref": "#/$defs/Nowhere"},
            "legacy": {"$ref": "#/definitions/Old"},
        },
        required=["root"],
        defs=defs,
    )
    tree["inputSchema"]["definitions"] = {"Old": {"type": "object", "properties": {"o": {"type": "string"}}}}
    source = generate([tree])
    lines = _field_lines(source)
    assert {
        "class Node(TypedDict):",
        "children: NotRequired[list[Node]]",
        "root: Node",
        'color: NotRequired[Literal["red", "blue"]]',
        "loop: NotRequired[Any]",
        "missing: NotRequired[Any]",
        "legacy: NotRequired[Old]",
        "class Old(TypedDict):",
    } - lines == set()
    module = _load(source, tmp_path)
    assert set(module.Node.__annotations__) == {"value", "children"}


def test_blank_descriptions_and_anchor_refs_neither_crash_nor_mistype() -> None:
    """A description of blanks only (on a tool, an object, a property) gives no docstring of its own, and a
    ``#name`` anchor reference (not a JSON pointer) is Any, not the whole schema."""
    tool = _tool(
        "blank",
        {
            "obj": {
                "type": "object",
                "description": " \n\t ",
                "properties": {"a": {"type": "string", "description": " "}},
            },
            "anchored": {"$ref": "#node"},
        },
        description="  \n  ",
    )
    tool["inputSchema"]["description"] = "\n"
    source = generate([tool])
    assert "anchored: NotRequired[Any]" in source
    assert '"""Call the tool blank."""' in source
    ast.parse(source)


def test_hostile_names_and_descriptions_never_become_code(tmp_path: Path) -> None:
    """Quotes, triple quotes, backslashes, newlines, NUL, bidi and line-separator characters in a tool's name,
    description, parameter names and descriptions, enum values and the server's name: the module parses to the
    expected statements only, imports without running anything of theirs, and keeps their text as data."""
    tools = [
        _tool(
            INJECTION,
            {
                "from": {"type": "string", "description": HOSTILE_TEXT},
                INJECTION: {"enum": [INJECTION, "it's", "\\", 'a "b"', HOSTILE_TEXT]},
            },
            required=["from"],
            description=HOSTILE_TEXT,
            outputSchema={"type": "object", "description": HOSTILE_TEXT, "properties": {INJECTION: {"type": "string"}}},
        ),
    ]
    source = generate(tools, server_name=HOSTILE_TEXT, server_version=INJECTION)
    tree = ast.parse(source)
    imports = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert imports == [
        "from __future__ import annotations",
        "from enum import Enum",
        "from typing import Any, Final, Literal, NotRequired, TypeAlias, TypedDict, cast",
        "from mcpkit import Client",
    ]
    called = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert called == {"TypedDict", "cast", "self.client.call_tool"}
    module = _load(source, tmp_path)  # (an injected os._exit(7) would end the test run here)
    wrapper = (
        module.HostileTools
        if hasattr(module, "HostileTools")
        else next(v for k, v in vars(module).items() if k.endswith("Tools"))
    )
    method = next(v for k, v in vars(wrapper).items() if not k.startswith("_"))
    assert " ".join(HOSTILE_TEXT.split()) in " ".join((method.__doc__ or "").split())
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func).endswith("call_tool"))
    assert ast.literal_eval(call.args[0]) == INJECTION  # the tool is called by its own name, as data
    literal_values = {
        ast.literal_eval(e)
        for n in ast.walk(tree)
        for t in [n, *_quoted_types(n)]
        for s in ast.walk(t)
        if isinstance(s, ast.Subscript) and ast.unparse(s.value) == "Literal"
        for e in (s.slice.elts if isinstance(s.slice, ast.Tuple) else [s.slice])
    }
    assert literal_values == {INJECTION, "it's", "\\", 'a "b"', HOSTILE_TEXT}
    (tmp_path / "hostile_client.py").write_text(source, encoding="utf-8")
    assert ruff_problems(tmp_path / "hostile_client.py", REPO / "pyproject.toml") == []


def test_names_are_python_identifiers_that_never_collide() -> None:
    """Keywords, invalid identifiers, non-ASCII, tools whose names fold to the same identifier, a tool named like
    the wrapper's ``client`` or a builtin, parameters named ``self``/``arguments``, and a definition named like a
    tool's generated type: every name is an identifier, unique where it lives."""
    tools = [
        _tool("class"),
        _tool("get-weather", {"self": {"type": "string"}, "arguments": {"type": "string"}, "l": {"type": "string"}}),
        _tool("get_weather", {"getWeather": {"type": "string"}, "get_weather": {"type": "string"}}),
        _tool("getWeather"),
        _tool("client"),
        _tool("list"),
        _tool("123go"),
        _tool("caf\u00e9"),
        _tool("\u65e5\u672c"),
        _tool(""),
        _tool("__init__"),
        _tool(
            "echo",
            {"x": {"$ref": "#/$defs/EchoInput"}},
            defs={"EchoInput": {"type": "object", "properties": {"y": {}}}},
        ),
    ]
    tree = ast.parse(generate(tools, server_name="names"))
    wrapper = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "NamesTools")
    methods = [n.name for n in wrapper.body if isinstance(n, ast.AsyncFunctionDef)]
    assert methods == [  # (in the order of the tools' names: "", "123go", "__init__", ...)
        "tool",
        "tool_123go",
        "init",
        "cafe",
        "class_",
        "client_",
        "echo",
        "get_weather",
        "get_weather_2",
        "get_weather_3",
        "list_",
        "tool_2",
    ]
    weather = next(n for n in wrapper.body if isinstance(n, ast.AsyncFunctionDef) and n.name == "get_weather")
    assert [a.arg for a in weather.args.kwonlyargs] == ["self_", "arguments_", "l_"]
    weather2 = next(n for n in wrapper.body if isinstance(n, ast.AsyncFunctionDef) and n.name == "get_weather_3")
    assert [a.arg for a in weather2.args.kwonlyargs] == ["get_weather", "get_weather_2"]
    top = [n.name for n in tree.body if isinstance(n, ast.ClassDef)] + [
        t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    ]
    assert len(top) == len(set(top)) and "EchoInput" in top and "EchoInput2" in top


def test_the_same_tools_give_the_same_text_in_any_order() -> None:
    tools = [
        _tool(f"tool{i}", {"a": {"type": "string"}, "b": {"enum": [1, 2]}}, required=["a"], description=f"Tool {i}.")
        for i in range(20)
    ]
    first = generate(tools, server_name="same", server_version="1")
    shuffled = list(tools)
    random.Random(7).shuffle(shuffled)
    assert generate(shuffled, server_name="same", server_version="1") == first


def test_bounds_deep_and_huge_schemas_become_any_and_too_many_tools_are_refused() -> None:
    """A schema nested 5,000 deep, one with 150,000 subschemas, an enum of 1,000 values, a 100 kB description:
    the module is written within a second or so, Any beyond the bounds; more tools than ``max_tools`` is a
    CodegenError, and so is a class name that is no identifier."""
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(5000):
        deep = {"type": "array", "items": deep}
    wide = {"anyOf": [{"type": "object", "properties": {f"p{i}": {"type": "string"}}} for i in range(150_000)]}
    started = time.monotonic()
    source = generate(
        [
            _tool("deep", {"d": deep}),
            _tool("wide", {"w": wide}),
            _tool("enum", {"e": {"type": "string", "enum": [f"v{i}" for i in range(1000)]}}),
            _tool("long", description="word " * 20_000),
        ]
    )
    assert time.monotonic() - started < 30
    assert "list[" * 20 in source and "list[" * 40 not in source
    assert "e: NotRequired[str]" in source
    assert "w: NotRequired[Any]" in source
    assert len(source) < 2_000_000
    with pytest.raises(CodegenError, match="more than max_tools=3"):
        generate([_tool(f"t{i}") for i in range(4)], max_tools=3)
    with pytest.raises(CodegenError, match="not a Python identifier"):
        generate([_tool("t")], class_name="not valid")


def test_the_module_passes_mypy_strict_and_ruff(tmp_path: Path) -> None:
    """A module from varied schemas (hostile text, recursive refs, long unions that become aliases, keys that are
    keywords) and a program using it: ``mypy --strict`` finds nothing, and checks the arguments it passes."""
    long_union = {"enum": [f"value-number-{i}" for i in range(30)]}
    tools = [
        _tool(
            "search",
            {
                "query": {"type": "string", "description": HOSTILE_TEXT},
                "from": {"type": "integer"},
                "mode": long_union,
                "filters": {"type": "array", "items": {"$ref": "#/$defs/Filter"}},
            },
            required=["query"],
            defs={
                "Filter": {
                    "type": "object",
                    "properties": {
                        "field": {"type": "string"},
                        "and": {"type": "array", "items": {"$ref": "#/$defs/Filter"}},
                    },
                    "required": ["field"],
                }
            },
            description=HOSTILE_TEXT,
            outputSchema={
                "type": "object",
                "properties": {
                    "hits": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}}}}
                },
                "required": ["hits"],
            },
        ),
        _tool(
            "count",
            {},
            outputSchema={"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]},
        ),
        _tool("ping"),
    ]
    (tmp_path / "search_client.py").write_text(generate(tools, server_name="search"), encoding="utf-8")
    (tmp_path / "use.py").write_text(
        "from mcpkit import Client\n"
        "from search_client import SearchTools\n\n\n"
        "async def main(client: Client) -> None:\n"
        "    tools = SearchTools(client)\n"
        "    found = await tools.search(query='x', from_=2, filters=[{'field': 'a', 'and': [{'field': 'b'}]}])\n"
        "    hits: list[str] = [hit.get('id', '') for hit in found['hits']]\n"
        "    total: int = await tools.count()\n"
        "    print(hits, total, (await tools.ping()).text)\n"
        "    await tools.search(query=1)\n",
        encoding="utf-8",
    )
    report = mypy_strict(tmp_path, tmp_path).stdout
    assert report.count("error:") == 1, report
    assert 'use.py:11: error: Argument "query" to "search" of "SearchTools" has incompatible type "int"' in report
    assert ruff_problems(tmp_path / "search_client.py", REPO / "pyproject.toml") == []


def test_very_long_property_and_tool_names_keep_the_module_within_the_line_length(tmp_path: Path) -> None:
    """Keys are the server's own words, of any length: a key of 150 characters made lines of up to 300 (a field, the
    arguments dict, the key set when sent) and so did the names of nested types built from it, which ruff refuses.
    Long keys are split over lines (their value unchanged), type names are cut like every name made."""
    long_key = "Kx" * 75
    nested = {"type": "object", "properties": {long_key: {"type": "array", "items": {"type": "string"}}}}
    tools = [
        _tool("t" * 100, {"k" * 150: {"type": "string"}, f"a-{'b' * 150}": {"type": "integer"}}, required=["k" * 150]),
        _tool(
            "nested", {long_key: {"type": "object", "properties": {long_key: nested}}, "o" * 150: {"type": "string"}}
        ),
        {"name": "out", "inputSchema": {"type": "object"}, "outputSchema": nested},
    ]
    source = generate(tools)
    path = tmp_path / "long_client.py"
    path.write_text(source, encoding="utf-8")
    assert [line for line in source.splitlines() if len(line) > 120] == []
    assert ruff_problems(path, REPO / "pyproject.toml") == []
    module = _load(source, tmp_path, "long_client")
    kept = [set(getattr(v, "__annotations__", {})) for v in vars(module).values() if isinstance(v, type)]
    assert {"k" * 150, f"a-{'b' * 150}"} in kept and {"o" * 150, long_key} in kept  # (the keys as the server wrote)
    assert [name for name in vars(module) if len(name) > 66] == []  # (64, and a suffix that keeps it unique)


def test_all_of_object_schemas_merge_into_one_typed_dict_and_prefix_items_become_tuples(tmp_path: Path) -> None:
    """``allOf`` of object schemas (a model extending another, as pydantic and OpenAPI write it) was ``Any``; it is
    one TypedDict with every part's properties (a key two parts type differently is ``Any``) and every part's
    ``required``. ``prefixItems`` (and draft-07 ``items`` as a list) of a fixed length was ``list[Any]``; it is a
    tuple, and a list of the union of its types when the length may vary."""
    defs = {"Base": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}}
    properties = {
        "pet": {
            "allOf": [
                {"$ref": "#/$defs/Base"},
                {"type": "object", "properties": {"name": {"type": "string"}, "id": {"type": "integer"}}},
                {"required": ["name"]},
            ],
        },
        "clash": {"allOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"a": {"type": "integer"}}}]},
        "mixed": {"allOf": [{"type": "integer"}, {"type": "object", "properties": {"x": {"type": "string"}}}]},
        "pair": {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "integer"}],
            "minItems": 2,
            "maxItems": 2,
        },
        "closed": {"type": "array", "items": [{"type": "boolean"}], "additionalItems": False, "minItems": 1},
        "opening": {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "number"}},
        "shorter": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "null"}], "items": False},
    }
    top = {
        "name": "derived",
        "inputSchema": {
            "allOf": [{"$ref": "#/$defs/Base"}, {"properties": {"extra": {"type": "boolean"}}}],
            "$defs": defs,
        },
    }
    source = generate([_tool("zoo", properties, required=["pet"], defs=defs), top])
    lines = _field_lines(source)
    expected = {
        "pet: ZooInputPet",
        "class ZooInputPet(TypedDict):",
        "id: int",
        "name: str",
        "clash: NotRequired[ZooInputClash]",
        "a: NotRequired[Any]",
        "mixed: NotRequired[Any]",
        "pair: NotRequired[tuple[str, int]]",
        "closed: NotRequired[tuple[bool]]",
        "opening: NotRequired[list[str | float]]",
        "shorter: NotRequired[list[str | None]]",
        "class DerivedInput(TypedDict):",
        "extra: NotRequired[bool]",
    }
    assert expected - lines == set(), source
    derived = source[source.index("class DerivedInput") :]
    assert derived.split("\n\n\n")[0].splitlines()[1:] == ["    id: int", "    extra: NotRequired[bool]"]
    path = tmp_path / "zoo_client.py"
    path.write_text(source, encoding="utf-8")
    assert ruff_problems(path, REPO / "pyproject.toml") == []
    assert "async def derived(self, *, id: int, extra: bool | NotSent = NOT_SENT)" in source
