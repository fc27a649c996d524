"""``mcpkit check`` inside a test suite: run the black-box checks against a server and fail the test on the
requirements it breaks, with the findings in the assertion message.

    report = await assert_conformant(app)                    # a server object: served over HTTP for the run
    report = await assert_conformant("server.py", transport="stdio")
    report = await assert_conformant("http://127.0.0.1:8000/mcp", fail_on="should")

The checks are :func:`mcpkit.check.run_checks` (both eras: the handshake revision asked for, then 2026-07-28 when
the server offers it). A server object, file or import path is served for the run by :func:`~.serving.serve`
(the guarded HTTP server, default limits, on 127.0.0.1) or, for ``transport="stdio"``, started as a subprocess of
this interpreter; a URL or a command line is checked as it is.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from ..check import Report, run_checks
from ._load import is_file_spec, is_server, split_spec, stdio_command, subprocess_env
from .serving import HTTP_PATHS, serve

FAIL_ON: dict[str, tuple[str, ...]] = {
    "must": ("MUST",),
    "should": ("MUST", "SHOULD"),
    "may": ("MUST", "SHOULD", "MAY"),
}
"""``fail_on`` -> the requirement levels whose failure fails the assertion."""


class NonConformant(AssertionError):
    """The server broke requirements of the levels asked for; :attr:`report` holds every finding and
    :attr:`failed` the IDs that decided it."""

    def __init__(self, message: str, report: Report, failed: list[str]) -> None:
        super().__init__(message)
        self.report = report
        self.failed = failed


def _is_spec(target: str) -> bool:
    """A server file or import path (loaded here), rather than a command line or a URL."""
    if any(ch.isspace() for ch in target) or "://" in target:
        return False
    where, name = split_spec(target)
    if name or is_file_spec(where):
        return True
    try:
        return importlib.util.find_spec(where) is not None
    except (ImportError, ValueError):
        return False


@contextlib.asynccontextmanager
async def _checkable(server: Any, transport: str) -> AsyncIterator[tuple[str | list[str], dict[str, Any]]]:
    """What ``run_checks`` takes for ``server``: (its target, the options it needs)."""
    if isinstance(server, os.PathLike):
        server = os.fspath(server)
    if isinstance(server, Sequence) and not isinstance(server, str):
        yield [str(part) for part in server], {}
        return
    if isinstance(server, str) and not _is_spec(server):
        yield server, {}  # a URL or a command line: as it is
        return
    if transport == "stdio":
        yield stdio_command(server), {"env": subprocess_env()}
        return
    if transport not in HTTP_PATHS:
        raise ValueError(f"transport: stdio or one of {', '.join(HTTP_PATHS)}, not {transport!r}")
    if not (is_server(server) or isinstance(server, str)):
        raise TypeError(f"cannot check a {type(server).__name__}: give a server, a file, an import path, a URL or argv")
    async with serve(server, transport) as served:
        yield served.url, {"transport": transport}


def _visible(text: str) -> str:
    """``text`` with control characters (and whatever a terminal would act on) written out: the evidence quotes
    what the server sent."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def findings(report: Report, ids: Sequence[str]) -> str:
    """The requirements ``ids`` as the assertion shows them: ID, level, the requirement's words, the evidence
    (read from the report's stable form, :meth:`~mcpkit.check.Report.as_dict`)."""
    entries = {entry["id"]: entry for entry in report.as_dict()["requirements"]}
    lines = []
    for rid in ids:
        entry = entries.get(rid, {})
        lines.append(f"{rid} ({entry.get('level', '?')}) {entry.get('requirement', '')}".rstrip())
        if entry.get("evidence"):
            lines.append("    " + _visible(str(entry["evidence"])))
    return "\n".join(lines)


async def check_server(
    server: Any,
    *,
    transport: str = "http",
    protocol_version: str | None = None,
    timeout: float = 10.0,
    modern: bool = True,
    **check_options: Any,
) -> Report:
    """Run ``mcpkit check`` against ``server`` and return its :class:`~mcpkit.check.Report` (nothing asserted).

    ``server``: a server object, a file or an import path (served over ``transport`` for the run: ``"http"``,
    ``"sse"``, ``"ws"`` or ``"stdio"``), a URL, or a command line (string or argv). ``protocol_version`` is the
    handshake revision asked for first (default: the latest); with ``modern`` a server that offers 2026-07-28 is
    checked in that era too. ``check_options`` are :func:`~mcpkit.check.run_checks`'s (``headers``, ``token``,
    ``env``, ``cwd``)."""
    if protocol_version is not None:
        check_options["protocol_version"] = protocol_version
    async with _checkable(server, transport) as (target, needed):
        options = {**needed, **check_options}
        if needed.get("env") and check_options.get("env"):
            options["env"] = {**needed["env"], **check_options["env"]}
        return await run_checks(target, timeout=timeout, modern=modern, **options)


async def assert_conformant(
    server: Any,
    *,
    fail_on: str = "must",
    transport: str = "http",
    ignore: Sequence[str] = (),
    **options: Any,
) -> Report:
    """Run ``mcpkit check`` against ``server`` (as :func:`check_server` takes it) and raise :class:`NonConformant`
    (an ``AssertionError``) when a requirement of the levels ``fail_on`` names failed (``"must"``: MUST and the
    specification's other MUST rules, ``"should"``: SHOULD too, ``"may"``: all), or when the run could not reach
    the server. The message names each failed requirement, its words and the evidence. ``ignore``: IDs not to fail
    on (a known gap, with its reason in the test). Returns the report."""
    __tracebackhide__ = True  # (pytest shows the test's line, not this one)
    if fail_on not in FAIL_ON:
        raise ValueError(f"fail_on: one of {', '.join(FAIL_ON)}, not {fail_on!r}")
    report = await check_server(server, transport=transport, **options)
    skipped = set(ignore)
    failed = [rid for name in FAIL_ON[fail_on] for rid in report.failed(name) if rid not in skipped]
    if failed:
        raise NonConformant(
            f"mcpkit check: {report.target} ({report.transport}) broke {len(failed)} requirement(s):\n"
            + findings(report, failed),
            report,
            failed,
        )
    if "aborted" in report.info:
        raise NonConformant(f"mcpkit check could not finish: {report.info['aborted']}", report, [])
    return report


class McpConformance:
    """What the ``mcp_conformance`` fixture gives a test (annotate the parameter with it): ``await
    mcp_conformance()`` runs ``mcpkit check`` against the test's ``mcp_server`` (or the ``server`` given) and
    raises :class:`NonConformant` on the requirements it breaks (:func:`assert_conformant`); returns the report.
    The plugin builds it; a test does not."""

    def __init__(self, default_server: Callable[[], Any]) -> None:
        self._default_server = default_server

    async def __call__(
        self,
        server: Any = None,
        *,
        fail_on: str = "must",
        transport: str = "http",
        ignore: Sequence[str] = (),
        **options: Any,
    ) -> Report:
        """:func:`assert_conformant` on ``server`` (default: the test's ``mcp_server``); ``options`` are
        :func:`check_server`'s (``protocol_version``, ``timeout``, ``modern``, ``headers``, ...)."""
        __tracebackhide__ = True  # (pytest shows the test's line, not this one)
        target = server if server is not None else self._default_server()
        return await assert_conformant(target, fail_on=fail_on, transport=transport, ignore=ignore, **options)


__all__ = ["FAIL_ON", "McpConformance", "NonConformant", "assert_conformant", "check_server", "findings"]
