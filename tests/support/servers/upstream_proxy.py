"""An OAuth proxy in a process of its own, for the tests that kill it: ``AuthorizationServer(upstream=
UpstreamLogin(...))`` on a ``RedisAuthStorage`` or a ``PostgresAuthStorage`` (whichever ``argv[2]``'s URL names),
its provider the test IdP at ``argv[1]`` (revocation endpoint included, a 2 s ``timeout`` unless ``argv[4]`` names
another), its keys or tables under the prefix ``argv[3]``. Prints ``{"port": N}`` once it listens.

    python tests/support/servers/upstream_proxy.py http://127.0.0.1:8001 redis://127.0.0.1:6379/0 mcpkit-test:1:
    python tests/support/servers/upstream_proxy.py http://127.0.0.1:8001 postgresql://u@127.0.0.1:5432/db t1_
"""

from __future__ import annotations

import asyncio
import sys

from listening import bind, serve_printing_port

from mcpkit.auth import AuthorizationServer, PostgresAuthStorage, RedisAuthStorage
from mcpkit.auth.upstream import UpstreamProvider
from mcpkit.auth.upstream_login import UpstreamLogin

SECRET = b"the-same-32-bytes-on-every-replica!"


async def main() -> None:
    idp_url, url, prefix = sys.argv[1:4]
    sock, base = bind()
    provider = UpstreamProvider(
        authorize_url=idp_url + "/authorize",
        token_url=idp_url + "/token",
        userinfo_url=idp_url + "/userinfo",
        revocation_url=idp_url + "/revoke",
        client_id="mcp-proxy",
        client_secret="proxy-secret-at-the-idp",
        scopes=("profile",),
        timeout=float(sys.argv[4]) if len(sys.argv) > 4 else 2.0,
    )
    shared = PostgresAuthStorage if url.startswith("postgres") else RedisAuthStorage
    storage = shared(url, prefix=prefix)
    proxy = AuthorizationServer(
        base, resources=[base + "/mcp"], upstream=UpstreamLogin(provider, secret=SECRET), storage=storage
    )
    await serve_printing_port(proxy, sock)


if __name__ == "__main__":
    asyncio.run(main())
