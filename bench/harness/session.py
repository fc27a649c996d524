"""One benchmark session: the facts about the machine and the versions, the run, the JSON, the printout."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson

from .cases import Budget, run_cases
from .contenders import BENCH, NODE_MODULES, SERVER_CONTENDERS, node

ROOT = BENCH.parent
RESULTS = BENCH / "results"
KEEP_RESULTS = 40  # per session name; the oldest beyond this are deleted
DISTS = [
    "mcp",
    "mcp-types",
    "fastmcp",
    "mcpkit",
    "uvicorn",
    "httptools",
    "h11",
    "starlette",
    "pydantic",
    "orjson",
    "anyio",
]


def machine() -> dict[str, Any]:
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": mem_gb,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "os": platform.platform(terse=True),
    }


def versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for d in DISTS:
        try:
            out[d] = metadata.version(d)
        except metadata.PackageNotFoundError:
            out[d] = "not installed"
    try:
        rev = subprocess.run(
            ["git", "-C", str(ROOT), "log", "-1", "--format=%h %cs"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        if rev and out.get("mcpkit") != "not installed":
            out["mcpkit"] += f" (commit {rev})"
    except (OSError, subprocess.SubprocessError):
        pass
    for c in SERVER_CONTENDERS:  # the npm contenders' packages, and the Node.js that runs them
        if c.package and c.package.startswith("npm:"):
            name = c.package[4:]
            try:
                out[name] = orjson.loads((NODE_MODULES / name / "package.json").read_bytes())["version"]
            except (OSError, ValueError, KeyError):
                out[name] = "not installed"
    exe = node()
    if exe is not None:
        try:
            out["node"] = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out["node"] = "unknown"
    return out


def http_parser() -> str:
    """uvicorn's HTTP parser for the Python contenders in this run (servers/_serve.py decides, in each server)."""
    from servers._serve import http_parser as chosen

    return str(chosen())


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def print_table(summary: dict[str, Any]) -> None:
    for cid, case in summary["cases"].items():
        print(f"\n{cid}: {case['title']} [{case['unit']}, {case['better']} is better]")
        for key, row in case["contenders"].items():
            if row["status"] != "ok":
                print(f"  {key:<16} n/a  {row['error'][:160]}")
                continue
            med = row["median"]
            ratio = row.get("cost_vs_floor")
            extra = "".join(
                f"  {k}={_fmt(med[k])}"
                for k in ("p50_ms", "p99_ms", "server_cpu_us", "server_sys_us", "driver_cpu_us")
                if k in med
            )
            cost = f"x{ratio:.2f}" if ratio else "-"
            print(f"  {key:<16} {_fmt(med['value']):>10}  cost {cost:>8}{extra}")


def compile_bytecode() -> list[str]:
    """Compile mcpkit and the bench's own modules to bytecode before any process starts.

    pip compiles the peers' modules when it installs them; mcpkit is an editable install, and with
    PYTHONDONTWRITEBYTECODE set (common in CI) its cached bytecode would be missing or stale, so every mcpkit
    process would compile its source again and cold start would measure the compiler. Same footing for all."""
    import compileall

    targets = [BENCH / "servers", BENCH / "clients"]
    try:
        import mcpkit

        targets.append(Path(mcpkit.__file__).parent)
    except ImportError:
        pass
    for target in targets:
        compileall.compile_dir(str(target), quiet=1)
    return [str(t) for t in targets]


def run_session(
    *,
    name: str,
    selected: list[str],
    budget: Budget,
    quick: bool,
    server_keys: list[str] | None,
    write_docs: bool,
    docs_writer: Any = None,
) -> int:
    started = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    meta: dict[str, Any] = {
        "name": name,
        "started": started.isoformat(timespec="seconds"),
        "quick": quick,
        "machine": machine(),
        "versions": versions(),
        "http_parser": http_parser(),
        "budget": asdict(budget),
        "argv": sys.argv[1:],
    }
    log(f"{name}: {len(selected)} case(s), {budget.reps} repetition(s), python {meta['machine']['python']}")
    meta["bytecode_compiled"] = compile_bytecode()
    meta["loadavg_start"] = [round(x, 2) for x in os.getloadavg()]
    summary = asyncio.run(run_cases(selected, budget, log, server_keys))
    meta["duration_s"] = round(time.perf_counter() - t0, 1)
    meta["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    result = {"meta": meta, **summary}
    RESULTS.mkdir(exist_ok=True)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    path = RESULTS / f"{name}-{stamp}{'-quick' if quick else ''}.json"
    path.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    for old in sorted(RESULTS.glob(f"{name}-*.json"))[:-KEEP_RESULTS]:  # bounded disk use
        old.unlink(missing_ok=True)
    print_table(summary)
    log(f"\n{name}: done in {meta['duration_s']}s; results in {path.relative_to(ROOT)}")
    if write_docs:
        from .report import write_docs as default_writer

        written = (docs_writer or default_writer)(result)
        for p in written:
            log(f"wrote {Path(p).relative_to(ROOT)}")
    # The harness is broken if the floor itself could not be measured.
    floor_failed = [
        cid
        for cid, case in summary["cases"].items()
        if case["floor"] is not None and case["contenders"].get(case["floor"], {}).get("status") != "ok"
    ]
    if floor_failed:
        log(f"FLOOR FAILED in {floor_failed}: the harness, not a contender, is at fault")
        return 1
    return 0
