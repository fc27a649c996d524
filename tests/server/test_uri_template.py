"""RFC 6570 URI templates: matching a URI back into the variables ``expand`` wrote."""

from __future__ import annotations

from mcpkit.server.uri_template import UriTemplate


def test_a_query_value_is_percent_decoded_and_a_plus_stays_a_plus() -> None:
    """RFC 6570 writes a space as %20 and "+" as %2B, so in a URI "+" is a literal "+" (it was read as a space,
    the form-encoding rule: a search for "c++" arrived as "c  ")."""
    template = UriTemplate("search://items{?q,lang}")
    assert template.match("search://items?q=a+b") == {"q": "a+b"}
    assert template.match("search://items?q=c++&lang=en") == {"q": "c++", "lang": "en"}
    assert template.match("search://items?q=a%20b") == {"q": "a b"}
    assert template.match("search://items?q=a%2Bb") == {"q": "a+b"}
    assert template.match("search://items?q=") == {"q": ""}
    assert template.match("search://items?q") == {"q": ""}
    for value in ("a b", "a+b", "100% & more=yes", "naïve"):
        assert template.match(template.expand({"q": value})) == {"q": value}
