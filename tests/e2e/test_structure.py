"""The layering rules that code review alone would let slip back: who may import whom, one definition of each
shared piece, module and class sizes, capabilities declared rather than discovered, and the check registry that
covers every check."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import REPO
from support.typecheck import mypy_strict

SRC = REPO / "src" / "mcpkit"


def _imported_modules(path: Path) -> set[str]:
    """Every module a file imports (relative imports resolved against its package), TYPE_CHECKING ones too."""
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.add(node.module)
    return found


def test_importing_the_server_loads_no_transport() -> None:
    """In a fresh interpreter, importing the low-level server (and building a stateless peer, which needs the null
    outbox) loads no module of mcpkit.transports."""
    code = (
        "import sys\n"
        "from mcpkit.server.lowlevel import Server\n"
        "Server('s').stateless_peer()\n"
        "print(sorted(m for m in sys.modules if m.startswith('mcpkit.transports')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_era_only_method_sets_defined_once() -> None:
    """MODERN_ONLY / HANDSHAKE_ONLY have one definition (protocol/versions.py); the dispatcher and the HTTP
    transport use that same object."""
    from mcpkit.protocol import versions
    from mcpkit.server import lowlevel
    from mcpkit.transports.http import streamable

    assert streamable.MODERN_ONLY is versions.MODERN_ONLY
    assert lowlevel.MODERN_ONLY is versions.MODERN_ONLY
    assert lowlevel.HANDSHAKE_ONLY is versions.HANDSHAKE_ONLY
    definitions = [p for p in SRC.rglob("*.py") if "\nMODERN_ONLY = " in p.read_text()]
    assert definitions == [SRC / "protocol" / "versions.py"]


def test_asgi_aliases_defined_once() -> None:
    """Scope/Receive/Send/ASGIApp are defined in mcpkit/_asgi.py only; every other module imports them."""
    aliases = ("Scope", "Receive", "Send", "ASGIApp")  # (protocol/jsonrpc.py has a JSON-RPC ``Message``, not ASGI)
    defined = sorted(
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if any(
            line.startswith(f"{name} = ") or line.startswith(f"{name}: TypeAlias")
            for line in p.read_text().splitlines()
            for name in aliases
        )
    )
    assert defined == ["_asgi.py"]


def test_registry_runs_every_check() -> None:
    """Every ``check_*`` method of the grouped checks is run: listed in the runner's registry, or called by the
    runner or by another check. A check added to a group but not to the registry would be silently skipped."""
    from mcpkit.check.checks import MODERN_CHECKS, SESSION_CHECKS, Checker

    names = {name for name, _ in inspect.getmembers(Checker, inspect.isfunction) if name.startswith("check_")}
    called: set[str] = set()
    for name in names | {"run"}:
        source = inspect.getsource(getattr(Checker, name))
        called.update(n for n in names if f"self.{n}(" in source or f"checker.{n}(" in source)
    runner_source = inspect.getsource(sys.modules[Checker.__module__])
    registered = {n for n in names if f".{n})" in runner_source or f"checker.{n}(" in runner_source}
    assert names - called - registered == set()
    assert [area for area, _ in SESSION_CHECKS][:2] == ["basics", "tools"]
    assert {area for area, _ in MODERN_CHECKS} <= {area for area, _ in SESSION_CHECKS}


def test_one_session_expired_class() -> None:
    """The two SessionExpired twins are one class: what the HTTP transport raises on a 404 for our session is
    caught as ``mcpkit.client.client.SessionExpired`` too, under every import path."""
    from mcpkit.client import client
    from mcpkit.protocol import errors
    from mcpkit.transports import http
    from mcpkit.transports.http import streamable_client

    assert client.SessionExpired is streamable_client.SessionExpired is http.SessionExpired
    assert client.SessionExpired is errors.SessionExpired
    with pytest.raises(client.SessionExpired):
        raise streamable_client.SessionExpired("session gone (HTTP 404)")
    assert issubclass(client.SessionExpired, ConnectionError)  # a lost session is a lost connection to callers


def test_streamable_http_server_split_by_idea() -> None:
    """The Streamable HTTP server is split by idea (endpoint, SessionManager, modern checks, answering, stream/pump,
    wire helpers): no file of it over 700 lines, the session table owned by the SessionManager, and the
    names imported from ``mcpkit.transports.http.streamable`` still there."""
    from mcpkit import MCPKit
    from mcpkit.transports.http import create_app, sessions, streamable

    http = SRC / "transports" / "http"
    parts = ["streamable.py", "sessions.py", "modern.py", "answer.py", "stream.py", "wire.py"]
    sizes = {name: len((http / name).read_text().splitlines()) for name in parts}
    assert all(n <= 700 for n in sizes.values()), sizes
    ep = create_app(MCPKit("split")).streamable
    assert isinstance(ep.sessions, sessions.SessionManager)
    assert ep._sessions is ep.sessions.table  # one table, looked up by the endpoint without a call per request
    for name in streamable.__all__:
        assert getattr(streamable, name) is not None


def test_transports_never_read_the_engines_bytes() -> None:
    """The engine hands its messages over typed (``Outgoing``), so no transport reads them back: the server's
    answering modules import no JSON decoder at all, and the HTTP client's ``send`` does not decode the message it
    was just given."""
    from mcpkit.transports.http.streamable_client import StreamableHTTPClientTransport

    for name in ("answer.py", "stream.py"):
        deps = _imported_modules(SRC / "transports" / "http" / name)
        assert not deps & {"orjson", "json", "mcpkit.protocol.jsonrpc"}, (name, deps)
    assert "orjson.loads" not in inspect.getsource(StreamableHTTPClientTransport.send)


def test_one_answer_path_in_both_eras() -> None:
    """A request-scoped transport gets a request's answer returned, typed, the same way in both eras
    (``Peer.handle`` for a handshake-era POST, ``Peer.run_detached`` for a stateless or 2026-07-28 one), and
    validated ``_meta`` has a slot of its own in the request context."""
    import asyncio

    from mcpkit.engine import ERROR, NULL_OUTBOX, RESULT, Outgoing, Peer, RequestContext
    from mcpkit.protocol import jsonrpc
    from mcpkit.protocol.errors import InvalidParams

    assert "validated_meta" in RequestContext.__slots__

    async def handler(ctx: RequestContext) -> dict[str, object]:
        if ctx.method == "bad":
            raise InvalidParams("no")
        return {"ok": ctx.method}

    async def main() -> tuple[Outgoing | None, Outgoing | None, Outgoing | None]:
        peer = Peer(NULL_OUTBOX, request_handler=handler)
        one = await peer.handle(jsonrpc.parse(b'{"jsonrpc":"2.0","id":7,"method":"good"}'), NULL_OUTBOX)
        bad = await peer.run_detached(peer.detached(8, "bad", None, NULL_OUTBOX))
        note = await peer.handle(jsonrpc.parse(b'{"jsonrpc":"2.0","method":"n"}'), NULL_OUTBOX)
        return one, bad, note

    one, bad, note = asyncio.run(main())
    assert one is not None and (one.kind, one.id, one.code) == (RESULT, 7, None)
    assert jsonrpc.parse(one.data).to_dict() == {"jsonrpc": "2.0", "id": 7, "result": {"ok": "good"}}  # type: ignore[union-attr]
    assert bad is not None and (bad.kind, bad.id, bad.code) == (ERROR, 8, InvalidParams.code)
    assert note is None


def test_engine_split_by_idea() -> None:
    """mcpkit/engine is a package of modules of at most 700 lines, one idea each, importing one another downwards
    only (no circle), and every public name keeps its import path ``mcpkit.engine.X``."""
    import mcpkit.engine as engine

    sizes = {p.name: len(p.read_text().splitlines()) for p in (SRC / "engine").glob("*.py")}
    assert {"messages.py", "context.py", "outgoing.py", "peer.py"} <= set(sizes), sizes
    assert all(n <= 700 for n in sizes.values()), sizes
    # downwards only, TYPE_CHECKING imports included: messages <- outgoing <- context <- peer
    names = ("messages", "outgoing", "context", "peer")
    deps = {
        n: {m.rsplit(".", 1)[-1] for m in _imported_modules(SRC / "engine" / f"{n}.py")} & set(names) for n in names
    }
    for i, n in enumerate(names):
        assert deps[n] <= set(names[:i]), (n, deps[n])
    for name in (
        "Peer",
        "RequestContext",
        "Outbox",
        "Connection",
        "NullOutbox",
        "NULL_OUTBOX",
        "DEFAULT_MAX_BATCH_SIZE",
        "MODERN_BATCH_REFUSAL",
        "ProgressCallback",
        "RequestHandler",
        "NotificationHandler",
        "BatchPolicy",
        "Outgoing",
    ):
        assert getattr(engine, name) is not None, name


def test_batch_refusal_text_built_once() -> None:
    """The refusal of a batch longer than max_batch_size is built in one place
    (``mcpkit.engine.batch_too_long``), used by the engine and the HTTP transport alike."""
    from mcpkit.engine import batch_too_long

    builders = sorted(
        str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if "is longer than the limit of" in p.read_text()
    )
    assert builders == ["engine/messages.py"]
    assert "max_batch_size" in batch_too_long(101, 100) and "101" in batch_too_long(101, 100)


def test_one_request_body_reader() -> None:
    """Every request body is read with one loop (``mcpkit._asgi.read_rest``: the limit, the disconnect): the
    Streamable HTTP endpoint, the legacy SSE endpoint, the dev authorization server's form and registration
    bodies and the resource server's look at a POST body (scope step-up) alike."""
    from mcpkit import _asgi
    from mcpkit.auth import _util
    from mcpkit.transports.http import sse

    readers: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                loops = [ast.get_source_segment(text, n) or "" for n in ast.walk(node) if isinstance(n, ast.While)]
                if any("await receive()" in loop and "more_body" in loop for loop in loops):
                    readers.append(f"{path.relative_to(SRC)}:{node.name}")  # (it loops over the body's chunks)
    assert readers == ["_asgi.py:read_rest"]
    assert sse.Disconnected is _asgi.Disconnected
    assert _util.read_body is _asgi.read_body


