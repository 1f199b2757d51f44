"""Cancel and reschedule through the booking service, on SQLite and on the memory store fake.

Every transition of the state diagram after the hold (NOTES.md) and its idempotency, the
per-action intents (an approval of one kind is never accepted as another), and the races of
issue 13: cancel vs confirm, reschedule vs a hold of the target, two reschedules, cancel vs
expiry, and the cancel of a hold whose payment is completing.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from expert_booking.cancellation import CancelBooking
from expert_booking.confirmation import ConfirmBooking
from expert_booking.domain.errors import SLOT_STARTED, BookingError, PaymentUnavailableError
from expert_booking.domain.intents import ActionIntent, cancel_intent, reschedule_intent
from expert_booking.domain.model import (
    Booking,
    BookingStatus,
    Customer,
    HumanApproval,
    PaymentStatus,
    SlotChange,
)
from expert_booking.edge.error_texts import wire_details
from expert_booking.ports import BookingStore, TraceContext
from expert_booking.rescheduling import RescheduleBooking
from expert_booking.services import (
    BookingService,
    GetBooking,
    HoldSlot,
    ListBookings,
    SearchSlots,
)
from harness.db_invariants import check_invariants
from tests.fakes import (
    ALL,
    CONTEXT,
    POLICY,
    WIDER_CATALOG,
    FakePayments,
    MutableClock,
    PaymentCall,
    answer,
    approval,
)
from tests.store_engines import ENGINES

pytestmark = pytest.mark.anyio


@pytest.fixture(params=sorted(ENGINES))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BookingStore]:
    async with ENGINES[request.param](tmp_path) as opened:
        yield opened


def _key() -> str:
    return str(uuid.uuid4())


async def _refusal(call: Awaitable[Any]) -> BookingError:
    with anyio.fail_after(5), pytest.raises(BookingError) as excinfo:
        await call
    return excinfo.value


def _action_approval(intent: ActionIntent, clock: MutableClock) -> HumanApproval:
    return HumanApproval(
        approval_id=str(uuid.uuid4()),
        decision="APPROVE",
        approved_at=clock.now(),
        intent=intent,
        intent_hash=intent.digest(),
    )


async def _hold(service: BookingService, slot_id: str = "slot-ai-001") -> Booking:
    customer = Customer(name="Ada Lovelace", email="Ada@Example.com")
    command = HoldSlot(slot_id=slot_id, customer=customer, idempotency_key=_key())
    return await service.hold_slot(command, CONTEXT)


async def _confirmed(
    service: BookingService,
    payments: FakePayments,
    clock: MutableClock,
    slot_id: str = "slot-ai-001",
) -> Booking:
    held = await _hold(service, slot_id)
    clock.advance(10)
    payments.script(held.booking_id, answer(held, "PAID", paid_at=clock.now()))
    command = ConfirmBooking(
        booking_id=held.booking_id,
        expected_version=held.version,
        idempotency_key=_key(),
        human_approval=approval(held, clock.now()),
    )
    confirmed = await service.confirm_booking(command, CONTEXT)
    assert confirmed.status is BookingStatus.CONFIRMED
    clock.advance(10)
    return confirmed


def _cancel(
    booking: Booking,
    human_approval: HumanApproval | None = None,
    *,
    key: str | None = None,
    expected_version: int | None = None,
) -> CancelBooking:
    return CancelBooking(
        booking_id=booking.booking_id,
        expected_version=booking.version if expected_version is None else expected_version,
        idempotency_key=key or _key(),
        human_approval=human_approval,
    )


def _reschedule(
    booking: Booking,
    new_slot_id: str,
    human_approval: HumanApproval | None = None,
    *,
    key: str | None = None,
) -> RescheduleBooking:
    return RescheduleBooking(
        booking_id=booking.booking_id,
        new_slot_id=new_slot_id,
        expected_version=booking.version,
        idempotency_key=key or _key(),
        human_approval=human_approval,
    )


async def _get(service: BookingService, booking: Booking) -> Booking:
    return await service.get_booking(GetBooking(booking.booking_id), CONTEXT)


async def _slot_is_free(service: BookingService, slot_id: str) -> bool:
    again = await _hold(service, slot_id)
    return again.slot_id == slot_id


# --- HELD -> CANCELLED ------------------------------------------------------------------------


async def test_an_unpaid_hold_is_cancelled_at_once_without_approval_and_frees_its_slot(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    held = await _hold(service)
    payments.script(held.booking_id, answer(held, "PENDING"))
    clock.advance(5)
    cancelled = await service.cancel_booking(_cancel(held), CONTEXT)
    assert (cancelled.status, cancelled.version) == (BookingStatus.CANCELLED, 2)
    assert cancelled.cancelled_at == clock.now()
    assert (cancelled.payment, cancelled.refund_due) == (held.payment, False)
    # Before the commit, and once after it (a Pay pressed in between is heard).
    assert payments.queried_ids == [held.booking_id] * 2
    assert await _get(service, held) == cancelled
    assert await _slot_is_free(service, "slot-ai-001")


@pytest.mark.parametrize("status", ["FAILED", "CLOSED"])
async def test_a_hold_whose_payment_ended_unpaid_is_cancelled_with_that_payment_status(
    service: BookingService, payments: FakePayments, status: str
) -> None:
    held = await _hold(service)
    payments.script(held.booking_id, answer(held, status))
    cancelled = await service.cancel_booking(_cancel(held), CONTEXT)
    assert cancelled.status is BookingStatus.CANCELLED
    assert (cancelled.payment.status, cancelled.refund_due) == (PaymentStatus(status), False)
    assert payments.queried_ids == [held.booking_id]  # a final answer: no second look


async def test_a_hold_the_person_has_paid_needs_a_cancel_approval_and_keeps_the_payment(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    held = await _hold(service)
    clock.advance(20)
    paid = answer(held, "PAID", paid_at=clock.now())
    payments.script(held.booking_id, paid)
    required = await _refusal(service.cancel_booking(_cancel(held), CONTEXT))
    assert required.code == "HUMAN_APPROVAL_REQUIRED"
    intent = cancel_intent(held)
    assert required.details == {
        "booking_id": held.booking_id,
        "intent": intent,
        "intent_hash": intent.digest(),
    }
    assert wire_details(required)["intent"] == {
        "action": "CANCEL",
        "amount": "500.00",
        "bookingId": held.booking_id,
        "currency": "CNY",
        "slotId": "slot-ai-001",
        "startsAt": "2030-09-02T02:00:00.000Z",
        "version": 1,
    }
    assert (await _get(service, held)).status is BookingStatus.HELD
    cancelled = await service.cancel_booking(
        _cancel(held, _action_approval(intent, clock)), CONTEXT
    )
    assert cancelled.status is BookingStatus.CANCELLED
    assert (cancelled.payment.status, cancelled.payment.paid_at) == (
        PaymentStatus.PAID,
        paid.paid_at,
    )


async def test_a_paid_answer_that_does_not_match_the_hold_changes_nothing(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    held = await _hold(service)
    payments.script(held.booking_id, answer(held, "PAID", paid_at=clock.now(), amount="1.00"))
    refused = await _refusal(service.cancel_booking(_cancel(held), CONTEXT))
    assert refused.code == "PAYMENT_MISMATCH"
    assert await _get(service, held) == held


async def test_an_unreachable_payment_service_leaves_the_hold_as_it_was(
    service: BookingService, payments: FakePayments
) -> None:
    held = await _hold(service)
    payments.script(held.booking_id, PaymentUnavailableError(booking_id=held.booking_id))
    refused = await _refusal(service.cancel_booking(_cancel(held), CONTEXT))
    assert (refused.code, refused.retryable) == ("PAYMENT_UNAVAILABLE", True)
    assert await _get(service, held) == held


# --- CONFIRMED -> CANCELLED -------------------------------------------------------------------


async def test_a_confirmed_booking_is_cancelled_only_with_a_fresh_cancel_approval(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock)
    queried = len(payments.calls)
    required = await _refusal(service.cancel_booking(_cancel(confirmed), CONTEXT))
    assert required.code == "HUMAN_APPROVAL_REQUIRED"
    intent = required.details["intent"]
    assert intent == cancel_intent(confirmed)
    assert required.details["intent_hash"] == intent.digest()
    cancelled = await service.cancel_booking(
        _cancel(confirmed, _action_approval(intent, clock)), CONTEXT
    )
    assert (cancelled.status, cancelled.version) == (BookingStatus.CANCELLED, confirmed.version + 1)
    assert (cancelled.payment, cancelled.refund_due) == (confirmed.payment, True)
    assert cancelled.confirmed_at == confirmed.confirmed_at
    assert len(payments.calls) == queried  # a confirmed booking's payment is known
    assert await _slot_is_free(service, "slot-ai-001")


async def test_a_confirmation_approval_is_never_accepted_as_a_cancel_approval(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock)
    v1 = approval(confirmed, clock.now())  # the v1 confirmation intent of the same booking
    refused = await _refusal(service.cancel_booking(_cancel(confirmed, v1), CONTEXT))
    assert refused.code == "APPROVAL_INTENT_MISMATCH"
    assert "action" in refused.details["fields"]
    assert (await _get(service, confirmed)).status is BookingStatus.CONFIRMED


async def test_a_reschedule_approval_is_never_accepted_as_a_cancel_approval_nor_back(
    store: BookingStore, service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock)
    target = await store.run(lambda tx: tx.lookup_slot("slot-ai-002"))
    assert target is not None
    moved = _action_approval(reschedule_intent(confirmed, target.slot), clock)
    refused = await _refusal(service.cancel_booking(_cancel(confirmed, moved), CONTEXT))
    assert refused.code == "APPROVAL_INTENT_MISMATCH"
    assert {"action", "newSlotId", "newStartsAt"} <= set(refused.details["fields"])
    cancel = _action_approval(cancel_intent(confirmed), clock)
    refused = await _refusal(
        service.reschedule_booking(_reschedule(confirmed, "slot-ai-002", cancel), CONTEXT)
    )
    assert refused.code == "APPROVAL_INTENT_MISMATCH"
    assert await _get(service, confirmed) == confirmed


async def test_a_cancel_approval_dated_before_the_booking_last_changed_is_before_intent(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock)
    assert confirmed.confirmed_at is not None
    early = replace(
        _action_approval(cancel_intent(confirmed), clock),
        approved_at=confirmed.confirmed_at - POLICY.approval_skew - timedelta(seconds=1),
    )
    refused = await _refusal(service.cancel_booking(_cancel(confirmed, early), CONTEXT))
    assert (refused.code, refused.details["reason"]) == ("HUMAN_APPROVAL_EXPIRED", "BEFORE_INTENT")
    assert refused.details["intent_issued_at"] == confirmed.confirmed_at
    clock.advance(POLICY.approval_ttl.total_seconds() + POLICY.approval_skew.total_seconds() + 1)
    stale = replace(early, approved_at=confirmed.confirmed_at)
    refused = await _refusal(service.cancel_booking(_cancel(confirmed, stale), CONTEXT))
    assert (refused.code, refused.details["reason"]) == ("HUMAN_APPROVAL_EXPIRED", "STALE")


async def test_a_rejected_or_edited_cancel_approval_changes_nothing(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock)
    intent = cancel_intent(confirmed)
    rejected = replace(_action_approval(intent, clock), decision="REJECT")
    assert (await _refusal(service.cancel_booking(_cancel(confirmed, rejected), CONTEXT))).code == (
        "HUMAN_APPROVAL_REJECTED"
    )
    edited = replace(_action_approval(intent, clock), intent=replace(intent, amount="1.00"))
    assert (await _refusal(service.cancel_booking(_cancel(confirmed, edited), CONTEXT))).code == (
        "APPROVAL_INTENT_HASH_MISMATCH"
    )
    assert await _get(service, confirmed) == confirmed


# --- other statuses, versions, idempotency ----------------------------------------------------


@pytest.mark.parametrize("final", ["EXPIRED", "PAYMENT_FAILED", "CANCELLED"])
async def test_a_final_booking_cannot_be_cancelled(
    service: BookingService, payments: FakePayments, clock: MutableClock, final: str
) -> None:
    held = await _hold(service)
    if final == "EXPIRED":
        clock.advance(POLICY.hold_ttl.total_seconds())
    elif final == "PAYMENT_FAILED":
        payments.script(held.booking_id, answer(held, "FAILED"))
        command = ConfirmBooking(held.booking_id, 1, _key(), approval(held, clock.now()))
        await _refusal(service.confirm_booking(command, CONTEXT))
    else:
        payments.script(held.booking_id, answer(held, "PENDING"))
        await service.cancel_booking(_cancel(held), CONTEXT)
    now = await _get(service, held)
    assert now.status is BookingStatus(final)
    refused = await _refusal(service.cancel_booking(_cancel(now), CONTEXT))
    assert (refused.code, refused.details["status"]) == ("INVALID_STATE", final)


async def test_cancel_with_a_stale_version_is_a_version_conflict(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock)
    refused = await _refusal(
        service.cancel_booking(_cancel(confirmed, expected_version=1), CONTEXT)
    )
    assert refused.code == "VERSION_CONFLICT"
    missing = replace(confirmed, booking_id="booking-none")
    assert (await _refusal(service.cancel_booking(_cancel(missing), CONTEXT))).code == (
        "BOOKING_NOT_FOUND"
    )


async def test_a_repeated_cancel_key_replays_the_outcome_and_changes_nothing_again(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock)
    key = "0F8FAD5B-D9CB-469F-A165-70867728950E"
    command = _cancel(confirmed, _action_approval(cancel_intent(confirmed), clock), key=key)
    first = await service.cancel_booking(command, CONTEXT)
    clock.advance(30)  # the approval is stale by now: a replay does not judge it again
    again = await service.cancel_booking(replace(command, idempotency_key=key.lower()), CONTEXT)
    assert again == first
    conflict = await _refusal(service.cancel_booking(replace(command, expected_version=9), CONTEXT))
    assert conflict.code == "IDEMPOTENCY_CONFLICT"
    listed = await service.list_bookings(
        ListBookings(limit=5, idempotency_key=key.lower()), CONTEXT
    )
    assert [booking.booking_id for booking in listed.bookings] == [confirmed.booking_id]


# --- CONFIRMED -> CONFIRMED (rescheduled) ----------------------------------------------------


async def test_a_confirmed_booking_moves_in_place_after_a_reschedule_approval(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock)
    required = await _refusal(
        service.reschedule_booking(_reschedule(confirmed, "slot-ai-002"), CONTEXT)
    )
    assert required.code == "HUMAN_APPROVAL_REQUIRED"
    intent = required.details["intent"]
    assert wire_details(required)["intent"] == {
        "action": "RESCHEDULE",
        "amount": "500.00",
        "bookingId": confirmed.booking_id,
        "currency": "CNY",
        "newSlotId": "slot-ai-002",
        "newStartsAt": "2030-09-03T02:00:00.000Z",
        "slotId": "slot-ai-001",
        "startsAt": "2030-09-02T02:00:00.000Z",
        "version": confirmed.version,
    }
    moved = await service.reschedule_booking(
        _reschedule(confirmed, "slot-ai-002", _action_approval(intent, clock)), CONTEXT
    )
    assert (moved.booking_id, moved.payment, moved.status) == (
        confirmed.booking_id,
        confirmed.payment,
        BookingStatus.CONFIRMED,
    )
    assert (moved.slot_id, moved.version) == ("slot-ai-002", confirmed.version + 1)
    assert moved.history == (
        SlotChange(
            slot_id="slot-ai-001",
            expert_id=confirmed.expert_id,
            starts_at=confirmed.starts_at,
            ends_at=confirmed.ends_at,
            changed_at=clock.now(),
        ),
    )
    assert await _get(service, confirmed) == moved
    assert await _slot_is_free(service, "slot-ai-001")
    assert (await _refusal(_hold(service, "slot-ai-002"))).code == "SLOT_UNAVAILABLE"


async def test_two_reschedules_keep_both_previous_slots_and_issue_intents_from_the_last_move(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock)
    first = await service.reschedule_booking(
        _reschedule(
            confirmed,
            "slot-ai-002",
            _action_approval(
                (
                    await _refusal(
                        service.reschedule_booking(_reschedule(confirmed, "slot-ai-002"), CONTEXT)
                    )
                ).details["intent"],
                clock,
            ),
        ),
        CONTEXT,
    )
    clock.advance(10)
    back = await _refusal(service.reschedule_booking(_reschedule(first, "slot-ai-001"), CONTEXT))
    early = replace(
        _action_approval(back.details["intent"], clock),
        approved_at=clock.now() - timedelta(seconds=10 + 6),
    )
    refused = await _refusal(
        service.reschedule_booking(_reschedule(first, "slot-ai-001", early), CONTEXT)
    )
    assert refused.details.get("reason") == "BEFORE_INTENT"
    second = await service.reschedule_booking(
        _reschedule(first, "slot-ai-001", _action_approval(back.details["intent"], clock)), CONTEXT
    )
    assert [change.slot_id for change in second.history] == ["slot-ai-001", "slot-ai-002"]
    assert second.version == confirmed.version + 2
    assert second.last_changed_at == clock.now()


@pytest.mark.parametrize(
    ("target", "code"),
    [
        ("slot-law-001", "RESCHEDULE_PRICE_DIFFERS"),
        ("slot-none", "SLOT_NOT_FOUND"),
        ("slot-ai-001", "SLOT_UNAVAILABLE"),
    ],
)
async def test_a_reschedule_to_a_slot_it_cannot_have_is_refused_before_any_approval(
    service: BookingService, payments: FakePayments, clock: MutableClock, target: str, code: str
) -> None:
    confirmed = await _confirmed(service, payments, clock)
    refused = await _refusal(service.reschedule_booking(_reschedule(confirmed, target), CONTEXT))
    assert refused.code == code
    assert await _get(service, confirmed) == confirmed


async def test_a_reschedule_to_a_taken_or_started_slot_is_slot_unavailable(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock)
    await _hold(service, "slot-ai-002")
    refused = await _refusal(
        service.reschedule_booking(_reschedule(confirmed, "slot-ai-002"), CONTEXT)
    )
    assert refused.code == "SLOT_UNAVAILABLE"
    other = await _confirmed(service, payments, clock, "slot-fin-002")
    clock.set(other.starts_at.replace(day=5))  # slot-fin-001's start, a day before its own
    refused = await _refusal(
        service.reschedule_booking(_reschedule(other, "slot-fin-001"), CONTEXT)
    )
    assert (refused.code, refused.message) == ("SLOT_UNAVAILABLE", "The slot has already started.")
    assert wire_details(refused)["slotId"] == "slot-fin-001"


async def test_once_its_appointment_has_started_a_booking_is_neither_cancelled_nor_moved(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock, "slot-fin-001")
    clock.set(confirmed.starts_at)
    moved = await _refusal(
        service.reschedule_booking(_reschedule(confirmed, "slot-fin-002"), CONTEXT)
    )
    approved = _cancel(confirmed, _action_approval(cancel_intent(confirmed), clock))
    cancelled = await _refusal(service.cancel_booking(approved, CONTEXT))
    for refused in (moved, cancelled):
        assert refused.code == "INVALID_STATE"
        assert (
            refused.message == "The appointment has already started; it can no longer be changed."
        )
        assert refused.details["reason"] == "STARTED"
        assert refused.details["starts_at"] == confirmed.starts_at
        assert refused.booking == confirmed  # the snapshot the agent shows the person
    assert await _get(service, confirmed) == confirmed  # no refund owed for a session given


async def test_only_a_confirmed_booking_can_be_rescheduled(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    held = await _hold(service)
    refused = await _refusal(service.reschedule_booking(_reschedule(held, "slot-ai-002"), CONTEXT))
    assert (refused.code, refused.details["status"]) == ("INVALID_STATE", "HELD")


async def test_a_repeated_reschedule_key_replays_the_move(
    store: BookingStore, service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock)
    lookup = await store.run(lambda tx: tx.lookup_slot("slot-ai-002"))
    assert lookup is not None
    command = _reschedule(
        confirmed, "slot-ai-002", _action_approval(reschedule_intent(confirmed, lookup.slot), clock)
    )
    first = await service.reschedule_booking(command, CONTEXT)
    assert await service.reschedule_booking(command, CONTEXT) == first
    assert (await _get(service, confirmed)).version == first.version
    conflict = await _refusal(
        service.reschedule_booking(replace(command, new_slot_id="slot-ai-001"), CONTEXT)
    )
    assert conflict.code == "IDEMPOTENCY_CONFLICT"
    listed = await service.list_bookings(
        ListBookings(limit=5, idempotency_key=command.idempotency_key), CONTEXT
    )
    assert [booking.version for booking in listed.bookings] == [first.version]


async def test_reschedule_refusals_carry_the_details_their_recovery_refers_to(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    """Which booking, which slot, and (price) both prices: what an agent is told to read."""
    confirmed = await _confirmed(service, payments, clock)
    booking_id = confirmed.booking_id

    async def refused(target: str, booking: Booking = confirmed) -> BookingError:
        return await _refusal(service.reschedule_booking(_reschedule(booking, target), CONTEXT))

    missing = await refused("slot-ai-002", replace(confirmed, booking_id="booking-none"))
    assert (missing.code, wire_details(missing)) == (
        "BOOKING_NOT_FOUND",
        {"bookingId": "booking-none"},
    )
    price = await refused("slot-law-001")
    assert (price.code, wire_details(price)) == (
        "RESCHEDULE_PRICE_DIFFERS",
        {
            "bookingId": booking_id,
            "slotId": "slot-law-001",
            "bookingAmount": "500.00",
            "bookingCurrency": "CNY",
            "slotAmount": "800.00",
            "slotCurrency": "CNY",
        },
    )
    unknown = await refused("slot-none")
    assert (unknown.code, wire_details(unknown)["slotId"]) == ("SLOT_NOT_FOUND", "slot-none")
    same = await refused("slot-ai-001")
    assert (same.code, same.message, wire_details(same)["slotId"]) == (
        "SLOT_UNAVAILABLE",
        "The booking already has this slot.",
        "slot-ai-001",
    )
    await _hold(service, "slot-ai-002")
    taken = await refused("slot-ai-002")
    assert (taken.code, taken.message, wire_details(taken)["slotId"]) == (
        "SLOT_UNAVAILABLE",
        None,  # the code's standard message: someone else has it
        "slot-ai-002",
    )
    clock.set(datetime(2030, 9, 2, 2, tzinfo=UTC))  # its own slot-ai-001 starts
    started = await refused("slot-ai-002")
    assert (started.code, wire_details(started)) == (
        "INVALID_STATE",
        {
            "bookingId": booking_id,
            "status": "CONFIRMED",
            "reason": "STARTED",
            "startsAt": "2030-09-02T02:00:00.000Z",
        },
    )
    assert await _get(service, confirmed) == confirmed


async def test_a_reschedule_key_reused_with_other_arguments_names_the_key(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock)
    key = _key()
    first = await _refusal(
        service.reschedule_booking(_reschedule(confirmed, "slot-ai-002", key=key), CONTEXT)
    )
    assert first.code == "HUMAN_APPROVAL_REQUIRED"
    # A refusal stores nothing under the key: only a move does.
    intent = first.details["intent"]
    moved = await service.reschedule_booking(
        _reschedule(confirmed, "slot-ai-002", _action_approval(intent, clock), key=key),
        CONTEXT,
    )
    conflict = await _refusal(
        service.reschedule_booking(_reschedule(confirmed, "slot-fin-001", key=key), CONTEXT)
    )
    assert (conflict.code, wire_details(conflict)) == (
        "IDEMPOTENCY_CONFLICT",
        {"idempotencyKey": key},
    )
    assert await _get(service, confirmed) == moved


async def test_a_reschedule_drops_the_slot_page_cache_and_its_replay_keeps_it(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock)
    query = SearchSlots(ALL, 10)
    before = await service.search_available_slots(query, CONTEXT)
    assert "slot-ai-002" in [slot.slot_id for slot in before.slots]
    assert (await service.search_available_slots(query, CONTEXT)).cache_hit
    intent = (
        await _refusal(service.reschedule_booking(_reschedule(confirmed, "slot-ai-002"), CONTEXT))
    ).details["intent"]
    command = _reschedule(confirmed, "slot-ai-002", _action_approval(intent, clock))
    moved = await service.reschedule_booking(command, CONTEXT)
    after = await service.search_available_slots(query, CONTEXT)
    assert not after.cache_hit
    free = [slot.slot_id for slot in after.slots]
    assert "slot-ai-001" in free
    assert "slot-ai-002" not in free
    assert (await service.search_available_slots(query, CONTEXT)).cache_hit
    # The replay changes nothing: the cached page stays.
    assert await service.reschedule_booking(command, CONTEXT) == moved
    assert (await service.search_available_slots(query, CONTEXT)).cache_hit


async def test_the_payment_query_of_a_cancel_runs_in_the_callers_trace(
    service: BookingService, payments: FakePayments
) -> None:
    held = await _hold(service)
    payments.script(held.booking_id, answer(held, "PENDING"))
    trace = TraceContext(trace_id="0af7651916cd43dd8448eb211c80319c", span_id="b7ad6b7169203331")
    await service.cancel_booking(_cancel(held), replace(CONTEXT, trace=trace))
    assert payments.calls == [PaymentCall(held.booking_id, trace)] * 2  # and the second look


async def test_cancel_refusals_carry_the_details_their_recovery_refers_to(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    """Which booking, its status and snapshot, or both versions: what an agent is told to read."""
    confirmed = await _confirmed(service, payments, clock)
    missing = await _refusal(
        service.cancel_booking(_cancel(replace(confirmed, booking_id="booking-none")), CONTEXT)
    )
    assert (missing.code, wire_details(missing)) == (
        "BOOKING_NOT_FOUND",
        {"bookingId": "booking-none"},
    )
    stale = await _refusal(service.cancel_booking(_cancel(confirmed, expected_version=1), CONTEXT))
    assert (stale.code, wire_details(stale)) == (
        "VERSION_CONFLICT",
        {"bookingId": confirmed.booking_id, "expectedVersion": 1, "currentVersion": 2},
    )
    held = await _hold(service, "slot-ai-002")
    payments.script(held.booking_id, answer(held, "PENDING"))
    done = await service.cancel_booking(_cancel(held), CONTEXT)
    final = await _refusal(service.cancel_booking(_cancel(done), CONTEXT))
    assert (final.code, wire_details(final), final.booking) == (
        "INVALID_STATE",
        {"bookingId": held.booking_id, "status": "CANCELLED"},
        done,
    )


async def test_a_cancel_key_reused_with_other_arguments_names_the_key(
    service: BookingService, payments: FakePayments
) -> None:
    held = await _hold(service)
    payments.script(held.booking_id, answer(held, "PENDING"))
    key = _key()
    done = await service.cancel_booking(_cancel(held, key=key), CONTEXT)
    conflict = await _refusal(
        service.cancel_booking(_cancel(held, key=key, expected_version=7), CONTEXT)
    )
    assert (conflict.code, wire_details(conflict)) == (
        "IDEMPOTENCY_CONFLICT",
        {"idempotencyKey": key},
    )
    assert await _get(service, held) == done


async def test_a_cancel_drops_the_slot_page_cache_and_its_replay_keeps_it(
    service: BookingService, payments: FakePayments
) -> None:
    held = await _hold(service)
    payments.script(held.booking_id, answer(held, "PENDING"))
    query = SearchSlots(ALL, 10)
    assert "slot-ai-001" not in [
        s.slot_id for s in (await service.search_available_slots(query, CONTEXT)).slots
    ]
    assert (await service.search_available_slots(query, CONTEXT)).cache_hit
    command = _cancel(held)
    done = await service.cancel_booking(command, CONTEXT)
    after = await service.search_available_slots(query, CONTEXT)
    assert not after.cache_hit
    assert "slot-ai-001" in [slot.slot_id for slot in after.slots]
    # The replay changes nothing: the cached page stays.
    assert await service.cancel_booking(command, CONTEXT) == done
    assert (await service.search_available_slots(query, CONTEXT)).cache_hit


async def test_a_reschedule_releases_an_overdue_hold_of_its_target_and_moves(
    store: BookingStore, service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    """No read in between releases the overdue hold: the reschedule's own release frees it."""
    confirmed = await _confirmed(service, payments, clock)
    overdue = await _hold(service, "slot-ai-002")
    clock.advance(POLICY.hold_ttl.total_seconds())
    lookup = await store.run(lambda tx: tx.lookup_slot("slot-ai-002"))
    assert lookup is not None
    intent = reschedule_intent(confirmed, lookup.slot)
    moved = await service.reschedule_booking(
        _reschedule(confirmed, "slot-ai-002", _action_approval(intent, clock)), CONTEXT
    )
    assert (moved.slot_id, moved.status) == ("slot-ai-002", BookingStatus.CONFIRMED)
    assert (await _get(service, overdue)).status is BookingStatus.EXPIRED


