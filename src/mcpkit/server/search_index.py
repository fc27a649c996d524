"""The text index behind tool search (:mod:`mcpkit.server.tool_search`): BM25 ranking or plain keyword matching
over a tool catalog, built in-house (no dependency), once per catalog change.

What a tool is found by: its name, title and description, and the names and descriptions of its parameters (the
top-level properties of its input schema). Text is cut into terms of letters and digits (``sendEmail``,
``send_email`` and ``send-email`` are the terms ``send`` and ``email``), lowercased, a trailing plural ``s``
folded. For BM25 a name counts three times, a title and a parameter name twice.

The query never becomes a pattern: a ``"keyword"`` search matches each of its whitespace-separated terms as a
case-insensitive substring (every term must match), a ``"bm25"`` search ranks by its terms. Neither backtracks, so a
query's cost is linear in the catalog's text.

Ranking is over what the caller may see: the statistics BM25 uses (how many tools, their mean length, how many
contain a term) are counted over the visible tools only, so a search answers exactly as over a catalog without the
hidden ones (nothing about them shows, not even through the order of the others).

Bounds (``docs/security.md``): each tool's indexed text is cut at :data:`MAX_TOOL_TEXT` characters, so the index
is at most proportional to the catalog; a query's terms past :data:`MAX_QUERY_TERMS` are ignored.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

#: characters of one tool's text (name, title, description, parameters) that are indexed; the rest is not
MAX_TOOL_TEXT = 16 * 1024
#: terms of a query that count; more are ignored
MAX_QUERY_TERMS = 32

_K1 = 1.2
_B = 0.75
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_TERM = re.compile(r"[^\W_]+")
# (field weights for BM25: how many times a term of the field counts)
_NAME, _TITLE, _PARAM, _TEXT = 3, 2, 2, 1


def terms(text: str) -> list[str]:
    """The BM25 terms of ``text`` (see the module docstring)."""
    out = []
    for term in _TERM.findall(_CAMEL.sub(" ", text).lower()):
        if len(term) > 3 and term.endswith("s") and not term.endswith("ss"):
            term = term[:-1]
        out.append(term)
    return out


def fields(tool: Any) -> list[tuple[str, int]]:
    """What ``tool`` is found by, as (text, BM25 weight), cut at :data:`MAX_TOOL_TEXT` characters in all."""
    out: list[tuple[str, int]] = [(tool.name, _NAME)]
    if tool.title:
        out.append((str(tool.title), _TITLE))
    if tool.description:
        out.append((tool.description, _TEXT))
    try:
        properties = tool.input_schema.get("properties")
    except Exception:  # (a schema that cannot be built: the tool is found by its name and texts)
        properties = None
    if isinstance(properties, dict):
        for name, spec in properties.items():
            out.append((str(name), _PARAM))
            if isinstance(spec, dict) and isinstance(spec.get("description"), str):
                out.append((spec["description"], _TEXT))
    budget, kept = MAX_TOOL_TEXT, []
    for text, weight in out:
        if budget <= 0:
            break
        kept.append((text[:budget], weight))
        budget -= len(text)
    return kept


class SearchIndex:
    """The index of one catalog (a sequence of tools, in registration order) for one strategy."""

    __slots__ = ("_lengths", "_postings", "_texts", "_total", "keyword", "tools")

    def __init__(self, tools: Iterable[Any], keyword: bool) -> None:
        self.keyword: bool = keyword
        self.tools: list[Any] = list(tools)
        self._texts: list[str] = []  # keyword: each tool's text, lowercased
        self._lengths: list[int] = []  # bm25: each tool's weighted term count
        self._postings: dict[str, list[tuple[int, int]]] = {}  # bm25: term -> (tool, weighted count)
        for doc, tool in enumerate(self.tools):
            found = fields(tool)
            if keyword:
                self._texts.append("\n".join(text for text, _ in found).lower())
                continue
            counts: dict[str, int] = {}
            for text, weight in found:
                for term in terms(text):
                    counts[term] = counts.get(term, 0) + weight
            self._lengths.append(sum(counts.values()))
            for term, count in counts.items():
                self._postings.setdefault(term, []).append((doc, count))
        self._total = sum(self._lengths)

    def search(self, query: str, limit: int, visible: Callable[[Any], bool] | None) -> list[Any]:
        """The tools that match ``query``, best first, at most ``limit``, among those ``visible`` says the caller
        sees (None: every one)."""
        if self.keyword:
            return self._keyword(query.lower().split()[:MAX_QUERY_TERMS], limit, visible)
        return self._bm25(list(dict.fromkeys(terms(query)))[:MAX_QUERY_TERMS], limit, visible)

    def _keyword(self, wanted: Sequence[str], limit: int, visible: Callable[[Any], bool] | None) -> list[Any]:
        found: list[Any] = []
        if not wanted:
            return found
        for tool, text in zip(self.tools, self._texts, strict=True):
            if all(term in text for term in wanted) and (visible is None or visible(tool)):
                found.append(tool)
                if len(found) >= limit:
                    break
        return found

    def _bm25(self, wanted: Sequence[str], limit: int, visible: Callable[[Any], bool] | None) -> list[Any]:
        postings = [self._postings[term] for term in wanted if term in self._postings]
        if not postings:
            return []
        lengths = self._lengths
        if visible is None:
            shown: list[bool] | None = None
            count, total = len(self.tools), self._total
        else:  # the statistics of the caller's catalog: as if the hidden tools were not there
            shown = [bool(visible(tool)) for tool in self.tools]
            count = sum(shown)
            total = sum(length for length, seen in zip(lengths, shown, strict=True) if seen)
        if count == 0:
            return []
        mean = total / count or 1.0
        scores: dict[int, float] = {}
        for posting in postings:
            hits = posting if shown is None else [hit for hit in posting if shown[hit[0]]]
            if not hits:
                continue
            idf = math.log(1.0 + (count - len(hits) + 0.5) / (len(hits) + 0.5))
            for doc, tf in hits:
                norm = _K1 * (1.0 - _B + _B * lengths[doc] / mean)
                scores[doc] = scores.get(doc, 0.0) + idf * tf * (_K1 + 1.0) / (tf + norm)
        best = heapq.nsmallest(limit, scores.items(), key=lambda item: (-item[1], item[0]))
        return [self.tools[doc] for doc, _ in best]


__all__ = ["MAX_QUERY_TERMS", "MAX_TOOL_TEXT", "SearchIndex", "fields", "terms"]
