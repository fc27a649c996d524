"""pytest run over a user's project that ``pytester`` wrote: in a subprocess, as the user runs it (in process,
pytester would re-import mcpkit between runs), with the plugins the user's pytest loads by itself.

Hypothesis's plugin is left out: the user's project does not use it, and importing it took 3-5 s of each run's
start at a load of 20 (about 9 s of a bare run's start against 3.6 s without it), and the tests of
the testing kit start some thirty such runs."""

from __future__ import annotations

import pytest


def run_pytest(pytester: pytest.Pytester, *args: str, timeout: float = 300) -> pytest.RunResult:
    """``pytest *args`` in ``pytester``'s folder, in a subprocess that ends within ``timeout`` seconds."""
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:hypothesispytest", *args, timeout=timeout)
