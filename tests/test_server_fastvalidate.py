"""The scalar fast path of tool argument validation must agree with pydantic exactly: whatever it accepts,
pydantic accepts with the same values and types (anything else falls through to pydantic itself)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from mcpkit.server.schema import FunctionInfo, _fast_validate


def f1(s: str, i: int, x: float, b: bool) -> None: ...


def f2(s: str = "d", i: int | None = None, x: float | None = 1.5, b: bool = False) -> None: ...


def f3(a: int | None, n: float | None = None) -> None: ...


VALUES: list[Any] = ["a", "", "5", "1.5", "true", 0, 1, -3, 2**53 + 1, 1.0, 1.5, -0.0, True, False, None, [], {}]
MISSING = object()


@pytest.mark.parametrize("fn", [f1, f2, f3], ids=lambda f: f.__name__)
def test_fast_path_agrees_with_pydantic(fn: Any) -> None:
    info = FunctionInfo(fn, name=fn.__name__)
    assert info._fast is not None, "a function of plain scalars takes the fast path"
    names = [p.name for p in info.params]
    accepted = 0
    for combo in itertools.product(*[[*VALUES, MISSING] for _ in names]):
        for extra in ({}, {"zz": 1}):
            args = {k: v for k, v in zip(names, combo, strict=True) if v is not MISSING} | extra
            fast = _fast_validate(info._fast, args)
            if fast is None:
                continue  # the fast path declined: pydantic decides, as before
            accepted += 1
            ref = info.model.model_validate(args)  # must not raise
            for k in names:
                want = getattr(ref, k)
                assert fast[k] == want and type(fast[k]) is type(want), (fn.__name__, args, k)
    assert accepted > 0
