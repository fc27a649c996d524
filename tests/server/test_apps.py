"""MCP Apps (SEP-1865, ``io.modelcontextprotocol/ui``, stable 2026-01-26) on mcpkit's server and client.

The spec's words these tests hold the code to: a view is a resource whose URI "MUST start with ``ui://``" and whose
``mimeType`` "MUST be ``text/html;profile=mcp-app``", given "via either ``text`` (string) or ``blob``
(base64-encoded)"; a tool links to it with ``_meta.ui.resourceUri`` and says who may call it with
``_meta.ui.visibility`` (``"model"``, ``"app"``; both when omitted); the resource's ``_meta.ui`` (``csp`` domain
lists, ``permissions``, ``domain``, ``prefersBorder``) is returned by ``resources/read`` on the content.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client, MCPKit
from mcpkit.client.apps import UI_HOST_SETTINGS, ViewError, check_view_contents
from mcpkit.protocol.apps import (
    APP_MIME_TYPE,
    check_view_meta,
    content_security_policy,
    csp_source_problem,
    permission_policy,
    tool_ui,
)
from mcpkit.protocol.extensions import UI_EXTENSION
from mcpkit.protocol.types import Tool
from mcpkit.server.apps import MAX_VIEW_ASSETS, build_view_document
from support.oracle import REVISIONS, validate_def

PAGE = "<!doctype html><html><body><button id=go>Go</button></body></html>"


def demo_app() -> MCPKit:
    app = MCPKit("apps-demo")
    app.add_view(
        "ui://demo/board",
        html=PAGE,
        title="Board",
        csp={"connectDomains": ["https://api.example.com"], "resourceDomains": ["https://*.cdn.example.com"]},
        permissions=["clipboardWrite"],
        domain="board.example.com",
        prefers_border=False,
    )

    @app.tool(ui="ui://demo/board")
    def board() -> dict[str, int]:
        """Show the board."""
        return {"score": 1}

    @app.tool(ui={"resourceUri": "ui://demo/board", "visibility": ["app"]})
    def refresh() -> dict[str, int]:
        """Only the board's own button calls this."""
        return {"score": 2}

    @app.view("ui://demo/live", description="rendered on each read")
    def live() -> str:
        return "<!doctype html><p>live</p>"

    return app


# ---------------------------------------------------------------------------------------------- server: errors


def test_a_view_uri_that_is_not_ui_is_refused_when_registered() -> None:
    app = MCPKit("x")
    for uri in ("https://example.com/v", "ui://", "file:///v.html", "ui:/missing-slash"):
        with pytest.raises(ValueError, match="must start with ui://"):
            app.add_view(uri, html=PAGE)
    with pytest.raises(ValueError, match="not a template"):
        app.add_view("ui://v/{id}", html=PAGE)


def test_a_tool_linking_to_a_view_that_is_not_registered_is_refused_when_decorated() -> None:
    app = MCPKit("x")
    with pytest.raises(ValueError, match="no view is registered at 'ui://nowhere'"):

        @app.tool(ui="ui://nowhere")
        def orphan() -> str:
            return ""

    with pytest.raises(ValueError, match="must start with ui://"):
        app.add_tool(lambda: "", name="bad", ui={"resourceUri": "https://example.com"})
    app.add_view("ui://here", html=PAGE)
    for visibility in ([], ["agent"], ["app", "app"]):
        with pytest.raises(ValueError, match="visibility"):
            app.add_tool(lambda: "", name="t", ui={"resourceUri": "ui://here", "visibility": visibility})
    with pytest.raises(ValueError, match="unknown keys"):
        app.add_tool(lambda: "", name="t", ui={"resourceUri": "ui://here", "csp": {}})
    with pytest.raises(TypeError, match="ui= takes"):
        app.add_tool(lambda: "", name="t", ui=42)
    assert [t.name for t in app.tools] == []  # (nothing half-registered)


