"""The shipped client when the connection fails: a wrong path, a server gone, a call cut off.

Real servers over loopback sockets. A failure after connecting (the server killed, a read
timeout) ends the ``open_client`` block with one ``ServerConnectionError`` instead of the SDK's
exception group, and a call cut off by the client's timeout may still commit: the booking its
key names shows up once the server has finished it (README, tool flow step 6).
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

import anyio
import httpx2
import pytest

from expert_booking.client import ServerConnectionError, open_client
from expert_booking.testing.payment_stub import PaymentStub
from expert_booking.testing.server_process import ServerProcess
from harness.mcp_calls import hold_arguments
from tests.e2e.envelopes import catalog_call

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_a_url_whose_path_serves_no_mcp_is_named_as_such(stub_server: ServerProcess):
    url = stub_server.url.replace("/mcp", "/mcpx")
    with pytest.raises(ServerConnectionError) as excinfo, anyio.fail_after(20):
        async with open_client(url):
            pytest.fail("connected to a path that serves no MCP")
    assert str(excinfo.value) == (
        f"cannot connect to the MCP server at {url}: HTTP 404 Not Found: nothing serves MCP at "
        "that path (this server's is /mcp)"
    )
    assert excinfo.value.connected is False


async def _list_tools_across_a_kill(server: ServerProcess) -> None:
    async with open_client(server.url) as client:
        await client.list_tools()
        server.kill()
        await client.list_tools()
        pytest.fail("a killed server answered")


async def test_a_server_gone_mid_session_ends_the_block_with_one_server_connection_error():
    server = ServerProcess()
    with server, anyio.fail_after(20), pytest.raises(ServerConnectionError) as excinfo:
        await _list_tools_across_a_kill(server)
    error = excinfo.value
    assert str(error).startswith(f"lost the connection to the MCP server at {error.url}: ")
    assert error.url.startswith("http://127.0.0.1:")
    assert error.connected is True
    assert isinstance(error.cause, httpx2.TransportError)


async def _call(url: str, name: str, arguments: dict[str, Any], **options: Any) -> dict[str, Any]:
    async with open_client(url, **options) as client:
        return await catalog_call(client, name, arguments)


async def test_a_hold_cut_off_by_the_read_timeout_may_commit_and_its_key_replays_it(
    stub: PaymentStub,
):
    """The cut-off call is still running: its key finds nothing yet; a retry returns its hold."""
    env = {
        **os.environ,
        "PAYMENT_QUERY_BASE_URL": stub.base_url,
        "BOOKING_DB_BUSY_TIMEOUT_MS": "20000",
    }
    with ServerProcess(env=env) as server, anyio.fail_after(40):
        search = {"query": "AI", "limit": 1}
        found = await _call(server.url, "booking.search_available_slots", search)
        hold = hold_arguments(found["data"]["slots"][0]["slotId"])
        by_key = {"idempotencyKey": hold["idempotencyKey"], "limit": 5}
        writer = sqlite3.connect(server.db_path, isolation_level=None, timeout=5)
        try:
            writer.execute("BEGIN IMMEDIATE")  # another process's writer: the hold must wait
            impatient = httpx2.Timeout(30.0, read=0.5)
            with pytest.raises(ServerConnectionError) as excinfo:
                await _call(server.url, "booking.hold_slot", hold, http_timeout=impatient)
            assert isinstance(excinfo.value.cause, httpx2.ReadTimeout)
            assert "the request may still complete on the server" in str(excinfo.value)
            listed = await _call(server.url, "booking.list_bookings", by_key)
            assert listed["data"]["total"] == 0  # not committed yet: still waiting for the lock
        finally:
            writer.close()  # ends its transaction: the waiting hold goes on
        retried = await _call(server.url, "booking.hold_slot", hold)
        listed = await _call(server.url, "booking.list_bookings", by_key)
    assert retried["ok"] is True, retried
    assert [b["bookingId"] for b in listed["data"]["bookings"]] == [retried["data"]["bookingId"]]


async def test_the_blocks_own_http_failures_elsewhere_are_not_relabelled(
    stub_server: ServerProcess,
):
    """Only failures of requests to the MCP endpoint become ServerConnectionError."""
    with pytest.raises(ExceptionGroup) as excinfo, anyio.fail_after(20):
        await _fail_elsewhere_inside(stub_server.url)
    assert excinfo.group_contains(httpx2.ConnectError)


async def _fail_elsewhere_inside(url: str) -> None:
    elsewhere = httpx2.Request("GET", "http://127.0.0.1:1/another-service")
    async with open_client(url) as client:
        await client.list_tools()
        raise ExceptionGroup(
            "the block's own calls", [httpx2.ConnectError("no", request=elsewhere)]
        )