async def test_fanout_is_given_not_patched_in() -> None:
    """Wiring a fan-out (``create_app(server, fanout=...)``) replaces no method of the server (its ``__dict__``
    holds no bound-method override, nothing is found by ``getattr``), and a change on worker A still reaches a
    ``subscriptions/listen`` stream on worker B through it (two real uvicorn servers on 127.0.0.1)."""
    from mcpkit import MCPKit
    from mcpkit.client.lowlevel import ClientSession
    from mcpkit.stores.bus import BusFanout, Fanout, InMemoryBus
    from mcpkit.transports.http import StreamableHTTPClientTransport
    from support.mcp_http import running

    def worker(name: str) -> MCPKit:
        app = MCPKit(name)

        @app.tool
        def add(tool_name: str) -> str:
            """Register a tool (the tool list changes on this worker)."""
            app.add_tool(lambda: "x", name=tool_name)
            return "added"

        return app

    bus = InMemoryBus()
    a, b = worker("A"), worker("B")
    before = {id(s): dict(vars(s)) for s in (a, b)}
    fan_a, fan_b = BusFanout(bus), BusFanout(bus)
    async with running(a, fanout=fan_a) as (url_a, _), running(b, fanout=fan_b) as (url_b, _):
        for server, fanout in ((a, fan_a), (b, fan_b)):
            assert server.fanout is fanout and isinstance(fanout, Fanout)
            added = {k for k in vars(server) if k not in before[id(server)]}
            assert added == set()  # only the declared `fanout` attribute changed value
            assert [k for k, v in vars(server).items() if inspect.ismethod(v)] == []
            assert type(server).notify_list_changed is MCPKit.notify_list_changed
        async with (
            ClientSession(StreamableHTTPClientTransport(url_b + "/mcp"), mode="modern") as cs_b,
            cs_b.listen(tools=True) as sub,
            ClientSession(StreamableHTTPClientTransport(url_a + "/mcp"), mode="modern") as cs_a,
        ):
            await cs_a.call_tool("add", {"tool_name": "t1"})
            method, _ = await sub.next(timeout=10)
            assert method == "notifications/tools/list_changed"
    assert fan_a.published >= 1 and fan_b.received >= 1
    assert not fan_a.running and not fan_b.running  # the apps' lifespan shutdown stopped them
    src = "\n".join(p.read_text() for p in SRC.rglob("*.py"))
    assert "setattr(server" not in src