def test_a_ui_resource_with_another_mime_type_is_refused_and_the_apps_type_is_the_default() -> None:
    app = MCPKit("x")
    with pytest.raises(ValueError, match="must be 'text/html;profile=mcp-app', not 'text/html'"):
        app.add_view("ui://v", html=PAGE, mime_type="text/html")
    with pytest.raises(ValueError, match="MIME type of a view"):
        app.add_resource("ui://r", "x", mime_type="text/plain")

    @app.resource("ui://plain")
    def plain() -> str:
        return PAGE

    assert app.resources[0].mime_type == APP_MIME_TYPE
    app.add_tool(lambda: "", name="linked", ui="ui://plain")  # (a ui:// resource is a view)


def test_view_meta_that_a_host_cannot_enforce_is_refused_when_registered() -> None:
    app = MCPKit("x")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"csp": {"connectDomains": ["*"]}}, "is not an https:// or wss:// origin"),
        ({"csp": {"resourceDomains": ["'unsafe-eval'"]}}, "is not an https:// or wss:// origin"),
        ({"csp": {"connectDomains": ["http://evil.example.com"]}}, "localhost only"),
        ({"csp": {"frameDomains": ["https://x.example.com; script-src *"]}}, "not an https://"),
        ({"csp": {"scriptDomains": ["https://x.example.com"]}}, "not a CSP list"),
        ({"permissions": ["usb"]}, "unknown view permissions"),
        ({"domain": "not a host/name"}, "is not a host name"),
    ]
    for options, message in cases:
        with pytest.raises(ValueError, match=message):
            app.add_view("ui://v", html=PAGE, **options)
    app.add_view("ui://dev", html=PAGE, csp={"connectDomains": ["http://localhost:5173", "ws://127.0.0.1:5173"]})


async def test_a_csp_source_is_read_with_its_scheme_and_host_case_insensitive_and_sent_in_lower_case() -> None:
    """URL schemes and host names are case-insensitive (RFC 3986 3.1, 3.2.2; CSP matches both so): a view's
    ``HTTPS://cdn.example.com`` is the https origin, registered and sent with its scheme in lower case; what is
    really not an enforceable origin is still refused, whatever its case."""
    app = MCPKit("x")
    app.add_view(
        "ui://v",
        html=PAGE,
        csp={
            "connectDomains": ["HTTPS://api.example.com", "Wss://rt.example.com", "https://api.example.com"],
            "resourceDomains": ["HTTP://LOCALHOST:5173", "HTTPS://*.CDN.example.com"],
        },
    )
    async with Client(app, cache=False) as client:
        contents = (await client.request("resources/read", {"uri": "ui://v"}))["contents"][0]
    assert contents["_meta"]["ui"]["csp"] == {
        "connectDomains": ["https://api.example.com", "wss://rt.example.com"],
        "resourceDomains": ["http://LOCALHOST:5173", "https://*.CDN.example.com"],
    }
    ui, problems = check_view_meta({"ui": {"csp": {"frameDomains": ["HTTPS://embed.example.com"]}}})
    assert problems == [] and ui["csp"] == {"frameDomains": ["https://embed.example.com"]}
    for bad, message in (
        ("HTTP://evil.example.com", "localhost only"),
        ("FTP://files.example.com", "not an https:// or wss:// origin"),
        ("HTTPS://*", "not an https:// or wss:// origin"),
        ("DATA:", "not an https:// or wss:// origin"),
    ):
        assert message in (csp_source_problem(bad) or "")
        with pytest.raises(ValueError, match=message):
            app.add_view("ui://w", html=PAGE, csp={"connectDomains": [bad]})


def test_a_view_document_larger_than_its_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="larger than 100 bytes"):
        build_view_document(html="x" * 101, max_bytes=100)
    with pytest.raises(ValueError, match="exactly one of"):
        build_view_document(html=PAGE, file="x.html")
    with pytest.raises(ValueError, match="not found"):
        build_view_document(file="/nonexistent/view.html")


# ---------------------------------------------------------------------------------------------- server: directories


def built_app(root: Path) -> Path:
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text(
        '<!doctype html><html><head><link rel="stylesheet" href="/assets/app.css">'
        '<link rel="modulepreload" href="./assets/app.js"><link rel="icon" href="assets/i.svg">'
        '<script type="module" crossorigin integrity="sha384-x" src="/assets/app.js"></script></head>'
        '<body><img src="assets/dot.png" alt="dot"><img src="https://cdn.example.com/x.png" alt="remote"></body></html>'
    )
    (root / "assets" / "app.css").write_text('body{background:url("dot.png")} @font-face{src:url(f.woff2)}')
    (root / "assets" / "f.woff2").write_bytes(b"wOF2")
    (root / "assets" / "dot.png").write_bytes(b"\x89PNG\r\n")
    (root / "assets" / "i.svg").write_text("<svg/>")
    (root / "assets" / "app.js").write_text('const s = "</script><!-- x"; document.body.dataset.ok = "1";')
    return root


