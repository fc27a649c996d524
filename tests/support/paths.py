"""Where things are, for tests at any depth under tests/: the tests folder, the repository, the test servers."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
SERVERS = TESTS / "support" / "servers"
CLIENTS = TESTS / "support" / "clients"
INTEROP = TESTS / "support" / "interop"
EXAMPLES = REPO / "examples"
