"""A decorator used the wrong way fails where it is written (at import), with the fix in its message: never a
server that silently lacks what the code seems to register."""

from __future__ import annotations

import functools

import pytest

from mcpkit import MCPKit


def test_a_bare_resource_decorator_is_an_error_that_shows_how_to_write_it() -> None:
    app = MCPKit("x")
    with pytest.raises(TypeError) as caught:

        @app.resource  # type: ignore[arg-type]
        def readme() -> str:
            return "hi"

    message = str(caught.value)
    assert "@app.resource needs the resource's URI" in message
    assert '@app.resource("scheme://path") above def readme' in message
    assert app.resources == [] and app.resource_templates == []


def test_a_template_whose_variables_do_not_match_the_parameters_says_what_to_change() -> None:
    app = MCPKit("x")
    with pytest.raises(ValueError) as caught:

        @app.resource("items://{item_id}")
        def item(id: str) -> str:
            return id

    message = str(caught.value)
    assert "['id'] are not variables of the URI" in message and "add {id} to the URI" in message
    with pytest.raises(ValueError) as caught:

        @app.resource("users://{uid}/posts/{post}")
        def post(uid: str) -> str:
            return uid

    message = str(caught.value)
    assert "['post'] are not parameters of post()" in message and "add a parameter post" in message
    assert app.resource_templates == []


def test_a_prompt_without_a_name_is_told_how_to_give_one() -> None:
    app = MCPKit("x")
    with pytest.raises(ValueError, match=r'this prompt needs a name.*@app\.prompt\(name="\.\.\."\)'):
        app.add_prompt(functools.partial(lambda topic: topic, topic="x"))
    with pytest.raises(ValueError, match=r'this prompt needs a name.*@app\.prompt\(name="\.\.\."\)'):
        app.prompt(lambda: "hi")
    assert app.prompts == []


def test_a_name_given_positionally_is_shown_as_the_keyword() -> None:
    app = MCPKit("x")
    with pytest.raises(TypeError, match=r"@app\.prompt\('greet'\): the name is a keyword argument; write "):
        app.prompt("greet")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"@app\.tool\(name='add'\)"):
        app.tool("add")  # type: ignore[call-overload]


def test_a_misspelled_decorator_option_names_the_closest_at_decoration() -> None:
    app = MCPKit("x")
    with pytest.raises(
        TypeError, match=r"@app\.tool\(\) got an unknown option 'anotations'; did you mean 'annotations'"
    ):
        app.tool(anotations={"readOnlyHint": True})  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="did you mean 'completions'"):
        app.prompt(completion={"x": ["a"]})  # type: ignore[call-overload]
    assert app.tools == [] and app.prompts == []
