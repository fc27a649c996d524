"""The documentation covers what the code offers: every public name of a package is in the API reference, every
option of the ``mcpkit`` command and every ``MCPKIT_*`` environment variable the code reads is in the guides."""

from __future__ import annotations

import importlib
import inspect
import re
from types import ModuleType

from support.paths import REPO

SRC = REPO / "src" / "mcpkit"

#: The packages whose ``__all__`` is the public API a user imports from. (``mcpkit.engine`` and
#: ``mcpkit.client``/``mcpkit.server`` are layers: their names reach users through ``mcpkit`` and the pages.)
PUBLIC_PACKAGES = (
    "mcpkit",
    "mcpkit.auth",
    "mcpkit.check",
    "mcpkit.inspector",
    "mcpkit.protocol",
    "mcpkit.server.middleware",
    "mcpkit.server.openapi",
    "mcpkit.stores",
    "mcpkit.stores.postgres",
    "mcpkit.stores.redis",
    "mcpkit.tasks",
    "mcpkit.testing",
    "mcpkit.testing.stores",
    "mcpkit.transports",
    "mcpkit.transports.http",
)


def _resolve(path: str) -> object:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for part in parts[cut:]:
            found = getattr(found, part)
        return found
    raise LookupError(path)


def _module_members(module: ModuleType) -> list[str]:
    """What ``::: module`` with no ``members`` option shows: its ``__all__``, or what it defines."""
    listed = getattr(module, "__all__", None)
    if listed is not None:
        return list(listed)
    return [
        n
        for n, v in vars(module).items()
        if not n.startswith("_") and getattr(v, "__module__", None) == module.__name__
    ]


def _documented() -> tuple[set[int], set[str]]:
    """The objects the reference pages show (by identity) and their dotted paths, read from each ``::: path``
    directive and its ``members`` option the way mkdocstrings reads them."""
    objects: set[int] = set()
    paths: set[str] = set()
    for page in sorted((REPO / "docs" / "reference").glob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            directive = re.match(r"\s*:::\s+([\w.]+)", lines[i])
            i += 1
            if directive is None:
                continue
            path, members = directive.group(1), None
            while i < len(lines) and (lines[i].startswith(" ") or not lines[i].strip()):
                if listed := re.match(r"\s*members:\s*(.*)", lines[i]):
                    value = listed.group(1).strip()
                    members = [] if value == "false" else [n.strip() for n in value.strip("[]").split(",") if n.strip()]
                i += 1
            target = _resolve(path)
            objects.add(id(target))
            paths.add(path)
            if inspect.ismodule(target):
                for name in _module_members(target) if members is None else members:
                    objects.add(id(getattr(target, name)))
                    paths.add(f"{path}.{name}")
    return objects, paths


def test_every_public_name_is_in_the_api_reference() -> None:
    """A name in a public package's ``__all__`` is shown by a page of docs/reference: the class or function
    itself (under whichever module the page names it), or, for a constant, a member of that name."""
    objects, paths = _documented()
    missing: list[str] = []
    for package in PUBLIC_PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.ismodule(value) or id(value) in objects or name == "__version__":
                continue
            if (inspect.isclass(value) or inspect.isroutine(value)) or not any(p.endswith(f".{name}") for p in paths):
                missing.append(f"{package}.{name}")
    assert missing == []


def _docs_text() -> str:
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages)


def test_every_option_of_the_mcpkit_command_is_documented() -> None:
    """Each visible ``--option`` of each ``mcpkit`` command is named somewhere in README.md or docs/."""
    import click

    cli_main = importlib.import_module("mcpkit.cli.main")

    cli_main._register_optional()
    group = cli_main.cli
    context = click.Context(group)
    docs = _docs_text()
    missing: list[str] = []
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None
        for param in command.params:
            if not isinstance(param, click.Option) or param.hidden:
                continue
            for option in param.opts + param.secondary_opts:
                if option.startswith("--") and not re.search(re.escape(option) + r"(?![\w-])", docs):
                    missing.append(f"mcpkit {name} {option}")
    assert missing == []


def test_every_option_of_the_mcpkit_command_says_what_it_does_and_no_help_points_at_itself() -> None:
    """``mcpkit proxy --help`` showed ``--transport`` and ``--mode`` with no text, and ``mcpkit install --help``
    said "See `mcpkit install --help`": each visible option has help text, and a command's help names the guide
    rather than itself; a guide it names exists."""
    import click

    cli_main = importlib.import_module("mcpkit.cli.main")

    cli_main._register_optional()
    group = cli_main.cli
    context = click.Context(group)
    silent: list[str] = []
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None
        text = command.help or ""
        assert f"mcpkit {name} --help" not in text, f"mcpkit {name} --help refers to itself"
        for guide in re.findall(r"docs/guides/[\w-]+\.md", text):
            assert (REPO / guide).is_file(), f"mcpkit {name} --help names {guide}, which does not exist"
        silent += [
            f"mcpkit {name} {p.opts[0]}"
            for p in command.params
            if isinstance(p, click.Option) and not p.hidden and not p.help
        ]
    assert silent == []


def test_every_mcpkit_environment_variable_the_code_reads_is_documented() -> None:
    """An ``MCPKIT_*`` variable named in the source (``os.environ``, a click ``envvar``) is named in the docs,
    but the ones a parent process sets for its workers."""
    internal = {"MCPKIT_WORKER_INDEX", "MCPKIT_WORKER_PARENT"}
    read = set()
    for path in SRC.rglob("*.py"):
        read.update(re.findall(r"[\"'](MCPKIT_[A-Z0-9_]+)[\"']", path.read_text(encoding="utf-8")))
    docs = _docs_text()
    assert sorted(v for v in read - internal if not re.search(re.escape(v) + r"(?![A-Z0-9_])", docs)) == []


def test_every_test_the_hand_written_docs_cite_exists() -> None:
    """A test named as the proof of a claim (``tests/x/test_y.py::test_z``, ``test_*`` for a file's tests) in
    docs/security.md, the guides and README.md exists under that name and path. (docs/compliance.md is generated
    from a full run; scripts/test.sh rewrites it.)"""
    import ast

    defined: dict[str, set[str]] = {}
    for path in (REPO / "tests").rglob("test_*.py"):
        if "node_modules" not in path.parts:
            tree = ast.parse(path.read_text(encoding="utf-8"))
            defined[path.relative_to(REPO).as_posix()] = {
                n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            }
    pages = [REPO / "README.md", REPO / "docs" / "security.md", *sorted((REPO / "docs" / "guides").glob("*.md"))]
    stale: list[str] = []
    for page in pages:
        for cited in re.finditer(
            r"`(tests/[\w/]*test_\w+\.py|test_\w+\.py)(?:::(\w+)(\*)?)?", page.read_text(encoding="utf-8")
        ):
            path, name, wildcard = cited.groups()
            files = [path] if path.startswith("tests/") else [f for f in defined if f.endswith(f"/{path}")]
            tests = set().union(*(defined.get(f, set()) for f in files))
            if not tests or (name and not (any(t.startswith(name) for t in tests) if wildcard else name in tests)):
                stale.append(f"{page.name}: {cited.group(0)}`")
    assert stale == []
