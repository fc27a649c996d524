"""The wire oracle (tests/support/oracle.py) must accept valid messages and reject broken ones, for every revision.

These tests prove the oracle itself, so they carry no requirement marker.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from support.oracle import REVISIONS, methods, validate_def, validate_message

HANDSHAKE = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN = "2026-07-28"


def _meta_2026() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def tools_list_request(rev: str) -> dict[str, Any]:
    params: dict[str, Any] = {"_meta": _meta_2026()} if rev == MODERN else {}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}


def tools_call_request(rev: str, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "echo", "arguments": {"text": "hi"}, **extra}
    if rev == MODERN:
        params["_meta"] = _meta_2026()
    return {"jsonrpc": "2.0", "id": "c-1", "method": "tools/call", "params": params}


def _modern_result(rev: str, body: dict[str, Any], cacheable: bool = False) -> dict[str, Any]:
    if rev == MODERN:
        body = {"resultType": "complete", **body}
        if cacheable:
            body.update({"ttlMs": 0, "cacheScope": "private"})
    return body


def tools_list_response(rev: str) -> dict[str, Any]:
    tool = {"name": "echo", "description": "Echo", "inputSchema": {"type": "object", "properties": {}}}
    return {"jsonrpc": "2.0", "id": 1, "result": _modern_result(rev, {"tools": [tool]}, cacheable=True)}


def call_tool_response(rev: str, content: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body = {"content": content if content is not None else [{"type": "text", "text": "hi"}]}
    return {"jsonrpc": "2.0", "id": "c-1", "result": _modern_result(rev, body)}


def rejects(msg: Any, rev: str, *, sender: str, request_method: str | None = None, match: str | None = None) -> str:
    with pytest.raises(AssertionError, match=match) as info:
        validate_message(msg, rev, sender=sender, request_method=request_method)  # type: ignore[arg-type]
    return str(info.value)


# ------------------------------------------------------------------ valid messages, every revision


@pytest.mark.parametrize("rev", REVISIONS)
def test_accepts_valid_tools_messages(rev: str) -> None:
    validate_message(tools_list_request(rev), rev, sender="client")
    validate_message(tools_list_response(rev), rev, sender="server", request_method="tools/list")
    validate_message(tools_call_request(rev), rev, sender="client")
    validate_message(call_tool_response(rev), rev, sender="server", request_method="tools/call")


@pytest.mark.parametrize("rev", HANDSHAKE)
def test_accepts_handshake_messages(rev: str) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": rev, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    validate_message(init, rev, sender="client")
    result = {
        "jsonrpc": "2.0",
        "id": 0,
        "result": {
            "protocolVersion": rev,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "s", "version": "1"},
        },
    }
    validate_message(result, rev, sender="server", request_method="initialize")
    validate_message({"jsonrpc": "2.0", "method": "notifications/initialized"}, rev, sender="client")
    validate_message({"jsonrpc": "2.0", "id": 7, "method": "ping"}, rev, sender="server")
    validate_message({"jsonrpc": "2.0", "id": 7, "result": {}}, rev, sender="client", request_method="ping")
    sampling = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "q"}}], "maxTokens": 5},
    }
    validate_message(sampling, rev, sender="server")


@pytest.mark.parametrize("rev", REVISIONS)
def test_accepts_error_response_and_rejects_broken_error(rev: str) -> None:
    ok = {"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "Method not found"}}
    validate_message(ok, rev, sender="server")
    rejects({"jsonrpc": "2.0", "id": 3, "error": {"code": -32601}}, rev, sender="server", match="message")
    rejects({"jsonrpc": "2.0", "id": 3, "error": {"code": "x", "message": "m"}}, rev, sender="server")


# ------------------------------------------------------------------ rejections


@pytest.mark.parametrize("rev", REVISIONS)
def test_rejects_tools_list_result_without_tools(rev: str) -> None:
    msg = tools_list_response(rev)
    del msg["result"]["tools"]
    reason = rejects(msg, rev, sender="server", request_method="tools/list")
    assert "tools" in reason and "ListToolsResult" in reason


@pytest.mark.parametrize("rev", REVISIONS)
def test_rejects_tool_without_input_schema(rev: str) -> None:
    msg = tools_list_response(rev)
    del msg["result"]["tools"][0]["inputSchema"]
    rejects(msg, rev, sender="server", request_method="tools/list", match="inputSchema")


def test_2026_result_without_result_type_is_rejected() -> None:
    msg = call_tool_response(MODERN)
    validate_message(msg, MODERN, sender="server", request_method="tools/call")
    del msg["result"]["resultType"]
    rejects(msg, MODERN, sender="server", request_method="tools/call", match="resultType")
    listing = tools_list_response(MODERN)
    del listing["result"]["ttlMs"]
    rejects(listing, MODERN, sender="server", request_method="tools/list", match="ttlMs")


def test_2026_request_without_protocol_version_meta_is_rejected() -> None:
    msg = tools_call_request(MODERN)
    del msg["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
    rejects(msg, MODERN, sender="client", match="protocolVersion")


def test_2026_input_required_result_is_validated_as_such() -> None:
    ok = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "resultType": "input_required",
            "inputRequests": {
                "q1": {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": "Name?",
                        "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}},
                    },
                },
            },
        },
    }
    validate_message(ok, MODERN, sender="server", request_method="tools/call")
    bad = copy.deepcopy(ok)
    bad["result"]["inputRequests"] = "nope"
    rejects(bad, MODERN, sender="server", request_method="tools/call", match="InputRequiredResult")


def test_2026_has_no_initialize_and_handshake_revisions_have_no_discover() -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": MODERN,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    rejects(init, MODERN, sender="client", match="initialize")
    discover = {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": _meta_2026()}}
    validate_message(discover, MODERN, sender="client")
    for rev in HANDSHAKE:
        rejects(discover, rev, sender="client", match="server/discover")


@pytest.mark.parametrize("rev", ("2024-11-05", "2025-06-18", "2025-11-25", MODERN))
def test_batches_are_rejected_outside_2025_03_26(rev: str) -> None:
    batch = [tools_list_request(rev), tools_call_request(rev)]
    rejects(batch, rev, sender="client", match="batch")


def test_batches_are_accepted_in_2025_03_26_and_checked_item_by_item() -> None:
    rev = "2025-03-26"
    validate_message([tools_list_request(rev), tools_call_request(rev)], rev, sender="client")
    validate_message(
        [tools_list_response(rev), {"jsonrpc": "2.0", "id": 5, "error": {"code": -1, "message": "m"}}],
        rev,
        sender="server",
    )
    broken = [tools_list_request(rev), {"jsonrpc": "2.0", "id": None, "method": "tools/list"}]
    rejects(broken, rev, sender="client", match=r"batch item \[1\]")
    rejects([], rev, sender="client", match="empty")
    rejects([tools_list_request(rev), tools_list_response(rev)], rev, sender="client", match="mixes")


def test_2024_11_05_lacks_what_2025_03_26_added() -> None:
    audio = [{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]
    validate_message(
        call_tool_response("2025-03-26", audio), "2025-03-26", sender="server", request_method="tools/call"
    )
    rejects(call_tool_response("2024-11-05", audio), "2024-11-05", sender="server", request_method="tools/call")

    annotated = tools_list_response("2025-03-26")
    annotated["result"]["tools"][0]["annotations"] = {"readOnlyHint": True}
    validate_message(annotated, "2025-03-26", sender="server", request_method="tools/list")
    rejects(annotated, "2024-11-05", sender="server", request_method="tools/list", match="annotations")

    progress = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "p", "progress": 1, "message": "half"},
    }
    validate_message(progress, "2025-03-26", sender="server")
    rejects(progress, "2024-11-05", sender="server", match="message")
    del progress["params"]["message"]
    validate_message(progress, "2024-11-05", sender="server")


@pytest.mark.parametrize("rev", REVISIONS)
@pytest.mark.parametrize("bad_id", [None, True, 1.5, {"x": 1}])
def test_rejects_bad_request_ids(rev: str, bad_id: Any) -> None:
    msg = tools_list_request(rev)
    msg["id"] = bad_id
    rejects(msg, rev, sender="client", match="id")


@pytest.mark.parametrize("rev", REVISIONS)
def test_rejects_envelope_errors(rev: str) -> None:
    msg = tools_list_request(rev)
    msg["jsonrpc"] = "1.0"
    rejects(msg, rev, sender="client", match="jsonrpc")
    both = tools_list_response(rev)
    both["error"] = {"code": -32603, "message": "x"}
    rejects(both, rev, sender="server", match="both")
    rejects({"jsonrpc": "2.0", "id": 1}, rev, sender="server", match="not a JSON-RPC")
    rejects("not an object", rev, sender="server", match="object")  # type: ignore[arg-type]


@pytest.mark.parametrize("rev", REVISIONS)
def test_rejects_wrong_direction_and_unknown_methods(rev: str) -> None:
    rejects(tools_call_request(rev), rev, sender="server", match="tools/call")
    rejects({"jsonrpc": "2.0", "id": 1, "method": "tools/frobnicate"}, rev, sender="client", match="unknown")
    # a server cannot "answer" a request that only servers send
    if rev in HANDSHAKE:
        rejects(
            {"jsonrpc": "2.0", "id": 1, "result": {"roots": []}},
            rev,
            sender="server",
            request_method="roots/list",
            match="roots/list",
        )
        validate_message(
            {"jsonrpc": "2.0", "id": 1, "result": {"roots": []}},
            rev,
            sender="client",
            request_method="roots/list",
        )


@pytest.mark.parametrize("rev", HANDSHAKE)
def test_notification_must_not_carry_an_id(rev: str) -> None:
    rejects(
        {"jsonrpc": "2.0", "id": 4, "method": "notifications/initialized"},
        rev,
        sender="client",
        match="notifications/initialized",
    )


def test_unknown_revision_is_an_error() -> None:
    rejects(tools_list_request("2025-06-18"), "1999-01-01", sender="client", match="unknown protocol revision")


def test_every_revision_has_its_core_methods() -> None:
    for rev in REVISIONS:
        table = methods(rev)
        assert ("ClientRequest", "tools/call") in table, rev
        assert ("ClientRequest", "initialize") in table or rev == MODERN, rev
    assert ("ClientRequest", "elicitation/create") not in methods("2025-06-18")
    assert ("ServerRequest", "elicitation/create") in methods("2025-06-18")
    assert ("ServerRequest", "elicitation/create") not in methods("2025-03-26")


def test_validate_def_checks_named_types() -> None:
    validate_def({"name": "x", "inputSchema": {"type": "object"}}, "2025-06-18", "Tool")
    with pytest.raises(AssertionError, match="name"):
        validate_def({"inputSchema": {"type": "object"}}, "2025-06-18", "Tool")
    with pytest.raises(AssertionError, match="no type"):
        validate_def({}, "2025-06-18", "NoSuchType")


@pytest.mark.parametrize("rev", ("2025-11-25", MODERN))
def test_mcp_types_second_opinion_runs_for_the_revisions_it_models(rev: str) -> None:
    from support.oracle import _mcp_types_check

    _mcp_types_check(tools_call_request(rev), rev, "client", None)
    bad = tools_call_request(rev)
    bad["params"]["name"] = 5
    with pytest.raises(AssertionError, match="mcp-types"):
        _mcp_types_check(bad, rev, "client", None)
    listing = tools_list_response(rev)
    listing["result"]["tools"] = [{"name": "x"}]
    with pytest.raises(AssertionError, match="mcp-types"):
        _mcp_types_check(listing, rev, "server", "tools/list")
