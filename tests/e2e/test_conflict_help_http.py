"""Help on conflict over HTTP through ``tool_catalog.call``, as two agents meet it.

A spawned server (a fresh seeded SQLite file, real clock) and the loopback payment stub. A
second caller's hold of a taken slot answers SLOT_UNAVAILABLE with ``details.alternatives``,
slots shaped exactly as the search lists them, and holding the first one succeeds. An approval
of an edited intent answers APPROVAL_INTENT_MISMATCH whose ``details.changes`` names exactly the
edited field and whose current intent, approved, confirms. Every error is checked against
``schemas/error.json`` and the envelope against ``schemas/envelope.json``.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import AsyncIterator
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
from tests.e2e.envelopes import catalog_call

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

REGISTRY = SchemaRegistry.load()


@pytest.fixture
async def rival(stub_server: ServerProcess) -> AsyncIterator[Client]:
    """A second caller: its own connection and client."""
    with anyio.fail_after(20):
        async with open_client(stub_server.url) as connected:
            yield connected


async def _call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    envelope = await catalog_call(client, name, arguments)
    assert not list(REGISTRY["envelope"].validator.iter_errors(envelope)), envelope
    return envelope


def _error(envelope: dict[str, Any], code: str) -> dict[str, Any]:
    assert envelope["ok"] is False, envelope
    error: dict[str, Any] = envelope["error"]
    assert error["code"] == code, error
    assert not list(REGISTRY["error"].validator.iter_errors(error)), error
    return error


def _data(envelope: dict[str, Any]) -> dict[str, Any]:
    assert envelope["ok"] is True, envelope
    data: dict[str, Any] = envelope["data"]
    return data


async def test_a_second_callers_hold_of_a_taken_slot_offers_alternatives_and_one_holds(
    stub_client: Client, rival: Client
) -> None:
    first = _data(await _call(stub_client, "booking.hold_slot", hold_arguments("slot-ai-001")))
    assert first["status"] == "HELD"

    refused = _error(
        await _call(rival, "booking.hold_slot", hold_arguments("slot-ai-001")), "SLOT_UNAVAILABLE"
    )
    alternatives = refused["details"]["alternatives"]
    assert "details.alternatives" in refused["recovery"]["action"]
    # The seed's only other AI slot: the same expert a day later (no colleague in the seed).
    searched = _data(
        await _call(rival, "booking.search_available_slots", {"query": "Lin Wei", "limit": 5})
    )
    assert alternatives == searched["slots"] == [alternatives[0]]
    assert alternatives[0]["slotId"] == "slot-ai-002"

    held = _data(await _call(rival, "booking.hold_slot", hold_arguments(alternatives[0]["slotId"])))
    assert (held["slotId"], held["status"]) == ("slot-ai-002", "HELD")
    # Now the expert has no free hour left: nothing to offer, and the schema still holds.
    none_left = _error(
        await _call(rival, "booking.hold_slot", hold_arguments("slot-ai-002")), "SLOT_UNAVAILABLE"
    )
    assert none_left["details"]["alternatives"] == []


def _hash(intent: dict[str, Any]) -> str:
    canonical = json.dumps(intent, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


async def test_an_edited_intent_names_the_changed_field_and_the_current_intent_confirms(
    stub_client: Client, stub: PaymentStub
) -> None:
    held = _data(await _call(stub_client, "booking.hold_slot", hold_arguments("slot-law-001")))
    arguments = confirm_arguments(held, approved_at=datetime.now(UTC))
    edited = arguments["humanApproval"]["intent"] | {"amount": "1.00"}
    arguments["humanApproval"] |= {"intent": edited, "intentHash": _hash(edited)}

    refused = _error(
        await _call(stub_client, "booking.confirm_booking", arguments), "APPROVAL_INTENT_MISMATCH"
    )
    details = refused["details"]
    assert details["changes"] == [
        {"field": "amount", "approvedValue": "1.00", "currentValue": "800.00"}
    ]
    assert (details["intent"], details["intentHash"]) == (
        held["confirmationIntent"]["intent"],
        held["confirmationIntent"]["intentHash"],
    )
    assert "details.changes" in refused["recovery"]["action"]

    stub.set_answer(held["bookingId"], amount="800.00")
    retry = arguments | {"idempotencyKey": str(uuid.uuid4())}
    retry["humanApproval"] = retry["humanApproval"] | {
        "approvedAt": arguments["humanApproval"]["approvedAt"],
        "intent": details["intent"],
        "intentHash": details["intentHash"],
    }
    confirmed = _data(await _call(stub_client, "booking.confirm_booking", retry))
    assert (confirmed["status"], confirmed["version"]) == ("CONFIRMED", 2)
