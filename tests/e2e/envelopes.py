"""Calls through the shipped client that return the envelope, checked for its ``isError`` flag."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
from mcp import Client

from tests.listed_errors import assert_listed


async def tool_envelope(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call the MCP tool ``tool``; its envelope, whose ``ok`` must agree with ``isError``."""
    with anyio.fail_after(15):
        result = await client.call_tool(tool, arguments)
    envelope = result.structured_content
    assert isinstance(envelope, dict)
    assert result.is_error is (envelope["ok"] is False)
    if not envelope["ok"]:
        name = arguments.get("name") if tool == "tool_catalog.call" else tool
        assert_listed(str(name), envelope["error"]["code"])
    return envelope


async def catalog_call(
    client: Client, name: str, arguments: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    """Call the logical tool ``name`` through ``tool_catalog.call`` (``extra``: more fields)."""
    call = {"name": name, "arguments": arguments, "requestSpanId": str(uuid.uuid4())}
    return await tool_envelope(client, "tool_catalog.call", call | extra)
