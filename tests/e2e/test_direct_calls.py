"""``tools/call`` answered in the SDK's middleware chain (``edge/direct_calls.py``), over HTTP.

The SDK checks a handler's result against the protocol's result schema on every request; for
this server's own tools that check is skipped on the request path, so it is made here: every
tool's results, successes and each kind of failure, as a spawned server sends them, are fixed
points of the SDK's ``serialize_server_result`` and carry the ``serverInfo`` stamp the SDK puts
on the results it shapes itself. What the middleware hands back to the SDK (malformed params,
an unknown tool) keeps the SDK's answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from mcp_types import INVALID_PARAMS, SERVER_INFO_META_KEY
from mcp_types.methods import serialize_server_result

from expert_booking.edge.wire_time import (
    CLIENT_SENT_META,
    SERVER_RECEIVED_META,
    SERVER_RESPONDED_META,
    SUPPORTED_PROTOCOL_VERSION,
)
from expert_booking.testing.server_process import ServerProcess
from harness.mcp_calls import McpCall, encode, hold_arguments, logical, tools_call, tools_list

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.fixture(scope="module")
async def http(stub_server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stub_server.url, timeout=30) as client:
        yield client


async def _post(http: httpx.AsyncClient, call: McpCall) -> dict[str, Any]:
    """The JSON-RPC reply to ``call`` sent as the SDK client sends it, stamped now."""
    headers, body = encode(call, request_id=7, stamped=True)
    reply: dict[str, Any] = (await http.post("", content=body, headers=headers)).json()
    return reply


async def _result(http: httpx.AsyncClient, call: McpCall) -> dict[str, Any]:
    reply = await _post(http, call)
    assert "result" in reply, reply
    result: dict[str, Any] = reply["result"]
    return result


async def test_every_tool_result_is_what_the_sdk_would_send(http: httpx.AsyncClient) -> None:
    listing = await _result(http, tools_list())  # shaped by the SDK itself
    server_info = listing["_meta"][SERVER_INFO_META_KEY]
    found = await _result(http, tools_call("tool_catalog.search", {"query": "hold", "limit": 3}))
    uri = found["structuredContent"]["data"]["items"][0]["uri"]
    held = await _result(http, logical("booking.hold_slot", hold_arguments("slot-ai-001")))
    booking_id = held["structuredContent"]["data"]["bookingId"]
    results = [
        found,
        held,
        await _result(http, tools_call("tool_catalog.read", {"uri": uri, "offset": 0, "limit": 5})),
        await _result(http, logical("booking.search_available_slots", {"query": "AI", "limit": 3})),
        await _result(http, logical("booking.get_booking", {"bookingId": booking_id})),
        await _result(http, logical("booking.list_bookings", {"limit": 5})),
        # Failures: not found, invalid arguments, an unknown logical tool, a bad catalog call.
        await _result(http, logical("booking.get_booking", {"bookingId": "bk-nobody-made-this"})),
        await _result(http, logical("booking.get_booking", {"bookingId": 5})),
        await _result(http, logical("booking.no_such_tool", {})),
        await _result(http, tools_call("tool_catalog.read", {"uri": uri})),
    ]
    assert [r["structuredContent"]["ok"] for r in results] == [True] * 6 + [False] * 4
    for result in results:
        assert serialize_server_result("tools/call", SUPPORTED_PROTOCOL_VERSION, result) == result
        assert result["resultType"] == "complete"
        meta = result["_meta"]
        assert meta[SERVER_INFO_META_KEY] == server_info
        assert {CLIENT_SENT_META, SERVER_RECEIVED_META, SERVER_RESPONDED_META} <= set(meta)


async def test_what_the_middleware_passes_on_keeps_the_sdks_answer(
    http: httpx.AsyncClient,
) -> None:
    bad = McpCall(
        "tools/call", {"name": "tool_catalog.search", "arguments": [1]}, "tool_catalog.search"
    )
    malformed = await _post(http, bad)
    assert malformed["error"]["code"] == INVALID_PARAMS, malformed
    unknown = await _post(http, tools_call("booking.get_booking", {"bookingId": "bk-1"}))
    assert unknown["error"]["code"] == INVALID_PARAMS, unknown
    assert unknown["error"]["data"] == {
        "name": "booking.get_booking",
        "callThrough": "tool_catalog.call",
    }
