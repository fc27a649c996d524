"""The benchmark harness: driver, cases, contenders, report (see bench/run.py)."""
