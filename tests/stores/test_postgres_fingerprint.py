"""The fingerprint of the app a PostgreSQL table prefix serves (``mcpkit.stores.postgres.fingerprint``), against a
real PostgreSQL: two apps on one prefix are warned about, the same app (another worker) is not, a fingerprint
past its time is not, and a running worker writes it again (the test through ``create_app``:
tests/transports/http/test_shared.py)."""

from __future__ import annotations

import asyncio
import logging
import secrets

import pytest

from mcpkit.stores.postgres import PostgresConnection
from mcpkit.stores.postgres.fingerprint import PostgresPrefixClaim, claim_prefix
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)

pytestmark = pytest.mark.postgres


async def test_a_second_app_on_a_table_prefix_is_warned_about_and_the_same_app_is_not(
    postgres_url: str,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    prefix = f"fp{secrets.token_hex(4)}_"
    conn = PostgresConnection(postgres_url, prefix=prefix)
    caplog.set_level(logging.WARNING, "mcpkit")
    try:
        assert await claim_prefix(conn, "alpha aaaaaaaaaaaa") is None  # (the first)
        assert await claim_prefix(conn, "alpha aaaaaaaaaaaa") is None  # (another worker of the same app)
        assert caplog.records == []
        assert await claim_prefix(conn, "beta bbbbbbbbbbbb") == "alpha aaaaaaaaaaaa"
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1, said
        assert f"PostgreSQL table prefix {prefix!r}" in said[0], said
        assert "app 'alpha'" in said[0] and "this worker is app 'beta'" in said[0], said
        assert "MCPKIT_POSTGRES_PREFIX" in said[0], said
        # a fingerprint past its time says nothing (the other app's workers are long gone)
        assert await claim_prefix(conn, "gamma cccccccccccc", ttl=0.2) == "beta bbbbbbbbbbbb"
        await asyncio.sleep(0.5)
        caplog.clear()
        assert await claim_prefix(conn, "delta dddddddddddd") is None
        assert caplog.records == []
        # another prefix is another deployment
        other = PostgresConnection(postgres_url, prefix=f"fp{secrets.token_hex(4)}_")
        try:
            assert await claim_prefix(other, "beta bbbbbbbbbbbb") is None
        finally:
            await other.aclose()
    finally:
        await conn.aclose()


async def test_a_running_worker_rewrites_its_fingerprint_so_a_later_app_is_warned_about(
    postgres_url: str,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    ttl = 2.0  # (written again every second)
    conn = PostgresConnection(postgres_url, prefix=f"fp{secrets.token_hex(4)}_")
    caplog.set_level(logging.WARNING, "mcpkit")
    claim = PostgresPrefixClaim(conn, "alpha aaaaaaaaaaaa", ttl=ttl)
    try:
        await claim.start()
        await asyncio.sleep(2.5 * ttl)  # (past two TTLs: only the refreshes keep it)
        assert caplog.records == []
        assert await claim_prefix(conn, "beta bbbbbbbbbbbb", ttl=ttl) == "alpha aaaaaaaaaaaa"
        for _ in range(100):  # the running worker says so too at its next refresh
            if len(caplog.records) >= 2:
                break
            await asyncio.sleep(0.1)
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 2 and "this worker is app 'alpha'" in said[1], said
    finally:
        await claim.aclose()
        await conn.aclose()


def test_a_claim_refuses_a_ttl_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="ttl"):
        PostgresPrefixClaim(PostgresConnection("postgresql://x@127.0.0.1:1/x"), "a b", ttl=0)
