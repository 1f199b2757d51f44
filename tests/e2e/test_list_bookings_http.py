"""``booking.list_bookings`` and the catalog version over HTTP, through the shipped client.

A spawned server (SQLite file, real clock) and the loopback payment stub answering PAID: an
agent holds and confirms, then lists newest first, by status and by the idempotency key of a
hold or of a confirmation (the question after a timeout), pages with a cursor bound to the
filters, and calls with a current or a stale ``catalogVersion``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from mcp import Client

from expert_booking.client import open_client
from expert_booking.edge.schemas import SchemaRegistry
from expert_booking.testing.payment_stub import PaymentStub
from expert_booking.testing.server_process import ServerProcess
from harness.mcp_calls import confirm_arguments, hold_arguments

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

REGISTRY = SchemaRegistry.load()
LIST = "booking.list_bookings"


@pytest.fixture(scope="module")
def server(stub: PaymentStub) -> Iterator[ServerProcess]:
    env = {**os.environ, "PAYMENT_QUERY_BASE_URL": stub.base_url}
    with ServerProcess(env=env) as running:
        yield running


@pytest.fixture
async def client(server: ServerProcess) -> AsyncIterator[Client]:
    with anyio.fail_after(20):
        async with open_client(server.url) as connected:
            yield connected


async def _tool(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    with anyio.fail_after(15):
        result = await client.call_tool(tool, arguments)
    envelope = result.structured_content
    assert isinstance(envelope, dict)
    assert result.is_error is (envelope["ok"] is False)
    return envelope


async def _call(
    client: Client, name: str, arguments: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    call = {"name": name, "arguments": arguments, "requestSpanId": str(uuid.uuid4())}
    return await _tool(client, "tool_catalog.call", call | extra)


async def _listed(client: Client, **arguments: Any) -> dict[str, Any]:
    envelope = await _call(client, LIST, {"limit": 50} | arguments)
    assert envelope["ok"], envelope
    data: dict[str, Any] = envelope["data"]
    assert not list(REGISTRY["booking_list_result"].validator.iter_errors(data)), data
    return data


def _ids(data: dict[str, Any]) -> list[str]:
    return [booking["bookingId"] for booking in data["bookings"]]


def _error_code(envelope: dict[str, Any]) -> str:
    assert envelope["ok"] is False, envelope
    code: str = envelope["error"]["code"]
    return code


async def test_an_agent_lists_its_bookings_by_status_by_key_and_page_by_page(
    client: Client, stub: PaymentStub
) -> None:
    hold_key, other_key, confirm_key = (str(uuid.uuid4()) for _ in range(3))
    first = await _call(client, "booking.hold_slot", hold_arguments("slot-ai-001", key=hold_key))
    second = await _call(client, "booking.hold_slot", hold_arguments("slot-law-001", key=other_key))
    held, paid = first["data"], second["data"]
    price = paid["payment"]
    stub.set_answer(paid["bookingId"], amount=price["amount"], currency=price["currency"])
    approved = confirm_arguments(paid, approved_at=datetime.now(UTC), key=confirm_key)
    confirmed = await _call(client, "booking.confirm_booking", approved)
    assert confirmed["ok"], confirmed
    assert confirmed["data"]["status"] == "CONFIRMED"

    every = await _listed(client)
    assert _ids(every) == [paid["bookingId"], held["bookingId"]]  # newest first
    assert every["total"] == 2
    assert every["nextCursor"] is None
    assert every["bookings"][0] == confirmed["data"]  # the snapshot get_booking would give

    assert _ids(await _listed(client, status=["CONFIRMED"])) == [paid["bookingId"]]
    assert _ids(await _listed(client, status=["HELD", "EXPIRED"])) == [held["bookingId"]]
    assert _ids(await _listed(client, status=["PAYMENT_FAILED"])) == []

    # After a timeout: did the hold commit, did the confirmation? (any case of the UUID)
    assert _ids(await _listed(client, idempotencyKey=hold_key.upper())) == [held["bookingId"]]
    by_confirm = await _listed(client, idempotencyKey=confirm_key)
    assert [b["status"] for b in by_confirm["bookings"]] == ["CONFIRMED"]
    nothing = await _listed(client, idempotencyKey=str(uuid.uuid4()))
    assert (nothing["bookings"], nothing["total"]) == ([], 0)

    page = await _listed(client, limit=1)
    assert (_ids(page), page["total"]) == ([paid["bookingId"]], 2)
    rest = await _listed(client, limit=1, cursor=page["nextCursor"])
    assert (_ids(rest), rest["nextCursor"]) == ([held["bookingId"]], None)
    elsewhere = await _call(
        client, LIST, {"limit": 1, "cursor": page["nextCursor"], "status": ["HELD"]}
    )
    assert _error_code(elsewhere) == "INVALID_CURSOR"


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"limit": 0},
        {"limit": 51},
        {"limit": 5, "status": []},
        {"limit": 5, "status": ["HELD", "HELD"]},
        {"limit": 5, "status": ["CANCELED"]},
        {"limit": 5, "idempotencyKey": "not-a-uuid"},
    ],
)
async def test_a_list_out_of_bounds_is_refused_with_the_offending_field(
    client: Client, arguments: dict[str, Any]
) -> None:
    envelope = await _call(client, LIST, arguments)

    assert _error_code(envelope) == "INVALID_ARGUMENTS"
    assert envelope["error"]["details"]["violations"]


async def test_catalog_results_carry_one_version_and_a_call_with_it_runs(client: Client) -> None:
    found = await _tool(client, "tool_catalog.search", {"query": "list my bookings", "limit": 3})
    read = await _tool(
        client,
        "tool_catalog.read",
        {"uri": "tool://booking.list_bookings", "offset": 0, "limit": 5},
    )
    version = found["data"]["catalogVersion"]

    assert found["data"]["items"][0]["name"] == LIST
    assert read["data"]["catalogVersion"] == version
    assert (await _call(client, LIST, {"limit": 1}, catalogVersion=version))["ok"]


async def test_a_stale_catalog_version_runs_nothing_and_names_the_current_one(
    client: Client,
) -> None:
    found = await _tool(client, "tool_catalog.search", {"query": "", "limit": 1})
    key = str(uuid.uuid4())

    stale = await _call(
        client,
        "booking.hold_slot",
        hold_arguments("slot-fin-002", key=key),
        catalogVersion="0000000000000000",
    )

    assert _error_code(stale) == "CATALOG_STALE"
    error = stale["error"]
    assert error["retryable"] is False
    assert error["details"] == {"currentVersion": found["data"]["catalogVersion"]}
    assert "tool_catalog.read" in error["recovery"]["action"]
    assert _ids(await _listed(client, idempotencyKey=key)) == []  # the hold never ran
