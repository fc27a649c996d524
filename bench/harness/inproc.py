"""What the in-process benches (``bench/core_inproc.py``, ``bench/uvicorn_inproc.py``) share: the options of their
command line that mean the same in both, and each contender's child process (``[PYTHONPATH:]module``: the module
it loads, the environment it runs in, what it prints)."""

from __future__ import annotations

import argparse
import os
import subprocess

from . import callgrind


def new_parser(doc: str | None) -> argparse.ArgumentParser:
    """The bench's parser, its module docs as the description, the contenders its first argument."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("contenders", nargs="*", help="[PYTHONPATH:]module of bench/servers")
    return parser


def add_load_options(parser: argparse.ArgumentParser) -> None:
    """The era, the calls per measured run and how many are in flight."""
    parser.add_argument("--era", choices=("modern", "legacy"), default="modern")
    parser.add_argument("--calls", type=int, default=15000, help="calls per measured run (four per round)")
    parser.add_argument("--concurrency", type=int, default=32)


def add_child_options(parser: argparse.ArgumentParser) -> None:
    """``--instructions`` (count under callgrind instead of timing) and the hidden ``--child MODULE`` a contender's
    process is started with."""
    parser.add_argument("--instructions", action="store_true", help="instructions per call under callgrind")
    parser.add_argument("--child", help=argparse.SUPPRESS)


def contender(spec: str, *, hash_seed: bool = False) -> tuple[str, dict[str, str]]:
    """The module of ``spec`` and the environment its child runs in (``PYTHONPATH`` the path before the colon, if
    any; ``PYTHONHASHSEED=0`` with ``hash_seed``)."""
    path, _, module = spec.rpartition(":")
    env = dict(os.environ, PYTHONHASHSEED="0") if hash_seed else dict(os.environ)
    if path:
        env["PYTHONPATH"] = path
    return module, env


def child_lines(spec: str, argv: list[str], env: dict[str, str]) -> list[str]:
    """Run a contender's child to its end (10 minutes at most): the lines it printed; its error ends the bench."""
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"{spec}: {out.stderr[-2000:]}")
    return out.stdout.strip().splitlines()


def print_instructions(spec: str, argv: list[str], env: dict[str, str], where: str) -> None:
    """The instructions per call of a contender's child (:func:`.callgrind.per_call`), as one line of the table."""
    per_call = callgrind.per_call(spec, argv, env)
    print(f"{spec:40s} {per_call / 1000:7.1f}k instructions/call ({where})")
