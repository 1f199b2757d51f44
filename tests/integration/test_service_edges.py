"""More behaviours that surviving mutants showed no test pinned (issue 10 item 9, second pass):
the wording and snapshots of refusals, booking ids, a confirm racing its own retry, the page
cache after a release, and the paid-after-expiry line. Through the service, on the SQLite store.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import replace
from datetime import timedelta
from typing import Any

import anyio
import pytest

from expert_booking.adapters.sqlite_store import SqliteBookingStore
from expert_booking.confirmation import ConfirmBooking
from expert_booking.domain.errors import BookingError
from expert_booking.domain.model import (
    Booking,
    BookingStatus,
    Customer,
    HumanApproval,
    PaymentAnswer,
)
from expert_booking.edge.error_texts import message_of, wire_details
from expert_booking.edge.wire import render_intent, render_slot
from expert_booking.ports import TraceContext
from expert_booking.services import (
    BookingService,
    GetBooking,
    HoldSlot,
    SearchSlots,
)
from tests.fakes import (
    ALL,
    CONTEXT,
    POLICY,
    SEED_SLOT_AI_002,
    SLOT_AI_001_STARTS_AT,
    FakePayments,
    MutableClock,
    answer,
    approval,
)

pytestmark = pytest.mark.anyio

CUSTOMER = Customer(name="Ada Lovelace", email="ada@example.com")


async def _hold(service: BookingService, slot_id: str = "slot-ai-001") -> Booking:
    return await service.hold_slot(HoldSlot(slot_id, CUSTOMER, str(uuid.uuid4())), CONTEXT)


def _confirm(
    booking: Booking, human: HumanApproval | None, key: str | None = None, version: int = 1
) -> ConfirmBooking:
    return ConfirmBooking(booking.booking_id, version, key or str(uuid.uuid4()), human)


async def _refused(call: Any) -> BookingError:
    with anyio.fail_after(5), pytest.raises(BookingError) as excinfo:
        await call
    return excinfo.value


async def test_approval_refusals_say_which_freshness_rule_failed(
    service: BookingService, clock: MutableClock
) -> None:
    held = await _hold(service)
    now = clock.now()
    said = {}
    for name, approved_at in {
        "future": now + POLICY.approval_skew * 2,
        "before-intent": now - POLICY.approval_skew * 2,
    }.items():
        command = _confirm(held, approval(held, approved_at))
        error = await _refused(service.confirm_booking(command, CONTEXT))
        said[name] = (error.code, message_of(error))
    clock.advance((POLICY.approval_ttl + POLICY.approval_skew * 2).total_seconds())
    stale = await _refused(service.confirm_booking(_confirm(held, approval(held, now)), CONTEXT))
    said["stale"] = (stale.code, message_of(stale))
    assert said == {
        "future": ("HUMAN_APPROVAL_EXPIRED", "The approval is dated in the future."),
        "before-intent": (
            "HUMAN_APPROVAL_EXPIRED",
            "The approval is dated before the server issued the intent it approves.",
        ),
        "stale": ("HUMAN_APPROVAL_EXPIRED", "The approval is older than the approval lifetime."),
    }


async def test_a_slot_that_has_started_cannot_be_held_and_the_refusal_says_so(
    service: BookingService, clock: MutableClock
) -> None:
    clock.set(SLOT_AI_001_STARTS_AT)
    refused = await _refused(_hold(service, "slot-ai-001"))
    assert (refused.code, message_of(refused), wire_details(refused)) == (
        "SLOT_UNAVAILABLE",
        "The slot has already started.",
        # The expert's other (seed) slot, the next day, is offered instead.
        {"slotId": "slot-ai-001", "alternatives": [render_slot(SEED_SLOT_AI_002)]},
    )


async def test_confirm_refusals_name_the_booking_and_the_key(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    held = await _hold(service)
    now = clock.now()
    other_amount = replace(held.intent, amount="1.00")
    mismatch = _confirm(held, approval(held, now, intent=other_amount))
    missing = ConfirmBooking("booking-none", 1, str(uuid.uuid4()), approval(held, now))
    found = {}

    async def record(name: str, command: ConfirmBooking) -> None:
        error = await _refused(service.confirm_booking(command, CONTEXT))
        found[name] = (error.code, wire_details(error))

    await record("mismatch", mismatch)
    await record("missing", missing)
    payments.script(held.booking_id, answer(held, "PAID", paid_at=now))
    key = str(uuid.uuid4())
    await service.confirm_booking(_confirm(held, approval(held, now), key), CONTEXT)
    await record("key", _confirm(held, approval(held, now), key, version=2))  # other arguments
    assert found == {
        "mismatch": (
            "APPROVAL_INTENT_MISMATCH",
            {
                "bookingId": held.booking_id,
                "fields": ["amount"],
                "changes": [{"field": "amount", "approvedValue": "1.00", "currentValue": "500.00"}],
                "intent": render_intent(held.intent),
                "intentHash": held.intent.digest(),
            },
        ),
        "missing": ("BOOKING_NOT_FOUND", {"bookingId": "booking-none"}),
        "key": ("IDEMPOTENCY_CONFLICT", {"idempotencyKey": key}),
    }


async def test_expired_and_invalid_state_refusals_carry_the_booking_as_it_is_now(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    confirmed = await _hold(service, "slot-law-001")
    payments.script(confirmed.booking_id, answer(confirmed, "PAID", paid_at=clock.now()))
    await service.confirm_booking(_confirm(confirmed, approval(confirmed, clock.now())), CONTEXT)
    expiring = await _hold(service)
    clock.advance(POLICY.hold_ttl.total_seconds())
    expired = await _refused(
        service.confirm_booking(_confirm(expiring, approval(expiring, clock.now())), CONTEXT)
    )
    again = _confirm(confirmed, approval(confirmed, clock.now()), version=2)
    state = await _refused(service.confirm_booking(again, CONTEXT))
    assert expired.code == "BOOKING_EXPIRED"
    assert expired.booking == await service.get_booking(GetBooking(expiring.booking_id), CONTEXT)
    assert expired.booking is not None
    assert expired.booking.status is BookingStatus.EXPIRED
    assert state.code == "INVALID_STATE"
    assert state.booking == await service.get_booking(GetBooking(confirmed.booking_id), CONTEXT)


async def test_the_payment_page_base_url_is_kept_as_written_but_for_trailing_slashes(
    store: SqliteBookingStore, clock: MutableClock
) -> None:
    policy = replace(POLICY, payment_page_base_url="http://127.0.0.1:3100/pay/X//")
    service = BookingService(store=store, payments=FakePayments(), clock=clock, policy=policy)
    held = await _hold(service)
    assert held.payment_page_url == f"http://127.0.0.1:3100/pay/X/{held.booking_id}"


async def test_a_booking_id_carries_128_random_bits(service: BookingService) -> None:
    ids = {(await _hold(service, slot)).booking_id for slot in ("slot-ai-001", "slot-ai-002")}
    assert len(ids) == 2
    assert all(re.fullmatch(r"booking-[0-9a-f]{32}", booking_id) for booking_id in ids)


class _HeldPayments(FakePayments):
    """Answers PAID; the first query waits until ``release`` is set (a slow payment service)."""

    def __init__(self) -> None:
        super().__init__()
        self.first_in_flight = anyio.Event()
        self.release = anyio.Event()

    async def query_payment(self, booking_id: str, trace: TraceContext) -> PaymentAnswer:
        if not self.first_in_flight.is_set():
            self.first_in_flight.set()
            await self.release.wait()
        return await super().query_payment(booking_id, trace)


async def test_a_confirm_whose_retry_settled_first_returns_the_retry_s_outcome(
    store: SqliteBookingStore, clock: MutableClock
) -> None:
    """A retry with the same key overtakes a slow first attempt: both answer the one outcome."""
    payments = _HeldPayments()
    service = BookingService(store=store, payments=payments, clock=clock, policy=POLICY)
    held = await _hold(service)
    payments.script(held.booking_id, answer(held, "PAID", paid_at=clock.now()))
    command = _confirm(held, approval(held, clock.now()))
    outcomes: dict[str, Booking] = {}

    async def first() -> None:
        outcomes["first"] = await service.confirm_booking(command, CONTEXT)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(first)
            await payments.first_in_flight.wait()
            outcomes["retry"] = await service.confirm_booking(command, CONTEXT)
            payments.release.set()
    assert outcomes["first"] == outcomes["retry"]
    assert (outcomes["retry"].status, outcomes["retry"].version) == (BookingStatus.CONFIRMED, 2)
    assert len(payments.calls) == 2


async def test_a_search_after_the_next_hold_expired_shows_its_slot_free(
    service: BookingService, clock: MutableClock
) -> None:
    overdue = await _hold(service, "slot-ai-001")
    clock.advance(3)
    await _hold(service, "slot-law-001")  # expires 3 s after the first
    clock.advance(POLICY.hold_ttl.total_seconds() - 3)
    query = SearchSlots(ALL, 10)
    released = await service.search_available_slots(query, CONTEXT)  # releases the first hold
    assert "slot-ai-001" in [s.slot_id for s in released.slots]
    assert "slot-law-001" not in [s.slot_id for s in released.slots]
    clock.advance(3)  # the second hold is due now, well inside the page cache's 5 s
    again = await service.search_available_slots(query, CONTEXT)
    assert not again.cache_hit
    assert "slot-law-001" in [s.slot_id for s in again.slots]
    assert (await service.get_booking(GetBooking(overdue.booking_id), CONTEXT)).version == 2


async def test_a_payment_after_expiry_logs_one_refund_due_line_naming_the_booking(
    service: BookingService,
    clock: MutableClock,
    payments: FakePayments,
    caplog: pytest.LogCaptureFixture,
) -> None:
    held = await _hold(service)
    command = _confirm(held, approval(held, clock.now()))

    def paid_after_the_hold_expired() -> Any:
        clock.advance(POLICY.hold_ttl.total_seconds())
        return answer(held, "PAID", paid_at=clock.now())

    payments.script(held.booking_id, paid_after_the_hold_expired)
    with caplog.at_level(logging.WARNING, logger="expert_booking.services"):
        refused = await _refused(service.confirm_booking(command, CONTEXT))
    assert refused.code == "PAID_AFTER_EXPIRY"
    line = f"paid after expiry: booking {held.booking_id} was paid after its hold expired"
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", f"{line}; refund due")
    ]


async def test_refused_holds_and_confirms_keep_the_slot_page_cache(
    service: BookingService, clock: MutableClock
) -> None:
    """Only a change or a release drops cached pages; a refusal changes nothing."""
    held = await _hold(service)
    query = SearchSlots(ALL, 10)
    assert not (await service.search_available_slots(query, CONTEXT)).cache_hit
    assert (await _refused(_hold(service))).code == "SLOT_UNAVAILABLE"
    assert (await service.search_available_slots(query, CONTEXT)).cache_hit
    refused = await _refused(service.confirm_booking(_confirm(held, None), CONTEXT))
    assert refused.code == "HUMAN_APPROVAL_REQUIRED"
    assert (await service.search_available_slots(query, CONTEXT)).cache_hit


async def test_holds_refused_without_a_write_keep_the_slot_page_cache(
    service: BookingService, clock: MutableClock
) -> None:
    """An unknown or already started slot is refused as a value (the transaction commits, with
    no change and no release): the cached pages stay valid, so the next search is a hit."""
    query = SearchSlots(ALL, 10)
    assert not (await service.search_available_slots(query, CONTEXT)).cache_hit
    assert (await _refused(_hold(service, "slot-none"))).code == "SLOT_NOT_FOUND"
    assert (await service.search_available_slots(query, CONTEXT)).cache_hit
    clock.set(SLOT_AI_001_STARTS_AT)  # the page listing slot-ai-001 ends here
    assert not (await service.search_available_slots(query, CONTEXT)).cache_hit
    started = await _refused(_hold(service, "slot-ai-001"))
    assert (started.code, started.message) == ("SLOT_UNAVAILABLE", "The slot has already started.")
    assert (await service.search_available_slots(query, CONTEXT)).cache_hit


async def test_a_page_read_after_another_process_released_still_ends_at_the_next_hold_expiry(
    store: SqliteBookingStore,
    clock: MutableClock,
    payments: FakePayments,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two services on one database (two processes, two caches). A search that peeked an
    overdue hold, which the other process then released, stores its page only until the next
    hold expiry: that hold is overdue afterwards and its slot must show free again."""
    long_cache = replace(POLICY, slot_cache_ttl=timedelta(hours=1))
    here = BookingService(store=store, payments=payments, clock=clock, policy=long_cache)
    other = BookingService(store=store, payments=payments, clock=clock, policy=long_cache)
    overdue = await _hold(other, "slot-ai-001")
    clock.advance(10)
    next_due = await _hold(other, "slot-law-001")  # expires 10 s after the first hold
    clock.set(overdue.expires_at)
    peek = store.peek_free_slots

    async def peek_then_the_other_process_releases(*args: Any) -> Any:
        found = await peek(*args)
        await other.get_booking(GetBooking(overdue.booking_id), CONTEXT)  # releases it
        return found

    monkeypatch.setattr(store, "peek_free_slots", peek_then_the_other_process_releases)
    query = SearchSlots(ALL, 10)
    page = await here.search_available_slots(query, CONTEXT)
    monkeypatch.undo()
    free = [slot.slot_id for slot in page.slots]
    assert "slot-ai-001" in free
    assert "slot-law-001" not in free
    clock.set(next_due.expires_at)
    again = await here.search_available_slots(query, CONTEXT)
    assert not again.cache_hit
    assert "slot-law-001" in [slot.slot_id for slot in again.slots]
