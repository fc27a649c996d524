"""Test-only wire oracle: does a JSON-RPC message mcpkit emitted match the OFFICIAL MCP types of a revision?

    validate_message(msg, "2025-06-18", sender="server", request_method="tools/call")

raises ``AssertionError`` with a readable reason when it does not.

Where the official types come from (nothing of the spec is copied into this repository):

* **2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28** -- the spec's own ``schema.json`` for each revision, as
  shipped inside the official conformance suite ``@modelcontextprotocol/conformance`` 0.2 pre-release (npm,
  pinned in ``tests/package.json`` under the alias ``conformance-0.2``; its CLI bundle embeds the four schemas
  and validates traffic with them). They are extracted at test time by a short Node script and validated with
  ``jsonschema`` (draft-07 for the two older ones, 2020-12 for the two newer ones). Like the conformance suite
  itself, ``NumberSchema.minimum/maximum`` is read as ``number`` in 2025-06-18/2025-11-25 (the published
  schema said ``integer`` by mistake; the spec's corrected copy says ``number``). Cross-checked locally
  against the spec repository: 2025-03-26 is byte-identical; the other three differ only by that fix (and, for
  2026-07-28, one renamed ``_meta`` definition of ``subscriptions/listen`` results).
* **2024-11-05** -- NO registry package ships machine-readable types for this revision (the ``mcp-types``
  PyPI package only has wire models for 2025-11-25 and 2026-07-28 and maps older revisions onto the
  2025-11-25 shapes; no npm package embeds its schema). It is validated against the nearest faithful source,
  the 2025-03-26 schema, with the 2025-03-26 additions explicitly taken out: no ``AudioContent`` anywhere
  content may appear, no JSON-RPC batches, and no ``Tool.annotations``, ``ServerCapabilities.completions``,
  ``ProgressNotification.params.message``, ``Annotations.lastModified`` (rejected explicitly, because the
  schema would let an unknown property through). Required fields are otherwise identical between the two
  revisions (checked by diffing the two spec schemas).
* **2025-11-25 and 2026-07-28 additionally** go through the ``mcp-types`` wire models (pydantic, from the
  official Python SDK) when they know the method: a second, independent opinion.

Rules applied on top of the schemas (JSON-RPC 2.0 / MCP base protocol): a request's ``id`` is a string or
an integer (never null, never a bool); a response never carries both ``result`` and ``error``; a method must
exist in the revision and be sent in the right direction (``sender``); batches only in 2025-03-26.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import shutil
import subprocess
from collections.abc import Iterable
from typing import Any, Literal

import jsonschema
from jsonschema.exceptions import ValidationError, best_match

from support.paths import TESTS

REVISIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
Sender = Literal["client", "server"]

_TESTS_DIR = TESTS
_NODE_MODULES = _TESTS_DIR / "node_modules"
_CONFORMANCE_BUNDLE = _NODE_MODULES / "conformance-0.2" / "dist" / "index.js"

# Reads the conformance CLI bundle as text, finds its revision -> schema table and evaluates only the four
# (pure literal) schema objects in an empty VM context. Nothing of the CLI itself runs.
_EXTRACT_JS = r"""
const fs = require("node:fs"); const vm = require("node:vm");
const src = fs.readFileSync(process.argv[1], "utf8");
const m = src.match(
  /const (\w+)=\{"2025-03-26":(\w+),"2025-06-18":(\w+),"2025-11-25":(\w+),\[(\w+)\]:(\w+)\}/);
if (!m) { console.error("schema table not found in conformance bundle"); process.exit(3); }
const names = [m[2], m[3], m[4], m[6]];
const start = src.indexOf(names[0] + "={$schema:");
if (start < 0 || start > m.index) { console.error("schema literals not found"); process.exit(4); }
const seg = src.slice(start, m.index).replace(/;\s*$/, "");
const ctx = {}; vm.createContext(ctx);
vm.runInContext("var " + seg + ";globalThis.__out={'2025-03-26':" + names[0] + ",'2025-06-18':" + names[1]
  + ",'2025-11-25':" + names[2] + ",'2026-07-28':" + names[3] + "};", ctx);
