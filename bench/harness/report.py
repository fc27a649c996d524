"""docs/benchmarks.md and docs/benchmarks.svg from one result JSON. Hand-written SVG, no plotting library."""

from __future__ import annotations

import hashlib
import itertools
import math
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from .contenders import BENCH, CLIENT_CONTENDERS, SERVER_CONTENDERS

ROOT = BENCH.parent
DOCS = ROOT / "docs"
COLORS = {
    "mcp": "#4e79a7",
    "mcp-lowlevel": "#a0cbe8",
    "fastmcp": "#f28e2b",
    "mcpkit": "#59a14f",
    "mcpkit-lowlevel": "#8cd17d",
    "mcpkit-def": "#b6992d",
    "mcpkit-inline": "#d4a6c8",
    "mcpkit-asgi": "#e15759",
    "mcpkit-session": "#8cd17d",
    "raw": "#999999",
    "floor": "#999999",
    "floor-lane": "#bab0ac",
}
# groups drawn as growth curves rather than bars, and the budget field giving each group's repetitions
CURVE_GROUPS = {"payload_stdio", "payload_http", "idle", "inflight"}
GROUP_REPS = {
    "growth": "growth_reps",
    "payload_stdio": "payload_reps",
    "payload_http": "payload_reps",
    "idle": "idle_reps",
    "inflight": "inflight_reps",
}
X = "\u00d7"  # the multiplication sign of "x4.2 the floor"
LOAD_CASES = (
    "stdio_seq",
    "stdio_c32",
    "stdio_100k",
    "stdio_modern_seq",
    "stdio_modern_c32",
    "http_seq",
    "http_c32",
    "http_100k",
    "http_modern",
    "http_modern_seq",
    "http_stateless_seq",
    "http_stateless",
)


@dataclass(frozen=True)
class Family:
    """One growth curve: the same measure at growing sizes, one line per contender."""

    id: str
    title: str
    axis: str  # what grows (the x axis)
    points: tuple[tuple[str, str, float], ...]  # (case id, size label, x position on the log axis)
    metric: str = "value"  # which median of the case is plotted
    unit: str = ""  # empty: the case's own unit
    note: str = ""
    detail: str = ""  # another median shown in each cell, e.g. "refused" -> "3,243 · 0 refused"


FAMILIES: tuple[Family, ...] = (
    Family(
        "list_tools",
        "tools/list full walk",
        "extra tools registered",
        (("list_tools_100", "100", 100), ("list_tools_1k", "1,000", 1e3), ("list_tools_10k", "10,000", 1e4)),
    ),
    Family(
        "list_res",
        "resources/list full walk",
        "resources registered",
        (("list_res_100", "100", 100), ("list_res_10k", "10,000", 1e4), ("list_res_100k", "100,000", 1e5)),
    ),
    Family(
        "echo_stdio",
        "echo over stdio, sequential",
        "characters echoed",
        (
            ("echo_stdio_1k", "1 KB", 1e3),
            ("echo_stdio_10k", "10 KB", 1e4),
            ("echo_stdio_100k", "100 KB", 1e5),
            ("echo_stdio_1m", "1 MB", 1e6),
        ),
    ),
    Family(
        "echo_http",
        "echo over Streamable HTTP, sequential",
        "characters echoed",
        (
            ("echo_http_1k", "1 KB", 1e3),
            ("echo_http_10k", "10 KB", 1e4),
            ("echo_http_100k", "100 KB", 1e5),
            ("echo_http_1m", "1 MB", 1e6),
        ),
    ),
    Family(
        "idle_rate",
        "sequential calls on one session while other sessions sit idle",
        "sessions open",
        (("idle_0", "0", 100), ("idle_1k", "1,000", 1e3), ("idle_10k", "10,000", 1e4)),
        note="0 is drawn one decade left of 1,000 (a log axis has no zero).",
    ),
    Family(
        "idle_cpu",
        "server CPU per call while other sessions sit idle",
        "sessions open",
        (("idle_0", "0", 100), ("idle_1k", "1,000", 1e3), ("idle_10k", "10,000", 1e4)),
        metric="server_cpu_us",
        unit="µs/call",
        note="From `/proc` in 10 ms ticks over the load: the resolution is 10 ms / calls (a few µs in a full run).",
    ),
    Family(
        "inflight",
        "one HTTP session, calls of a 50 ms tool in flight",
        "calls in flight",
        (("inflight_32", "32", 32), ("inflight_256", "256", 256), ("inflight_1k", "1,024", 1024)),
        note="A 50 ms tool caps N in flight at N / 0.05 calls/s; refused calls (429/503) wait what Retry-After says.",
        detail="refused",
    ),
    Family(
        "inflight_p99",
        "one HTTP session, p99 latency of a 50 ms tool by calls in flight",
        "calls in flight",
        (("inflight_32", "32", 32), ("inflight_256", "256", 256), ("inflight_1k", "1,024", 1024)),
        metric="p99_ms",
        unit="ms",
        note="Answered calls only; 50 ms is the tool itself.",
    ),
)