async def test_a_reschedule_of_an_unknown_booking_keeps_the_slot_page_cache(
    service: BookingService, payments: FakePayments, clock: MutableClock
) -> None:
    confirmed = await _confirmed(service, payments, clock)
    query = SearchSlots(ALL, 10)
    assert not (await service.search_available_slots(query, CONTEXT)).cache_hit
    unknown = replace(confirmed, booking_id="booking-none")
    refused = await _refusal(
        service.reschedule_booking(_reschedule(unknown, "slot-ai-002"), CONTEXT)
    )
    assert refused.code == "BOOKING_NOT_FOUND"
    assert (await service.search_available_slots(query, CONTEXT)).cache_hit


async def test_a_reschedule_refused_on_a_slot_another_server_took_drops_the_search_cache(
    service: BookingService, store: BookingStore, payments: FakePayments, clock: MutableClock
) -> None:
    """As for a refused hold (test_booking_service): the cache listed the target as free."""
    confirmed = await _confirmed(service, payments, clock)
    other = BookingService(store=store, payments=payments, clock=clock, policy=POLICY)
    query = SearchSlots(ALL, 20)
    assert "slot-ai-002" in [
        s.slot_id for s in (await service.search_available_slots(query, CONTEXT)).slots
    ]
    await _hold(other, "slot-ai-002")
    assert (await service.search_available_slots(query, CONTEXT)).cache_hit
    refused = await _refusal(
        service.reschedule_booking(_reschedule(confirmed, "slot-ai-002"), CONTEXT)
    )
    assert refused.code == "SLOT_UNAVAILABLE"
    page = await service.search_available_slots(query, CONTEXT)
    assert not page.cache_hit
    assert "slot-ai-002" not in [slot.slot_id for slot in page.slots]


