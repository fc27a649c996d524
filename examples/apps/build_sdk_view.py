"""Build examples/apps/sdk_view/dist/counter.html: the counter view on the official MCP Apps SDK.

The view is one document (a host reads it with ``resources/read``), so this script inlines the SDK's self-contained
bundle (``@modelcontextprotocol/ext-apps``, ``dist/src/app-with-deps.js``, from the npm package pinned in
tests/package.json) and ``sdk_view/counter.js`` into ``sdk_view/counter.html``. The bundle is an ES module whose last
statement exports its names; that statement becomes ``const ExtApps = {...}`` so counter.js, in the same module
script, reads ``ExtApps.App``. Nothing else of the bundle is changed.

    python examples/apps/build_sdk_view.py            # writes sdk_view/dist/counter.html
    python examples/apps/build_sdk_view.py --check    # exit 1 when the committed file differs from a fresh build

``--node-modules DIR`` reads the package from another install (default: tests/node_modules).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SOURCE = HERE / "sdk_view"
OUTPUT = SOURCE / "dist" / "counter.html"
PACKAGE = "@modelcontextprotocol/ext-apps"
BUNDLE = "dist/src/app-with-deps.js"
MARKER = "<!-- mcpkit: the App SDK bundle and counter.js go here -->"
_EXPORTS = re.compile(r"export\s*\{(?P<names>[^{}]*)\}\s*;?\s*$")


def build(node_modules: Path) -> str:
    """The built document (text)."""
    package = node_modules / PACKAGE
    version = json.loads((package / "package.json").read_text())["version"]
    bundle = (package / BUNDLE).read_text(encoding="utf-8")
    found = _EXPORTS.search(bundle)
    if found is None:
        raise SystemExit(f"{PACKAGE} {version}: {BUNDLE} does not end with an export list")
    pairs = []
    for item in found["names"].split(","):
        local, _, exported = item.strip().partition(" as ")
        pairs.append(f"{(exported or local).strip()}: {local.strip()}")
    module = bundle[: found.start()] + "const ExtApps = {" + ", ".join(pairs) + "};\n"
    module += (SOURCE / "counter.js").read_text(encoding="utf-8")
    # an inline script ends at the first "</script": keep the bundle's strings from closing it
    module = re.sub(r"</(script)", r"<\\/\1", module, flags=re.I).replace("<!--", "<\\!--")
    template = (SOURCE / "counter.html").read_text(encoding="utf-8")
    if MARKER not in template:
        raise SystemExit(f"{SOURCE / 'counter.html'} lacks the marker {MARKER!r}")
    banner = f"<!-- built by examples/apps/build_sdk_view.py from {PACKAGE} {version} ({BUNDLE}); do not edit -->\n"
    return template.replace(MARKER, f'<script type="module">\n{module}\n</script>').replace(
        "<!doctype html>\n", "<!doctype html>\n" + banner, 1
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node-modules", type=Path, default=REPO / "tests" / "node_modules")
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    args = parser.parse_args(argv)
    text = build(args.node_modules)
    if args.check:
        same = OUTPUT.is_file() and OUTPUT.read_text(encoding="utf-8") == text
        print(f"{OUTPUT.relative_to(REPO)}: {'up to date' if same else 'DIFFERS from a fresh build'}")
        return 0 if same else 1
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(REPO)} ({len(text.encode())} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
