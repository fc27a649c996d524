"""The loopback redirect listener (:class:`~mcpkit.auth.LoopbackCallback`) against stray requests to its port."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from mcpkit.auth import LoopbackCallback, OAuthClient, OAuthFlowError
from support.scripted_oauth import client_for, scripted


async def test_a_callback_with_another_state_is_discarded_and_the_real_one_still_completes_the_flow() -> None:
    """Anything on the machine, or any web page the browser shows, can reach the listener on 127.0.0.1 before the
    authorization server's redirect does. A callback whose ``state`` is not the pending request's is discarded
    (400) and the listener keeps waiting, as the spec asks ("discard any results that do not include or have a
    mismatch with the original state"): before, the first request to the path ended the flow with a state
    mismatch, so a stray request aborted every sign-in."""
    answers: list[int] = []

    async def browser(url: str) -> None:
        async with httpx.AsyncClient(follow_redirects=True) as http:
            for forged in ("?code=forged&state=wrong", "?code=forged", "?error=access_denied"):
                answers.append((await http.get(callback.redirect_uri + forged)).status_code)
            answers.append((await http.get(url)).status_code)  # the user signs in

    async with scripted() as s:
        callback = LoopbackCallback(open_url=browser, timeout=10)
        client = OAuthClient(
            s.mcp_url,
            client_metadata={"redirect_uris": [callback.redirect_uri]},
            redirect_handler=callback.redirect_handler,
            callback_handler=callback.callback_handler,
        )
        async with httpx.AsyncClient(auth=client) as http:
            assert (await http.get(s.mcp_url)).status_code == 200
        assert answers == [400, 400, 400, 200]
        assert [f["code"] for f in s.requests_to("/token")] != ["forged"]
        await client.aclose()


async def _held(port: int, count: int, head: bytes) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """``count`` connections to the listener, each having sent ``head`` (an unfinished request) and holding on."""
    held = []
    for _ in range(count):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head)
        await writer.drain()
        held.append((reader, writer))
    return held


async def _closed_by_listener(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), 0.05) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


def _client_of(s: Any, callback: LoopbackCallback) -> OAuthClient:
    return OAuthClient(
        s.mcp_url,
        client_metadata={"redirect_uris": [callback.redirect_uri]},
        redirect_handler=callback.redirect_handler,
        callback_handler=callback.callback_handler,
    )


async def test_connections_that_never_finish_their_request_cannot_keep_the_real_redirect_out() -> None:
    """A local process opens 64 connections to the listener and never finishes a request on any: the listener holds
    at most ``max_connections`` (16) of them, closing the oldest for each new one (before, it held every one, each
    for 10 s), and the browser's redirect arriving after them is still served and completes the sign-in."""
    open_after_flood: list[int] = []
    held: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def browser(url: str) -> None:
        held.extend(await _held(callback.port, 64, b"GET /callback?code=x&state="))
        await asyncio.sleep(0.3)  # the listener accepts them all
        open_after_flood.append(sum([not await _closed_by_listener(r) for r, _ in held]))
        async with httpx.AsyncClient(follow_redirects=True, timeout=5) as http:
            assert (await http.get(url)).status_code == 200

    async with scripted() as s:
        callback = LoopbackCallback(open_url=browser, timeout=10)
        assert callback.max_connections == 16
        client = _client_of(s, callback)
        async with httpx.AsyncClient(auth=client) as http:
            assert (await asyncio.wait_for(http.get(s.mcp_url), 10)).status_code == 200
        assert open_after_flood and open_after_flood[0] <= callback.max_connections
        for _, writer in held:
            writer.close()
        await client.aclose()


async def test_a_request_slower_than_the_time_bound_or_larger_than_the_size_bound_is_cut_off() -> None:
    """A connection that does not finish its request within ``request_timeout`` is closed (it was held 10 s
    whatever the setting), and a request head over ``max_request_size`` is answered 431 at once (one under 64 KiB
    was waited for until the timeout); the real redirect is still served after both."""
    seen: dict[str, Any] = {}

    async def browser(url: str) -> None:
        [(slow, slow_writer)] = await _held(callback.port, 1, b"GET /callback?code=x")
        [(large, large_writer)] = await _held(callback.port, 1, b"GET /callback?pad=" + b"a" * (40 * 1024))
        seen["large"] = await asyncio.wait_for(large.read(), 2)
        await asyncio.sleep(callback.request_timeout + 0.3)
        seen["slow_closed"] = await _closed_by_listener(slow)
        for writer in (slow_writer, large_writer):
            writer.close()
        async with httpx.AsyncClient(follow_redirects=True, timeout=5) as http:
            assert (await http.get(url)).status_code == 200

    async with scripted() as s:
        callback = LoopbackCallback(open_url=browser, timeout=10)
        assert (callback.request_timeout, callback.max_request_size) == (10.0, 32 * 1024)
        callback.request_timeout = 0.5
        client = _client_of(s, callback)
        async with httpx.AsyncClient(auth=client) as http:
            assert (await asyncio.wait_for(http.get(s.mcp_url), 10)).status_code == 200
        assert seen["large"].startswith(b"HTTP/1.1 431 ")
        assert seen["slow_closed"]
        await client.aclose()


async def test_a_flood_of_requests_that_are_not_the_answer_ends_the_listener_at_its_bound() -> None:
    """A local process floods the listener with requests that are not the answer (a wrong ``state``, another path):
    each was answered and the listener waited on for as long as the sign-in's ``timeout`` (300 s by default),
    however many came. Past ``max_requests`` of them (1,000) it now stops: the sign-in fails saying so, and the
    port is closed."""
    sent: list[int] = []

    async def flood(port: int) -> None:
        async with httpx.AsyncClient(timeout=5) as http:
            for i in range(300):
                try:
                    r = await http.get(f"http://127.0.0.1:{port}/callback?code=forged&state=wrong{i}")
                except httpx.TransportError:
                    return  # the listener stopped
                sent.append(r.status_code)

    async def browser(url: str) -> None:
        await asyncio.gather(*(flood(callback.port) for _ in range(4)))

    async with scripted() as s:
        callback = LoopbackCallback(open_url=browser, timeout=60)
        assert callback.max_requests == 1000
        callback.max_requests = 100
        client = _client_of(s, callback)
        async with httpx.AsyncClient(auth=client) as http:
            with pytest.raises(OAuthFlowError, match="max_requests"):
                await asyncio.wait_for(http.get(s.mcp_url), 30)
        assert set(sent) == {400} and len(sent) <= 100
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", callback.port)
        await client.aclose()


async def test_a_listener_whose_callback_is_never_awaited_stops_at_its_time_limit() -> None:
    """The listener starts when the browser is sent to the authorization page; when the caller never waits for the
    callback (its flow failed in between), the listener stayed open for good. It now stops ``timeout`` seconds
    after it started, and at once when opening the browser fails."""
    callback = LoopbackCallback(open_url=lambda url: None, timeout=0.5)
    await callback.redirect_handler("http://127.0.0.1:9/authorize?state=s")
    _, writer = await asyncio.open_connection("127.0.0.1", callback.port)  # listening
    writer.close()
    await asyncio.sleep(1.0)
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", callback.port)

    def broken(url: str) -> None:
        raise RuntimeError("no browser")

    callback = LoopbackCallback(open_url=broken, timeout=60)
    with pytest.raises(RuntimeError):
        await callback.redirect_handler("http://127.0.0.1:9/authorize?state=s")
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", callback.port)


@pytest.mark.parametrize(
    "answer",
    [
        (200, b"<html>\x1b]0;pwned\x07\x1b[2J sign in" + b"x" * 100_000 + b"</html>"),
        (500, b'{"error": "' + b"\x1b[31m" * 500 + b'"}'),
    ],
    ids=["page", "error"],
)
async def test_headless_browser_shows_an_authorization_endpoint_that_does_not_redirect_bounded_and_escaped(
    answer: tuple[int, object],
) -> None:
    """An authorization endpoint that answers without redirecting: its answer was shown as its first 200 characters
    as they came, terminal escape sequences included. Now bounded, with its control characters escaped."""
    async with scripted() as s:
        s.authorize_answer = answer
        client, _ = client_for(s)
        async with httpx.AsyncClient(auth=client) as http:
            with pytest.raises(OAuthFlowError, match=f"HTTP {answer[0]} without a redirect") as caught:
                await http.get(s.mcp_url)
        message = str(caught.value)
        assert len(message) < 400, len(message)
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in message), message
        assert "\\x1b" in message
        await client.aclose()