process.stdout.write(JSON.stringify(ctx.__out));
"""


def _node() -> str:
    local = _NODE_MODULES / ".bin" / "node"
    if local.exists():
        return str(local)
    found = shutil.which("node")
    if found is None:
        raise RuntimeError("oracle: no `node` found; run scripts/test.sh (it installs tests/node_modules)")
    return found


@functools.cache
def _official_schemas() -> dict[str, dict[str, Any]]:
    if not _CONFORMANCE_BUNDLE.exists():
        raise RuntimeError(
            f"oracle: {_CONFORMANCE_BUNDLE} is missing -- the npm test peers are not installed. "
            "Run `bash scripts/test.sh` (or `npm ci` in tests/)."
        )
    proc = subprocess.run(
        [_node(), "-e", _EXTRACT_JS, str(_CONFORMANCE_BUNDLE)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NODE_OPTIONS": ""},
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"oracle: schema extraction failed ({proc.returncode}): {proc.stderr.strip()}")
    raw: dict[str, dict[str, Any]] = json.loads(proc.stdout)
    out: dict[str, dict[str, Any]] = {}
    for rev, schema in raw.items():
        schema = copy.deepcopy(schema)
        defs = _defs(schema)
        if rev in ("2025-06-18", "2025-11-25"):
            for key in ("minimum", "maximum", "default"):
                prop = defs.get("NumberSchema", {}).get("properties", {}).get(key)
                if isinstance(prop, dict) and prop.get("type") == "integer":
                    prop["type"] = "number"
        out[rev] = schema
    out["2024-11-05"] = _derive_2024_11_05(out["2025-03-26"])
    return out


def _defs(schema: dict[str, Any]) -> dict[str, Any]:
    result = schema["$defs"] if "$defs" in schema else schema["definitions"]
    assert isinstance(result, dict)
    return result


def _derive_2024_11_05(s2503: dict[str, Any]) -> dict[str, Any]:
    """The 2025-03-26 schema with everything 2025-03-26 added taken out (see the module docstring)."""
    schema = copy.deepcopy(s2503)
    defs = _defs(schema)
    audio_ref = "#/definitions/AudioContent"

    def drop_audio(node: Any) -> None:
        if isinstance(node, dict):
            for key in ("anyOf", "oneOf"):
                alts = node.get(key)
                if isinstance(alts, list):
                    node[key] = [a for a in alts if not (isinstance(a, dict) and a.get("$ref") == audio_ref)]
            for value in node.values():
                drop_audio(value)
        elif isinstance(node, list):
            for value in node:
                drop_audio(value)

    for name in ("AudioContent", "JSONRPCBatchRequest", "JSONRPCBatchResponse", "ToolAnnotations"):
        defs.pop(name, None)
    drop_audio(defs)
    defs["JSONRPCMessage"]["anyOf"] = [alt for alt in defs["JSONRPCMessage"]["anyOf"] if alt.get("type") != "array"]
    # Properties introduced in 2025-03-26: remove them and forbid them explicitly.
    _forbid(defs["Tool"], "annotations")
    _forbid(defs["ServerCapabilities"], "completions")
    _forbid(defs["ProgressNotification"]["properties"]["params"], "message")
    if "Annotations" in defs:
        _forbid(defs["Annotations"], "lastModified")
    return schema


def _forbid(obj: dict[str, Any], prop: str) -> None:
    obj.get("properties", {}).pop(prop, None)
    obj.setdefault("not", {"anyOf": []})["anyOf"].append({"required": [prop]})


@functools.cache
def _validator(revision: str, def_name: str) -> jsonschema.protocols.Validator:
    schema = _official_schemas()[revision]
    key = "$defs" if "$defs" in schema else "definitions"
    if def_name not in schema[key]:
        raise AssertionError(f"[{revision}] the official schema has no type {def_name!r}")
    root = {k: v for k, v in schema.items() if k not in ("$ref", "anyOf", "oneOf")}
    root["$ref"] = f"#/{key}/{def_name}"
    cls = jsonschema.validators.validator_for(schema)
    validator: jsonschema.protocols.Validator = cls(root)
    return validator


def _fail(revision: str, what: str, errors: Iterable[ValidationError]) -> None:
    errs = list(errors)
    if not errs:
        return
    best = best_match(errs)
    lines = []
    for err in sorted(errs, key=lambda e: list(e.absolute_path))[:6]:
        path = "/".join(str(p) for p in err.absolute_path) or "<root>"
        lines.append(f"  at {path}: {err.message[:300]}")
    more = f"\n  ... {len(errs) - 6} more error(s)" if len(errs) > 6 else ""
    best_path = "/".join(str(p) for p in best.absolute_path) or "<root>"
    raise AssertionError(
        f"[{revision}] not a valid {what}: {best.message[:300]} (at {best_path})\n" + "\n".join(lines) + more
    )


def validate_def(obj: Any, revision: str, def_name: str) -> None:
    """Validate ``obj`` against one named type of the official schema (``"Tool"``, ``"CallToolResult"``)."""
    _check_revision(revision)
    _fail(revision, def_name, _validator(revision, def_name).iter_errors(obj))


def _check_revision(revision: str) -> None:
    if revision not in REVISIONS:
        raise AssertionError(f"unknown protocol revision {revision!r}; known: {', '.join(REVISIONS)}")


def _union_members(revision: str, union: str) -> list[str]:
    defs = _defs(_official_schemas()[revision])
    node = defs.get(union)
    if node is None:
        return []
    if "anyOf" not in node and "const" in node.get("properties", {}).get("method", {}):
        # A one-member "union" (2026-07-28: ClientNotification = CancelledNotification) is generated inline.
        return [union]
    return [alt["$ref"].rsplit("/", 1)[-1] for alt in node.get("anyOf", []) if "$ref" in alt]


@functools.cache
def _method_table(revision: str) -> dict[tuple[str, str], str]:
    """(union, method) -> type name, e.g. ("ClientRequest", "tools/call") -> "CallToolRequest"."""
    defs = _defs(_official_schemas()[revision])
    table: dict[tuple[str, str], str] = {}
    for union in ("ClientRequest", "ClientNotification", "ServerRequest", "ServerNotification"):
        for name in _union_members(revision, union):
            method = defs.get(name, {}).get("properties", {}).get("method", {}).get("const")
            if isinstance(method, str):
                table[(union, method)] = name
    return table


@functools.cache
def _error_table(revision: str) -> dict[int, tuple[str, bool]]:
    """error code -> (type name, whether that type describes the whole message or just the error object)."""
    defs = _defs(_official_schemas()[revision])
    table: dict[int, tuple[str, bool]] = {}
    for name, node in defs.items():
        if not name.endswith("Error") or not isinstance(node, dict):
            continue
        props = node.get("properties", {})
        for part in props.get("error", {}).get("allOf", []):
            code = part.get("properties", {}).get("code", {}).get("const")
            if isinstance(code, int):
                table[code] = (name, True)
        code = props.get("code", {}).get("const")
        if isinstance(code, int) and code not in table:
            table[code] = (name, False)
    return table


def methods(revision: str) -> dict[tuple[str, str], str]:
    """The official methods of a revision: ``{(union, method): type_name}`` (useful to tests)."""
    _check_revision(revision)
    return dict(_method_table(revision))


def _result_type_for(revision: str, request_method: str, responder: Sender, result: Any) -> str:
    requester_union = "ClientRequest" if responder == "server" else "ServerRequest"
    table = _method_table(revision)
    req_name = table.get((requester_union, request_method))
    if req_name is None:
        other = "ServerRequest" if requester_union == "ClientRequest" else "ClientRequest"
        where = " (it is a request in the other direction)" if (other, request_method) in table else ""
        raise AssertionError(
            f"[{revision}] a {responder} cannot answer {request_method!r}: it is not a "
            f"{requester_union[:-7].lower()} request in this revision{where}"
        )
    defs = _defs(_official_schemas()[revision])
    if isinstance(result, dict) and result.get("resultType") == "input_required" and "InputRequiredResult" in defs:
        return "InputRequiredResult"
    if isinstance(result, dict) and "task" in result and "CreateTaskResult" in defs:
        return "CreateTaskResult"  # (2025-11-25: a task-augmented request is answered with its task)
    candidate = req_name[: -len("Request")] + "Result"
    if candidate in defs:
        return candidate
    return "EmptyResult" if "EmptyResult" in defs else "Result"


def _check_id(msg: dict[str, Any], revision: str, what: str, *, allow_null: bool = False) -> None:
    if "id" not in msg:
        raise AssertionError(f"[{revision}] {what} has no 'id'")
    rid = msg["id"]
    if rid is None and allow_null:
        return
    if isinstance(rid, bool) or not isinstance(rid, (str, int)):
        raise AssertionError(f"[{revision}] {what} 'id' must be a string or an integer, got {rid!r}")


def _is_create_task(result: Any) -> bool:
    """A 2025-11-25 CreateTaskResult (the mcp-types models have no tasks: they would read it as the method's own
    result type)."""
    return isinstance(result, dict) and "task" in result


def _mcp_types_check(msg: dict[str, Any], revision: str, sender: Sender, request_method: str | None) -> None:
    """Second opinion from the official Python SDK's wire models (2025-11-25 and 2026-07-28 only)."""
    if revision not in ("2025-11-25", "2026-07-28"):
        return
    import pydantic
    from mcp_types import methods as mt

    try:
        if "method" in msg:
            params = msg.get("params")
            method = msg["method"]
            if "id" in msg:
                surface = mt.CLIENT_REQUESTS if sender == "client" else mt.SERVER_REQUESTS
                stub = {"jsonrpc": "2.0", "id": msg["id"]}
            else:
                surface = mt.CLIENT_NOTIFICATIONS if sender == "client" else mt.SERVER_NOTIFICATIONS
                stub = {"jsonrpc": "2.0"}
            model = surface.get((method, revision))
            if model is not None:
                body: dict[str, Any] = {**stub, "method": method}
                if params is not None:
                    body["params"] = params
                model.model_validate(body, by_name=False)
        elif "result" in msg and request_method is not None and not _is_create_task(msg["result"]):
            results = mt.SERVER_RESULTS if sender == "server" else mt.CLIENT_RESULTS
            target = results.get((request_method, revision))
            if target is not None:
                pydantic.TypeAdapter(target).validate_python(msg["result"], by_name=False)
    except pydantic.ValidationError as exc:
        raise AssertionError(f"[{revision}] rejected by the mcp-types wire models: {exc}") from None


