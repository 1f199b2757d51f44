"""Wire timestamps and log lines through the official client against the spawned server.

CONTRACT section 2 (the chain clientSentAt <= serverReceivedAt <= serverResultCreatedAt <=
serverRespondedAt <= clientReceivedAt, result._meta equal to the headers) and section 5 (one JSON
log line per action on stderr).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest
from mcp import Client

from expert_booking.client import Exchange, ExchangeRecorder, chain_error, open_client
from expert_booking.testing.payment_stub import PaymentStub
from expert_booking.testing.server_process import ServerProcess

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

LOG_FIELDS = {
    "source",
    "timestamp",
    "caller",
    "action",
    "durationMs",
    "trace_id",
    "span_id",
    "operation_id",
}


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    # The payment service is not queried by these reads; point it at a closed port.
    env = {**os.environ, "PAYMENT_QUERY_BASE_URL": "http://127.0.0.1:9"}
    with ServerProcess(env=env) as running:
        yield running


@pytest.fixture
async def connected(
    server: ServerProcess,
) -> AsyncIterator[tuple[Client, ExchangeRecorder]]:
    recorder = ExchangeRecorder()
    with anyio.fail_after(20):
        async with open_client(server.url, on_exchange=recorder) as client:
            yield client, recorder


def exchange_for(recorder: ExchangeRecorder, method: str, meta: dict[str, Any]) -> Exchange:
    """The recorded exchange that produced a result with this ``_meta``."""
    matches = [
        e
        for e in recorder.exchanges
        if e.mcp_method == method and e.client_sent_at == meta["clientSentAt"]
    ]
    assert matches, (method, meta, recorder.exchanges)
    return matches[-1]


def assert_chain(exchange: Exchange, meta: dict[str, Any], created_at: str | None = None) -> None:
    assert exchange.status_code == 200
    assert meta["serverReceivedAt"] == exchange.server_received_at
    assert meta["serverRespondedAt"] == exchange.server_responded_at
    chain = exchange.chain(created_at)
    assert chain_error(chain) is None, chain


async def test_discover_and_tools_list_carry_the_timestamp_chain(
    connected: tuple[Client, ExchangeRecorder],
) -> None:
    client, recorder = connected
    discovered = client.session.discover_result
    assert discovered is not None
    discover_meta = discovered.meta
    assert discover_meta is not None
    assert_chain(exchange_for(recorder, "server/discover", discover_meta), discover_meta)
    listed = await client.list_tools()
    assert [tool.name for tool in listed.tools] == [
        "tool_catalog.search",
        "tool_catalog.read",
        "tool_catalog.call",
    ]
    assert listed.meta is not None
    assert_chain(exchange_for(recorder, "tools/list", listed.meta), listed.meta)


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("tool_catalog.search", {"query": "slot", "limit": 5}),
    (
        "tool_catalog.read",
        {"uri": "tool://booking.search_available_slots", "offset": 0, "limit": 10},
    ),
    (
        "tool_catalog.call",
        {
            "name": "booking.search_available_slots",
            "arguments": {"query": "AI", "limit": 3},
            "requestSpanId": "6f1c1f3e-8d0a-4c59-9a43-2b7f4f1c2d11",
        },
    ),
]


@pytest.mark.parametrize(("tool", "arguments"), CALLS, ids=[name for name, _ in CALLS])
async def test_every_tool_call_carries_the_timestamp_chain_with_result_created_inside(
    connected: tuple[Client, ExchangeRecorder], tool: str, arguments: dict[str, Any]
) -> None:
    client, recorder = connected
    await client.list_tools()
    result = await client.call_tool(tool, arguments)
    envelope = result.structured_content
    assert isinstance(envelope, dict)
    assert envelope["ok"] is True, envelope
    assert result.is_error is False
    assert result.meta is not None
    envelope_meta = envelope["meta"]
    assert envelope_meta["clientSentAt"] == result.meta["clientSentAt"]
    assert envelope_meta["serverReceivedAt"] == result.meta["serverReceivedAt"]
    exchange = exchange_for(recorder, "tools/call", result.meta)
    assert_chain(exchange, result.meta, envelope_meta["serverResultCreatedAt"])


async def test_each_action_writes_one_json_log_line_with_the_contract_fields(
    server: ServerProcess, connected: tuple[Client, ExchangeRecorder]
) -> None:
    client, _ = connected
    operation_ids: list[str] = []
    for tool, arguments in CALLS:
        result = await client.call_tool(tool, {**arguments, "requestSpanId": str(uuid.uuid4())})
        envelope = result.structured_content
        assert isinstance(envelope, dict)
        operation_ids.append(envelope["meta"]["operationId"])
    server.wait_for_stderr(lambda line: operation_ids[-1] in line)
    records = [record for record in server.json_log_records() if "action" in record]
    assert records
    for record in records:
        assert record.keys() >= LOG_FIELDS, json.dumps(record)
    logged = {record["operation_id"] for record in records}
    assert set(operation_ids) <= logged


async def test_payment_stub_and_server_process_work_together() -> None:
    async with PaymentStub.running() as stub:
        env = {**os.environ, "PAYMENT_QUERY_BASE_URL": stub.base_url}
        with ServerProcess(env=env) as server:
            recorder = ExchangeRecorder()
            with anyio.fail_after(20):
                async with open_client(server.url, on_exchange=recorder) as client:
                    result = await client.call_tool(
                        "tool_catalog.call",
                        {
                            "name": "booking.get_booking",
                            "arguments": {"bookingId": "bk-does-not-exist"},
                            "requestSpanId": str(uuid.uuid4()),
                        },
                    )
    envelope = result.structured_content
    assert isinstance(envelope, dict)
    assert envelope["ok"] is False
    assert envelope["error"]["code"] == "BOOKING_NOT_FOUND"
    assert result.is_error is True
    assert stub.requests == []