def _runtime_imports(path: Path) -> set[str]:
    """The mcpkit modules a file imports when it runs (late imports inside functions too), leaving out what it
    imports only under ``if TYPE_CHECKING:``."""
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    tree = ast.parse(path.read_text())
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            typing_only.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only or not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        found.add(".".join(base + ([node.module] if node.module else [])))
    return found


_CONTENT_USERS = ("tools", "prompts", "resources", "completions", "context", "schema")


def test_content_module_is_a_leaf_the_others_use() -> None:
    """The content types and conversions live in ``server/content.py``, which imports no other
    module of ``mcpkit.server`` (not even for typing); tools, prompts, resources, completions, context and schema
    take them from it, and none of them imports ``server/tools.py`` (tools keeps only the tool). The public
    import paths still give the very same objects."""
    content = SRC / "server" / "content.py"
    server_deps = sorted(m for m in _imported_modules(content) if m.startswith("mcpkit.server"))
    assert server_deps == []
    for name in _CONTENT_USERS:
        deps = _imported_modules(SRC / "server" / f"{name}.py")
        assert "mcpkit.server.content" in deps, name
        assert "mcpkit.server.tools" not in deps, name
    import mcpkit
    from mcpkit.server import content, tools

    for public in ("Image", "Audio", "to_content", "downgrade_content", "sniff_mime"):
        assert getattr(tools, public) is getattr(content, public)
    assert mcpkit.Image is content.Image and mcpkit.Audio is content.Audio and mcpkit.Tool is tools.Tool