def validate_message(
    msg: dict[str, Any] | list[Any],
    revision: str,
    *,
    sender: Sender,
    request_method: str | None = None,
) -> None:
    """Assert that ``msg`` (one decoded JSON-RPC message, or a batch) is valid for ``revision``.

    ``sender`` is who emitted it. For a response, ``request_method`` is the method of the request it answers
    and selects the result type (``tools/call`` -> ``CallToolResult``); without it only the envelope is
    checked.
    """
    _check_revision(revision)
    if sender not in ("client", "server"):
        raise ValueError(f"sender must be 'client' or 'server', not {sender!r}")
    if isinstance(msg, list):
        _validate_batch(msg, revision, sender, request_method)
        return
    if not isinstance(msg, dict):
        raise AssertionError(f"[{revision}] a JSON-RPC message must be an object, got {type(msg).__name__}")
    if msg.get("jsonrpc") != "2.0":
        raise AssertionError(f"[{revision}] 'jsonrpc' must be exactly \"2.0\", got {msg.get('jsonrpc')!r}")
    defs = _defs(_official_schemas()[revision])
    if "method" in msg:
        method = msg["method"]
        if not isinstance(method, str):
            raise AssertionError(f"[{revision}] 'method' must be a string, got {method!r}")
        is_request = "id" in msg
        kind = "Request" if is_request else "Notification"
        union = ("Client" if sender == "client" else "Server") + kind
        if is_request:
            _check_id(msg, revision, "request")
        envelope = "JSONRPCRequest" if is_request else "JSONRPCNotification"
        validate_def(msg, revision, envelope)
        table = _method_table(revision)
        type_name = table.get((union, method))
        if type_name is None:
            hints = [u for (u, m) in table if m == method]
            hint = f" (the revision has it as: {', '.join(hints)})" if hints else " (unknown in this revision)"
            raise AssertionError(f"[{revision}] {method!r} is not a valid {sender} {kind.lower()}{hint}")
        validate_def(msg, revision, type_name)
    elif "result" in msg or "error" in msg:
        if "result" in msg and "error" in msg:
            raise AssertionError(f"[{revision}] a response must not carry both 'result' and 'error'")
        if "error" in msg:
            _check_id(msg, revision, "error response", allow_null=True)
            envelope = "JSONRPCErrorResponse" if "JSONRPCErrorResponse" in defs else "JSONRPCError"
            validate_def(msg, revision, envelope)
            code = msg["error"].get("code") if isinstance(msg["error"], dict) else None
            specific = _error_table(revision).get(code) if isinstance(code, int) else None
            if specific is not None:
                name, whole_message = specific
                validate_def(msg if whole_message else msg["error"], revision, name)
        else:
            _check_id(msg, revision, "response")
            envelope = "JSONRPCResultResponse" if "JSONRPCResultResponse" in defs else "JSONRPCResponse"
            validate_def(msg, revision, envelope)
            if request_method is not None:
                result_type = _result_type_for(revision, request_method, sender, msg["result"])
                validate_def(msg["result"], revision, result_type)
    else:
        raise AssertionError(f"[{revision}] not a JSON-RPC request, notification or response (keys: {sorted(msg)})")
    _mcp_types_check(msg, revision, sender, request_method)


def _validate_batch(msg: list[Any], revision: str, sender: Sender, request_method: str | None) -> None:
    if revision != "2025-03-26":
        raise AssertionError(
            f"[{revision}] JSON-RPC batch arrays are not valid in this revision (only 2025-03-26 has them)"
        )
    if not msg:
        raise AssertionError(f"[{revision}] an empty JSON-RPC batch is invalid")
    has_method = ["method" in m if isinstance(m, dict) else False for m in msg]
    if any(has_method) and not all(has_method):
        raise AssertionError(f"[{revision}] a batch mixes requests/notifications with responses")
    validate_def(msg, revision, "JSONRPCBatchRequest" if all(has_method) else "JSONRPCBatchResponse")
    for i, item in enumerate(msg):
        try:
            validate_message(item, revision, sender=sender, request_method=request_method)
        except AssertionError as exc:
            raise AssertionError(f"batch item [{i}]: {exc}") from None
