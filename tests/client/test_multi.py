"""MultiClient: several real servers (in-process and stdio subprocesses) behind one namespace; a broken server is
isolated and reported per server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mcpkit.client.multi import MultiClient, ServerUnavailable
from mcpkit.client.targets import ServerNotFound, ServerStartError
from support.paths import SERVERS
from support.servers.client_server import build_server
from support.typecheck import mypy_strict, revealed_types

SERVER = str(SERVERS / "client_server.py")
HOSTILE = str(SERVERS / "hostile_cli_server.py")


async def test_one_namespace_over_two_servers() -> None:
    async with MultiClient({"a": build_server(), "b": [sys.executable, SERVER]}) as mc:
        assert mc.errors == {}
        tools = await mc.list_tools()
        names = {t.name for t in tools}
        assert {"a__echo", "b__echo", "a__add", "b__t11"} <= names and len(tools) == 54
        assert (await mc.call_tool("b__echo", {"text": "via b"})).text == "via b"
        assert (await mc.call_tool("a__add", {"a": 1, "b": 1})).data == {"sum": 2}
        prompts = await mc.list_prompts()
        assert {"a__greet", "b__plain"} <= {p.name for p in prompts}
        got = await mc.get_prompt("b__greet", {"name": "Bo"})
        assert "Bo" in got.messages[0].content.text  # type: ignore[union-attr]
        pairs = await mc.list_resources()
        assert {s for s, _ in pairs} == {"a", "b"}
        got_b = await mc.read_resource("mcpkit://text/1", server="b")  # both list it: name the one to read
        assert got_b.contents[0].text == "text number 1"  # type: ignore[union-attr]
        pings = await mc.ping()
        assert set(pings) == {"a", "b"} and all(isinstance(v, float) for v in pings.values())


async def test_failing_servers_do_not_take_down_the_others(tmp_path: Path) -> None:
    targets = {
        "good": build_server(),
        "missing": "no-such-mcp-server-binary --stdio",
        "crash": [sys.executable, SERVER, "--crash"],
    }
    async with MultiClient(targets, separator=".", connect_timeout=10) as mc:
        assert set(mc.clients) == {"good"}
        assert isinstance(mc.errors["missing"], ServerNotFound)
        assert isinstance(mc.errors["crash"], ServerStartError)
        assert "told to crash" in str(mc.errors["crash"])
        tools = await mc.list_tools()
        assert tools and all(t.name.startswith("good.") for t in tools)
        with pytest.raises(ServerUnavailable, match="crash"):
            await mc.call_tool("crash.echo", {"text": "x"})
        with pytest.raises(KeyError):
            await mc.call_tool("nobody.echo")
        pings = await mc.ping()
        assert isinstance(pings["good"], float) and isinstance(pings["missing"], ServerNotFound)


async def test_a_server_dying_mid_session_is_isolated() -> None:
    async with MultiClient({"a": build_server(), "b": [sys.executable, SERVER]}) as mc:
        proc = mc.clients["b"]._opened.stdio.process  # type: ignore[union-attr]
        assert proc is not None
        proc.kill()
        await proc.wait()
        tools = await mc.list_tools()
        assert tools and {t.name.split("__")[0] for t in tools} == {"a"}
        assert "b" in mc.errors and "b" not in mc.clients
        assert (await mc.call_tool("a__echo", {"text": "alive"})).text == "alive"
        assert await mc.reconnect("b")  # a fresh process
        assert (await mc.call_tool("b__echo", {"text": "back"})).text == "back"


async def test_mcp_json_document(tmp_path: Path) -> None:
    config = {
        "mcpServers": {
            "one": {"command": sys.executable, "args": [SERVER]},
            "two": {"command": sys.executable, "args": [SERVER], "env": {"X": "1"}},
        }
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config))
    async with MultiClient(str(path)) as mc:
        assert set(mc.clients) == {"one", "two"}
        assert (await mc.call_tool("two__echo", {"text": "2"})).text == "2"


async def test_multiclient_routes_by_owner_never_broadcasts() -> None:
    """Issue 15.5: a hostile member that lists the trusted member's URI does not win the read (a collision is an
    error naming both servers), and a URI no server listed is not sent to every member."""
    from mcpkit.client.multi import ResourceCollision, UnknownResource

    targets = {"evil": [sys.executable, HOSTILE, "squat"], "good": [sys.executable, SERVER]}
    async with MultiClient(targets, mode="handshake") as mc:
        assert mc.errors == {}
        pairs = await mc.list_resources()
        assert ("evil", "mcpkit://text/1") in {(s, r.uri) for s, r in pairs}
        with pytest.raises(ResourceCollision) as collision:
            await mc.read_resource("mcpkit://text/1")
        assert collision.value.servers == ["evil", "good"] and "'evil'" in str(collision.value)
        assert "'good'" in str(collision.value) and "server=NAME" in str(collision.value)
        good = await mc.read_resource("mcpkit://text/1", server="good")
        assert good.contents[0].text == "text number 1"  # type: ignore[union-attr]
        # listed by one server only: routed to it alone
        assert (await mc.read_resource("mcpkit://text/2")).contents[0].text == "text number 2"  # type: ignore[union-attr]
        with pytest.raises(UnknownResource, match="list_resources"):
            await mc.read_resource("secret://never-listed")
        await mc.client("evil").ping()  # the hostile server has handled everything sent before this
        seen = mc.client("evil").stderr
        assert "read secret://never-listed" not in seen and "read mcpkit://text/2" not in seen
        assert "read mcpkit://text/1" not in seen  # only the named server was asked
    async with MultiClient(targets, mode="handshake") as fresh:  # nothing listed yet: the owners are learnt once
        assert (await fresh.read_resource("mcpkit://text/2")).contents[0].text == "text number 2"  # type: ignore[union-attr]
        with pytest.raises(ResourceCollision, match="'evil', 'good'"):
            await fresh.read_resource("mcpkit://item/5")  # both templates produce it
        assert (await fresh.read_resource("evil://x")).contents[0].text == "evil"  # type: ignore[union-attr]
        assert (await fresh.read_resource("mcpkit://item/5", server="good")).contents[0].text == "item 5"  # type: ignore[union-attr]
        with pytest.raises(UnknownResource):
            await fresh.read_resource("secret://never-listed")
        await fresh.client("evil").ping()
        assert "secret://" not in fresh.client("evil").stderr and "mcpkit://" not in fresh.client("evil").stderr


async def test_a_multiclient_call_is_typed_by_result_type_as_a_clients_is(tmp_path: Path) -> None:
    """``multi.call_tool(qualified, ..., result_type=T)`` validates ``data`` into ``T`` and is a ``ToolResult[T]``
    for ``mypy --strict`` (it was ``ToolResult[Any]``), as ``Client.call_tool`` is."""
    from typing import TypedDict

    class Sum(TypedDict):
        sum: int

    async with MultiClient({"a": build_server()}) as mc:
        assert (await mc.call_tool("a__add", {"a": 1, "b": 1}, result_type=Sum)).data == {"sum": 2}
    pytest.importorskip("mypy")
    program = tmp_path / "program.py"
    program.write_text(
        "from typing import TypedDict\n\n"
        "from mcpkit import MultiClient\n\n"
        "class Sum(TypedDict):\n"
        "    sum: int\n\n"
        "async def main(multi: MultiClient) -> None:\n"
        '    reveal_type((await multi.call_tool("a__add", {"a": 1}, result_type=Sum)).data["sum"])\n'
        '    reveal_type((await multi.call_tool("a__add", {"a": 1}, timeout=5)).data)\n',
        encoding="utf-8",
    )
    proc = mypy_strict(program, tmp_path)
    revealed = revealed_types(proc.stdout)
    assert "error:" not in proc.stdout, proc.stdout
    assert revealed == ["int", "Any"], proc.stdout
