"""Behaviours that surviving mutants showed no test pinned (issue 10 item 9), through the service.

Each test names the behaviour; each would fail with the mutant that survived before it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from expert_booking.confirmation import ConfirmBooking
from expert_booking.domain.errors import BookingError
from expert_booking.domain.model import BookingStatus, Customer
from expert_booking.edge.error_texts import wire_details
from expert_booking.edge.wire import render_slot
from expert_booking.policy import BookingPolicy
from expert_booking.ports import SlotQuery
from expert_booking.services import (
    BookingService,
    GetBooking,
    HoldSlot,
    SearchSlots,
)
from tests.fakes import (
    CONTEXT,
    SEED_SLOT_AI_002,
    FakePayments,
    MutableClock,
    answer,
    approval,
)

pytestmark = pytest.mark.anyio

SKEW = timedelta(seconds=5)
POLICY = BookingPolicy(
    hold_ttl=timedelta(seconds=300),
    approval_ttl=timedelta(seconds=120),
    approval_skew=SKEW,
    slot_cache_ttl=timedelta(seconds=5),
    payment_page_base_url="http://127.0.0.1:3100/pay/",  # a trailing slash, as users write it
)
CUSTOMER = Customer(name="Ada Lovelace", email="Ada.Lovelace@Example.com")


def _hold(slot_id: str = "slot-ai-001", key: str | None = None) -> HoldSlot:
    return HoldSlot(slot_id=slot_id, customer=CUSTOMER, idempotency_key=key or str(uuid.uuid4()))


async def _refused(call: Any) -> BookingError:
    with anyio.fail_after(5), pytest.raises(BookingError) as excinfo:
        await call
    return excinfo.value


def _window(after: str | None, before: str | None) -> SlotQuery:
    return SlotQuery(
        text="",
        specialty=None,
        starts_after=None if after is None else datetime.fromisoformat(after),
        starts_before=None if before is None else datetime.fromisoformat(before),
    )


async def test_searches_that_differ_only_by_date_window_do_not_share_a_cache_entry(
    service: BookingService,
) -> None:
    everything = await service.search_available_slots(SearchSlots(_window(None, None), 2), CONTEXT)
    later = await service.search_available_slots(
        SearchSlots(_window("2030-09-03T00:00:00+00:00", None), 2), CONTEXT
    )
    earlier = await service.search_available_slots(
        SearchSlots(_window(None, "2030-09-02T05:00:00+00:00"), 2), CONTEXT
    )
    assert not later.cache_hit
    assert not earlier.cache_hit
    assert [s.slot_id for s in everything.slots] == ["slot-ai-001", "slot-law-001"]
    assert [s.slot_id for s in later.slots] == ["slot-ai-002", "slot-law-002"]
    assert [s.slot_id for s in earlier.slots] == ["slot-ai-001"]
    assert (everything.total, later.total, earlier.total) == (6, 4, 1)
    # A cursor is bound to its window too.
    assert everything.next_cursor is not None
    refused = await _refused(
        service.search_available_slots(
            SearchSlots(_window("2030-09-03T00:00:00+00:00", None), 2, everything.next_cursor),
            CONTEXT,
        )
    )
    assert refused.code == "INVALID_CURSOR"


async def test_hold_releases_an_overdue_hold_of_the_same_slot_itself(
    service: BookingService, clock: MutableClock
) -> None:
    first = await service.hold_slot(_hold(), CONTEXT)
    clock.advance(POLICY.hold_ttl.total_seconds())  # expiresAt reached: overdue
    # No search or get in between: only the hold's own release can free the slot.
    second = await service.hold_slot(_hold(), CONTEXT)
    assert second.status is BookingStatus.HELD
    assert second.booking_id != first.booking_id
    expired = await service.get_booking(GetBooking(first.booking_id), CONTEXT)
    assert (expired.status, expired.version) == (BookingStatus.EXPIRED, 2)


async def test_the_payment_page_url_has_one_slash_before_the_booking_id(
    service: BookingService,
) -> None:
    held = await service.hold_slot(_hold(), CONTEXT)
    assert held.payment_page_url == f"http://127.0.0.1:3100/pay/{held.booking_id}"


async def test_a_failed_answer_carrying_paid_at_records_no_paid_time(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    held = await service.hold_slot(_hold(), CONTEXT)
    payments.script(held.booking_id, answer(held, "FAILED", paid_at=clock.now()))
    command = ConfirmBooking(held.booking_id, 1, str(uuid.uuid4()), approval(held, clock.now()))
    refused = await _refused(service.confirm_booking(command, CONTEXT))
    assert refused.code == "PAYMENT_FAILED"
    stored = await service.get_booking(GetBooking(held.booking_id), CONTEXT)
    assert stored.status is BookingStatus.PAYMENT_FAILED
    assert stored.payment.paid_at is None


async def test_an_ordinary_paid_confirm_logs_no_reconciliation_warning(
    service: BookingService,
    clock: MutableClock,
    payments: FakePayments,
    caplog: pytest.LogCaptureFixture,
) -> None:
    held = await service.hold_slot(_hold(), CONTEXT)
    payments.script(held.booking_id, answer(held, "PAID", paid_at=clock.now()))
    command = ConfirmBooking(held.booking_id, 1, str(uuid.uuid4()), approval(held, clock.now()))
    with caplog.at_level(logging.WARNING, logger="expert_booking.services"):
        confirmed = await service.confirm_booking(command, CONTEXT)
    assert confirmed.status is BookingStatus.CONFIRMED
    # No warning at all: the paid-after-expiry line's wording may change, its absence may not.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_an_idempotency_key_in_upper_case_replays_the_same_hold(
    service: BookingService,
) -> None:
    key = str(uuid.uuid4())
    first = await service.hold_slot(_hold(key=key), CONTEXT)
    again = await service.hold_slot(_hold(key=key.upper()), CONTEXT)
    assert again == first
    refused = await _refused(service.hold_slot(_hold("slot-ai-002", key=key.upper()), CONTEXT))
    assert refused.code == "IDEMPOTENCY_CONFLICT"
    assert wire_details(refused) == {"idempotencyKey": key}  # echoed in the canonical form


async def test_a_confirm_key_in_another_case_replays_the_same_outcome(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    held = await service.hold_slot(_hold(), CONTEXT)
    payments.script(held.booking_id, answer(held, "PAID", paid_at=clock.now()))
    key = str(uuid.uuid4())
    human = approval(held, clock.now())
    confirmed = await service.confirm_booking(
        ConfirmBooking(held.booking_id, 1, key, human), CONTEXT
    )
    replayed = await service.confirm_booking(
        ConfirmBooking(held.booking_id, 1, key.upper(), human), CONTEXT
    )
    assert replayed == confirmed
    assert len(payments.calls) == 1


async def test_the_stored_fingerprint_is_sha256_of_the_canonical_arguments(
    service: BookingService, db_path: Path
) -> None:
    key = str(uuid.uuid4()).upper()
    await service.hold_slot(_hold(key=key), CONTEXT)
    with sqlite3.connect(db_path) as db:
        rows = db.execute("SELECT scope, key, fingerprint FROM idempotency").fetchall()
    canonical = json.dumps(
        {
            "customer": {
                "email": "Ada.Lovelace@Example.com",
                "name": "Ada Lovelace",
                "note": None,
                "phone": None,
            },
            "slot_id": "slot-ai-001",
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    assert rows == [
        ("booking.hold_slot", key.lower(), hashlib.sha256(canonical.encode()).hexdigest())
    ]


async def _held_and_confirm(
    service: BookingService, clock: MutableClock, **changes: Any
) -> tuple[Any, ConfirmBooking]:
    held = await service.hold_slot(_hold(), CONTEXT)
    human = approval(held, clock.now())
    values: dict[str, Any] = {
        "booking_id": held.booking_id,
        "expected_version": 1,
        "idempotency_key": str(uuid.uuid4()),
        "human_approval": human,
        **changes,
    }
    return held, ConfirmBooking(**values)


async def test_refusal_details_name_what_the_recovery_sentences_refer_to(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    """Every refusal's ``details`` exactly, as the wire shows them: agents are told to read them."""
    held, wrong_version = await _held_and_confirm(service, clock, expected_version=3)
    booking_id = held.booking_id
    found: dict[str, tuple[str, dict[str, Any]]] = {}

    async def record(name: str, call: Any) -> None:
        error = await _refused(call)
        found[name] = (error.code, wire_details(error))

    await record("version", service.confirm_booking(wrong_version, CONTEXT))
    await record("slot-taken", service.hold_slot(_hold(), CONTEXT))
    await record("no-slot", service.hold_slot(_hold("slot-none"), CONTEXT))
    await record("no-booking", service.get_booking(GetBooking("booking-none"), CONTEXT))
    no_approval = ConfirmBooking(booking_id, 1, str(uuid.uuid4()), None)
    await record("required", service.confirm_booking(no_approval, CONTEXT))
    rejected = ConfirmBooking(
        booking_id, 1, str(uuid.uuid4()), approval(held, clock.now(), decision="REJECT")
    )
    await record("rejected", service.confirm_booking(rejected, CONTEXT))
    stale = ConfirmBooking(
        booking_id, 1, str(uuid.uuid4()), approval(held, clock.now() - timedelta(seconds=60))
    )
    await record("before-intent", service.confirm_booking(stale, CONTEXT))
    future = ConfirmBooking(
        booking_id, 1, str(uuid.uuid4()), approval(held, clock.now() + timedelta(seconds=60))
    )
    await record("future", service.confirm_booking(future, CONTEXT))
    tampered = ConfirmBooking(
        booking_id, 1, str(uuid.uuid4()), approval(held, clock.now(), intent_hash="sha256:0")
    )
    await record("hash", service.confirm_booking(tampered, CONTEXT))
    payments.script(booking_id, answer(held, "PENDING"))
    pending = ConfirmBooking(booking_id, 1, str(uuid.uuid4()), approval(held, clock.now()))
    await record("pending", service.confirm_booking(pending, CONTEXT))
    payments.script(booking_id, answer(held, "PAID", paid_at=clock.now(), amount="5.00"))
    mismatch = ConfirmBooking(booking_id, 1, str(uuid.uuid4()), approval(held, clock.now()))
    await record("mismatch", service.confirm_booking(mismatch, CONTEXT))
    clock.advance(130)  # the approval given at the hold is now older than its lifetime
    late = ConfirmBooking(booking_id, 1, str(uuid.uuid4()), approval(held, held.held_at))
    await record("stale", service.confirm_booking(late, CONTEXT))

    expires_at = (held.held_at + POLICY.hold_ttl).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    issued_at = held.held_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert found == {
        "version": (
            "VERSION_CONFLICT",
            {"bookingId": booking_id, "expectedVersion": 3, "currentVersion": 1},
        ),
        "slot-taken": (
            "SLOT_UNAVAILABLE",
            {"slotId": "slot-ai-001", "alternatives": [render_slot(SEED_SLOT_AI_002)]},
        ),
        "no-slot": ("SLOT_NOT_FOUND", {"slotId": "slot-none"}),
        "no-booking": ("BOOKING_NOT_FOUND", {"bookingId": "booking-none"}),
        "required": ("HUMAN_APPROVAL_REQUIRED", {"bookingId": booking_id}),
        "rejected": ("HUMAN_APPROVAL_REJECTED", {"bookingId": booking_id}),
        "before-intent": (
            "HUMAN_APPROVAL_EXPIRED",
            {"bookingId": booking_id, "reason": "BEFORE_INTENT", "intentIssuedAt": issued_at},
        ),
        "future": ("HUMAN_APPROVAL_EXPIRED", {"bookingId": booking_id, "reason": "FUTURE"}),
        "hash": ("APPROVAL_INTENT_HASH_MISMATCH", {"bookingId": booking_id}),
        "pending": ("PAYMENT_PENDING", {"bookingId": booking_id, "expiresAt": expires_at}),
        "mismatch": ("PAYMENT_MISMATCH", {"bookingId": booking_id, "fields": ["amount"]}),
        "stale": (
            "HUMAN_APPROVAL_EXPIRED",
            {"bookingId": booking_id, "reason": "STALE", "approvalTtlSeconds": 120},
        ),
    }


