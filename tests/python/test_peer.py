"""genmcp driven by an independent peer: the official Python MCP SDK (mcp==2.3.0).

Every test gets its own genmcp process (see conftest.py), talks to it over
Streamable HTTP on 127.0.0.1 only, bounds every wait with anyio.fail_after and
is capped by pytest-timeout.

The SDK's `Subscription` iterator deduplicates pending events (they are level
triggers: ten `ToolsListChanged` not yet consumed are one "refetch tools"), so
counts of wire frames are taken from the client's `message_handler`, which the
SDK calls once for every notification frame it receives, listen frames
included (`ClientSession._intercept_notification` returns False for events,
so they are still "teed" to the handler).
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.subscriptions import (
    ResourceUpdated,
    Subscription,
    SubscriptionLost,
    ToolsListChanged,
)
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from conftest import GenmcpServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

MODERN = "2026-07-28"
DEMO_TOOLS = {"add_note", "delete_note", "toggle_extra_tool", "burst"}
EVENT_WAIT_S = 10.0
QUIET_S = 0.5
"""How long to keep watching for frames that must NOT arrive."""


class FrameLog:
    """`message_handler` that records every server notification the SDK surfaces."""

    def __init__(self) -> None:
        self.frames: list[tuple[str, Any, str | None]] = []  # (method, subscriptionId, uri)
        self.errors: list[Exception] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.errors.append(message)
            return
        params = getattr(message, "params", None)
        meta = getattr(params, "meta", None) or {}
        self.frames.append((message.method, meta.get(SUBSCRIPTION_ID_META_KEY), getattr(params, "uri", None)))

    def on(self, sub: Subscription) -> list[tuple[str, str | None]]:
        """The (method, uri) frames stamped with this subscription's id, in arrival order."""
        return [(m, uri) for (m, sid, uri) in self.frames if sid == sub.subscription_id]


def client(url: str, **kwargs: Any) -> Client:
    return Client(url, read_timeout_seconds=EVENT_WAIT_S, **kwargs)


async def next_event(sub: Subscription, timeout: float = EVENT_WAIT_S) -> Any:
    with anyio.fail_after(timeout):
        return await sub.__anext__()


async def wait_until(cond: Callable[[], bool], timeout: float = EVENT_WAIT_S) -> None:
    with anyio.fail_after(timeout):
        while not cond():
            await anyio.sleep(0.02)


def honored(sub: Subscription) -> dict[str, Any]:
    return sub.honored.model_dump(by_alias=True, exclude_none=True)


async def add_note(c: Client, text: str, uri: str | None = None) -> str:
    args = {"text": text} if uri is None else {"text": text, "uri": uri}
    result = await c.call_tool("add_note", args)
    assert not result.is_error, result
    assert len(result.content) == 1 and isinstance(result.content[0], types.TextContent), result
    return result.content[0].text