def test_a_directory_of_built_assets_becomes_one_document(tmp_path: Path) -> None:
    html = build_view_document(directory=built_app(tmp_path / "dist"))
    assert "<script" in html and "src=" not in html.split("<body>")[0]  # the script is inline
    assert '<script type="module">const s = "<\\/script>\\x3C!-- x"' in html  # (cannot end the inline script early)
    assert "integrity" not in html and "modulepreload" not in html
    assert '<style>body{background:url("data:image/png;base64,' in html
    assert 'url("data:font/woff2;base64,d09GMg==")' in html or 'url("data:application/octet-stream' in html
    assert 'href="data:image/svg+xml;base64,' in html
    assert 'src="https://cdn.example.com/x.png"' in html  # (a remote URL is left alone: its domain needs the CSP)


def test_an_inlined_directory_view_behaves_in_a_browser_as_its_files_did(tmp_path: Path) -> None:
    """What inlining keeps, checked in a real Chromium: a deferred classic script still runs once the document is
    parsed (an inline script ignores defer: run where it stood in the head, it found no element), a print-only
    stylesheet still applies to print only (its media attribute kept), and an attribute value with a double quote
    (single-quoted in the source) stays one attribute."""
    from support.browser import chromium

    root = tmp_path / "dist"
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text(
        "<!doctype html><html><head>"
        '<script src="assets/first.js" defer></script><script defer src="assets/second.js"></script>'
        '<link rel="stylesheet" href="assets/print.css" media="print">'
        "</head><body><p id=out>waiting</p>"
        "<img src='assets/dot.png' alt='the \"dot\" image' id=dot></body></html>"
    )
    (root / "assets" / "first.js").write_text('document.getElementById("out").textContent = "first";')
    (root / "assets" / "second.js").write_text('document.getElementById("out").textContent += " then second";')
    (root / "assets" / "print.css").write_text("p { color: rgb(255, 0, 0) }")
    (root / "assets" / "dot.png").write_bytes(b"\x89PNG\r\n")
    html = build_view_document(directory=root)
    with chromium() as browser:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.set_content(html)
        assert page.text_content("#out") == "first then second"
        assert page.eval_on_selector("#out", "p => getComputedStyle(p).color") != "rgb(255, 0, 0)"
        page.emulate_media(media="print")
        assert page.eval_on_selector("#out", "p => getComputedStyle(p).color") == "rgb(255, 0, 0)"
        assert page.get_attribute("#dot", "alt") == 'the "dot" image'
        assert errors == []


