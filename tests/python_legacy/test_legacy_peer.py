"""genmcp driven by a 2025-era client: the official Python MCP SDK 1.x (mcp==1.26.0).

That SDK speaks 2025-11-25: `initialize`, `Mcp-Session-Id`, a GET stream for
server notifications, `resources/subscribe`. It runs against plain
`genmcp serve` (the notes demo, no flags): the compatibility path of the HTTP
transport serves it from the same suite and the same stream actors as a
2026-07-28 client. Every wait is bounded with anyio.fail_after.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from pydantic import AnyUrl

from conftest import GenmcpServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

LEGACY = "2025-11-25"
DEMO_TOOLS = {"add_note", "delete_note", "toggle_extra_tool", "burst"}
EVENT_WAIT_S = 10.0
TOOLS_CHANGED = "notifications/tools/list_changed"
UPDATED = "notifications/resources/updated"


class Frames:
    """`message_handler` that records every server notification (method, uri)."""

    def __init__(self) -> None:
        self.frames: list[tuple[str, str | None]] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            root = message.root
            uri = getattr(root.params, "uri", None)
            self.frames.append((root.method, str(uri) if uri is not None else None))

    def count(self, method: str, uri: str | None = None) -> int:
        return sum(1 for m, u in self.frames if m == method and (uri is None or u == uri))


async def wait_until(cond: Callable[[], bool], timeout: float = EVENT_WAIT_S) -> None:
    with anyio.fail_after(timeout):
        while not cond():
            await anyio.sleep(0.02)


async def add_note(s: ClientSession, text: str, uri: str | None = None) -> str:
    args = {"text": text} if uri is None else {"text": text, "uri": uri}
    result = await s.call_tool("add_note", args)
    assert not result.isError, result
    assert isinstance(result.content[0], types.TextContent), result
    return result.content[0].text


async def test_a_2025_client_initializes_calls_tools_and_reads_a_resource(genmcp: GenmcpServer) -> None:
    async with streamable_http_client(genmcp.url) as (read, write, session_id):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            assert init.protocolVersion == LEGACY
            assert init.serverInfo.name == "genmcp-notes"
            assert init.capabilities.tools is not None and init.capabilities.tools.listChanged
            assert init.capabilities.resources is not None and init.capabilities.resources.subscribe
            sid = session_id()
            assert sid and all(0x21 <= ord(c) <= 0x7E for c in sid)

            assert await s.send_ping() is not None
            names = {t.name for t in (await s.list_tools()).tools}
            assert DEMO_TOOLS <= names, names

            uri = await add_note(s, "hello from a 2025 client")
            read_back = await s.read_resource(AnyUrl(uri))
            assert read_back.contents[0].text == "hello from a 2025 client"
            listed = await s.list_resources()
            assert uri in {str(r.uri) for r in listed.resources}

            with pytest.raises(Exception) as missing:
                await s.read_resource(AnyUrl("note://999999"))
            assert getattr(missing.value, "error", None) is not None
            assert missing.value.error.code == -32002


async def test_the_get_stream_delivers_list_changes_and_subscribed_updates(genmcp: GenmcpServer) -> None:
    frames = Frames()
    async with streamable_http_client(genmcp.url) as (read, write, _sid):
        async with ClientSession(read, write, message_handler=frames) as s:
            await s.initialize()
            uri = await add_note(s, "watched")

            # The SDK opens its GET stream in the background after `initialized`:
            # toggle until the first change arrives on it.
            with anyio.fail_after(EVENT_WAIT_S):
                while frames.count(TOOLS_CHANGED) == 0:
                    await s.call_tool("toggle_extra_tool", {})
                    await anyio.sleep(0.1)
            tools = {t.name for t in (await s.list_tools()).tools}
            assert "toggle_extra_tool" in tools

            # Not subscribed yet: an edit is not announced.
            await add_note(s, "edit 0", uri=uri)
            await s.subscribe_resource(AnyUrl(uri))
            await add_note(s, "edit 1", uri=uri)
            await wait_until(lambda: frames.count(UPDATED, uri) >= 1)
            assert frames.count(UPDATED, uri) == 1, frames.frames

            # Unsubscribed: edits are no longer announced. A tool-list change
            # published after the edit marks how far the stream has got.
            await s.unsubscribe_resource(AnyUrl(uri))
            changes = frames.count(TOOLS_CHANGED)
            await add_note(s, "edit 2", uri=uri)
            await s.call_tool("toggle_extra_tool", {})
            await wait_until(lambda: frames.count(TOOLS_CHANGED) > changes)
            assert frames.count(UPDATED, uri) == 1, frames.frames
            # No notification carried a subscription id or an acknowledgement.
            assert all(not m.startswith("notifications/subscriptions/") for m, _ in frames.frames)
