"""Contender: ``mcpkit_middleware.py`` with ``BENCH_MIDDLEWARE=telemetry`` (see there)."""

import os
import runpy
from pathlib import Path

os.environ["BENCH_MIDDLEWARE"] = "telemetry"
runpy.run_path(str(Path(__file__).resolve().parent / "mcpkit_middleware.py"), run_name="__main__")
