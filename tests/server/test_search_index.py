"""The tool search index: BM25 over names, titles, descriptions and parameters; keyword matching; what the caller
cannot see neither shows nor sways the ranking; the bounds of what is indexed and of a query."""

from __future__ import annotations

from typing import Any

from mcpkit.server.search_index import MAX_QUERY_TERMS, MAX_TOOL_TEXT, SearchIndex, terms
from mcpkit.server.tools import Tool


def _tool(name: str, description: str = "", **params: str) -> Tool:
    properties = {p: {"type": "string", "description": d} for p, d in params.items()}
    return Tool.from_schema(
        name, {"type": "object", "properties": properties}, lambda args, ctx: "", description=description
    )


CATALOG = [
    _tool("get_weather", "The weather forecast of a city.", city="The city"),
    _tool("sendEmail", "Send a message.", to="Who receives the email"),
    _tool("list_files", "List the files of a folder.", path="A folder"),
    _tool("delete_file", "Delete a file for good.", path="The file"),
]


def _names(found: list[Any]) -> list[str]:
    return [tool.name for tool in found]


def test_terms_split_words_case_and_plurals() -> None:
    assert terms("sendEmail send_email send-emails HTTPServer") == ["send", "email"] * 3 + ["httpserver"]
    assert terms("class pass files") == ["class", "pass", "file"]


def test_bm25_ranks_names_above_descriptions_and_finds_parameters() -> None:
    index = SearchIndex(CATALOG, keyword=False)
    assert _names(index.search("email", 10, None)) == ["sendEmail"]  # (its name and a parameter's description)
    assert sorted(_names(index.search("files", 10, None))) == ["delete_file", "list_files"]
    named = SearchIndex([_tool("notify", "Sends an email to someone."), _tool("email", "Sends.")], keyword=False)
    assert _names(named.search("email", 10, None)) == ["email", "notify"]
    assert _names(index.search("weather city", 1, None)) == ["get_weather"]
    assert index.search("zeppelin", 10, None) == []
    assert index.search("   ", 10, None) == []


def test_keyword_needs_every_term_as_typed_case_insensitively() -> None:
    index = SearchIndex(CATALOG, keyword=True)
    assert _names(index.search("FILE", 10, None)) == ["list_files", "delete_file"]
    assert _names(index.search("file good", 10, None)) == ["delete_file"]
    assert _names(index.search("file", 1, None)) == ["list_files"]
    assert index.search("", 10, None) == []


def test_a_hidden_tool_neither_shows_nor_sways_the_ranking() -> None:
    catalog = [_tool("alpha", "report report"), _tool("beta", "report summary"), _tool("gamma", "summary")]
    hidden = {"gamma"}
    ranked = _names(SearchIndex(catalog, keyword=False).search("report summary", 10, lambda t: t.name not in hidden))
    alone = _names(SearchIndex(catalog[:2], keyword=False).search("report summary", 10, None))
    assert ranked == alone and "gamma" not in ranked
    assert SearchIndex(catalog, keyword=True).search("summary", 10, lambda t: t.name not in hidden)[0].name == "beta"
    assert SearchIndex(catalog, keyword=False).search("report", 10, lambda t: False) == []


def test_what_is_indexed_of_a_tool_is_bounded() -> None:
    padding = "filler " * (MAX_TOOL_TEXT // 7 + 1)
    tool = _tool("big", padding + "needle", extra="needle too")
    index = SearchIndex([tool], keyword=True)
    assert index.search("filler", 10, None) != []
    assert index.search("needle", 10, None) == []  # (past the bound: not indexed)
    assert SearchIndex([tool], keyword=False).search("needle", 10, None) == []


def test_only_the_first_query_terms_count() -> None:
    index = SearchIndex(CATALOG, keyword=False)
    noise = " ".join(f"w{i}" for i in range(MAX_QUERY_TERMS))
    assert index.search(noise + " weather", 10, None) == []
    assert _names(index.search("weather " + noise, 10, None)) == ["get_weather"]
    keyword = SearchIndex(CATALOG, keyword=True)
    assert _names(keyword.search("file " * MAX_QUERY_TERMS + "zeppelin", 10, None)) == ["list_files", "delete_file"]