def _family_value(case: dict[str, Any] | None, key: str, metric: str) -> float | None:
    row = case["contenders"].get(key) if case else None
    if row is None or row["status"] != "ok":
        return None
    v = row["median"].get(metric)
    return float(v) if isinstance(v, (int, float)) and v > 0 else None


def present_families(cases: dict[str, Any]) -> list[Family]:
    """The families with at least two of their sizes in this run."""
    return [f for f in FAMILIES if sum(cid in cases for cid, _, _ in f.points) >= 2]


def _growth_curves(w: Any, server_cases: dict[str, Any], server_keys: list[str]) -> None:
    """For each growth family: a table (rows = sizes, columns = contenders, then the growth between sizes) and
    its line chart (docs/benchmarks-growth-<family>.svg, written by write_growth_svgs)."""
    fams = present_families(server_cases)
    if not fams:
        return
    labels = _labels(SERVER_CONTENDERS)
    w("### Growth curves")
    w("")
    w(
        "How each cost grows with the size of the work, all contenders in the same run. Under each table, "
        f"`{X}` rows give the growth from one size to the next, per contender: for times, growth equal to the "
        f"size step (in brackets) is linear; for rates (calls/s), {X}1.00 means the rate held."
    )
    w("")
    for f in fams:
        points = [(cid, lab) for cid, lab, _ in f.points if cid in server_cases]
        keys = [k for k in server_keys if any(k in server_cases[cid]["contenders"] for cid, _ in points)]
        unit = f.unit or server_cases[points[0][0]]["unit"]
        better = server_cases[points[0][0]]["better"] if f.metric == "value" else "lower"
        w(f"#### {f.title} ({unit}, {'higher' if better == 'higher' else 'lower'} is better)")
        w("")
        w(f"![{f.title}](benchmarks-growth-{f.id}.svg)")
        w("")
        w(f"| {f.axis} | " + " | ".join(labels.get(k, k) for k in keys) + " |")
        w("|---|" + "---:|" * len(keys))
        for cid, lab in points:
            cells = []
            for k in keys:
                row = server_cases[cid]["contenders"].get(k)
                v = _family_value(server_cases[cid], k, f.metric)
                cell = "—" if row is None else "n/a" if v is None else _num(v)
                if v is not None and f.detail and row is not None and f.detail in row["median"]:
                    cell += f" · {int(row['median'][f.detail]):,} {f.detail}"
                cells.append(cell)
            w(f"| {lab} (`{cid}`) | " + " | ".join(cells) + " |")
        xpos = {cid: xv for cid, _, xv in f.points}
        for (ca, la), (cb, lb) in itertools.pairwise(points):
            step = f" (size {X}{xpos[cb] / xpos[ca]:,.0f})" if ca != f.points[0][0] or f.points[0][1] != "0" else ""
            cells = []
            for k in keys:
                va = _family_value(server_cases[ca], k, f.metric)
                vb = _family_value(server_cases[cb], k, f.metric)
                cells.append(f"{X}{vb / va:.2f}" if va and vb else "-")
            w(f"| {X} {la} → {lb}{step} | " + " | ".join(cells) + " |")
        w("")
        if f.note:
            w(f.note)
            w("")