def test_no_runtime_import_circle_among_content_users() -> None:
    """Among app, tools, prompts, resources, completions, context, schema and content, the imports that run
    (top-level or late) form no circle. (context names ``MCPKit`` for typing only.)"""
    names = ("app", *_CONTENT_USERS, "content")
    graph = {n: {m.rsplit(".", 1)[1] for m in _runtime_imports(SRC / "server" / f"{n}.py")} & set(names) for n in names}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            assert state.get(nxt) != 1, " -> ".join([*path, node, nxt])
            if nxt not in state:
                visit(nxt, [*path, node])
        state[node] = 2

    for n in names:
        if n not in state:
            visit(n, [])


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, dict[str, int]]:
    """Every ``mcpkit`` module -> the ``mcpkit`` modules it names in an import (and the line): top-level, late inside
    a function and under ``if TYPE_CHECKING:`` alike; ``from pkg import mod`` counts as an import of ``pkg.mod``.
    (The parent packages Python runs on the way, ``mcpkit/__init__`` and the like, are not arrows.)"""
    modules = {_module_name(p): p for p in SRC.rglob("*.py")}
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        arrows: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(parts + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                submodules = [f"{module}.{alias.name}" for alias in node.names]
                # ``from pkg import mod`` names the submodule; the package itself only when a name is not one
                named_package = any(sub not in modules for sub in submodules)
                targets = [module, *submodules] if named_package else submodules
            for target in targets:
                if target in modules and target != name:
                    arrows.setdefault(target, node.lineno)
        graph[name] = arrows
    return graph


def _circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_in_src() -> None:
    """Among the modules of src/mcpkit, the imports (runtime, late inside a function, and typing-only under
    ``TYPE_CHECKING``) form no circle."""
    graph = _import_graph()
    report = [
        " ; ".join(f"{a} -> {b} (line {line})" for a in circle for b, line in graph[a].items() if b in circle)
        for circle in _circles(graph)
    ]
    assert report == []


def test_circle_finder_sees_every_kind_of_import() -> None:
    """The finder above is not blind: a typing-only back arrow and a late import inside a function each close a
    circle it reports (so an empty report means something)."""
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}}
    assert _circles(graph) == [["a", "b", "c"]]
    arrows = _import_graph()
    assert "mcpkit.engine" in arrows["mcpkit.server.lowlevel"]  # a top-level import is an arrow
    late = [m for m, deps in arrows.items() if "mcpkit.transports.stdio" in deps]
    assert "mcpkit.run" in late  # run_stdio_async imports the stdio transport inside the function


def test_run_checks_takes_exactly_the_parameters_of_checker_and_shows_them() -> None:
    """``run_checks`` takes the parameters of ``Checker`` (names, kinds, defaults, annotations: the two cannot drift
    apart), an option ``Checker`` does not know fails at once, naming it, and the function is a plain module-level
    ``async def`` with those parameters, so the API reference (read from the source) shows them instead of
    ``(*args, **kwargs)``."""
    import asyncio

    from mcpkit.check import Checker, run_checks
    from mcpkit.check.checks import runner

    ours = list(inspect.signature(run_checks).parameters.values())
    theirs = list(inspect.signature(Checker).parameters.values())
    assert [(p.name, p.kind, p.default, p.annotation) for p in ours] == [
        (p.name, p.kind, p.default, p.annotation) for p in theirs
    ]
    assert inspect.signature(run_checks).return_annotation in ("Report", runner.Report)
    with pytest.raises(TypeError, match="no_such_option"):
        asyncio.run(run_checks("python -c pass", no_such_option=1))  # type: ignore[call-arg]
    tree = ast.parse(Path(inspect.getfile(runner)).read_text(encoding="utf-8"))
    defs = [n for n in tree.body if isinstance(n, ast.AsyncFunctionDef) and n.name == "run_checks"]
    assert len(defs) == 1 and defs[0].args.vararg is None and defs[0].args.kwarg is None
    assert [a.arg for a in defs[0].args.args + defs[0].args.kwonlyargs] == [p.name for p in theirs]


