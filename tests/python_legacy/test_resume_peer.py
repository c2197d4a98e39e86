"""SSE polling with the official Python MCP SDK 1.x (mcp==1.26.0): genmcp serve
--max-stream-duration 2 closes the session's GET stream every 2 s with a
`retry` hint; the SDK reconnects with `Last-Event-ID` and every event
published meanwhile arrives once and in order. Every wait is bounded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from pydantic import AnyUrl

from conftest import GenmcpServer, _binary, _start, _stop
from test_legacy_peer import UPDATED, Frames, add_note, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

NOTES = 24


@pytest.fixture
def polling(tmp_path: Path) -> Iterator[GenmcpServer]:
    """The notes demo closing each 2025 stream after 2 s."""
    server = _start(_binary(), tmp_path / "genmcp.log", ("--max-stream-duration", "2"))
    try:
        yield server
    finally:
        _stop(server.proc)
        print(f"--- genmcp log (exit {server.proc.returncode}) ---\n{server.log()}")


async def test_a_get_stream_closed_every_2_s_loses_no_event(polling: GenmcpServer) -> None:
    frames = Frames()
    # Every GET the SDK sends, with its Last-Event-ID (None when none): the
    # stream must be resumed, not merely reopened.
    gets: list[str | None] = []

    async def record(request: httpx.Request) -> None:
        if request.method == "GET":
            gets.append(request.headers.get("last-event-id"))

    http = httpx.AsyncClient(
        follow_redirects=True,
        timeout=httpx.Timeout(30.0, read=300.0),
        event_hooks={"request": [record]},
    )
    async with (
        http,
        streamable_http_client(polling.url, http_client=http) as (read, write, _sid),
    ):
        async with ClientSession(read, write, message_handler=frames) as s:
            await s.initialize()
            uris = [await add_note(s, f"note {i}") for i in range(NOTES)]
            for uri in uris:
                await s.subscribe_resource(AnyUrl(uri))
            # The SDK opens its GET stream in the background: wait until an
            # edit of the first note arrives on it.
            with anyio.fail_after(10):
                while frames.count(UPDATED, uris[0]) == 0:
                    await add_note(s, "probe", uri=uris[0])
                    await anyio.sleep(0.1)
            await anyio.sleep(0.5)  # a late probe's update lands before the count
            start = len(frames.frames)
            resumed_before = sum(1 for g in gets if g)
            # One edit per note, 0.25 s apart: about 6 s, across at least two
            # closes of the GET stream by the server.
            for uri in uris:
                await add_note(s, "edit", uri=uri)
                await anyio.sleep(0.25)
            await wait_until(lambda: len(frames.frames) - start >= NOTES, timeout=20)
            await anyio.sleep(0.5)
            got = [u for m, u in frames.frames[start:] if m == UPDATED]
            assert got == uris, frames.frames[start:]
            resumed = sum(1 for g in gets if g) - resumed_before
            assert resumed >= 2, f"the GET stream was resumed {resumed} times during the edits"