def growth_svg(f: Family, cases: dict[str, Any]) -> str:
    """A line chart of one family: log x (the size), log y (the figure), one line per contender."""
    points = [(cid, lab, xv) for cid, lab, xv in f.points if cid in cases]
    keys = [c.key for c in SERVER_CONTENDERS if any(c.key in cases[cid]["contenders"] for cid, _, _ in points)]
    unit = f.unit or cases[points[0][0]]["unit"]
    series: dict[str, list[tuple[float, float]]] = {}
    for k in keys:
        pts = [(xv, v) for cid, _, xv in points if (v := _family_value(cases[cid], k, f.metric)) is not None]
        if pts:
            series[k] = pts
    values = [v for pts in series.values() for _, v in pts] or [1.0]
    steps = [m * 10.0**e for e in range(-3, 8) for m in (1, 2, 5)]
    lo = next((s for s in reversed(steps) if s <= min(values)), steps[0])
    hi = next((s for s in steps if s >= max(values)), steps[-1])
    if hi <= lo:
        hi = lo * 10
    xs = [xv for _, _, xv in points]
    xlo, xhi = math.log10(min(xs)), math.log10(max(xs))
    if xhi <= xlo:
        xhi = xlo + 1
    left, top, plot_w, plot_h = 70, 40, 460, 240
    width, height = left + plot_w + 170, top + plot_h + 60

    def px(xv: float) -> float:
        return left + plot_w * (math.log10(xv) - xlo) / (xhi - xlo)

    def py(v: float) -> float:
        return top + plot_h * (1 - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)))

    p = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="18" font-size="13" font-weight="bold">{escape(f.title)} ({escape(unit)}; log-log)</text>',
    ]
    yticks = [s for s in steps if lo <= s <= hi]
    if len(yticks) > 8:
        yticks = [s for s in yticks if str(s).lstrip("0.").startswith("1")] or yticks
    for s in yticks:
        y = py(s)
        p.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        p.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#555">{s:g}</text>')
    for _, lab, xv in points:
        x = px(xv)
        p.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="#e5e5e5"/>')
        p.append(f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle" fill="#555">{escape(lab)}</text>')
    p.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>')
    p.append(f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h + 36}" text-anchor="middle">{escape(f.axis)}</text>')
    ly = top + 6
    for k, pts in series.items():
        color = COLORS.get(k, "#777")
        path = " ".join(f"{px(xv):.1f},{py(v):.1f}" for xv, v in pts)
        p.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for xv, v in pts:
            p.append(f'<circle cx="{px(xv):.1f}" cy="{py(v):.1f}" r="3" fill="{color}"/>')
        p.append(
            f'<line x1="{left + plot_w + 14}" y1="{ly}" x2="{left + plot_w + 34}" y2="{ly}" stroke="{color}" '
            'stroke-width="2"/>'
        )
        p.append(f'<text x="{left + plot_w + 40}" y="{ly + 4}">{escape(k)}</text>')
        ly += 16
    p.append("</svg>")
    return "\n".join(p) + "\n"


def write_growth_svgs(result: dict[str, Any]) -> list[Path]:
    """docs/benchmarks-growth-<family>.svg for every growth family in this run."""
    cases = {k: v for k, v in result["cases"].items() if v["group"] != "clients"}
    out = []
    for f in present_families(cases):
        path = DOCS / f"benchmarks-growth-{f.id}.svg"
        path.write_text(growth_svg(f, cases), encoding="utf-8")
        out.append(path)
    return out


def _num(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def _cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return "—"
    if row["status"] != "ok":
        return "n/a"
    ratio = row.get("cost_vs_floor")
    return f"{_num(row['median']['value'])} ({X}{ratio:.2f})" if ratio else _num(row["median"]["value"])


def _labels(pool: list[Any]) -> dict[str, str]:
    return {c.key: c.label for c in pool}


def _server_tables(w: Any, server_cases: dict[str, Any], server_keys: list[str]) -> None:
    """The results table, the growth table and the latency table of the server cases."""
    labels = _labels(SERVER_CONTENDERS)
    w("| case | unit | " + " | ".join(f"{labels[k]}" for k in server_keys) + " |")
    w("|---|---|" + "---:|" * len(server_keys))
    for cid, case in server_cases.items():
        better = "↑" if case["better"] == "higher" else "↓"
        w(
            f"| {case['title']} (`{cid}`) | {case['unit']} {better} | "
            + " | ".join(_cell(case["contenders"].get(k)) for k in server_keys)
            + " |"
        )
    w("")
    _growth_curves(w, server_cases, server_keys)
    detail = [cid for cid in LOAD_CASES if cid in server_cases]
    if detail:
        w("### Latency and server CPU per call")
        w("")
        w("p50 / p99 latency in ms, and the server process's CPU time per call in µs (from `/proc`, 10 ms ticks).")
        w("")
        w("| case | " + " | ".join(labels[k] for k in server_keys) + " |")
        w("|---|" + "---:|" * len(server_keys))
        for cid in detail:
            cells = []
            for k in server_keys:
                row = server_cases[cid]["contenders"].get(k)
                if row is None:
                    cells.append("—")
                elif row["status"] != "ok":
                    cells.append("n/a")
                else:
                    m = row["median"]
                    cpu = f", {_num(m['server_cpu_us'])} µs" if "server_cpu_us" in m else ""
                    cells.append(f"{_num(m.get('p50_ms'))} / {_num(m.get('p99_ms'))}{cpu}")
            w(f"| `{cid}` | " + " | ".join(cells) + " |")
        w("")


def markdown(result: dict[str, Any]) -> str:
    meta = result["meta"]
    cases: dict[str, Any] = result["cases"]
    mach = meta["machine"]
    reps = meta["budget"]["reps"]
    parser = meta.get("http_parser", "h11")  # (runs before it was recorded: h11)
    server_cases = {k: v for k, v in cases.items() if v["group"] != "clients"}
    client_cases = {k: v for k, v in cases.items() if v["group"] == "clients"}
    server_keys = [c.key for c in SERVER_CONTENDERS if any(c.key in v["contenders"] for v in server_cases.values())]
    out: list[str] = []
    w = out.append
    w("# Benchmarks")
    w("")
    when = meta["started"][:16].replace("T", " ")
    w(
        f"Generated by `python bench/run.py` on {when} UTC in {meta['duration_s']:.0f} s; "
        "do not edit by hand, rerun instead. Raw figures: `bench/results/*.json` (not committed)."
    )
    w("")
    w("![cost of each contender relative to the floor](benchmarks.svg)")
    w("")
    w("## How to read it")
    w("")
    w(
        f"- Every figure is the **median of {reps} repetitions** taken in one run. Contenders are interleaved "
        "(A B C, then C B A, ...) so drift of the machine spreads over everyone."
    )
    w(
        "- Every figure is also given as a **cost relative to a floor measured in the same run**: "
        f"`floor rate / rate` for throughput, `value / floor value` for time and memory. {X}1.00 is as cheap as the "
        f"floor; {X}4 means four times the floor's cost. Lower is better."
    )
    w(
        "- The floors are the least Python that still answers MCP correctly: `bench/servers/floor_stdio.py` "
        "(raw asyncio + orjson, newline-delimited) and `bench/servers/floor_asgi.py` (a raw ASGI app, JSON "
        "responses, `Mcp-Session-Id`) served by the same uvicorn configuration as every HTTP contender "
        f"(`bench/servers/_serve.py`: asyncio loop, {parser}, no access log, no proxy-headers middleware, as "
        "mcpkit serves). For clients the floor is the bench's "
        "own raw JSON-RPC client against `floor_stdio.py`."
    )
    w(
        "- `floor-lane` (`bench/servers/floor_lane.py`) is the raw floor of mcpkit's own serving: the same floor's "
        "answers (parse, pick the canned answer, write), written from inside a subclass of uvicorn's httptools "
        "protocol with the shortcuts mcpkit's protocol lane takes: no `RequestResponseCycle` (a small holder of the "
        "body until it is whole), no URL parse for `POST /mcp`, no ASGI task, `receive` or `send` (one write), and "
        "no keep-alive timer per response (one timer per server closes idle connections). It runs no MCP logic and "
        "none of mcpkit's connection guard, so `mcpkit-*` against `floor-lane` is what mcpkit's MCP work and guard "
        "cost on the lane, and `floor-lane` against `floor` what uvicorn's ASGI serving costs."
    )
    w(
        '- The mcpkit HTTP contenders are served as their users serve them, `app.run(transport="http")` '
        "(`_serve.serve_mcpkit`: mcpkit's `build_server`, its connection guard and its protocol lane, which answers "
        "a call made at once without an ASGI cycle), with the shared settings. `mcpkit-asgi` is `mcpkit-def`'s app "
        "mounted as a plain ASGI app on stock uvicorn, as in Starlette or FastAPI."
    )
    w(
        f"- Every Python contender and the ASGI floor are served with uvicorn's {parser} parser and the asyncio "
        "event loop: what a user of mcpkit's `http` extra gets (it installs httptools, which uvicorn picks "
        "when present, and no uvloop). `bench/run.py --http-parser h11` serves them all with the pure-Python "
        "parser instead."
    )
    w(
        "- `TypeScript SDK v2 McpServer` is the official TypeScript SDK (`@modelcontextprotocol/server`, the "
        "version below) on Node.js, through its public API (`bench/servers/ts_v2_server.mjs`): `serveStdio` over "
        "stdio; over HTTP a `NodeStreamableHTTPServerTransport` and an `McpServer` per session for 2025 traffic "
        "(the SDK's documented sessionful pattern) and `createMcpHandler` (one server per request, its design) for "
        "2026-07-28 traffic and for the stateless cases, JSON responses, on `node:http`."
    )
    w(
        "- The load generator speaks raw JSON-RPC (asyncio pipes; a keep-alive HTTP/1.1 client on raw asyncio "
        "streams), so the client's cost is the same for every server. It shares the two cores with the server; "
        "its own CPU per call is recorded in the JSON (`driver_cpu_us`) next to the server's (`server_cpu_us`)."
    )
    w(
        "- HTTP contenders are asked for JSON responses (`json_response=True`); tool calls are `echo(text)` "
        "unless the case says otherwise, and `add(2, 3)` is checked once per server."
    )
    w(
        "- Every framework's tools are written as `async def` (the same code in each): a plain `def` tool adds "
        "one worker-thread hand-off per call in every framework that runs sync tools off the event loop "
        "(about 70 µs a call on this machine), which would measure thread scheduling rather than the framework. "
        "mcpkit's `@app.tool(thread=False)` runs a never-blocking sync tool inline instead."
    )
    w(
        "- Server CPU per call (`/proc` utime + stime of the server process / calls; `server_sys_us` is the "
        "stime part: socket work and page faults) does not depend on how busy the machine was; rates and "
        "latencies do. Where the floor's server CPU per call is about equal to the driver's (stdio, 32 in "
        "flight), the floor is held back by the driver too, so ratios in that row "
        "understate the contenders' true cost."
    )
    w(
        "- Issue 2 (stdio round trips of a trivial handler vs a raw asyncio + orjson loop) is the "
        "`mcpkit low-level Server` column of `stdio_seq` / `stdio_c32`; `python bench/stdio_roundtrip.py` "
        "measures just that, with more repetitions."
    )
    w(
        "- The `mcpkit MCPKit, plain def tools` column is the same app with `def echo` / `def add` (what most "
        "users write) and mcpkit's default sync policy: a worker thread until a function proves fast and "
        "non-blocking, then inline (`mcpkit.server.sync_exec`)."
    )
    w(
        "- Growth cases (`list_*`): one server per registry size, full walks of the list over stdio "
        "(every page, following `nextCursor`): the first fills what a server caches, then at least four more, and "
        "more while they take less than a second together (40 walks at most); the figure is the fastest walk "
        "after the first, in ms, and `list_res_100k_rss` the server's RSS after them. The floor "
        "answers the whole list in one page. fastmcp is not run at 100,000 resources: it registers resources in "
        "quadratic time, so that server would take tens of minutes to start; its other sizes run in the first "
        "repetition only (10,000 tools take it ~30 s of CPU to register). The plain-`def` mcpkit app is not "
        "run here: a list walk runs no tool, it would measure the same registry again."
    )
    w(
        "- Growth curves (issue 16), each in the first few repetitions only (see the budget in the JSON): "
        "**payload** (`echo_stdio_*`, `echo_http_*`): one server per contender and transport, sequential `echo` of "
        "1 KB, 10 KB, 100 KB and 1 MB strings, every reply checked, in ms per call. **Idle sessions** (`idle_*`): "
        "one stateful HTTP server; one session calls `echo` sequentially with 0, then 1,000, then 10,000 sessions "
        "open on the server (the measured one counts, so a server capped at 10,000 sessions is exactly full), the "
        "idle ones opened from client addresses 127.0.0.2, .3, ... 100 each (mcpkit's default "
        "`max_sessions_per_client` is 100 per address); `idle_mem` is the RSS growth over them / their number, "
        "and the first and last idle session must still answer. **In flight** (`inflight_*`): one handshake-era "
        "session, N closed-loop clients with a keep-alive connection each calling `sleep50` (an `async def` tool "
        "that sleeps 50 ms, the same in every server, registered with `BENCH_SLOW_TOOL=1`); a refused call (429 "
        "or 503) is counted and its client waits what `Retry-After` says before sending again "
        "(`bench/inflight.py` is the same method as a standalone script, for before/after comparisons). "
        "N / 0.05 s is the ceiling."
    )
    w("")
    w("## Results")
    w("")
    _server_tables(w, server_cases, server_keys)
    if client_cases:
        w("### Clients")
        w("")
        clabels = _labels(CLIENT_CONTENDERS)
        w(
            "Each client connects (handshake era) to a floor server and calls `echo` sequentially: `floor_stdio.py`"
            " over stdio, `floor_asgi.py` (same uvicorn configuration as the servers) over Streamable HTTP. The raw"
            " client (the bench driver's own JSON-RPC) is the floor of each transport."
        )
        w("")
        w(f"| client | transport | calls/s | {X} floor | p50 ms | p99 ms | connect ms |")
        w("|---|---|---:|---:|---:|---:|---:|")
        for cid, case in client_cases.items():
            transport = "HTTP" if "http" in cid else "stdio"
            for k, row in case["contenders"].items():
                if row["status"] != "ok":
                    w(f"| {clabels.get(k, k)} | {transport} | n/a | | | | |")
                    continue
                m = row["median"]
                ratio = row.get("cost_vs_floor")
                cost = f"{X}{ratio:.2f}" if ratio else "-"
                w(
                    f"| {clabels.get(k, k)} | {transport} | {_num(m['value'])} | {cost} | "
                    f"{_num(m.get('p50_ms'))} | {_num(m.get('p99_ms'))} | {_num(m.get('connect_ms'))} |"
                )
        w("")
    failures = [
        (cid, k, row["error"])
        for cid, case in cases.items()
        for k, row in case["contenders"].items()
        if row["status"] != "ok"
    ]
    if failures:
        w("### n/a: why")
        w("")
        seen: dict[tuple[str, str], list[str]] = {}
        for cid, k, err in failures:
            seen.setdefault((k, err), []).append(cid)
        for (k, err), cids in seen.items():
            w(f"- **{k}** ({', '.join(f'`{c}`' for c in cids)}): {escape(err, quote=False).replace('|', '/')}")
        w("")
    w("## Cases")
    w("")
    w("| id | what is measured |")
    w("|---|---|")
    notes = {
        "stdio_seq": "one request at a time over the server's stdin/stdout; calls/s and latency",
        "stdio_c32": "32 requests in flight on the one stdio connection",
        "stdio_100k": "`echo` of a 100 000-character string, sequential (the reply is checked)",
        "stdio_peak_rss": "the server's peak RSS (`VmHWM`) after the stdio cases above",
        "cold_start": "from spawning `python server.py` to the `initialize` response (median of the spawns)",
        "http_seq": "Streamable HTTP, stateful (one `Mcp-Session-Id`), one request at a time, keep-alive",
        "http_c32": "the same session over 32 keep-alive connections, 32 requests in flight",
        "http_100k": "`echo` of a 100 000-character string over the stateful session, sequential "
        "(the reply is checked)",
        "stdio_modern_seq": "2026-07-28 era over stdio: `_meta` protocolVersion + clientCapabilities on every "
        "request, one at a time",
        "stdio_modern_c32": "2026-07-28 era over stdio, 32 in flight",
        "http_modern_seq": "2026-07-28 era over Streamable HTTP (as `http_modern`), one request at a time",
        "list_tools_100": "full tools/list walk with 100 extra tools (one server per size, stdio)",
        "list_tools_1k": "full tools/list walk with 1,000 extra tools",
        "list_tools_10k": "full tools/list walk with 10,000 extra tools",
        "list_res_100": "full resources/list walk over 100 static text resources",
        "list_res_10k": "full resources/list walk over 10,000 resources",
        "list_res_100k": "full resources/list walk over 100,000 resources",
        "list_res_100k_rss": "the server's RSS (VmRSS) after the walks of `list_res_100k`, what it keeps",
        "echo_stdio_1k": "`echo` of a 1,000-character string over stdio, sequential, in ms per call (the reply is "
        "checked); `_10k`, `_100k`, `_1m`: 10,000, 100,000 and 1,000,000 characters",
        "echo_http_1k": "the same over one stateful Streamable HTTP session (JSON answers)",
        "idle_0": "sequential `echo` calls/s on one stateful HTTP session, no other session open",
        "idle_1k": "the same with 1,000 sessions open (999 idle), opened from 127.0.0.2.. (100 per address)",
        "idle_10k": "the same with 10,000 sessions open (9,999 idle)",
        "idle_mem": "server RSS growth over the 9,999 idle sessions / 9,999; the first and last must still answer",
        "inflight_32": "one session, 32 closed-loop clients (one connection each) calling the 50 ms `sleep50` "
        "tool; answered calls/s (ceiling 640), 429/503 answers wait Retry-After",
        "inflight_256": "the same, 256 in flight (ceiling 5,120 calls/s)",
        "inflight_1k": "the same, 1,024 in flight (ceiling 20,480 calls/s)",
        "http_modern": "2026-07-28 era: no handshake, `_meta` protocolVersion + clientCapabilities on every "
        "request, `MCP-Protocol-Version`/`Mcp-Method`/`Mcp-Name` headers; 32 in flight",
        "http_session_mem": "open N idle sessions (initialize + initialized), server RSS growth / N; the first "
        "and last session must still answer a call. RSS moves in pages and reuses freed heap, so figures "
        "under ~1 KB mean 'too small to see' (the floor keeps one small dict per session); in the ratio "
        "every value under 1 KB counts as 1 KB",
        "http_stateless_seq": "the server in stateless mode (no `Mcp-Session-Id`), handshake-era calls, one request "
        "at a time, keep-alive",
        "http_stateless": "the server in stateless mode, handshake-era calls, 32 in flight",
        "client_seq": "client libraries against the stdio floor; the raw client is the floor",
        "client_http_seq": "client libraries against the ASGI floor over Streamable HTTP (stateful, JSON answers); "
        "the raw client is the floor",
    }
    for cid in cases:
        w(f"| `{cid}` | {notes.get(cid, cases[cid]['title'])} |")
    w("")
    w("## Machine")
    w("")
    w(f"- CPU: {mach['cpu']}, {mach['cores']} cores; memory {mach.get('memory_gb')} GB")
    w(f"- Python: {mach['python']}; OS: {mach['os']}")
    if "loadavg_start" in meta:
        w(
            f"- Load average (1, 5, 15 min): {meta['loadavg_start']} at the start, "
            f"{meta.get('loadavg_end')} at the end. "
            "Anything above ~0.5 means other work shared the cores during the run: compare ratios, not absolutes."
        )
    w("")
    w("## Versions")
    w("")
    w("| package | version |")
    w("|---|---|")
    for name, ver in meta["versions"].items():
        w(f"| {name} | {ver} |")
    w("")
    w("## How to rerun")
    w("")
    w("```sh")
    w("python bench/run.py            # full run, ~15 minutes; rewrites this page and its .svg charts")
    w("python bench/run.py --quick    # smoke run (CI), seconds; JSON only")
    w("python bench/run.py --only stdio_seq,http_c32 --contenders floor,mcp,mcpkit")
    w("python bench/run.py --only stdio_c32,http_c32 --reps 9  # more repetitions: narrower medians on a noisy machine")
    w("python bench/run.py --list     # case ids and contender keys")
    w("python bench/run.py --only inflight_32,inflight_256,inflight_1k --docs  # one growth curve's own section")
    w("python bench/inflight.py --inflight 256,1024  # mcpkit alone, in flight on one session, e.g. before/after")
    w("python bench/stdio_roundtrip.py  # issue 2: stdio round trips, low-level servers vs the raw loop")
    w("# A/B of servers by server CPU per call (alternating loads, real sockets), e.g. a change vs its base:")
    w(".bench-venv/bin/python bench/ab.py floor=floor_asgi.py base=/tmp/base/src:mcpkit_server.py new=mcpkit_server.py")
    w(".bench-venv/bin/python bench/ab.py --transport stdio floor=floor_stdio.py new=mcpkit_server.py  # sequential")
    w("# CPU per HTTP call in one process (uvicorn, the suite's parser, no sockets; ~1 µs), best of 3 rounds:")
    w(".bench-venv/bin/python bench/uvicorn_inproc.py floor_asgi /tmp/base/src:mcpkit_def mcpkit_def")
    w("# the same in instructions per call under callgrind (load-independent, ~1 minute per contender); the lane")
    w("# against its raw floor: mcpkit_inline (thread=False, repeatable under valgrind) and floor_lane:")
    w(".bench-venv/bin/python bench/uvicorn_inproc.py --instructions floor_asgi floor_lane mcpkit_inline")
    w("# why two HTTP servers differ: loop turns, tasks, GC, context switches, server/helper/client CPU per call:")
    w(".bench-venv/bin/python bench/loopstats.py --counts floor=floor_asgi.py mcpkit=mcpkit_def.py")
    w("# whether runs that differ are noise: each run's ratio to the floor against what repetition noise gives:")
    w("python bench/spread.py --contender mcpkit-def --cases http_seq,http_c32 --target 0.9")
    w("```")
    w("")
    w(
        "The first run creates `.bench-venv` (gitignored) and installs the peers (`mcp==2.3.0`, `fastmcp==4.1.2`) "
        "and mcpkit itself (`pip install -e .[http]`) into it. A contender is a script in `bench/servers/` "
        "(or `bench/clients/`) plus one row in `bench/harness/contenders.py`; one that fails to start is "
        "reported n/a with its error and never stops the run. Every case is bounded in calls and seconds, every "
        "child process runs in its own process group and is killed when the run ends."
    )
    w("")
    if result.get("skipped_reps"):
        w(f"Note: the run hit its time bound and skipped {result['skipped_reps']} repetition(s).")
        w("")
    return "\n".join(out)


def svg(result: dict[str, Any]) -> str:
    """Horizontal bars of cost relative to the floor, log scale, one block per case."""
    cases: dict[str, Any] = result["cases"]
    label_w, plot_w, bar_h, gap, top = 300, 520, 12, 10, 58
    blocks: list[tuple[str, list[tuple[str, float | None]]]] = []
    max_ratio = 2.0
    for case in cases.values():
        if case["group"] in CURVE_GROUPS:
            continue  # drawn as growth curves (benchmarks-growth-*.svg)
        bars: list[tuple[str, float | None]] = []
        for k, row in case["contenders"].items():
            if k == case["floor"]:
                continue
            r = row.get("cost_vs_floor") if row["status"] == "ok" else None
            if r is not None:
                max_ratio = max(max_ratio, r)
            bars.append((k, r))
        blocks.append((f"{case['title']} ({case['unit']})", bars))
    min_ratio = min([1.0] + [r for _, bars in blocks for _, r in bars if r is not None and r > 0])
    steps = [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]
    top_tick = next((d for d in steps if d >= max_ratio), steps[-1])
    low_tick = next((d for d in reversed(steps) if d <= min_ratio), steps[0])
    ticks = [d for d in steps if low_tick <= d <= top_tick]
    span = math.log(top_tick) - math.log(low_tick)

    def x(r: float) -> float:
        r = min(max(r, low_tick), float(top_tick))
        return label_w + plot_w * (math.log(r) - math.log(low_tick)) / span

    x1 = x(1.0)

    height = top + sum(len(b) * (bar_h + 2) + gap + 14 for _, b in blocks) + 20
    width = label_w + plot_w + 70
    p: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        '<text x="10" y="18" font-size="14" font-weight="bold">Cost relative to the floor '
        f"({X}1 = floor, the dark line; lower is better; log scale)</text>",
    ]
    keys = [k for k in COLORS if any(k == bk for _, bars in blocks for bk, _ in bars)]
    lx = 10
    for k in keys:
        p.append(f'<rect x="{lx}" y="28" width="10" height="10" fill="{COLORS[k]}"/>')
        p.append(f'<text x="{lx + 14}" y="37">{escape(k)}</text>')
        lx += 24 + 7 * len(k)
    for t in ticks:
        tx = x(t)
        stroke = "#333" if t == 1 else "#ddd"
        p.append(f'<line x1="{tx:.1f}" y1="{top - 6}" x2="{tx:.1f}" y2="{height - 16}" stroke="{stroke}"/>')
        p.append(f'<text x="{tx:.1f}" y="{top - 9}" text-anchor="middle" fill="#555">{X}{t:g}</text>')
    y = top
    for title, bars in blocks:
        p.append(f'<text x="10" y="{y + 10}" font-weight="bold">{escape(title)}</text>')
        y += 14
        for k, r in bars:
            p.append(f'<text x="{label_w - 6}" y="{y + bar_h - 2}" text-anchor="end" fill="#333">{escape(k)}</text>')
            if r is None:
                p.append(f'<text x="{x1 + 4:.1f}" y="{y + bar_h - 2}" fill="#999">n/a</text>')
            else:
                xr = x(r)
                left, bw = min(x1, xr), max(1.0, abs(xr - x1))
                p.append(
                    f'<rect x="{left:.1f}" y="{y}" width="{bw:.1f}" height="{bar_h}" fill="{COLORS.get(k, "#777")}"/>'
                )
                p.append(f'<text x="{max(x1, xr) + 4:.1f}" y="{y + bar_h - 2}">{X}{r:.2f}</text>')
            y += bar_h + 2
        y += gap
    p.append("</svg>")
    return "\n".join(p) + "\n"


def is_partial(result: dict[str, Any]) -> bool:
    """A run of chosen cases or contenders (``--only`` / ``--contenders``), not the full set."""
    return any(a.split("=", 1)[0] in ("--only", "--contenders") for a in result["meta"].get("argv", []))


def partial_section(result: dict[str, Any]) -> tuple[str, str]:
    """(key, markdown) of a partial run's section: its own tables, same format as the full page's."""
    meta = result["meta"]
    cases: dict[str, Any] = {k: v for k, v in result["cases"].items() if v["group"] != "clients"}
    keys = [c.key for c in SERVER_CONTENDERS if any(c.key in v["contenders"] for v in cases.values())]
    key = hashlib.sha1(" ".join([*sorted(cases), "|", *keys]).encode()).hexdigest()[:10]
    out: list[str] = [f"<!-- partial-run {key} start -->"]
    w = out.append
    when = meta["started"][:16].replace("T", " ")
    budget = meta["budget"]
    reps = max(
        min(budget["reps"], budget.get(GROUP_REPS.get(v["group"], "reps"), budget["reps"])) for v in cases.values()
    )
    w(f"## Partial run: {', '.join(f'`{c}`' for c in cases)}")
    w("")
    w(
        f"Generated by `python bench/run.py {' '.join(meta.get('argv', []))}` on {when} UTC in "
        f"{meta['duration_s']:.0f} s: median of {reps} repetitions, every figure and ratio from this "
        f"one run; load average {meta.get('loadavg_start')} at the start, {meta.get('loadavg_end')} at the end. "
        "Only these cases and contenders were run (the machine is shared); the rest of the page is from the last "
        "full run, which replaces this section when it is rerun."
    )
    w("")
    _server_tables(w, cases, keys)
    w(f"<!-- partial-run {key} end -->")
    return key, "\n".join(out)


def write_partial(result: dict[str, Any]) -> list[Path]:
    """Put a partial run's section into docs/benchmarks.md (replacing the same case set's earlier one, else
    before "## Cases"); the full run's tables and the SVG stay as they are."""
    md = DOCS / "benchmarks.md"
    key, section = partial_section(result)
    page = md.read_text(encoding="utf-8") if md.exists() else "# Benchmarks\n\n## Cases\n"
    start, end = f"<!-- partial-run {key} start -->", f"<!-- partial-run {key} end -->"
    if start in page and end in page:
        page = page[: page.index(start)] + section + page[page.index(end) + len(end) :]
    elif "\n## Cases\n" in page:
        at = page.index("\n## Cases\n") + 1
        page = page[:at] + section + "\n\n" + page[at:]
    else:
        page = page.rstrip("\n") + "\n\n" + section + "\n"
    md.write_text(page, encoding="utf-8")
    return [md, *write_growth_svgs(result)]


def write_docs(result: dict[str, Any]) -> list[Path]:
    DOCS.mkdir(exist_ok=True)
    if is_partial(result):
        return write_partial(result)
    md = DOCS / "benchmarks.md"
    sv = DOCS / "benchmarks.svg"
    md.write_text(markdown(result) + "\n", encoding="utf-8")
    sv.write_text(svg(result), encoding="utf-8")
    return [md, sv, *write_growth_svgs(result)]