# --- a wall clock stepped back ------------------------------------------------------------------


async def test_a_clock_stepped_back_never_records_a_change_before_the_state_it_leaves(
    store: BookingStore,
    service: BookingService,
    payments: FakePayments,
    clock: MutableClock,
    tmp_path: Path,
) -> None:
    """NTP or a restored VM can move the wall clock back: each change is recorded at the later
    of the clock and the booking's last change, so the order a caller checks still holds.

    Judgements keep the clock as it is (each approval below is dated 3 s before the state it
    approves, within the 5 s skew); only the recorded instants are held back.
    """
    unpaid = await _hold(service)
    payments.script(unpaid.booking_id, answer(unpaid, "PENDING"))
    clock.advance(-3600)
    cancelled = await service.cancel_booking(_cancel(unpaid), CONTEXT)
    assert cancelled.cancelled_at == unpaid.held_at  # an hour before the hold, unclamped

    held = await _hold(service, "slot-ai-002")
    clock.set(held.held_at - timedelta(seconds=3))  # each step below: 3 s before the hold
    payments.script(held.booking_id, answer(held, "PAID", paid_at=held.held_at))
    confirm = ConfirmBooking(held.booking_id, held.version, _key(), approval(held, clock.now()))
    confirmed = await service.confirm_booking(confirm, CONTEXT)
    assert confirmed.confirmed_at == held.held_at

    clock.set(held.held_at - timedelta(seconds=3))
    target = await store.run(lambda tx: tx.lookup_slot(unpaid.slot_id))  # free again
    assert target is not None
    approve = _action_approval(reschedule_intent(confirmed, target.slot), clock)
    move = _reschedule(confirmed, unpaid.slot_id, approve)
    moved = await service.reschedule_booking(move, CONTEXT)
    assert [change.changed_at for change in moved.history] == [held.held_at]

    clock.set(held.held_at - timedelta(seconds=3))
    approve = _action_approval(cancel_intent(moved), clock)
    ended = await service.cancel_booking(_cancel(moved, approve), CONTEXT)
    assert ended.cancelled_at == held.held_at

    database = tmp_path / "booking.db"  # the SQLite engine's file; the memory fake has none
    if database.exists():
        assert check_invariants(database) == []


