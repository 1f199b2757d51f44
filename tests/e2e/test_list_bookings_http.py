"""``booking.list_bookings`` and the catalog version over HTTP, through the shipped stub_client.

A spawned server (SQLite file, real clock) and the loopback payment stub answering PAID: an
agent holds and confirms, then lists newest first, by status and by the idempotency key of a
hold or of a confirmation (the question after a timeout), pages with a cursor bound to the
filters, and calls with a current or a stale ``catalogVersion``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from mcp import Client

from expert_booking.edge.schemas import SchemaRegistry
from expert_booking.testing.payment_stub import PaymentStub
from harness.mcp_calls import confirm_arguments, hold_arguments
from tests.e2e.envelopes import catalog_call, tool_envelope

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

REGISTRY = SchemaRegistry.load()
LIST = "booking.list_bookings"


async def _listed(stub_client: Client, **arguments: Any) -> dict[str, Any]:
    envelope = await catalog_call(stub_client, LIST, {"limit": 50} | arguments)
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
    stub_client: Client, stub: PaymentStub
) -> None:
    hold_key, other_key, confirm_key = (str(uuid.uuid4()) for _ in range(3))
    first = await catalog_call(
        stub_client, "booking.hold_slot", hold_arguments("slot-ai-001", key=hold_key)
    )
    second = await catalog_call(
        stub_client, "booking.hold_slot", hold_arguments("slot-law-001", key=other_key)
    )
    held, paid = first["data"], second["data"]
    price = paid["payment"]
    stub.set_answer(paid["bookingId"], amount=price["amount"], currency=price["currency"])
    approved = confirm_arguments(paid, approved_at=datetime.now(UTC), key=confirm_key)
    confirmed = await catalog_call(stub_client, "booking.confirm_booking", approved)
    assert confirmed["ok"], confirmed
    assert confirmed["data"]["status"] == "CONFIRMED"

    every = await _listed(stub_client)
    assert _ids(every) == [paid["bookingId"], held["bookingId"]]  # newest first
    assert every["total"] == 2
    assert every["nextCursor"] is None
    assert every["bookings"][0] == confirmed["data"]  # the snapshot get_booking would give

    assert _ids(await _listed(stub_client, status=["CONFIRMED"])) == [paid["bookingId"]]
    assert _ids(await _listed(stub_client, status=["HELD", "EXPIRED"])) == [held["bookingId"]]
    assert _ids(await _listed(stub_client, status=["PAYMENT_FAILED"])) == []

    # After a timeout: did the hold commit, did the confirmation? (any case of the UUID)
    assert _ids(await _listed(stub_client, idempotencyKey=hold_key.upper())) == [held["bookingId"]]
    by_confirm = await _listed(stub_client, idempotencyKey=confirm_key)
    assert [b["status"] for b in by_confirm["bookings"]] == ["CONFIRMED"]
    nothing = await _listed(stub_client, idempotencyKey=str(uuid.uuid4()))
    assert (nothing["bookings"], nothing["total"]) == ([], 0)

    page = await _listed(stub_client, limit=1)
    assert (_ids(page), page["total"]) == ([paid["bookingId"]], 2)
    rest = await _listed(stub_client, limit=1, cursor=page["nextCursor"])
    assert (_ids(rest), rest["nextCursor"]) == ([held["bookingId"]], None)
    elsewhere = await catalog_call(
        stub_client, LIST, {"limit": 1, "cursor": page["nextCursor"], "status": ["HELD"]}
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
    stub_client: Client, arguments: dict[str, Any]
) -> None:
    envelope = await catalog_call(stub_client, LIST, arguments)

    assert _error_code(envelope) == "INVALID_ARGUMENTS"
    assert envelope["error"]["details"]["violations"]


async def test_catalog_results_carry_one_version_and_a_call_with_it_runs(
    stub_client: Client,
) -> None:
    found = await tool_envelope(
        stub_client, "tool_catalog.search", {"query": "list my bookings", "limit": 3}
    )
    read = await tool_envelope(
        stub_client,
        "tool_catalog.read",
        {"uri": "tool://booking.list_bookings", "offset": 0, "limit": 5},
    )
    version = found["data"]["catalogVersion"]

    assert found["data"]["items"][0]["name"] == LIST
    assert read["data"]["catalogVersion"] == version
    assert (await catalog_call(stub_client, LIST, {"limit": 1}, catalogVersion=version))["ok"]


async def test_a_stale_catalog_version_runs_nothing_and_names_the_current_one(
    stub_client: Client,
) -> None:
    found = await tool_envelope(stub_client, "tool_catalog.search", {"query": "", "limit": 1})
    key = str(uuid.uuid4())

    stale = await catalog_call(
        stub_client,
        "booking.hold_slot",
        hold_arguments("slot-fin-002", key=key),
        catalogVersion="0000000000000000",
    )

    assert _error_code(stale) == "CATALOG_STALE"
    error = stale["error"]
    assert error["retryable"] is False
    assert error["details"] == {"currentVersion": found["data"]["catalogVersion"]}
    assert "tool_catalog.read" in error["recovery"]["action"]
    assert _ids(await _listed(stub_client, idempotencyKey=key)) == []  # the hold never ran