def test_helpers_defined_once() -> None:
    """Helpers that two sides use have one definition: the ASGI body reader's disconnect signal, the wait for a
    client's disconnect, the client's callback awaiting, the ``notifications/message`` params of a session's and a
    request's log, and the completers of a prompt's arguments / a template's variables."""
    from mcpkit import _asgi
    from mcpkit.client import handlers, lowlevel
    from mcpkit.transports.http import sse

    assert sse.Disconnected is _asgi.Disconnected
    assert lowlevel.maybe_await is handlers.maybe_await
    text = [p.read_text() for p in SRC.rglob("*.py")]
    once = (
        "class Disconnected(",
        "def wait_disconnect(",
        "def maybe_await(",
        '{"level": level, "data": data}',
        "literal_choices(p.annotation)",
    )
    assert {needle: sum(body.count(needle) for body in text) for needle in once} == dict.fromkeys(once, 1)


#: Modules allowed over 700 lines, each with its reason.
LONG_MODULES: dict[str, str] = {}  # module -> why it is longer (none today)


def test_no_module_over_700_lines_without_a_reason() -> None:
    """No module of src/mcpkit over 700 lines without a stated reason (LONG_MODULES); the modules split by idea
    keep their public names' import paths."""
    sizes = {str(p.relative_to(SRC)): len(p.read_text().splitlines()) for p in SRC.rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > 700 and name not in LONG_MODULES} == {}
    from mcpkit.auth.server import AuthorizationServer, AuthStorage, ClientRecord, InMemoryAuthStorage
    from mcpkit.client.client import Client, ElicitationContentError, PaginationLimitExceeded, ToolResult, Watch
    from mcpkit.client.lowlevel import ClientSession, Subscription
    from mcpkit.transports.http.streamable_client import HTTPTransportError, ResponseTooLarge, fast_path_applies

    moved = (AuthStorage, ClientRecord, InMemoryAuthStorage, ElicitationContentError, PaginationLimitExceeded)
    assert all(cls.__module__.startswith("mcpkit.") for cls in moved)
    assert callable(fast_path_applies) and issubclass(ResponseTooLarge, Exception)
    assert issubclass(HTTPTransportError, Exception) and Subscription.__name__ == "Subscription"
    assert {"call_tool", "connect", "aclose", "request"} <= set(dir(Client)) and hasattr(ClientSession, "listen")
    assert hasattr(AuthorizationServer, "register_client") and hasattr(ToolResult, "data") and Watch is not None


def test_one_asgi_lifespan_answerer() -> None:
    """The ASGI app, the Streamable HTTP, legacy SSE and WebSocket endpoints and the development authorization
    server answer the ASGI lifespan protocol with one function (``_asgi.lifespan``). (The in-process API runner,
    server/openapi/asgi.py, is the other side: it reads that answer from the app it serves, never sends it.)"""
    answer = '{"type": "lifespan.startup.complete"}'
    holders = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if answer in p.read_text()]
    assert holders == ["_asgi.py"]


#: Layers above server/ (server/ imports none of them), and the one face it may name: ``Server.run`` reaches
#: ``mcpkit.run`` through an import inside the method (server/running.py).
_ABOVE_SERVER = ("mcpkit.transports", "mcpkit.client", "mcpkit.stores", "mcpkit.auth", "mcpkit.cli", "mcpkit.check")
_ABOVE_SERVER += ("mcpkit.inspector", "mcpkit.proxies", "mcpkit.proxy_upstream", "mcpkit.proxy_conn")
_ABOVE_SERVER += ("mcpkit.proxy_rounds", "mcpkit.proxy_shaping", "mcpkit.proxy_skills", "mcpkit.proxy_watch")
_ABOVE_SERVER += ("mcpkit.proxy_listen", "mcpkit.proxy_local", "mcpkit.proxy_search", "mcpkit.proxy_forward")
_ABOVE_SERVER += ("mcpkit.proxy_pool", "mcpkit.telemetry", "mcpkit.run")


def test_server_imports_no_layer_above_it_but_the_run_face() -> None:
    """server/ (every file, at any depth, late and typing-only imports included) imports nothing of the layers
    above it; the one exception is ``server/running.py`` naming the ``mcpkit.run`` face inside ``Server.run``."""
    found = {
        str(path.relative_to(SRC)): sorted(m for m in _imported_modules(path) if m.startswith(_ABOVE_SERVER))
        for path in sorted((SRC / "server").rglob("*.py"))
    }
    assert {k: v for k, v in found.items() if v} == {"server/running.py": ["mcpkit.run"]}


