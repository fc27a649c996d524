"""The forms the inspector generates from a tool's input schema, filled in a real browser: a nested object through
``$ref`` (with its defaults and an optional value), arrays of strings and of objects (items added), an enum, a
multi-select with its default, a boolean; the arguments the server receives are exactly those; and what the schema
forbids is refused on the page, before anything is sent."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import pytest

from support.browser import InspectorProcess, chromium, screenshot
from support.paths import SERVERS

SERVER = SERVERS / "forms_server.py"


@pytest.fixture
def inspector() -> Iterator[InspectorProcess]:
    proc = InspectorProcess("inspect", f"{sys.executable} {SERVER}")
    try:
        yield proc
    finally:
        proc.stop()


def test_a_form_with_nested_objects_arrays_enums_and_defaults(inspector: InspectorProcess) -> None:
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1200})
        page.goto(inspector.url)
        page.click("#tools-list button[data-key='order']")
        form = page.locator("#tool-form")
        assert form.get_by_label("city").input_value() == "Lisbon"  # defaults filled in
        assert form.get_by_label("size").locator("option:checked").text_content() == "medium"
        assert form.get_by_label("cheese").is_checked() and not form.get_by_label("olives").is_checked()

        page.click("#call-button")  # nothing filled: refused on the page
        assert "required" in form.locator(".field.invalid .err").first.text_content()
        assert page.locator(".call").count() == 0

        form.get_by_label("customer *").fill("Ada")
        form.get_by_label("street *").fill("Rua Augusta 1")
        form.get_by_label("floor").fill("3")
        form.get_by_role("button", name="Add an item to items").click()
        form.get_by_role("button", name="Add an item to items").click()
        names = form.get_by_label("name *")
        names.nth(0).fill("bread")
        names.nth(1).fill("wine")
        quantities = form.get_by_label("quantity")
        quantities.nth(1).fill("100")
        page.click("#call-button")
        assert "at most 99" in form.locator(".field.invalid .err").first.text_content()
        quantities.nth(1).fill("2")
        form.get_by_role("button", name="Add an item to tags").click()
        form.locator("[name='tags[1]']").fill("gift")
        form.get_by_label("size").select_option(label="large")
        form.get_by_label("express").check()
        form.get_by_label("olives").check()
        screenshot(page, "forms")
        page.click("#call-button")
        done = page.locator(".call[data-status='done'] pre.text")
        done.wait_for(timeout=20_000)
        assert json.loads(done.text_content()) == {
            "customer": "Ada",
            "address": {"street": "Rua Augusta 1", "city": "Lisbon", "floor": 3},
            "items": [{"name": "bread", "quantity": 1}, {"name": "wine", "quantity": 2}],
            "tags": ["gift"],
            "size": "large",
            "express": True,
            "toppings": ["cheese", "olives"],
            "note": None,
        }


def test_a_schema_with_boolean_subschemas_gets_a_form() -> None:
    """JSON Schema allows ``true`` and ``false`` as schemas (schemars writes ``"value": true`` for a
    ``serde_json::Value`` field): the page threw on them and the tool had no form and no Call button at all. A
    ``true`` property is edited as JSON; a ``false`` one (never allowed) gets no field."""
    proc = InspectorProcess("inspect", f"{sys.executable} {SERVERS / 'schema_shapes_server.py'}")
    try:
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(proc.url)
            page.click("#tools-list button[data-key='anything']")
            form = page.locator("#tool-form")
            form.locator("[name='value']").fill('[1, {"a": 2}]')
            form.locator("[name='label']").fill("x")
            assert form.locator("[name='forbidden']").count() == 0
            form.get_by_role("button", name="Add an item to many").click()
            form.locator("[name='many[1]']").fill('"free"')
            page.click("#call-button")
            done = page.locator(".call[data-status='done'] pre.text")
            done.wait_for(timeout=20_000)
            assert json.loads(done.text_content()) == {"value": [1, {"a": 2}], "label": "x", "many": ["free"]}
            assert not errors, errors
    finally:
        proc.stop()
