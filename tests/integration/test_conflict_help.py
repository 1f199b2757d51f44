"""Help on conflict through the booking service, on SQLite and on the memory store fake.

A SLOT_UNAVAILABLE of a hold or a reschedule offers ranked free slots (``details.alternatives``)
read after the refusal; an APPROVAL_INTENT_MISMATCH of a confirm, cancel or reschedule names
each changed field (``details.changes``) and carries the current intent, whose approval then
goes through. The catalog is the seed plus ``WIDER_CATALOG`` (more AI experts and hours).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Awaitable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from expert_booking.cancellation import CancelBooking
from expert_booking.confirmation import ConfirmBooking
from expert_booking.domain.conflicts import FieldChange
from expert_booking.domain.errors import BookingError
from expert_booking.domain.intents import ActionIntent, cancel_intent, reschedule_intent
from expert_booking.domain.model import Booking, BookingStatus, Customer, HumanApproval, Slot
from expert_booking.edge.error_texts import wire_details
from expert_booking.ports import BookingStore, SlotNeighbours
from expert_booking.rescheduling import RescheduleBooking
from expert_booking.services import BookingService, HoldSlot
from tests.fakes import (
    CONTEXT,
    T0,
    WIDER_CATALOG,
    FakePayments,
    MutableClock,
    answer,
    approval,
)
from tests.store_engines import ENGINES

pytestmark = pytest.mark.anyio


@pytest.fixture(params=sorted(ENGINES))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BookingStore]:
    async with ENGINES[request.param](tmp_path, WIDER_CATALOG) as opened:
        yield opened


def _key() -> str:
    return str(uuid.uuid4())


async def _refusal(call: Awaitable[Any]) -> BookingError:
    with anyio.fail_after(5), pytest.raises(BookingError) as excinfo:
        await call
    return excinfo.value


def _alternatives(error: BookingError) -> list[str]:
    return [slot.slot_id for slot in error.details["alternatives"]]


async def _hold(service: BookingService, slot_id: str = "slot-ai-001") -> Booking:
    customer = Customer(name="Ada Lovelace", email="Ada@Example.com")
    return await service.hold_slot(HoldSlot(slot_id, customer, _key()), CONTEXT)


async def _slot(store: BookingStore, slot_id: str) -> Slot:
    """Slot ``slot_id`` as the store has it (read through the port)."""
    found = await store.peek_slots_near(slot_id, T0, 0)
    assert found.slot is not None
    return found.slot


def _approve(intent: ActionIntent, clock: MutableClock) -> HumanApproval:
    return HumanApproval(str(uuid.uuid4()), "APPROVE", clock.now(), intent, intent.digest())


async def _confirmed(
    service: BookingService, payments: FakePayments, clock: MutableClock, slot_id: str
) -> Booking:
    held = await _hold(service, slot_id)
    clock.advance(10)
    payments.script(held.booking_id, answer(held, "PAID", paid_at=clock.now()))
    command = ConfirmBooking(held.booking_id, 1, _key(), approval(held, clock.now()))
    confirmed = await service.confirm_booking(command, CONTEXT)
    clock.advance(10)
    return confirmed


async def test_a_taken_slot_offers_the_experts_nearest_hours_and_a_colleague_then_one_holds(
    service: BookingService,
) -> None:
    await _hold(service)
    refused = await _refusal(_hold(service))
    assert refused.code == "SLOT_UNAVAILABLE"
    # x01 (01:30, another price: a hold does not mind) is nearest; b04 (01:00) and a01 (03:00)
    # tie at one hour, the earlier wins; one place stays for a colleague free at 02:00.
    assert _alternatives(refused) == ["slot-ai-x01", "slot-ai-b04", "slot-jb-001"]
    assert wire_details(refused)["alternatives"][2] == {
        "slotId": "slot-jb-001",
        "expertId": "exp-ai-003",
        "expertName": "Dr. Jonas Berg",
        "specialty": "AI",
        "startsAt": "2030-09-02T02:00:00.000Z",
        "endsAt": "2030-09-02T03:00:00.000Z",
        "price": {"amount": "500.00", "currency": "CNY"},
    }
    held = await _hold(service, _alternatives(refused)[0])
    assert (held.slot_id, held.status) == ("slot-ai-x01", BookingStatus.HELD)
    again = await _refusal(_hold(service))
    assert _alternatives(again) == ["slot-ai-b04", "slot-ai-a01", "slot-jb-001"]


async def test_a_started_slot_offers_only_slots_that_have_not_started(
    service: BookingService, clock: MutableClock
) -> None:
    clock.set(clock.now().replace(day=2, hour=2))  # slot-ai-001 begins: so do its colleagues
    refused = await _refusal(_hold(service))
    assert refused.message == "The slot has already started."
    assert _alternatives(refused) == ["slot-ai-a01", "slot-ai-a02", "slot-ai-002"]


async def test_a_store_that_cannot_read_alternatives_still_refuses_with_none(
    service: BookingService, store: BookingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def failing(_slot_id: str, _now: Any, _limit: int, **_price: Any) -> SlotNeighbours:
        raise BookingError

    await _hold(service)
    monkeypatch.setattr(store, "peek_slots_near", failing)
    refused = await _refusal(_hold(service))
    assert (refused.code, refused.details["alternatives"]) == ("SLOT_UNAVAILABLE", ())


async def test_a_reschedule_to_a_taken_slot_offers_slots_at_the_bookings_price(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock, "slot-ai-002")
    await _hold(service, "slot-ai-001")
    command = RescheduleBooking(
        confirmed.booking_id, "slot-ai-001", confirmed.version, _key(), None
    )
    refused = await _refusal(service.reschedule_booking(command, CONTEXT))
    assert refused.code == "SLOT_UNAVAILABLE"
    # Not x01 (900.00): a reschedule charges no difference.
    assert _alternatives(refused) == ["slot-ai-b04", "slot-ai-a01", "slot-jb-001"]
    # The booking's own slot is never offered (it is taken, by this booking).
    to_own = replace(command, new_slot_id="slot-ai-002", idempotency_key=_key())
    own = await _refusal(service.reschedule_booking(to_own, CONTEXT))
    assert "slot-ai-002" not in _alternatives(own)
    # The three latest before it at its price: x01 (900.00, between a01 and b04) takes none
    # of the store's three places of that kind.
    assert _alternatives(own) == ["slot-ai-a02", "slot-ai-a01", "slot-ai-b04"]


async def test_a_reschedule_to_a_started_slot_at_another_price_offers_the_bookings_price(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock, "slot-ai-002")  # 500.00
    clock.set(datetime(2030, 9, 2, 1, 45, tzinfo=UTC))  # x01 (900.00) began at 01:30
    command = RescheduleBooking(
        confirmed.booking_id, "slot-ai-x01", confirmed.version, _key(), None
    )
    refused = await _refusal(service.reschedule_booking(command, CONTEXT))
    assert refused.message == "The slot has already started."
    assert _alternatives(refused) == ["slot-ai-001", "slot-ai-a01", "slot-ai-a02"]


async def test_a_reschedule_approval_for_another_slot_names_the_change_and_the_current_intent(
    service: BookingService, store: BookingStore, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock, "slot-ai-002")
    approved = _approve(reschedule_intent(confirmed, await _slot(store, "slot-ai-a01")), clock)
    command = RescheduleBooking(
        confirmed.booking_id, "slot-ai-a02", confirmed.version, _key(), approved
    )
    refused = await _refusal(service.reschedule_booking(command, CONTEXT))
    assert refused.code == "APPROVAL_INTENT_MISMATCH"
    current = reschedule_intent(confirmed, await _slot(store, "slot-ai-a02"))
    assert wire_details(refused) == {
        "bookingId": confirmed.booking_id,
        "fields": ["newSlotId", "newStartsAt"],
        "changes": [
            {"field": "newSlotId", "approvedValue": "slot-ai-a01", "currentValue": "slot-ai-a02"},
            {
                "field": "newStartsAt",
                "approvedValue": "2030-09-02T03:00:00.000Z",
                "currentValue": "2030-09-02T04:00:00.000Z",
            },
        ],
        "intent": current.canonical_doc(),
        "intentHash": current.digest(),
    }
    fresh = _approve(refused.details["intent"], clock)
    moved = await service.reschedule_booking(
        replace(command, idempotency_key=_key(), human_approval=fresh), CONTEXT
    )
    assert (moved.slot_id, moved.version) == ("slot-ai-a02", confirmed.version + 1)


async def test_a_reschedule_approval_sent_to_cancel_names_the_action_and_the_target(
    service: BookingService, store: BookingStore, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock, "slot-ai-002")
    approved = _approve(reschedule_intent(confirmed, await _slot(store, "slot-ai-a01")), clock)
    command = CancelBooking(confirmed.booking_id, confirmed.version, _key(), approved)
    refused = await _refusal(service.cancel_booking(command, CONTEXT))
    assert refused.code == "APPROVAL_INTENT_MISMATCH"
    assert refused.details["changes"] == (
        FieldChange("action", "RESCHEDULE", "CANCEL"),
        FieldChange("newSlotId", "slot-ai-a01", None),
        FieldChange("newStartsAt", "2030-09-02T03:00:00.000Z", None),
    )
    intent = cancel_intent(confirmed)
    assert (refused.details["intent"], refused.details["intent_hash"]) == (intent, intent.digest())
    fresh = _approve(refused.details["intent"], clock)
    cancelled = await service.cancel_booking(
        replace(command, idempotency_key=_key(), human_approval=fresh), CONTEXT
    )
    assert (cancelled.status, cancelled.refund_due) == (BookingStatus.CANCELLED, True)


async def test_a_confirmation_approval_of_another_booking_names_what_differs(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    first = await _hold(service, "slot-ai-a01")
    second = await _hold(service, "slot-ai-a02")
    command = ConfirmBooking(second.booking_id, 1, _key(), approval(first, clock.now()))
    refused = await _refusal(service.confirm_booking(command, CONTEXT))
    assert [change.field for change in refused.details["changes"]] == [
        "bookingId",
        "slotId",
        "startsAt",
    ]
    challenge = second.confirmation_intent
    assert challenge is not None
    assert wire_details(refused)["intent"] == challenge.intent.canonical_doc()
    assert wire_details(refused)["intentHash"] == challenge.intent_hash
    payments.script(second.booking_id, answer(second, "PAID", paid_at=clock.now()))
    confirmed = await service.confirm_booking(
        replace(command, idempotency_key=_key(), human_approval=approval(second, clock.now())),
        CONTEXT,
    )
    assert confirmed.status is BookingStatus.CONFIRMED


async def test_alternatives_that_cannot_be_read_are_logged_with_the_cause(
    service: BookingService,
    store: BookingStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def failing(_slot_id: str, _now: Any, _limit: int, **_price: Any) -> SlotNeighbours:
        raise BookingError

    await _hold(service)
    monkeypatch.setattr(store, "peek_slots_near", failing)
    with caplog.at_level(logging.WARNING, logger="expert_booking.services"):
        refused = await _refusal(_hold(service))
    assert refused.code == "SLOT_UNAVAILABLE"
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "alternatives to a taken slot could not be read")
    ]
    exc_info = caplog.records[0].exc_info
    assert exc_info is not None
    assert exc_info[0] is BookingError