async def wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """Poll the process for up to `timeout` seconds; its exit code, or None if still running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (rc := proc.poll()) is not None:
            return rc
        await anyio.sleep(0.05)
    return proc.poll()


# ---------------------------------------------------------------- handshake


async def test_connects_at_2026_07_28_lists_tools_and_calls_add_note(genmcp: GenmcpServer) -> None:
    async with client(genmcp.url) as c:
        # mode="auto" silently falls back to `initialize` if server/discover fails:
        # only a successful discover leaves the connection at 2026-07-28.
        assert c.protocol_version == MODERN
        assert c.session.discover_result is not None
        assert c.session.initialize_result is None
        assert MODERN in c.session.discover_result.supported_versions
        assert c.server_info is not None and c.server_info.name == "genmcp-notes"

        caps = c.server_capabilities
        assert caps.tools is not None and caps.tools.list_changed is True
        assert caps.resources is not None
        assert caps.resources.list_changed is True and caps.resources.subscribe is True

        listed = await c.list_tools()
        names = {t.name for t in listed.tools}
        assert DEMO_TOOLS <= names, names

        uri = await add_note(c, "hello from the python peer")
        assert re.fullmatch(r"note://\d+", uri), uri
        assert await add_note(c, "edited", uri=uri) == uri


# ---------------------------------------------------------------- listen


async def test_listen_tools_only_is_honored_and_delivers_tools_list_changed(genmcp: GenmcpServer) -> None:
    frames = FrameLog()
    async with client(genmcp.url, message_handler=frames) as listener, client(genmcp.url) as actor:
        assert listener.protocol_version == MODERN and actor.protocol_version == MODERN
        assert "extra_tool" not in {t.name for t in (await listener.list_tools()).tools}

        async with listener.listen(tools_list_changed=True) as sub:
            # Entering the context waited for notifications/subscriptions/acknowledged.
            assert isinstance(sub.subscription_id, str) and sub.subscription_id
            assert honored(sub) == {"toolsListChanged": True}

            # A resources change first: the tools-only stream must not carry it.
            await add_note(actor, "not for this stream")
            toggled = await actor.call_tool("toggle_extra_tool", {})
            assert not toggled.is_error, toggled

            assert await next_event(sub) == ToolsListChanged()
            await anyio.sleep(QUIET_S)
            assert frames.on(sub) == [("notifications/tools/list_changed", None)]

            # The SDK evicted its tools/list cache on the event: a refetch sees the change.
            assert "extra_tool" in {t.name for t in (await listener.list_tools()).tools}
        assert not frames.errors, frames.errors


async def test_resource_subscription_gets_updates_for_that_note_only(genmcp: GenmcpServer) -> None:
    frames = FrameLog()
    async with client(genmcp.url, message_handler=frames) as listener, client(genmcp.url) as actor:
        watched = await add_note(actor, "watched")
        other = await add_note(actor, "other")
        assert watched != other

        async with listener.listen(resource_subscriptions=[watched]) as sub:
            assert honored(sub) == {"resourceSubscriptions": [watched]}

            await add_note(actor, "other, edited", uri=other)  # must not reach this stream
            await add_note(actor, "watched, edited", uri=watched)

            # The SDK admits any ResourceUpdated once URIs were honored (the spec allows
            # sub-resources), so an update for `other` would surface here first.
            assert await next_event(sub) == ResourceUpdated(uri=watched)
            await anyio.sleep(QUIET_S)
            assert frames.on(sub) == [("notifications/resources/updated", watched)]
        assert not frames.errors, frames.errors


async def test_burst_of_200_tools_events_arrives_as_200_frames_on_one_stream(genmcp: GenmcpServer) -> None:
    frames = FrameLog()
    count = 200
    async with client(genmcp.url, message_handler=frames) as listener, client(genmcp.url) as actor:
        async with listener.listen(tools_list_changed=True) as sub:
            result = await actor.call_tool("burst", {"count": count})
            assert not result.is_error, result
            assert result.structured_content == {"streams": 1, "count": count}

            tools_frames = lambda: [f for f in frames.on(sub) if f[0] == "notifications/tools/list_changed"]  # noqa: E731
            await wait_until(lambda: len(tools_frames()) >= count, timeout=20)
            await anyio.sleep(QUIET_S)
            assert len(tools_frames()) == count
            assert frames.on(sub) == tools_frames()

            # The iterator coalesces identical pending events, but the stream is alive and yields them.
            assert await next_event(sub) == ToolsListChanged()
        assert not frames.errors, frames.errors


# ---------------------------------------------------------------- ending a stream


async def test_sigterm_ends_listen_gracefully_and_server_exits_0(genmcp: GenmcpServer) -> None:
    async with client(genmcp.url) as listener:
        async with listener.listen(tools_list_changed=True) as sub:
            genmcp.proc.send_signal(signal.SIGTERM)
            received: list[Any] = []
            with anyio.fail_after(EVENT_WAIT_S):
                # Graceful completion (the listen's JSON-RPC result) ends the loop;
                # a dropped stream would raise SubscriptionLost here instead.
                async for event in sub:
                    received.append(event)
            assert received == []
    rc = await wait_exit(genmcp.proc, timeout=5)
    assert rc == 0, f"genmcp exit code after SIGTERM: {rc!r} (None = still running after 5 s)"


async def test_sigkill_while_listening_raises_subscription_lost(genmcp: GenmcpServer) -> None:
    async with client(genmcp.url) as listener:
        async with listener.listen(tools_list_changed=True) as sub:
            genmcp.proc.kill()
            with anyio.fail_after(EVENT_WAIT_S):
                with pytest.raises(SubscriptionLost):
                    async for _event in sub:
                        pass
    assert await wait_exit(genmcp.proc, timeout=5) == -signal.SIGKILL

