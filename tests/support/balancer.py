"""A real load balancer in front of worker processes, from the configurations shipped in deploy/: nginx
(deploy/nginx/mcpkit.conf) or HAProxy (deploy/haproxy/haproxy.cfg), round robin, no stickiness.

    with Balancer("nginx", [port1, port2], tmp_path) as lb:
        lb.url                    # http://127.0.0.1:<port>/mcp

The shipped file is used as it is; only the upstream addresses and the listening port are replaced (and, for
nginx, the file is wrapped in the main context a non-root nginx needs: pid, logs and temporary files in tmp).
When the binary is missing the test FAILS in CI (scripts/test.sh installs both) and is skipped elsewhere.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support.procs import stop, wait_listening

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"


def _binary(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/local/sbin")
    if path is None:
        message = f"!!! {name} NOT FOUND: install it (apt-get install -y {name}, or run bash scripts/test.sh) !!!"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def nginx_config(upstreams: list[int], port: int, workdir: Path, extra: str = "") -> str:
    """deploy/nginx/mcpkit.conf with these upstreams and port, inside a main context rooted in ``workdir``."""
    shipped = (DEPLOY / "nginx" / "mcpkit.conf").read_text(encoding="utf-8")
    lines = shipped.splitlines()
    template = next(line for line in lines if re.match(r"\s*server 10\.0\.0\.\d+:8000", line))
    servers = [re.sub(r"10\.0\.0\.\d+:8000", f"127.0.0.1:{p}", template) for p in upstreams]
    body: list[str] = []
    for line in lines:
        if re.match(r"\s*server 10\.0\.0\.\d+:8000", line):
            if line == template:
                body.extend(servers)
            continue
        body.append(re.sub(r"^(\s*)listen 80;", rf"\1listen 127.0.0.1:{port};", line))
    assert any(f"listen 127.0.0.1:{port};" in line for line in body), "the shipped config no longer listens on 80"
    temp = "\n".join(
        f"    {kind}_temp_path {workdir / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        f"worker_processes 1;\npid {workdir / 'nginx.pid'};\nerror_log {workdir / 'error.log'} warn;\n"
        f"events {{ worker_connections 1024; }}\n"
        f"http {{\n    access_log off;\n{temp}\n{extra}\n" + "\n".join(body) + "\n}\n"
    )


def haproxy_config(upstreams: list[int], port: int) -> str:
    """deploy/haproxy/haproxy.cfg with these servers and port."""
    shipped = (DEPLOY / "haproxy" / "haproxy.cfg").read_text(encoding="utf-8")
    lines = shipped.splitlines()
    template = next(line for line in lines if re.match(r"\s*server w\d 10\.0\.0\.\d+:8000", line))
    body: list[str] = []
    for line in lines:
        if re.match(r"\s*server w\d 10\.0\.0\.\d+:8000", line):
            if line == template:
                for i, p in enumerate(upstreams, 1):
                    body.append(re.sub(r"w\d 10\.0\.0\.\d+:8000", f"w{i} 127.0.0.1:{p}", template))
            continue
        body.append(re.sub(r"^(\s*)bind :80$", rf"\1bind 127.0.0.1:{port}", line))
    assert any(f"bind 127.0.0.1:{port}" in line for line in body), "the shipped config no longer binds :80"
    return "\n".join(body) + "\n"


class Balancer:
    """nginx or HAProxy on a free port of 127.0.0.1, in front of workers on ``upstreams`` (ports of 127.0.0.1)."""

    def __init__(self, kind: str, upstreams: list[int], workdir: Path, *, nginx_extra: str = "") -> None:
        self.kind = kind
        self.port = _free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        if kind == "nginx":
            conf = workdir / "nginx.conf"
            conf.write_text(nginx_config(upstreams, self.port, workdir, nginx_extra), encoding="utf-8")
            cmd = [_binary("nginx"), "-p", str(workdir), "-c", str(conf), "-g", "daemon off;"]
        elif kind == "haproxy":
            conf = workdir / "haproxy.cfg"
            conf.write_text(haproxy_config(upstreams, self.port), encoding="utf-8")
            cmd = [_binary("haproxy"), "-W", "-db", "-f", str(conf)]
        else:
            raise ValueError(kind)
        self.proc: subprocess.Popen[bytes] = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        wait_listening(self.port, self.proc, timeout=20)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        stop(self.proc, timeout=10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def __enter__(self) -> Balancer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
