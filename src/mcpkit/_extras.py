"""Optional dependencies: which extra brings which module, and one-line errors that name the install command.

The bare install (``pip install mcpkit``: pydantic, orjson, jsonschema-rs) writes servers and runs them over stdio,
builds the ASGI app (``create_app``) for an ASGI server of the user's choice, and connects a client to stdio
targets and in-process servers. Everything else is an extra:

=========  ==========================================  ====================================================
extra      brings                                      for
=========  ==========================================  ====================================================
``http``   uvicorn, httpx, websockets, sniffio,        ``app.run("http"|"sse"|"ws")`` (uvicorn), HTTP and
           httptools                                   WebSocket client targets
``cli``    click, rich, watchfiles, pyyaml             the ``mcpkit`` command (watchfiles: ``mcpkit dev``,
                                                       pyyaml: ``mcpkit install goose``)
``redis``  redis                                       ``mcpkit.stores.redis`` (several workers)
``postgres`` asyncpg                                   ``mcpkit.stores.postgres`` (several workers)
``auth``   pyjwt[crypto] (+ the ``http`` extra)        ``mcpkit.auth`` (OAuth 2.1)
``skills`` pyyaml                                      Skills: ``add_skills``, reading and checking skills
``otel``   opentelemetry-api, opentelemetry-sdk        ``mcpkit.telemetry`` (OpenTelemetry spans)
``all``    all of the above
``openai`` openai                                      :class:`~mcpkit.client.sampling.OpenAISampler` made
                                                       without a client
``anthropic`` anthropic                                :class:`~mcpkit.client.sampling.AnthropicSampler`
                                                       made without a client
=========  ==========================================  ====================================================

The ``testing`` extra (pytest, pytest-asyncio and the ``http`` extra; not in ``all``) is for test suites: the
testing kit, :mod:`mcpkit.testing`, and its pytest plugin.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["EXTRA_OF", "MissingExtra", "explain", "require"]

# top-level module -> the extra that installs it
EXTRA_OF: dict[str, str] = {
    "uvicorn": "http",
    "httpx": "http",
    "websockets": "http",
    "sniffio": "http",
    "h11": "http",
    "httptools": "http",
    "click": "cli",
    "rich": "cli",
    "watchfiles": "cli",
    "redis": "redis",
    "asyncpg": "postgres",
    "jwt": "auth",
    "cryptography": "auth",
    "yaml": "skills",
    "opentelemetry": "otel",
    "pytest": "testing",
    "pytest_asyncio": "testing",
    "openai": "openai",
    "anthropic": "anthropic",
}


class MissingExtra(ModuleNotFoundError):
    """An optional dependency is not installed; the message names the ``pip install`` command that brings it."""


def explain(exc: ModuleNotFoundError, feature: str | None = None) -> MissingExtra | None:
    """A :class:`MissingExtra` for ``exc`` when the missing module belongs to an extra, else None."""
    if isinstance(exc, MissingExtra):
        return exc
    root = (exc.name or "").partition(".")[0]
    extra = EXTRA_OF.get(root)
    if extra is None:
        return None
    what = f"{feature} needs" if feature else "this needs"
    err = MissingExtra(f"{what} the Python package {root!r}: pip install 'mcpkit[{extra}]'", name=exc.name)
    return err


def require(module: str, feature: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtra` naming the extra to install (``feature`` says what for)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        err = explain(exc, feature)
        if err is None:
            raise
        raise err from None