async def test_refusals_of_a_finished_booking_carry_their_details(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    held, command = await _held_and_confirm(service, clock)
    payments.script(held.booking_id, answer(held, "CLOSED"))
    closed = await _refused(service.confirm_booking(command, CONTEXT))
    assert (closed.code, wire_details(closed)) == ("PAYMENT_CLOSED", {"bookingId": held.booking_id})
    again = ConfirmBooking(held.booking_id, 2, str(uuid.uuid4()), approval(held, clock.now()))
    state = await _refused(service.confirm_booking(again, CONTEXT))
    assert (state.code, wire_details(state)) == (
        "INVALID_STATE",
        {"bookingId": held.booking_id, "status": "PAYMENT_CLOSED"},
    )
    other, expiring = await _held_and_confirm(service, clock)
    clock.advance(POLICY.hold_ttl.total_seconds())
    expired = await _refused(service.confirm_booking(expiring, CONTEXT))
    assert (expired.code, wire_details(expired)) == (
        "BOOKING_EXPIRED",
        {"bookingId": other.booking_id},
    )
    failed_hold, failing = await _held_and_confirm(service, clock)
    payments.script(failed_hold.booking_id, answer(failed_hold, "FAILED"))
    failed = await _refused(service.confirm_booking(failing, CONTEXT))
    assert (failed.code, wire_details(failed)) == (
        "PAYMENT_FAILED",
        {"bookingId": failed_hold.booking_id},
    )