def test_an_inlined_directory_views_responsive_images_still_load_in_a_browser(tmp_path: Path) -> None:
    """A browser loads an <img>'s srcset (or a <picture>'s <source srcset>) before its src: each local candidate is
    inlined too, with its descriptor, or the image is broken in a sandbox that has no server to fetch it from."""
    import struct
    import zlib

    from support.browser import chromium

    def png(width: int) -> bytes:
        raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(1))
        chunk = lambda kind, data: (  # noqa: E731
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )
        header = struct.pack(">IIBBBBB", width, 1, 8, 2, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")

    root = tmp_path / "dist"
    (root / "img").mkdir(parents=True)
    (root / "img" / "one.png").write_bytes(png(1))
    (root / "img" / "two.png").write_bytes(png(2))
    (root / "index.html").write_text(
        "<!doctype html><html><body>"
        '<img id=a src="img/one.png" srcset="img/one.png 1x, ./img/two.png 2x">'
        '<picture><source srcset="img/two.png" type="image/png"><img id=b src="img/one.png"></picture>'
        "</body></html>"
    )
    html = build_view_document(directory=root)
    assert "img/" not in html
    with chromium() as browser:
        page = browser.new_page()
        page.set_content(html)
        page.wait_for_function("[...document.images].every(i => i.complete)")
        assert page.eval_on_selector("#a", "i => i.naturalWidth") in (1, 2)
        assert page.eval_on_selector("#b", "i => i.naturalWidth") == 2


def test_an_inlined_directory_views_css_imports_still_apply_in_a_browser(tmp_path: Path) -> None:
    """A stylesheet's @import of a local file (quoted or url(), with a media condition or not, nested) is inlined
    in its place: left as a file name it is fetched from nowhere in the host's sandbox, and as a data: URL the
    view's CSP (style-src without data:) refuses it."""
    from support.browser import chromium

    root = tmp_path / "dist"
    (root / "css" / "parts").mkdir(parents=True)
    (root / "index.html").write_text(
        '<!doctype html><html><head><link rel="stylesheet" href="css/main.css"></head>'
        "<body><p id=a>a</p><p id=b>b</p><p id=c>c</p></body></html>"
    )
    (root / "css" / "main.css").write_text(
        '@import "parts/a.css";\n@import url(parts/b.css);\n@import url("parts/c.css") print;\n#a { margin: 0 }'
    )
    (root / "css" / "parts" / "a.css").write_text('@import "deep.css";\n#a { color: rgb(0, 128, 0) }')
    (root / "css" / "parts" / "deep.css").write_text("#a { font-weight: 700 }")
    (root / "css" / "parts" / "b.css").write_text("#b { color: rgb(0, 0, 255) }")
    (root / "css" / "parts" / "c.css").write_text("#c { color: rgb(255, 0, 0) }")
    html = build_view_document(directory=root)
    assert "@import" not in html
    (root / "css" / "parts" / "deep.css").write_text('@import "a.css";')  # a cycle: refused when registered
    with pytest.raises(ValueError, match="@import nested deeper than 8"):
        build_view_document(directory=root)
    with chromium() as browser:
        page = browser.new_page()
        page.set_content(html)
        color = "e => getComputedStyle(e).color"
        assert page.eval_on_selector("#a", color) == "rgb(0, 128, 0)"
        assert page.eval_on_selector("#a", "e => getComputedStyle(e).fontWeight") == "700"
        assert page.eval_on_selector("#b", color) == "rgb(0, 0, 255)"
        assert page.eval_on_selector("#c", color) != "rgb(255, 0, 0)"  # print only
        page.emulate_media(media="print")
        assert page.eval_on_selector("#c", color) == "rgb(255, 0, 0)"


def test_an_inlined_script_keeps_every_literal_that_would_end_or_change_the_script_element(tmp_path: Path) -> None:
    """Once inline, a script's text is read by the HTML tokenizer first: ``</script`` would end the element and
    ``<!--`` (then ``<script``) would stop ``</script>`` from ending it. The inliner escapes both as the HTML standard
    advises, so that every literal still holds what it held: in a string, a template, a comment, a regular expression
    (one with the ``u`` flag too, where ``<\\!--`` is a SyntaxError) and after a backslash. Checked in Chromium."""
    from support.browser import chromium

    checks = {
        "string": '"a</script>b" === "a<" + "/script>b"',
        "upper case": '"</SCRIPT >".length === 10',
        "comment then script": '"<!--<script>".length === 12 && "</script>".length === 9',
        "template": "`<!--${1}</script>` === '<!--1</scr' + 'ipt>'",
        "regex": '/<!--(.*)-->/.exec("<!--a-->")[1] === "a"',
        "unicode regex": '/<!--x<\\/script>/u.test("<!--x</scr" + "ipt>")',
        "unicode sets regex": '/[<]!--/v.test("<!--")',
        "after a backslash": '"\\<!--" === "<" + "!--" && /\\<!--/.test("<" + "!--")',
        "two backslashes": '"\\\\<!--" === "\\\\" + "<" + "!--"',
    }
    root = tmp_path / "dist"
    root.mkdir()
    (root / "index.html").write_text(
        '<!doctype html><html><head><script src="checks.js"></script></head>'
        "<body><p id=after>the rest of the document</p></body></html>"
    )
    lines = "".join(
        f"results[{name!r}] = (() => {{ try {{ return {c}; }} catch (e) {{ return String(e); }} }})();\n"
        for name, c in checks.items()
    )
    (root / "checks.js").write_text(f"// a comment holding </script> and <!-- too\nwindow.results = {{}};\n{lines}")
    html = build_view_document(directory=root)
    with chromium() as browser:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.set_content(html)
        assert errors == []
        assert page.evaluate("window.results") == {name: True for name in checks}
        assert page.text_content("#after") == "the rest of the document"  # (the script element ended where it did)
        assert page.evaluate("document.scripts.length") == 1


def vite_split_build(root: Path, entry_code: str) -> Path:
    """What ``vite build`` writes for a view whose code is split into chunks (without vite-plugin-singlefile)."""
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text(
        '<!doctype html><html><head><script type="module" crossorigin src="/assets/index-B2x9.js"></script>'
        '<link rel="modulepreload" crossorigin href="/assets/vendor-Cq1z.js"></head>'
        "<body><p id=out>waiting</p></body></html>"
    )
    (root / "assets" / "index-B2x9.js").write_text(entry_code)
    (root / "assets" / "vendor-Cq1z.js").write_text("export const v = 1;")
    (root / "assets" / "Lazy-D4kp.js").write_text("export default 2;")
    return root


def test_a_directory_view_split_into_chunks_is_refused_naming_the_chunk_and_the_fix(tmp_path: Path) -> None:
    """A view is one document, loaded from ``resources/read`` into a sandbox with no server behind it: a chunk its
    code imports (``import ... from``, ``export ... from``, ``import()``) cannot be loaded there, and no inline form
    can stand in for a module file under the view's CSP. Such a build is refused when the view is registered, naming
    the chunk and the fix (one file: vite-plugin-singlefile, as the MCP Apps quickstart builds views)."""
    static = 'import{v as e}from"./vendor-Cq1z.js";document.getElementById("out").textContent="ran "+e;'
    dynamic = (
        'const __vite__mapDeps=(i,m=__vite__mapDeps,d=(m.f||(m.f=["assets/Lazy-D4kp.js"])))=>i.map(i=>d[i]);'
        'document.getElementById("out").onclick=()=>import("./Lazy-D4kp.js");'
    )
    reexport = 'export { v } from "/assets/vendor-Cq1z.js";'
    for name, code, chunk in (
        ("static", static, "vendor-Cq1z.js"),
        ("dynamic", dynamic, "Lazy-D4kp.js"),
        ("reexport", reexport, "vendor-Cq1z.js"),
    ):
        root = vite_split_build(tmp_path / name, code)
        with pytest.raises(
            ValueError, match=rf"imports 'assets/{chunk}'.*single file.*vite-plugin-singlefile"
        ) as caught:
            build_view_document(directory=root)
        assert "index-B2x9.js" in str(caught.value)
    # one file (what vite-plugin-singlefile writes): text that only looks like an import of a file that is not in
    # the directory, or a bare specifier, is not a chunk
    single = (
        'const doc = "use import(\\"./x.js\\") to load it"; import("https://cdn.example.com/m.js").catch(() => {});'
        'document.getElementById("out").textContent = "ran alone";'
    )
    root = vite_split_build(tmp_path / "single", single)
    html = build_view_document(directory=root)
    from support.browser import chromium

    with chromium() as browser:
        page = browser.new_page()
        page.set_content(html)
        page.wait_for_function("document.getElementById('out').textContent !== 'waiting'")
        assert page.text_content("#out") == "ran alone"


def test_a_directory_view_cannot_reach_outside_its_directory(tmp_path: Path) -> None:
    root = built_app(tmp_path / "dist")
    (tmp_path / "secret.js").write_text("steal()")
    for ref in (
        "../secret.js",
        "assets/../../secret.js",
        "%2e%2e/secret.js",
        "/../secret.js",
        "assets\\..\\..\\secret.js",
    ):
        (root / "index.html").write_text(f'<!doctype html><script src="{ref}"></script>')
        with pytest.raises(ValueError, match=r"outside the view's directory|not a path inside"):
            build_view_document(directory=root)
    os.symlink(tmp_path / "secret.js", root / "assets" / "link.js")
    (root / "index.html").write_text('<!doctype html><script src="assets/link.js"></script>')
    with pytest.raises(ValueError, match="outside the view's directory"):
        build_view_document(directory=root)
    with pytest.raises(ValueError, match="outside the view's directory"):
        build_view_document(directory=root, entry="../secret.js")
    (root / "index.html").write_text('<!doctype html><script src="assets/missing.js"></script>')
    with pytest.raises(ValueError, match="not found"):
        build_view_document(directory=root)


def test_a_directory_view_is_bounded_in_bytes_and_in_assets(tmp_path: Path) -> None:
    root = built_app(tmp_path / "dist")
    with pytest.raises(ValueError, match="larger than 200 bytes"):
        build_view_document(directory=root, max_bytes=200)
    (root / "index.html").write_text(
        "<!doctype html>" + "".join('<img src="assets/dot.png">' for _ in range(MAX_VIEW_ASSETS + 1))
    )
    with pytest.raises(ValueError, match=f"more than {MAX_VIEW_ASSETS} assets"):
        build_view_document(directory=root)


# ---------------------------------------------------------------------------------------------- server: the wire


@pytest.mark.parametrize("revision", REVISIONS)
async def test_tools_and_views_carry_their_ui_meta_in_every_revision(revision: str) -> None:
    async with Client(demo_app(), protocol_version=revision, cache=False) as client:
        assert client.server_extension(UI_EXTENSION) == {}  # (a server with views declares the extension)
        tools = {t["name"]: t for t in (await client.request("tools/list", {}))["tools"]}
        assert tools["board"]["_meta"] == {
            "ui": {"resourceUri": "ui://demo/board"},
            "ui/resourceUri": "ui://demo/board",
        }
        assert tools["refresh"]["_meta"]["ui"] == {"resourceUri": "ui://demo/board", "visibility": ["app"]}
        for tool in tools.values():
            validate_def(tool, revision, "Tool")
        listed = {r["uri"]: r for r in (await client.request("resources/list", {}))["resources"]}
        board = listed["ui://demo/board"]
        assert board["mimeType"] == APP_MIME_TYPE
        ui = {
            "csp": {"connectDomains": ["https://api.example.com"], "resourceDomains": ["https://*.cdn.example.com"]},
            "permissions": {"clipboardWrite": {}},
            "domain": "board.example.com",
            "prefersBorder": False,
        }
        assert board["_meta"] == {"ui": ui}
        validate_def(board, revision, "Resource")
        read = await client.request("resources/read", {"uri": "ui://demo/board"})
        assert read["contents"] == [
            {"uri": "ui://demo/board", "mimeType": APP_MIME_TYPE, "text": PAGE, "_meta": {"ui": ui}}
        ]
        live = await client.request("resources/read", {"uri": "ui://demo/live"})
        assert live["contents"][0]["text"] == "<!doctype html><p>live</p>"
        assert live["contents"][0]["mimeType"] == APP_MIME_TYPE


# ---------------------------------------------------------------------------------------------- client


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_the_client_types_a_tools_ui_and_reads_its_checked_view(mode: str) -> None:
    async with Client(demo_app(), mode=mode, extensions={UI_EXTENSION: UI_HOST_SETTINGS}) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert tools["board"].ui is not None and tools["board"].ui.resource_uri == "ui://demo/board"
        assert tools["board"].ui.model_visible and tools["board"].ui.app_visible
        assert tools["refresh"].ui is not None and not tools["refresh"].ui.model_visible
        view = await client.read_view("board")
        assert view.html == PAGE and view.problems == [] and view.prefers_border is False
        assert view.csp["connectDomains"] == ["https://api.example.com"]
        assert "connect-src https://api.example.com;" in view.content_security_policy
        assert view.permissions == {"clipboardWrite": {}} and view.domain == "board.example.com"
        assert (await client.read_view(tools["refresh"])).uri == "ui://demo/board"
        assert (await client.read_view("ui://demo/live")).html.startswith("<!doctype html>")
        with pytest.raises(ViewError, match="links to no view"):
            await client.read_view({"name": "plain", "inputSchema": {"type": "object"}})
        with pytest.raises(ViewError, match="no tool 'nope'"):
            await client.read_view("nope")


def test_the_deprecated_flat_resource_uri_is_read_too() -> None:
    tool = Tool.model_validate({"name": "t", "_meta": {"ui/resourceUri": "ui://old"}})
    assert tool.ui is not None and tool.ui.resource_uri == "ui://old"
    assert Tool.model_validate({"name": "t"}).ui is None
    assert tool_ui({"ui": {"resourceUri": 3, "visibility": ["robot"]}}) is None


def test_a_view_a_host_must_not_render_is_a_view_error() -> None:
    ok = {"uri": "ui://v", "mimeType": APP_MIME_TYPE, "text": PAGE}
    assert check_view_contents("ui://v", [ok]).html == PAGE
    blob = {**ok, "blob": base64.b64encode(PAGE.encode()).decode()}
    del blob["text"]
    assert check_view_contents("ui://v", [blob]).html == PAGE
    bad: list[tuple[str, list[dict[str, Any]], str]] = [
        ("https://v", [ok], "not a view"),
        ("ui://v", [], "no content"),
        ("ui://v", [{**ok, "mimeType": "text/html"}], "MIME type 'text/html'"),
        ("ui://v", [{"uri": "ui://v", "mimeType": APP_MIME_TYPE}], "neither text nor blob"),
        ("ui://v", [{"uri": "ui://v", "mimeType": APP_MIME_TYPE, "blob": "%%%"}], "not base64"),
        (
            "ui://v",
            [{"uri": "ui://v", "mimeType": APP_MIME_TYPE, "blob": base64.b64encode(b"\xff\xfe").decode()}],
            "UTF-8",
        ),
        ("ui://v", [{**ok, "text": "x" * 101}], "larger than 100 bytes"),
    ]
    for uri, contents, message in bad:
        with pytest.raises(ViewError, match=message):
            check_view_contents(uri, contents, max_bytes=100)


def test_what_a_host_cannot_honour_is_dropped_and_reported_never_loosened() -> None:
    ui, problems = check_view_meta(
        {
            "ui": {
                "csp": {
                    "connectDomains": ["https://ok.example.com", "*", "data:", "https://ok.example.com"],
                    "frameDomains": "https://x.example.com",
                    "resourceDomains": [f"https://h{i}.example.com" for i in range(40)],
                },
                "permissions": {"camera": {}, "usb": {}, "geolocation": True},
                "domain": 7,
                "prefersBorder": "yes",
            }
        }
    )
    assert ui["csp"]["connectDomains"] == ["https://ok.example.com"]
    assert len(ui["csp"]["resourceDomains"]) == 32 and "frameDomains" not in ui["csp"]
    assert ui["permissions"] == {"camera": {}} and "domain" not in ui and "prefersBorder" not in ui
    assert len(problems) == 8
    view = check_view_contents("ui://v", [{"uri": "ui://v", "mimeType": APP_MIME_TYPE, "text": "<p>no doctype</p>"}])
    assert view.problems and "doctype" in view.problems[0]


def test_the_content_security_policy_is_the_spec_default_plus_exactly_the_declared_domains() -> None:
    default = content_security_policy(None)
    assert "default-src 'none'" in default and "connect-src 'none'" in default and "frame-src 'none'" in default
    assert "object-src 'none'" in default and "base-uri 'self'" in default and "unsafe-eval" not in default
    csp = content_security_policy(
        {
            "connectDomains": ["wss://rt.example.com"],
            "resourceDomains": ["https://cdn.example.com"],
            "frameDomains": ["https://www.youtube.com"],
            "baseUriDomains": ["https://base.example.com"],
        }
    )
    assert (
        "connect-src wss://rt.example.com;" in csp
        and "script-src 'self' 'unsafe-inline' https://cdn.example.com;" in csp
    )
    assert "frame-src https://www.youtube.com;" in csp and "base-uri https://base.example.com;" in csp
    assert permission_policy({"camera": {}, "clipboardWrite": {}}) == "camera; clipboard-write"
    for source in ("https://a.b", "https://*.a.b", "https://a.b:8443/path/", "http://localhost:5173", "wss://[::1]:1"):
        assert csp_source_problem(source) is None, source
    for source in ("https://", "'self'", "https://a.b c", "https://a.b,https://c.d", "javascript:x", 7, "ftp://a.b"):
        assert csp_source_problem(source) is not None, source
