"""``python -m mcpkit.testing._serve SPEC``: serve the server SPEC names (``file.py[:name]`` or
``package.module[:name]``) over stdio, through its own ``run()`` (a server class that customizes it is served as
written). What the testing kit starts for its stdio transport; needs no extra (no click)."""

from __future__ import annotations

import sys

from ._load import ServerLoadError, load_server


def main(argv: list[str] | None = None) -> int:
    """Load the server named by the one argument and run it over stdio until stdin closes."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m mcpkit.testing._serve SERVER (file.py[:name] or module[:name])", file=sys.stderr)
        return 2
    try:
        server = load_server(args[0])
    except ServerLoadError as exc:
        print(f"mcpkit.testing: {exc}", file=sys.stderr)
        return 2
    server.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
