"""Pure units of the high-level server: RFC 6570 templates, docstrings, sealed cursors, schemas, ranking."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

from mcpkit.protocol.errors import InvalidParams
from mcpkit.server.completions import completion_result, rank
from mcpkit.server.pagination import Paginator
from mcpkit.server.schema import FunctionInfo, ReturnInfo, parse_docstring
from mcpkit.server.uri_template import UriTemplate, UriTemplateError

# ---------------------------------------------------------------------------------------------- RFC 6570

EXPANSIONS = [
    # (template, values, expected) -- examples from RFC 6570 section 1.2 / 3.2 (levels 1-3)
    ("{var}", {"var": "value"}, "value"),
    ("{hello}", {"hello": "Hello World!"}, "Hello%20World%21"),
    ("{+var}", {"var": "value"}, "value"),
    ("{+hello}", {"hello": "Hello World!"}, "Hello%20World!"),
    ("{+path}/here", {"path": "/foo/bar"}, "/foo/bar/here"),
    ("here?ref={+path}", {"path": "/foo/bar"}, "here?ref=/foo/bar"),
    ("X{#var}", {"var": "value"}, "X#value"),
    ("map?{x,y}", {"x": "1024", "y": "768"}, "map?1024,768"),
    ("{x,hello,y}", {"x": "1024", "y": "768", "hello": "Hello World!"}, "1024,Hello%20World%21,768"),
    ("{+x,hello,y}", {"x": "1024", "y": "768", "hello": "Hello World!"}, "1024,Hello%20World!,768"),
    ("X{.var}", {"var": "value"}, "X.value"),
    ("X{.x,y}", {"x": "1024", "y": "768"}, "X.1024.768"),
    ("{/var}", {"var": "value"}, "/value"),
    ("{/var,x}/here", {"var": "value", "x": "1024"}, "/value/1024/here"),
    ("{;x,y}", {"x": "1024", "y": "768"}, ";x=1024;y=768"),
    ("{;x,y,empty}", {"x": "1024", "y": "768", "empty": ""}, ";x=1024;y=768;empty"),
    ("{?x,y}", {"x": "1024", "y": "768"}, "?x=1024&y=768"),
    ("{?x,y,empty}", {"x": "1024", "y": "768", "empty": ""}, "?x=1024&y=768&empty="),
    ("?fixed=yes{&x}", {"x": "1024"}, "?fixed=yes&x=1024"),
    ("{?x,undef}", {"x": "1024"}, "?x=1024"),
    # a variable followed by a "." expression: the last dot starts the extension
    ("file:///{name}{.ext}", {"name": "report", "ext": "pdf"}, "file:///report.pdf"),
    ("file:///{name}{.ext}", {"name": "report.v2", "ext": "pdf"}, "file:///report.v2.pdf"),
    ("file:///{+path}{.ext}", {"path": "docs/a.b", "ext": "txt"}, "file:///docs/a.b.txt"),
    ("file:///{name}{.ext}", {"name": "README"}, "file:///README"),
]


@pytest.mark.parametrize(("template", "values", "expected"), EXPANSIONS)
def test_rfc6570_expansion_and_round_trip(template: str, values: dict[str, str], expected: str) -> None:
    tpl = UriTemplate(template)
    assert tpl.expand(values) == expected
    assert tpl.match(expected) == values


def test_matching_rules() -> None:
    items = UriTemplate("mcpkit://items/{id}")
    assert items.variables == ("id",)
    assert items.match("mcpkit://items/7") == {"id": "7"}
    assert items.match("mcpkit://items/a%2Fb") is None  # issue 12 item 10: no decoded "/" in a simple {var}
    assert items.match("mcpkit://items/7/extra") is None  # {id} never spans a "/"
    assert items.match("mcpkit://other/7") is None
    files = UriTemplate("file:///{+path}")
    assert files.match("file:///etc/hosts") == {"path": "etc/hosts"}
    search = UriTemplate("search://q{?q,lang}")
    assert search.match("search://q?lang=en&q=cats&other=1") == {"q": "cats", "lang": "en"}
    assert search.match("search://q") == {}
    assert UriTemplate.is_template("a://{b}") and not UriTemplate.is_template("a://b")


@pytest.mark.parametrize("bad", ["{", "a}", "{}", "{var*}", "{var:3}", "{a,a}", "{=x}", "{a b}"])
def test_invalid_templates_are_rejected(bad: str) -> None:
    with pytest.raises(UriTemplateError):
        UriTemplate(bad)


# ---------------------------------------------------------------------------------------------- docstrings


def test_google_sphinx_and_numpy_docstrings() -> None:
    google = parse_docstring(
        """Fetch the weather.

        More detail here.

        Args:
            city: The city name,
                possibly long.
            units (str): metric or imperial.

        Returns:
            The forecast.
        """
    )
    assert google.summary == "Fetch the weather.\n\nMore detail here."
    assert google.params == {"city": "The city name, possibly long.", "units": "metric or imperial."}
    sphinx = parse_docstring("Do it.\n\n:param a: first\n:param int b: second\n:returns: nothing")
    assert sphinx.summary == "Do it." and sphinx.params == {"a": "first", "b": "second"}
    numpy = parse_docstring("Sum.\n\nParameters\n----------\nx : int\n    The x.\ny : int\n    The y.\n")
    assert numpy.summary == "Sum." and numpy.params == {"x": "The x.", "y": "The y."}
    assert parse_docstring(None).params == {}


# ---------------------------------------------------------------------------------------------- cursors


def test_cursors_are_sealed_and_never_crash() -> None:
    p = Paginator(b"k" * 32)
    items = [f"i{n}" for n in range(7)]
    page, cursor = p.page("tools", items, {}, 3, str)
    assert page == ["i0", "i1", "i2"] and cursor
    page, cursor2 = p.page("tools", items, {"cursor": cursor}, 3, str)
    assert page == ["i3", "i4", "i5"]
    page, end = p.page("tools", items, {"cursor": cursor2}, 3, str)
    assert page == ["i6"] and end is None
    assert p.page("tools", items, {"cursor": ""}, 3, str) == ([], None)
    assert cursor is not None
    forged = [
        cursor[:-1] + ("A" if cursor[-1] != "A" else "B"),
        cursor.split(".")[0],
        "x" * 5000,
        "é.é",
        123,
        None if False else [],
        Paginator(b"other-key-0123456789abcdef").encode("tools", 3, "i2"),
        p.encode("prompts", 3, "i2"),
    ]
    for bad in forged:
        with pytest.raises(InvalidParams):
            p.page("tools", items, {"cursor": bad}, 3, str)
    # a valid cursor past the end of a list that shrank: an empty last page, not an error or a crash
    shrunk = ["i0"]
    assert p.page("tools", shrunk, {"cursor": cursor2}, 3, str) == ([], None)


# ---------------------------------------------------------------------------------------------- schemas


class Point(BaseModel):
    x: int
    y: int


def test_wrapped_output_schema_keeps_defs_resolvable() -> None:
    info = ReturnInfo(list[Point])
    schema = info.output_schema
    assert schema is not None
    assert schema["properties"]["result"]["items"] == {"$ref": "#/$defs/Point"}
    assert "Point" in schema["$defs"]
    jsonschema.Draft202012Validator.check_schema(schema)
    value = info.structure([Point(x=1, y=2)])
    assert value == {"result": [{"x": 1, "y": 2}]}
    jsonschema.validate(value, schema, cls=jsonschema.Draft202012Validator)
    assert ReturnInfo(str).structured is False
    assert ReturnInfo(None).structured is False
    assert ReturnInfo(bool).output_schema == {
        "type": "object",
        "properties": {"result": {"type": "boolean"}},
        "required": ["result"],
    }


def test_function_info_skips_context_and_rejects_private_params() -> None:
    from mcpkit import Context

    def f(a: int, ctx: Context, b: str = "x") -> None: ...

    info = FunctionInfo(f, name="f")
    assert [p.name for p in info.params] == ["a", "b"] and info.context_param == "ctx"
    assert info.input_schema["required"] == ["a"]

    def g(_hidden: int) -> None: ...

    with pytest.raises(ValueError, match="_hidden"):
        FunctionInfo(g, name="g")


def test_rank_and_cut() -> None:
    assert rank(["Apple", "pineapple", "apricot", "banana"], "ap") == ["Apple", "apricot", "pineapple"]
    assert rank(["a", "b"], "") == ["a", "b"]
    many: list[Any] = [str(i) for i in range(150)]
    out = completion_result(many)["completion"]
    assert len(out["values"]) == 100 and out["total"] == 150 and out["hasMore"] is True
