#!/usr/bin/env python3
"""CI tests what users install: build the wheel, install it into fresh virtual environments exactly as the README
says (bare ``pip install mcpkit`` and ``pip install 'mcpkit[all]'``), with no dev tools, and run there:

* every fenced ```python block of README.md and docs/**/*.md, extracted and executed as a script (cwd = the
  repository root, stdin = /dev/null, 60 s each). A block is skipped only when the line before its fence is
  ``<!-- no-run: reason -->``; skipped blocks are listed. Bare venv: README.md's blocks; a block that stops with
  mcpkit's one-line "needs an extra" error counts as expected there. ``[all]`` venv: every block must pass.
* every example under examples/ against the client (connect, list and read what it offers, call its
  argument-free or README-documented tools), the README's CLI commands (``mcpkit call "python
  examples/everything.py" add a=2 b=3`` prints 5), and every tool of ``@modelcontextprotocol/server-everything``
  (tests/node_modules) through ``mcpkit call``;
* ``pip install 'mcpkit[cli]'`` alone: ``mcpkit call`` and ``mcpkit check`` of a stdio server work without the
  ``http`` extra; ``mcpkit check`` of a URL names it in one line;
* in the bare venv, each missing-extra path (``mcpkit --help``, ``app.run("http")``) must fail with one line
  naming ``pip install 'mcpkit[...]'``;
* the five programs of a new user (``examples/first_steps/``: a server with a model-returning tool, a template, a
  prompt and progress; a stdio client; elicitation; sampling; a server and client over HTTP), each run, then
  checked with ``mypy --strict`` (no ``type: ignore``, no ``cast``) in the ``[all]`` venv with mypy added last
  (after every other check, so the dev-tool probe above still holds for them).

A missing runtime dependency fails here (a ModuleNotFoundError is not one of mcpkit's one-line extra errors).
Usage: ``python scripts/check_install.py [--keep] [--only bare|cli|all|testing]``; exit 0 when everything passed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK_TIMEOUT = 60.0  # seconds per code block / command (the brief of issue 13)
NO_RUN = re.compile(r"^\s*<!--\s*no-run:\s*(.+?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)```python\s*$")
NODE_BIN = ROOT / "tests" / "node_modules" / ".bin"
EXTRA_ERROR = re.compile(r"pip install 'mcpkit\[\w+\]'")
TESTING_GUIDE = ROOT / "docs" / "guides" / "testing.md"
TESTING_EXAMPLE = ROOT / "examples" / "testing"


@dataclass
class Block:
    source: Path
    line: int  # 1-based line of the opening fence
    code: str
    skip: str | None = None

    @property
    def where(self) -> str:
        return f"{self.source.relative_to(ROOT)}:{self.line}"


@dataclass
class Report:
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def ok(self, what: str) -> None:
        self.passed.append(what)
        print(f"  ok    {what}", flush=True)

    def fail(self, what: str, detail: str) -> None:
        self.failed.append(what)
        print(f"  FAIL  {what}\n{textwrap.indent(detail.rstrip()[-3000:], '        ')}", flush=True)

    def skip(self, what: str, why: str) -> None:
        self.skipped.append(f"{what} ({why})")
        print(f"  skip  {what}: {why}", flush=True)


# ---------------------------------------------------------------------------------------------- code blocks


def extract_blocks(path: Path) -> list[Block]:
    """The ```python blocks of a Markdown file, with the no-run reason of each skipped one."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent = len(m.group(1))
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        prev = lines[start - 1] if start > 0 else ""
        no_run = NO_RUN.match(prev)
        blocks.append(Block(path, start + 1, "\n".join(body) + "\n", no_run.group(1) if no_run else None))
        i += 1
    return blocks


def markdown_files(readme_only: bool) -> list[Path]:
    """README.md, and the docs (but the testing guide: its blocks are pytest files, run in the testing venv)."""
    files = [ROOT / "README.md"]
    if not readme_only:
        files += sorted(p for p in (ROOT / "docs").rglob("*.md") if p.is_file() and p != TESTING_GUIDE)
    return files


# ---------------------------------------------------------------------------------------------- venvs


class Venv:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.bin = path / "bin"
        self.python = self.bin / "python"

    def env(self) -> dict[str, str]:
        """The environment of an activated venv: its bin first on PATH, no PYTHONPATH (nothing from the checkout
        or the dev venv may leak in), node on PATH for the npm peers."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env["VIRTUAL_ENV"] = str(self.path)
        env["PATH"] = os.pathsep.join([str(self.bin), str(NODE_BIN), env.get("PATH", "")])
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("MCPKIT_DEBUG", None)
        return env

    def run(
        self, argv: list[str], timeout: float = BLOCK_TIMEOUT, stdin: int | None = subprocess.DEVNULL
    ) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                argv,
                cwd=ROOT,
                env=self.env(),
                stdin=stdin,
                capture_output=True,
                text=True,
                timeout=timeout,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            return subprocess.CompletedProcess(argv, 124, out, err + f"\n(timed out after {timeout:.0f} s)")


def build_wheel(out: Path) -> Path:
    """``pip wheel`` of the checkout (an isolated build with the pyproject's build backend)."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q", "-w", str(out), "."],
        cwd=ROOT,
        check=True,
    )
    wheels = sorted(out.glob("mcpkit-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"expected one wheel in {out}, found {wheels}")
    return wheels[0]


def make_venv(path: Path, wheel: Path, extras: str, brings: tuple[str, ...] = ()) -> Venv:
    """A fresh venv with only the wheel installed, the way the README says (``pip install 'mcpkit[all]'``);
    ``brings``: the dev tools the extras themselves install (``testing``: pytest)."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    venv = Venv(path)
    spec = f"mcpkit{extras} @ {wheel.as_uri()}"
    subprocess.run(
        [str(venv.python), "-m", "pip", "install", "--disable-pip-version-check", "-q", spec],
        check=True,
        env=venv.env(),
        cwd=path,
    )
    where = venv.run([str(venv.python), "-c", "import mcpkit, sys; print(mcpkit.__file__)"], timeout=60)
    if where.returncode != 0 or not where.stdout.strip().startswith(str(path)):
        raise SystemExit(f"mcpkit in {path} is not the installed wheel: {where.stdout}{where.stderr}")
    for tool in ("pytest", "ruff", "mypy", "jsonschema"):  # no dev tools: what users have, nothing more
        if tool in brings:
            continue
        probe = venv.run([str(venv.python), "-c", f"import {tool}"], timeout=60)
        if probe.returncode == 0:
            raise SystemExit(f"the fresh venv {path} has the dev package {tool!r}: it would hide a missing dependency")
    return venv


# ---------------------------------------------------------------------------------------------- checks


def run_blocks(venv: Venv, blocks: list[Block], report: Report, tmp: Path, extras_may_be_missing: bool) -> None:
    for n, block in enumerate(blocks):
        what = f"code block {block.where}"
        if block.skip is not None:
            report.skip(what, f"no-run: {block.skip}")
            continue
        script = tmp / f"block_{n}.py"
        script.write_text(block.code, encoding="utf-8")
        started = time.monotonic()
        proc = venv.run([str(venv.python), str(script)])
        took = time.monotonic() - started
        expected = _expected_output(block)
        if proc.returncode == 0 and expected is not None and proc.stdout.strip() != expected:
            report.fail(what, f"printed {proc.stdout.strip()!r}, expected {expected!r}\n{proc.stderr}")
        elif proc.returncode == 0:
            report.ok(f"{what} ({took:.1f} s)")
        elif extras_may_be_missing and _one_line_extra_error(proc):
            report.ok(f"{what}: needs an extra, said so in one line")
        else:
            report.fail(what, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")


# What a README block that makes this call must print (the README's client example prints exactly 5: the
# acceptance of issue 13). Blocks of the docs may print more (server info, URLs): they must run, not match.
_EXPECTED = {'call_tool("add", {"a": 2, "b": 3})': "5"}


def _expected_output(block: Block) -> str | None:
    if block.source.name != "README.md" or block.source.parent != ROOT:
        return None
    return next((out for call, out in _EXPECTED.items() if call in block.code), None)


def _one_line_extra_error(proc: subprocess.CompletedProcess[str]) -> bool:
    last = [line for line in proc.stderr.splitlines() if line.strip()][-1:]
    return bool(last) and bool(EXTRA_ERROR.search(last[0]))


def check_missing_extras(venv: Venv, report: Report) -> None:
    """Bare install: each path that needs an extra stops with one line naming the pip command."""
    cases = {
        "mcpkit --help": [str(venv.bin / "mcpkit"), "--help"],
        'app.run("http")': [str(venv.python), "-c", "from mcpkit import MCPKit; MCPKit('x').run('http', port=0)"],
    }
    for what, argv in cases.items():
        proc = venv.run(argv)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        if proc.returncode != 0 and len(lines) == 1 and EXTRA_ERROR.search(lines[0]):
            report.ok(f"bare: {what} -> {lines[0]}")
        elif proc.returncode != 0 and lines and EXTRA_ERROR.search(lines[-1]) and "Traceback" in proc.stderr:
            report.fail(f"bare: {what}", f"names the extra, but after a traceback:\n{proc.stderr}")
        else:
            report.fail(f"bare: {what}", f"exit {proc.returncode}, expected one line naming the extra:\n{proc.stderr}")


_EXAMPLE_PROBE = r"""
import asyncio, json, sys
from mcpkit import Client, MCPError

target, calls = sys.argv[1], json.loads(sys.argv[2])

async def main():
    async with Client(target) as client:
        await client.ping()
        tools = await client.list_tools()
        caps = client.server_capabilities
        resources = await client.list_resources() if "resources" in caps else []
        templates = await client.list_resource_templates() if "resources" in caps else []
        prompts = await client.list_prompts() if "prompts" in caps else []
        for r in resources[:3]:
            await client.read_resource(r.uri)
        for p in prompts:
            if not any(a.required for a in (p.arguments or [])):
                try:
                    await client.get_prompt(p.name)
                except MCPError as exc:  # an answer all the same (e.g. a prompt that elicits: no handler here)
                    print(f"prompt {p.name}: {exc}", file=sys.stderr)
        called = []
        for tool in tools:
            args = calls.get(tool.name)
            if args is None and not (tool.input_schema or {}).get("required") and tool.name in calls.get("*", []):
                args = {}
            if args is not None:
                result = await client.call_tool(tool.name, args)
                if result.is_error:
                    raise SystemExit(f"tool {tool.name} failed: {result.text}")
                called.append(tool.name)
        print(json.dumps({"tools": len(tools), "resources": len(resources), "templates": len(templates),
                          "prompts": len(prompts), "called": called}))

asyncio.run(main())
"""

# The examples that are servers, and the calls that exercise them (arguments as their docstrings/README show).
EXAMPLE_SERVERS: dict[str, dict[str, object]] = {
    "everything.py": {"add": {"a": 2, "b": 3}, "echo": {"text": "hi"}, "*": ["image", "touch"]},
    "weather.py": {},
    "files.py": {},
    "conformance_server.py": {},
}
# Examples that are not stdio servers, and why they are run the way they are (or not at all).
EXAMPLE_OTHERS = {
    "conformance_client.py": "a client the conformance harness drives (MCP_CONFORMANCE_SCENARIO + a scenario "
    "server): run by tests/conformance/run.py",
    "oauth_server.py": "run with --demo: serves on HTTP, then a headless OAuth client signs in and calls a tool",
}


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def check_examples(venv: Venv, report: Report) -> None:
    for path in sorted((ROOT / "examples").glob("*.py")):
        name = path.name
        if name in EXAMPLE_SERVERS:
            proc = venv.run(
                [str(venv.python), "-c", _EXAMPLE_PROBE, f"python examples/{name}", json.dumps(EXAMPLE_SERVERS[name])]
            )
            if proc.returncode == 0:
                report.ok(f"example {name} against the client: {proc.stdout.strip()}")
            else:
                report.fail(f"example {name}", f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        elif name == "oauth_server.py":
            port = str(_free_port())
            proc = venv.run([str(venv.python), f"examples/{name}", "--demo", "--port", port], timeout=120)
            if proc.returncode == 0:
                report.ok(f"example {name} --demo")
            else:
                report.fail(f"example {name} --demo", f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        elif name in EXAMPLE_OTHERS:
            report.skip(f"example {name}", EXAMPLE_OTHERS[name])
        else:
            report.fail(f"example {name}", "a new example: add it to EXAMPLE_SERVERS or EXAMPLE_OTHERS")


# The README's CLI commands, run as written (each must appear verbatim in README.md) and what they must print.
README_COMMANDS: list[tuple[str, str | None]] = [
    ('mcpkit call "python examples/everything.py" add a=2 b=3', "5"),
    ('mcpkit tools "python examples/everything.py"', None),
]


def check_cli(venv: Venv, report: Report) -> None:
    import shlex

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for command, expected in README_COMMANDS:
        if command not in readme:
            report.fail(f"CLI {command}", "this command is no longer in README.md: update README_COMMANDS")
            continue
        argv = shlex.split(command)
        proc = venv.run([str(venv.bin / argv[0]), *argv[1:]])
        if proc.returncode != 0:
            report.fail(f"CLI {command}", f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        elif expected is not None and proc.stdout.strip() != expected:
            report.fail(f"CLI {command}", f"printed {proc.stdout.strip()!r}, expected {expected!r}\n{proc.stderr}")
        else:
            report.ok(f"CLI {command}")


def check_cli_extra(venv: Venv, report: Report) -> None:
    """``pip install 'mcpkit[cli]'`` alone: the stdio commands work (``mcpkit check`` judges a stdio server
    without the http extra), and a URL target stops with one line naming ``mcpkit check`` and the http extra."""
    mcpkit = str(venv.bin / "mcpkit")
    proc = venv.run([mcpkit, "call", "python examples/everything.py", "add", "a=2", "b=3"])
    if proc.returncode == 0 and proc.stdout.strip() == "5":
        report.ok("cli: mcpkit call over stdio")
    else:
        report.fail("cli: mcpkit call over stdio", f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    proc = venv.run([mcpkit, "check", "--no-stateless", "python examples/everything.py"], timeout=180)
    if proc.returncode == 0 and "RESULT: PASS" in proc.stdout:
        report.ok("cli: mcpkit check of a stdio server")
    else:
        report.fail("cli: mcpkit check of a stdio server", f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    proc = venv.run([mcpkit, "check", "http://127.0.0.1:9/mcp"])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    if proc.returncode == 1 and len(lines) == 1 and "mcpkit check needs" in lines[0] and EXTRA_ERROR.search(lines[0]):
        report.ok(f"cli: mcpkit check of a URL -> {lines[0]}")
    else:
        report.fail("cli: mcpkit check of a URL", f"exit {proc.returncode}, expected one line naming the extra:\n"
                    f"{proc.stderr}")  # fmt: skip


def _sample_value(schema: dict[str, object]) -> object:
    if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type")
    if kind == "string":
        return "hello"
    if kind in ("number", "integer"):
        low = schema.get("minimum", 1)
        return low if isinstance(low, (int, float)) else 1
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return "hello"


def check_server_everything(venv: Venv, report: Report) -> None:
    """Every tool of @modelcontextprotocol/server-everything answers a ``mcpkit call`` (required arguments filled
    from its input schema; a tool that needs the client to sample or elicit may answer with a tool error)."""
    server = NODE_BIN / "mcp-server-everything"
    if not server.exists() or not (NODE_BIN / "node").exists():
        report.fail("server-everything", f"{server} is missing: scripts/test.sh installs tests/node_modules")
        return
    target = str(server)
    lister = (
        "import asyncio, json, sys\nfrom mcpkit import Client\n"
        "async def main():\n"
        "    async with Client(sys.argv[1]) as c:\n"
        "        print(json.dumps([t.dump() for t in await c.list_tools()]))\n"
        "asyncio.run(main())\n"
    )
    listing = venv.run([str(venv.python), "-c", lister, target])
    try:
        tools = json.loads(listing.stdout)
    except json.JSONDecodeError:
        report.fail("server-everything: list its tools", f"{listing.stdout}\n{listing.stderr}")
        return
    for tool in tools:
        schema = tool.get("inputSchema") or {}
        props = schema.get("properties") or {}
        args = {k: _sample_value(props.get(k) or {}) for k in schema.get("required") or []}
        proc = venv.run([str(venv.bin / "mcpkit"), "call", target, tool["name"], "--args", json.dumps(args)])
        out = proc.stdout + proc.stderr
        if proc.returncode == 0:
            report.ok(f"server-everything: mcpkit call {tool['name']}")
        elif proc.returncode == 1 and "Traceback" not in out and proc.stdout.strip():
            # the tool answered with isError (e.g. "fetch failed" offline, or it needs the tasks extension):
            # called, and the answer shown; the message is listed so a reader can judge it
            said = " ".join(proc.stdout.split())[:120]
            report.ok(f"server-everything: mcpkit call {tool['name']} (answered with a tool error: {said})")
        else:
            report.fail(f"server-everything: mcpkit call {tool['name']}", f"exit {proc.returncode}\n{out}")


FIRST_STEPS = ROOT / "examples" / "first_steps"
# each program runs on its own and checks what it got (``client.py`` starts ``server.py`` over stdio)
FIRST_STEPS_PROGRAMS = ("client.py", "elicitation.py", "sampling.py", "over_http.py")
FIRST_STEPS_CALL = ("find_book", "isbn=9780261102217")  # ``mcpkit call`` reads the digits as the string they are
FIRST_STEPS_MYPY = "mypy>=1.10"


def check_first_steps(venv: Venv, report: Report) -> None:
    """The five programs of ``examples/first_steps`` run, and pass ``mypy --strict`` with no escape hatch."""
    found = sorted(p.name for p in FIRST_STEPS.glob("*.py"))
    expected = sorted((*FIRST_STEPS_PROGRAMS, "server.py"))
    if found != expected:
        report.fail("first steps", f"examples/first_steps holds {found}, expected {expected}: update FIRST_STEPS_*")
        return
    for name in FIRST_STEPS_PROGRAMS:
        proc = venv.run([str(venv.python), str(FIRST_STEPS / name)], timeout=120)
        if proc.returncode == 0:
            report.ok(f"first steps: {name}")
        else:
            report.fail(f"first steps: {name}", f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    server = str(FIRST_STEPS / "server.py")
    proc = venv.run([str(venv.bin / "mcpkit"), "call", server, *FIRST_STEPS_CALL, "-o", "json"])
    title = ""
    if proc.returncode == 0:
        try:
            title = str(json.loads(proc.stdout)["structuredContent"]["title"])
        except (ValueError, KeyError, TypeError):
            title = ""
    if title == "The Hobbit":
        report.ok(f"first steps: mcpkit call server.py {' '.join(FIRST_STEPS_CALL)}")
    else:
        report.fail("first steps: mcpkit call server.py", f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    hatches = [
        f"{p.name}:{n}: {line.strip()}"
        for p in sorted(FIRST_STEPS.glob("*.py"))
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if "type: ignore" in line or re.search(r"\bcast\(", line)
    ]
    if hatches:
        report.fail("first steps: no type: ignore, no cast", "\n".join(hatches))
    install = venv.run(
        [str(venv.python), "-m", "pip", "install", "--disable-pip-version-check", "-q", FIRST_STEPS_MYPY], timeout=300
    )
    if install.returncode != 0:
        report.fail("first steps: install mypy", install.stdout + install.stderr)
        return
    check = venv.run(
        [str(venv.python), "-m", "mypy", "--strict", "--no-incremental", "examples/first_steps"], timeout=300
    )
    if check.returncode == 0:
        report.ok(f"first steps: mypy --strict examples/first_steps ({check.stdout.strip()})")
    else:
        report.fail("first steps: mypy --strict examples/first_steps", check.stdout + check.stderr)


# ---------------------------------------------------------------------------------------------- the testing kit

_RUNS = re.compile(r"^mcpkit: (\d+) test runs over (\d+) transport\(s\) x (\d+) era\(s\) \((\d+) passed\)$", re.M)
_TEST_FUNCTION = re.compile(r"^(async )?def test_", re.M)


def _session_processes(sid: int) -> list[str]:
    """The processes still alive (zombies too) in session ``sid`` (a run started with ``start_new_session``)."""
    left = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 3 and int(fields[3]) == sid:  # state ppid pgrp session
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                cmdline = ""
            shown = cmdline or stat[: stat.rfind(")") + 1]
            left.append(f"pid {entry.name} (parent {fields[1]}, state {fields[0]}): {shown}")
    return left


def run_pytest(
    venv: Venv, cwd: Path, args: list[str], timeout: float
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``python -m pytest ARGS`` in ``cwd`` as its own session; also the processes of that session still there
    once pytest has exited (none may be: whatever a test started must be stopped)."""
    argv = [str(venv.python), "-m", "pytest", "-p", "no:cacheprovider", *args]
    proc = subprocess.Popen(
        argv, cwd=cwd, env=venv.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        err += f"\n(timed out after {timeout:.0f} s)"
    deadline = time.monotonic() + 10  # what the run ended may still be on its way out (and be reaped)
    while (left := _session_processes(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), left


def check_testing_kit(venv: Venv, report: Report, tmp: Path) -> None:
    """``pip install 'mcpkit[testing]'`` plus examples/testing: its tests, run by the plugin on every transport and
    in both eras (the count printed), nothing left running after; then the testing guide's blocks, each a test file
    run by pytest (a block that records a surface snapshot runs a second time, comparing with it)."""
    pip = [str(venv.python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    install = venv.run([*pip, str(TESTING_EXAMPLE)], timeout=600)
    if install.returncode != 0:
        report.fail("testing: pip install examples/testing", install.stdout + install.stderr)
        return
    started = time.monotonic()
    proc, left = run_pytest(venv, TESTING_EXAMPLE, ["-q"], timeout=1800)
    took = time.monotonic() - started
    runs = _RUNS.search(proc.stdout)
    what = "testing: examples/testing under the plugin"
    if proc.returncode != 0 or runs is None:
        report.fail(what, f"exit {proc.returncode}\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}")
    elif (runs.group(2), runs.group(3)) != ("5", "2") or runs.group(1) != runs.group(4):
        report.fail(what, f"not every test on 5 transports x 2 eras, all passed: {runs.group(0)}")
    elif left:
        report.fail(what, "processes left running after the run:\n" + "\n".join(left))
    else:
        total = proc.stdout.strip().splitlines()[-1].strip("= ")
        report.ok(f"{what}: {runs.group(0).removeprefix('mcpkit: ')}; {total}; no process left ({took:.0f} s)")
    for n, block in enumerate(extract_blocks(TESTING_GUIDE)):
        what = f"code block {block.where}"
        if block.skip is not None:
            report.skip(what, f"no-run: {block.skip}")
            continue
        folder = tmp / f"guide_{n}"
        folder.mkdir()
        started = time.monotonic()
        if _TEST_FUNCTION.search(block.code):
            (folder / f"test_guide_{n}.py").write_text(block.code, encoding="utf-8")
            args = ["-q", "-o", "asyncio_default_fixture_loop_scope=function"]
            snapshot = "mcp_snapshot" in block.code
            proc, left = run_pytest(venv, folder, [*args, "--mcp-update-snapshots"] if snapshot else args, 600)
            if proc.returncode == 0 and snapshot:
                proc, left = run_pytest(venv, folder, args, 600)
        else:
            (folder / f"guide_{n}.py").write_text(block.code, encoding="utf-8")
            proc = venv.run([str(venv.python), str(folder / f"guide_{n}.py")], timeout=300)
            left = []
        if proc.returncode != 0:
            report.fail(what, f"exit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
        elif left:
            report.fail(what, "processes left running:\n" + "\n".join(left))
        else:
            report.ok(f"{what} ({time.monotonic() - started:.1f} s)")


# ---------------------------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the venvs (printed) for a look")
    parser.add_argument("--only", choices=("bare", "cli", "all", "testing"), help="check one install only")
    opts = parser.parse_args()
    report = Report()
    tmp = Path(tempfile.mkdtemp(prefix="mcpkit-install-"))
    started = time.monotonic()
    try:
        wheel = build_wheel(tmp / "dist")
        print(f"wheel: {wheel.name} ({time.monotonic() - started:.0f} s)", flush=True)
        if opts.only in (None, "bare"):
            print("\n-- bare: pip install mcpkit", flush=True)
            bare = make_venv(tmp / "bare", wheel, "")
            check_missing_extras(bare, report)
            run_blocks(bare, [b for f in markdown_files(True) for b in extract_blocks(f)], report, tmp, True)
            proc = bare.run([str(bare.python), "-c", _EXAMPLE_PROBE, "python examples/everything.py",
                             json.dumps(EXAMPLE_SERVERS["everything.py"])])  # fmt: skip
            if proc.returncode == 0:
                report.ok(f"bare: examples/everything.py over stdio: {proc.stdout.strip()}")
            else:
                report.fail("bare: examples/everything.py over stdio", proc.stdout + proc.stderr)
        if opts.only in (None, "cli"):
            print("\n-- cli: pip install 'mcpkit[cli]'", flush=True)
            check_cli_extra(make_venv(tmp / "cli", wheel, "[cli]"), report)
        if opts.only in (None, "all"):
            print("\n-- all: pip install 'mcpkit[all]'", flush=True)
            full = make_venv(tmp / "all", wheel, "[all]")
            run_blocks(full, [b for f in markdown_files(False) for b in extract_blocks(f)], report, tmp, False)
            check_cli(full, report)
            check_examples(full, report)
            check_server_everything(full, report)
            check_first_steps(full, report)  # last: it adds mypy to the venv
        if opts.only in (None, "testing"):
            print("\n-- testing: pip install 'mcpkit[testing]' and examples/testing", flush=True)
            kit = make_venv(tmp / "testing", wheel, "[testing]", brings=("pytest",))
            check_testing_kit(kit, report, tmp)
    finally:
        if opts.keep:
            print(f"\nkept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    took = time.monotonic() - started
    print(f"\ninstall check: {len(report.passed)} passed, {len(report.failed)} failed, {len(report.skipped)} skipped"
          f" ({took:.0f} s)")  # fmt: skip
    for s in report.skipped:
        print(f"  skipped: {s}")
    for f in report.failed:
        print(f"  FAILED: {f}")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
