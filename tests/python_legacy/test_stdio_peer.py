"""genmcp over stdio driven by a 2025-era host: the Python MCP SDK's
`stdio_client` (mcp==1.26.0) launches `genmcp serve --stdio` as a child
process, as desktop hosts do, and speaks 2025-11-25 on its stdin/stdout:
initialize, tools, a pushed `tools/list_changed`, `resources/subscribe` /
`resources/updated` / `unsubscribe`, `logging/setLevel` with
`notifications/message`, ping, and EOF when the client closes.
Every wait is bounded with anyio.fail_after.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from pydantic import AnyUrl

from conftest import _binary

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

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


def params(*extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=str(_binary()), args=["serve", "--stdio", *extra])


async def test_a_stdio_host_lists_calls_and_hears_pushed_changes() -> None:
    frames = Frames()
    async with stdio_client(params()) as (read, write):
        async with ClientSession(read, write, message_handler=frames) as s:
            with anyio.fail_after(EVENT_WAIT_S):
                init = await s.initialize()
            assert init.protocolVersion == "2025-11-25"
            assert init.serverInfo.name == "genmcp-notes"
            assert init.capabilities.tools is not None and init.capabilities.tools.listChanged

            tools = {t.name for t in (await s.list_tools()).tools}
            assert "toggle_extra_tool" in tools

            result = await s.call_tool("toggle_extra_tool", {})
            assert not result.isError, result
            await wait_until(lambda: frames.count(TOOLS_CHANGED) >= 1)
            assert "extra_tool" in {t.name for t in (await s.list_tools()).tools}

            await s.send_ping()


async def test_subscribed_resources_are_updated_until_unsubscribed() -> None:
    frames = Frames()
    async with stdio_client(params()) as (read, write):
        async with ClientSession(read, write, message_handler=frames) as s:
            with anyio.fail_after(EVENT_WAIT_S):
                await s.initialize()
            added = await s.call_tool("add_note", {"text": "one"})
            uri = added.content[0].text
            assert uri.startswith("note://")

            await s.subscribe_resource(AnyUrl(uri))
            await s.call_tool("add_note", {"text": "two", "uri": uri})
            await wait_until(lambda: frames.count(UPDATED, uri) >= 1)
            read_back = await s.read_resource(AnyUrl(uri))
            assert read_back.contents[0].text == "two"

            await s.unsubscribe_resource(AnyUrl(uri))
            seen = frames.count(UPDATED, uri)
            await s.call_tool("add_note", {"text": "three", "uri": uri})
            await s.send_ping()
            await anyio.sleep(0.3)
            assert frames.count(UPDATED, uri) == seen

            with pytest.raises(Exception) as missing:
                await s.read_resource(AnyUrl("note://nope"))
            assert getattr(missing.value, "error", None) is not None
            assert missing.value.error.code == -32002


async def test_set_level_sends_log_messages_on_the_pipe() -> None:
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(p: types.LoggingMessageNotificationParams) -> None:
        logs.append(p)

    async with stdio_client(params("--conformance")) as (read, write):
        async with ClientSession(read, write, logging_callback=on_log) as s:
            with anyio.fail_after(EVENT_WAIT_S):
                await s.initialize()
            await s.set_logging_level("info")
            result = await s.call_tool("test_tool_with_logging", {})
            assert not result.isError, result
            await wait_until(lambda: len(logs) >= 3)
            assert {log.level for log in logs} == {"info"}

            await s.set_logging_level("error")
            seen = len(logs)
            await s.call_tool("test_tool_with_logging", {})
            assert len(logs) == seen


async def test_elicitation_is_answered_by_the_host_on_the_pipe() -> None:
    async def elicit(_ctx: Any, p: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(
            action="accept", content={"username": "ada", "email": "ada@example.com"}
        )

    async with stdio_client(params("--conformance")) as (read, write):
        async with ClientSession(read, write, elicitation_callback=elicit) as s:
            with anyio.fail_after(EVENT_WAIT_S):
                await s.initialize()
            result = await s.call_tool("test_elicitation", {"message": "who?"})
            assert not result.isError, result
            assert "ada" in result.content[0].text
