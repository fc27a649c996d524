"""The JSON Schema side of tools without a Python signature (:meth:`Tool.from_schema
<mcpkit.server.tools.Tool.from_schema>`, whose :class:`~mcpkit.server.tools.SchemaTool` is in ``tools``): the
schemas compiled (formats checked too), what is wrong with a value said as a decorated tool's argument check says
it, and the stand-in for the function description the dispatcher reads of a tool.
"""

from __future__ import annotations

import inspect
from itertools import islice
from typing import Any

from .schema import ArgumentProblem

JSONDict = dict[str, Any]
MAX_PROBLEMS = 8
"""How many problems of one call's arguments a refusal names (the rest are not looked for)."""


class SchemaInfo:
    """What the dispatcher reads of a tool's function, for a tool that has none (always given a Context)."""

    context_param = "ctx"
    fast_plan = None
    params: list[Any] = []
    return_annotation = inspect.Signature.empty

    def __init__(self, input_schema: JSONDict, description: str, is_async: bool) -> None:
        self.input_schema = input_schema
        self.description = description
        self.is_async = is_async


def schema_validator(schema: Any, what: str) -> Any:
    """A validator of ``schema`` (formats checked too), or a ``ValueError`` when it is not a JSON Schema of an
    object (what MCP requires of a tool's input and output schemas)."""
    import jsonschema_rs

    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValueError(f'{what} must be a JSON Schema object with "type": "object", not {schema!r:.200}')
    try:
        return jsonschema_rs.validator_for(schema, validate_formats=True)
    except Exception as exc:  # (jsonschema_rs raises ValidationError/ValueError for a schema it cannot compile)
        raise ValueError(f"{what} is not a valid JSON Schema: {exc}") from None


def schema_problems(validator: Any, instance: Any) -> list[ArgumentProblem]:
    """What is wrong with ``instance`` for ``validator`` (empty: nothing), said as a decorated tool's argument
    check says it: a required property missing, a property not allowed, or a value and why it is refused."""
    if validator.is_valid(instance):
        return []
    import jsonschema_rs

    kinds = jsonschema_rs.ValidationErrorKind
    problems: list[ArgumentProblem] = []
    for error in islice(validator.iter_errors(instance), MAX_PROBLEMS):
        path, kind = tuple(error.instance_path), error.kind
        if isinstance(kind, kinds.Required):
            problems.append(((*path, kind.property), "missing", ""))
        elif isinstance(kind, kinds.AdditionalProperties):
            problems.extend(((*path, name), "unexpected", "") for name in kind.unexpected)
        else:
            problems.append((path, "invalid", error.message))
    return problems[:MAX_PROBLEMS]


__all__ = ["MAX_PROBLEMS", "SchemaInfo", "schema_problems", "schema_validator"]