@pytest.mark.parametrize("engine", sorted(ENGINES))
async def test_a_clock_stepped_back_cannot_move_a_booking_into_a_slot_begun_by_its_last_change(
    engine: str, payments: FakePayments, clock: MutableClock, tmp_path: Path
) -> None:
    """The move would be recorded at the booking's last change, after the target's start: the
    target counts as started then, though the stepped-back clock reads before it."""
    async with ENGINES[engine](tmp_path, WIDER_CATALOG) as store:
        service = BookingService(store=store, payments=payments, clock=clock, policy=POLICY)
        clock.set(datetime(2030, 9, 2, 0, 59, 50, tzinfo=UTC))
        held = await _hold(service)  # slot-ai-001, at 02:00
        clock.set(datetime(2030, 9, 2, 1, 0, 2, tzinfo=UTC))
        payments.script(held.booking_id, answer(held, "PAID", paid_at=clock.now()))
        confirm = ConfirmBooking(held.booking_id, 1, _key(), approval(held, clock.now()))
        confirmed = await service.confirm_booking(confirm, CONTEXT)
        clock.set(datetime(2030, 9, 2, 0, 59, 58, tzinfo=UTC))  # 4 s back: approvals still fit
        target = await store.run(lambda tx: tx.lookup_slot("slot-ai-b04"))  # starts at 01:00
        assert target is not None
        approve = _action_approval(reschedule_intent(confirmed, target.slot), clock)
        move = _reschedule(confirmed, "slot-ai-b04", approve)
        refused = await _refusal(service.reschedule_booking(move, CONTEXT))
        assert (refused.code, refused.message) == ("SLOT_UNAVAILABLE", SLOT_STARTED)
        assert (await _get(service, confirmed)).slot_id == "slot-ai-001"