def test_no_class_in_transports_over_400_lines() -> None:
    """Every class of transports/ fits in 400 lines: the HTTP endpoint and the HTTP client transport are built from
    parts, not one class spread over files."""
    sizes = {
        f"{path.relative_to(SRC)}:{node.name}": (node.end_lineno or node.lineno) - node.lineno + 1
        for path in sorted((SRC / "transports").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
    }
    assert {k: n for k, n in sizes.items() if n > 400} == {}


def test_the_http_endpoint_is_composed_of_parts() -> None:
    """The Streamable HTTP endpoint inherits from nothing: its parts are objects it holds (the 2026-07-28 routes,
    the session table, the SSE side handed to every stream, the answering, the handshake era's routes), and a
    stream reaches the SSE side it was given, never the endpoint."""
    from mcpkit import MCPKit
    from mcpkit.transports.http import answer, create_app, handshake, modern, sessions, stream, streamable

    assert streamable.StreamableHTTPEndpoint.__bases__ == (object,)
    ep = create_app(MCPKit("parts")).streamable
    assert isinstance(ep.modern, modern.ModernRoutes)
    assert isinstance(ep.sessions, sessions.SessionManager)
    assert isinstance(ep.sse, stream.SSEPump)
    assert isinstance(ep.answers, answer.Answerer)
    assert isinstance(ep.handshake, handshake.HandshakeRoutes)
    assert ep.answers.sse is ep.sse and ep.handshake.sse is ep.sse
    assert stream.Stream(ep.sse, None, 0).sse is ep.sse
    assert "ep" not in stream.Stream.__slots__


def _underscore_uses(source: str, me: str, package: str) -> list[str]:
    """Where module ``me`` (of ``package``, its text ``source``) takes another module's underscore name: ``from .x
    import _name`` (relative or absolute), or ``x._name`` on what it imported from mcpkit (``from . import x``,
    ``import mcpkit.x``, ``from .x import Thing``)."""
    tree = ast.parse(source)
    modules: dict[str, str] = {}  # local name -> the mcpkit module (or name in one) it stands for
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            origin = ".".join(base + ([node.module] if node.module else []))
            if not origin.startswith("mcpkit"):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__") and origin != me:
                    found.append(f"from {origin} import {alias.name}")
                modules[alias.asname or alias.name] = f"{origin}.{alias.name}"
        elif isinstance(node, ast.Import):
            # ``import mcpkit.x`` binds ``mcpkit``; ``import mcpkit.x as y`` binds ``y``
            modules.update({a.asname or "mcpkit": a.name for a in node.names if a.name.startswith("mcpkit")})
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in modules:
                found.append(ast.unparse(node))
    return found


#: Underscore names one module of mcpkit may still take from another: (file, what) -> why (none today).
UNDERSCORE_IMPORTS: dict[tuple[str, str], str] = {}


def test_no_underscore_name_is_imported_from_another_module() -> None:
    """The modules of mcpkit name each other's parts by package-internal public names (documented, not exported
    from the package unless public API): no ``from .x import _name`` and no ``x._name`` across modules. A name with
    a leading underscore stays in its module, so it can change without a look at the rest of the package."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        me = _module_name(path)
        package = me if path.name == "__init__.py" else me.rpartition(".")[0]
        found += [(str(path.relative_to(SRC)), use) for use in _underscore_uses(path.read_text(), me, package)]
    assert [use for use in found if use not in UNDERSCORE_IMPORTS] == []


def test_the_underscore_finder_sees_every_kind_of_use() -> None:
    """The finder above catches a relative and an absolute import of another module's underscore name and an
    attribute read on what a module imported, and leaves a module's own names and dunders alone."""
    probe = (
        "from . import builtins\n"
        "from .builtins import _ping, checked_queue_size\n"
        "from mcpkit.server.fanout import _something as alias\n"
        "import mcpkit.server.lowlevel\n"
        "from ._probe_underscores import _mine\n"
        "from .builtins import __doc__ as d\n"
        "x = builtins._set_level\n"
        "y = mcpkit.server.lowlevel._BUILTINS\n"
        "z = alias._whatever_attr\n"
    )
    assert _underscore_uses(probe, "mcpkit.server._probe_underscores", "mcpkit.server") == [
        "from mcpkit.server.builtins import _ping",
        "from mcpkit.server.fanout import _something",
        "builtins._set_level",
        "mcpkit.server.lowlevel._BUILTINS",
        "alias._whatever_attr",
    ]


#: The getattr calls transports/ keeps, each a read of data, not a capability: (file, first argument), and why.
_DATA_GETATTRS = {
    ("transports/http/sessions.py", "auth"),  # the fields of whatever principal the auth layer put in the scope
}


def test_transports_find_no_capability_with_getattr() -> None:
    """No getattr or hasattr in transports/ discovers what an object can do: optional capabilities are declared
    (``engine.BaseConnection``, ``stores.BaseSessionStore``, the hosting protocols). What remains reads data."""
    calls = {
        (str(path.relative_to(SRC)), ast.unparse(node.args[0]))
        for path in sorted((SRC / "transports").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
    }
    assert calls == _DATA_GETATTRS


def test_telemetry_finds_nothing_with_getattr() -> None:
    """Telemetry reads the declared attributes of the typed objects it is given (a session's features, a peer's
    tracer), never probes them with getattr or hasattr."""
    source = (SRC / "telemetry.py").read_text()
    calls = [
        ast.unparse(node)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
    ]
    assert calls == []


def test_optional_capabilities_have_defaults_and_old_objects_still_work() -> None:
    """A connection or session store that only has the required methods (not derived from the base classes) is
    still served; one that derives from the base class gets the optional methods' defaults."""
    import asyncio

    from mcpkit.engine import BaseConnection
    from mcpkit.stores import BaseSessionStore, SessionStore

    class Plain:
        def __init__(self) -> None:
            self.saved: dict[str, dict[str, object]] = {}

        async def save(self, sid: str, state: dict[str, object], ttl: float | None) -> None:
            self.saved[sid] = state

        async def load(self, sid: str) -> dict[str, object] | None:
            return self.saved.get(sid)

        async def delete(self, sid: str) -> None:
            self.saved.pop(sid, None)

    class Derived(Plain, BaseSessionStore):
        pass

    store = Derived()
    assert isinstance(store, SessionStore) and isinstance(Plain(), SessionStore)
    asyncio.run(store.save("s", {"v": 1}, 10.0))
    assert asyncio.run(store.touch("s", 10.0)) == {"v": 1} and asyncio.run(store.touch("gone", 1.0)) is None
    conn = BaseConnection()
    conn.set_fast_path(lambda data: False, None)  # the defaults do nothing, and raise nothing
    conn.set_protocol_version("2025-11-25")
    asyncio.run(conn.wait_ready())


#: The layers of docs/architecture.md, from the bottom up: a module may import its own layer and those below it.
_LAYERS: tuple[tuple[str, ...], ...] = (
    ("protocol", "_aio", "_asgi", "_lazy", "_extras", "_options", "_version", "_runtime"),
    ("engine",),
    ("tasks",),
    ("hosting",),
    ("server",),
    ("stores", "auth"),
    ("transports",),
    ("client",),
    (
        "run",
        "telemetry",
        "check",
        "proxies",
        "proxy_upstream",
        "proxy_conn",
        "proxy_forward",
        "proxy_listen",
        "proxy_local",
        "proxy_pool",
        "proxy_rounds",
        "proxy_search",
        "proxy_shaping",
        "proxy_skills",
        "proxy_watch",
        "inspector",
        "testing",
        "cli",
        "__main__",
        "",
    ),
)
_RANK = {part: rank for rank, parts in enumerate(_LAYERS) for part in parts}
#: The one arrow up, stated in docs/architecture.md ("Running a server"): ``Server.run`` names the ``mcpkit.run`` face.
_UPWARD_ALLOWED = {("mcpkit.server.running", "mcpkit.run")}


def _layer(module: str) -> int:
    parts = module.split(".")
    return _RANK[parts[1] if len(parts) > 1 else ""]


def test_no_import_runs_up_the_layers() -> None:
    """Every import among the modules of src/mcpkit (top-level, late and typing-only alike) runs down the layers or
    stays in its own; every package and top-level module belongs to a layer."""
    graph = _import_graph()
    assert {m.split(".")[1] for m in graph if "." in m} <= set(_RANK)
    upward = {(a, b) for a, deps in graph.items() for b in deps if _layer(b) > _layer(a)}
    assert upward == _UPWARD_ALLOWED


#: tests/ folders that are not named after a package or module of src/mcpkit: cross-cutting tests, helpers, the
#: conformance runner, the leaves ``_aio``/``_runtime`` (tests/runtime), and the tests of the repository's bench/.
_TEST_FOLDERS_OF_THEIR_OWN = {"e2e", "support", "conformance", "runtime", "bench", "node_modules", "__pycache__"}


def test_tests_are_laid_out_like_the_code() -> None:
    """tests/<package>/test_<module>.py mirrors src/mcpkit (cross-cutting tests in tests/e2e, helpers and test
    servers in tests/support): no test file or helper at the top of tests/, every folder names a package or
    module of mcpkit, and every test_*.py holds tests."""
    tests = REPO / "tests"
    assert sorted(p.name for p in tests.glob("*.py")) == ["conftest.py"]
    for folder in (p for p in tests.iterdir() if p.is_dir() and p.name not in _TEST_FOLDERS_OF_THEIR_OWN):
        if not any(f.suffix == ".py" and "__pycache__" not in f.parts for f in folder.rglob("*")):
            continue  # (what a checkout leaves behind after a move: byte code only)
        assert (SRC / folder.name).is_dir() or (SRC / f"{folder.name}.py").is_file(), folder.name
    for path in tests.rglob("test_*.py"):
        if {"node_modules", "support"} & set(path.relative_to(tests).parts):
            continue
        tree = ast.parse(path.read_text())
        names = [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        assert any(name.startswith("test_") for name in names), path


def test_no_test_helper_shadows_a_standard_library_module() -> None:
    """Helpers in tests/support are also run as scripts (a worker, a server), with their own folder first on
    sys.path: a ``support/http.py`` there made ``import uvicorn`` import it instead of the standard ``http``."""
    support = REPO / "tests" / "support"
    shadowing = sorted(
        str(path.relative_to(support))
        for path in support.rglob("*.py")
        if "node_modules" not in path.parts and path.stem in sys.stdlib_module_names
    )
    assert shadowing == []


def test_every_name_the_api_reference_lists_is_in_its_modules_all() -> None:
    """A name docs/reference shows as a module's member (``::: module`` with ``members: [...]``) is part of that
    module's public API: listed in its ``__all__`` (what ``from module import *`` and type checkers' view of a
    ``py.typed`` package go by), and there."""
    import importlib
    import re

    missing: list[str] = []
    for page in sorted((REPO / "docs" / "reference").glob("*.md")):
        module = None
        for line in page.read_text(encoding="utf-8").splitlines():
            if found := re.match(r"\s*:::\s+([\w.]+)", line):
                module = found.group(1)
            elif (listed := re.match(r"\s*members:\s*\[(.*)\]", line)) and module is not None:
                try:
                    mod = importlib.import_module(module)
                except ModuleNotFoundError:
                    continue  # (a class's members)
                public = getattr(mod, "__all__", None)
                for name in (n.strip() for n in listed.group(1).split(",") if n.strip()):
                    if (public is not None and name not in public) or not hasattr(mod, name):
                        missing.append(f"{page.name}: {module}.{name}")
    assert missing == []


#: The packages (and module) that import their public names on first use, through a module ``__getattr__``.
_LAZY_PACKAGES = (
    "mcpkit",
    "mcpkit.auth",
    "mcpkit.testing",
    "mcpkit.transports.http",
    "mcpkit.server.middleware",
    "mcpkit.server.openapi",
    "mcpkit.server.context",
)


@pytest.mark.timeout(360)  # (mypy --strict over the whole package, cold: 30-40 s alone, past 120 s on a busy machine)
def test_a_misspelled_import_from_a_lazy_package_is_a_type_error(tmp_path: Path) -> None:
    """A module ``__getattr__`` returning ``Any`` tells a type checker that every name exists: ``from mcpkit
    import Clinet`` passed ``mypy --strict`` (typed ``Any``). The lazy packages hide it from type checkers, so
    every public name imports, typed, and a misspelled one is an error."""
    pytest.importorskip("mypy")
    import importlib

    lines = []
    for i, package in enumerate(_LAZY_PACKAGES):
        names = list(importlib.import_module(package).__all__)
        if package == "mcpkit.server.context":
            names += ["AcceptedElicitation", "CancelledElicitation", "DeclinedElicitation", "ElicitationResult"]
        lines.append(f"from {package} import {', '.join(f'{n} as _{i}_{n}' for n in names)}")
        lines.append(f"from {package} import NoSuchName as _{i}_typo  # misspelled")
    program = tmp_path / "program.py"
    program.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = mypy_strict(program, tmp_path)
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    misspelled = [n for n, line in enumerate(lines, 1) if line.endswith("# misspelled")]
    wrong = [e for e in errors if int(e.split(":")[1]) not in misspelled or "NoSuchName" not in e]
    assert wrong == [], proc.stdout
    assert sorted({int(e.split(":")[1]) for e in errors}) == misspelled, proc.stdout
