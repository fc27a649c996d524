"""The checker's first exchange: a URL with no MCP endpoint (a 404, a POST refused, a web page) is a bad target
(exit 2, the report says what answered), not a server that broke a requirement; a server whose answer to
``initialize`` is a broken JSON-RPC body still fails M042. Real uvicorn servers on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from mcpkit.check import run_checks
from support.asgi import serve_asgi, serve_asgi_in_thread


def _site(status: int, content_type: str, body: bytes) -> Any:
    """An ASGI app answering every request with the same status and body (a web server with no MCP endpoint)."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        headers = [(b"content-type", content_type.encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


PAGE = b"<!doctype html><html><head><title>Welcome</title></head><body>Hello</body></html>"


async def test_a_url_with_no_mcp_endpoint_is_a_bad_target_not_a_failed_requirement() -> None:
    for status, content_type, body, seen in [
        (404, "text/plain", b"Not Found", "HTTP 404"),
        (405, "text/plain", b"Method Not Allowed", "HTTP 405"),
        (200, "text/html; charset=utf-8", PAGE, "HTTP 200 text/html"),
    ]:
        async with serve_asgi(_site(status, content_type, body)) as port:
            url = f"http://127.0.0.1:{port}/mcp"
            report = await run_checks(url, timeout=2.0)
        assert report.failed_musts() == [] and not report.requirements, report.render_text()
        assert report.exit_code() == 2
        assert report.info["no MCP endpoint"].startswith(seen), report.info
        assert report.info["aborted"].startswith(f"no MCP endpoint at {url}: {seen}"), report.info
        assert "RESULT: INCOMPLETE" in report.render_text()


async def test_an_initialize_answered_with_a_broken_json_rpc_body_still_fails_m042() -> None:
    for content_type, body in [
        ("application/json", b'{"hello": "world"}'),
        ("application/json", b'{"jsonrpc": "2.0", "id": 1, "result": '),
    ]:
        async with serve_asgi(_site(200, content_type, body)) as port:
            report = await run_checks(f"http://127.0.0.1:{port}/mcp", timeout=2.0)
        assert "M042" in report.failed_musts(), report.render_text()
        assert "no MCP endpoint" not in report.info and report.exit_code() == 1


def test_cli_says_there_is_no_mcp_endpoint_and_exits_2() -> None:
    with serve_asgi_in_thread(_site(404, "text/html", b"<h1>Not Found</h1>")) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        args = [sys.executable, "-m", "mcpkit.cli.main", "check", "--timeout", "2", url]
        text = subprocess.run(args, capture_output=True, text=True, timeout=120)
        js = subprocess.run([*args, "--format", "json"], capture_output=True, text=True, timeout=120)
    assert text.returncode == 2, text.stdout + text.stderr
    assert f"no MCP endpoint at {url}: HTTP 404" in text.stdout and "FAIL" not in text.stdout, text.stdout
    assert js.returncode == 2, js.stdout + js.stderr
    data = json.loads(js.stdout)
    assert data["failedMust"] == [] and data["requirements"] == []
    assert data["info"]["no MCP endpoint"].startswith("HTTP 404")


async def test_a_legacy_sse_or_websocket_url_with_no_mcp_endpoint_is_a_bad_target() -> None:
    async with serve_asgi(_site(404, "text/html", b"<h1>Not Found</h1>")) as port:
        for url in (f"http://127.0.0.1:{port}/sse", f"ws://127.0.0.1:{port}/ws"):
            report = await run_checks(url, timeout=2.0)
            assert report.failed_musts() == [] and not report.requirements, report.render_text()
            assert report.exit_code() == 2 and report.info["no MCP endpoint"], report.info
            assert report.info["aborted"].startswith(f"no MCP endpoint at {url}: "), report.info
