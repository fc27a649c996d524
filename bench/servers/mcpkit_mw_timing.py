"""Contender: ``mcpkit_middleware.py`` with ``BENCH_MIDDLEWARE=timing`` (see there)."""

import os
import runpy
from pathlib import Path

os.environ["BENCH_MIDDLEWARE"] = "timing"
runpy.run_path(str(Path(__file__).resolve().parent / "mcpkit_middleware.py"), run_name="__main__")
