"""Cancel and reschedule over HTTP through ``tool_catalog.call``, as an agent drives them.

A spawned server (SQLite file, real clock) and the loopback payment stub. The agent finds the
tools by searching the catalog, holds and confirms, reschedules (first call answers
HUMAN_APPROVAL_REQUIRED with the intent, the retry carries the approval), cancels, cancels an
unpaid hold at once, and learns an outcome from list_bookings by the idempotency key.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from mcp import Client

from expert_booking.domain.model import format_instant
from expert_booking.edge.schemas import SchemaRegistry
from expert_booking.testing.payment_stub import PaymentStub
from harness.mcp_calls import confirm_arguments, hold_arguments
from tests.e2e.envelopes import catalog_call, tool_envelope

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

REGISTRY = SchemaRegistry.load()


async def _found(stub_client: Client, query: str) -> str:
    envelope = await tool_envelope(stub_client, "tool_catalog.search", {"query": query, "limit": 3})
    name: str = envelope["data"]["items"][0]["name"]
    return name


def _snapshot(envelope: dict[str, Any]) -> dict[str, Any]:
    assert envelope["ok"], envelope
    data: dict[str, Any] = envelope["data"]
    assert not list(REGISTRY["booking_snapshot"].validator.iter_errors(data)), data
    return data


def _approved(arguments: dict[str, Any], refused: dict[str, Any]) -> dict[str, Any]:
    """The retry of a refused call, with the person's approval of details.intent."""
    assert refused["ok"] is False, refused
    error = refused["error"]
    assert error["code"] == "HUMAN_APPROVAL_REQUIRED", error
    approval = {
        "approvalId": str(uuid.uuid4()),
        "decision": "APPROVE",
        "approvedAt": format_instant(datetime.now(UTC)),
        "intent": error["details"]["intent"],
        "intentHash": error["details"]["intentHash"],
    }
    return arguments | {"idempotencyKey": str(uuid.uuid4()), "humanApproval": approval}


async def test_an_agent_reschedules_and_cancels_a_confirmed_booking_through_the_catalog(
    stub_client: Client, stub: PaymentStub
) -> None:
    reschedule = await _found(stub_client, "move my appointment to another time")
    cancel = await _found(stub_client, "cancel my booking")
    assert (reschedule, cancel) == ("booking.reschedule_booking", "booking.cancel_booking")

    held = _snapshot(
        await catalog_call(stub_client, "booking.hold_slot", hold_arguments("slot-fin-001"))
    )
    stub.set_answer(held["bookingId"], amount="650.00")
    approved = confirm_arguments(held, approved_at=datetime.now(UTC))
    confirmed = _snapshot(await catalog_call(stub_client, "booking.confirm_booking", approved))
    assert (confirmed["status"], confirmed["history"], confirmed["cancelledAt"]) == (
        "CONFIRMED",
        [],
        None,
    )

    move = {
        "bookingId": confirmed["bookingId"],
        "newSlotId": "slot-fin-002",
        "expectedVersion": confirmed["version"],
        "idempotencyKey": str(uuid.uuid4()),
    }
    asked = await catalog_call(stub_client, reschedule, move)
    assert asked["error"]["details"]["intent"]["action"] == "RESCHEDULE"
    retry = _approved(move, asked)
    moved = _snapshot(await catalog_call(stub_client, reschedule, retry))
    assert (moved["bookingId"], moved["payment"], moved["slotId"]) == (
        confirmed["bookingId"],
        confirmed["payment"],
        "slot-fin-002",
    )
    assert moved["version"] == confirmed["version"] + 1
    assert [change["slotId"] for change in moved["history"]] == ["slot-fin-001"]
    assert (
        _snapshot(await catalog_call(stub_client, reschedule, retry)) == moved
    )  # idempotent replay

    # The approval of the move is not an approval to cancel.
    stop = {
        "bookingId": moved["bookingId"],
        "expectedVersion": moved["version"],
        "idempotencyKey": str(uuid.uuid4()),
    }
    replayed = await catalog_call(
        stub_client, cancel, stop | {"humanApproval": retry["humanApproval"]}
    )
    assert replayed["ok"] is False
    assert replayed["error"]["code"] == "INVALID_ARGUMENTS"  # its intent is no CANCEL intent
    asked = await catalog_call(stub_client, cancel, stop)
    assert asked["error"]["details"]["intent"]["action"] == "CANCEL"
    again = _approved(stop, asked)
    cancelled = _snapshot(await catalog_call(stub_client, cancel, again))
    assert (cancelled["status"], cancelled["version"]) == ("CANCELLED", moved["version"] + 1)
    assert (cancelled["refundDue"], moved["refundDue"]) == (True, False)
    assert cancelled["cancelledAt"] is not None

    listed = await catalog_call(
        stub_client,
        "booking.list_bookings",
        {"limit": 5, "idempotencyKey": again["idempotencyKey"]},
    )
    assert [b["status"] for b in listed["data"]["bookings"]] == ["CANCELLED"]
    rehold = await catalog_call(stub_client, "booking.hold_slot", hold_arguments("slot-fin-002"))
    assert rehold["ok"], rehold  # the cancelled booking released its slot


async def test_an_unpaid_hold_is_cancelled_at_once_over_http(
    stub_client: Client, stub: PaymentStub
) -> None:
    held = _snapshot(
        await catalog_call(stub_client, "booking.hold_slot", hold_arguments("slot-law-002"))
    )
    stub.set_answer(held["bookingId"], status="PENDING", amount="800.00")
    stop = {
        "bookingId": held["bookingId"],
        "expectedVersion": held["version"],
        "idempotencyKey": str(uuid.uuid4()).upper(),
    }
    cancelled = _snapshot(await catalog_call(stub_client, "booking.cancel_booking", stop))
    assert (cancelled["status"], cancelled["payment"]["status"]) == ("CANCELLED", "PENDING")
    assert cancelled["refundDue"] is False
    assert _snapshot(await catalog_call(stub_client, "booking.cancel_booking", stop)) == cancelled
    refused = await catalog_call(
        stub_client, "booking.cancel_booking", stop | {"idempotencyKey": str(uuid.uuid4())}
    )
    assert refused["error"]["code"] == "INVALID_STATE"
    assert refused["error"]["recovery"]["action"]
