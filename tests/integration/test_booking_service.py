"""BookingService with a settable clock and a scripted payment service, on every store engine.

Each test runs on the real SQLite store and on the in-memory fake of the store port
(``tests/memory_store.py``), except the tests that inspect or lock the SQLite file itself
(they take ``db_path``). The first five tests are the seed's most important scenarios (spec,
最重要的测试场景 1-5).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from expert_booking.adapters.clock import SystemClock
from expert_booking.adapters.sqlite_store import SqliteBookingStore
from expert_booking.confirmation import ConfirmBooking
from expert_booking.domain.errors import BookingError, PaymentUnavailableError
from expert_booking.domain.model import (
    Booking,
    BookingStatus,
    Customer,
    HumanApproval,
    PaymentStatus,
)
from expert_booking.ports import BookingStore, SlotQuery
from expert_booking.services import (
    BookingService,
    GetBooking,
    HoldSlot,
    ListBookings,
    SearchSlots,
    SlotPage,
)
from tests.fakes import (
    ALL,
    CONTEXT,
    POLICY,
    SEED_ORDER,
    SLOT_AI_001_STARTS_AT,
    FakePayments,
    MutableClock,
    answer,
    approval,
    transaction_held_open,
)
from tests.store_engines import ENGINES, REPLICAS, overlapping

pytestmark = pytest.mark.anyio


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test on a store runs on each engine; one that reads the SQLite file on SQLite only."""
    if "store" not in metafunc.fixturenames:
        return
    own = inspect.signature(metafunc.function).parameters
    metafunc.parametrize(
        "store", ["sqlite"] if "db_path" in own else sorted(ENGINES), indirect=True
    )


@pytest.fixture
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BookingStore]:
    async with ENGINES[request.param](tmp_path) as opened:
        yield opened


def _key() -> str:
    return str(uuid.uuid4())


def _customer(name: str = "Ada Lovelace") -> Customer:
    return Customer(name=name, email=f"{name.partition(' ')[0]}@Example.com")


async def _hold(
    service: BookingService,
    slot_id: str = "slot-ai-001",
    *,
    customer: Customer | None = None,
    key: str | None = None,
) -> Booking:
    command = HoldSlot(
        slot_id=slot_id, customer=customer or _customer(), idempotency_key=key or _key()
    )
    return await service.hold_slot(command, CONTEXT)


def _confirm(
    booking: Booking,
    human_approval: HumanApproval | None,
    *,
    key: str | None = None,
    expected_version: int | None = None,
) -> ConfirmBooking:
    return ConfirmBooking(
        booking_id=booking.booking_id,
        expected_version=booking.version if expected_version is None else expected_version,
        idempotency_key=key or _key(),
        human_approval=human_approval,
    )


async def _refusal(call: Awaitable[Any]) -> BookingError:
    with anyio.fail_after(5), pytest.raises(BookingError) as excinfo:
        await call
    return excinfo.value


async def _search(service: BookingService, query: SlotQuery = ALL, limit: int = 20) -> SlotPage:
    return await service.search_available_slots(SearchSlots(query=query, limit=limit), CONTEXT)


def _ids(page: SlotPage) -> list[str]:
    return [slot.slot_id for slot in page.slots]


@contextlib.contextmanager
def _raw(db_path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(db_path, isolation_level=None)
    try:
        yield connection
    finally:
        connection.close()


def _active_bookings(db_path: Path, slot_id: str) -> int:
    with _raw(db_path) as connection:
        row = connection.execute(
            "SELECT COUNT(*) FROM bookings WHERE slot_id = ? AND status IN ('HELD', 'CONFIRMED')",
            (slot_id,),
        ).fetchone()
    return int(row[0])


# --- the seed's five core scenarios ---------------------------------------------------------


async def test_a_held_slot_refuses_a_second_customer_until_the_hold_expires(
    service: BookingService, clock: MutableClock, db_path: Path
) -> None:
    first = await _hold(service, customer=_customer("Ada Lovelace"))
    assert first.status is BookingStatus.HELD
    assert first.version == 1
    assert first.expires_at == first.held_at + timedelta(seconds=300)

    refused = await _refusal(_hold(service, customer=_customer("Grace Hopper")))
    assert refused.code == "SLOT_UNAVAILABLE"
    assert "slot-ai-001" not in _ids(await _search(service))

    clock.advance(301)
    assert "slot-ai-001" in _ids(await _search(service))
    second = await _hold(service, customer=_customer("Grace Hopper"))
    assert second.status is BookingStatus.HELD
    expired = await service.get_booking(GetBooking(first.booking_id), CONTEXT)
    assert expired.status is BookingStatus.EXPIRED
    assert expired.version == 2
    assert expired.confirmation_intent is None
    assert _active_bookings(db_path, "slot-ai-001") == 1


async def test_a_pending_payment_keeps_the_hold_and_a_later_paid_answer_confirms_once(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    booking = await _hold(service)
    clock.advance(30)
    paid_at = clock.now()
    payments.script(
        booking.booking_id,
        answer(booking, "PENDING"),
        answer(booking, "PAID", paid_at=paid_at),
    )
    command = _confirm(booking, approval(booking, clock.now()))

    pending = await _refusal(service.confirm_booking(command, CONTEXT))
    assert pending.code == "PAYMENT_PENDING"
    assert pending.retryable is True
    unchanged = await service.get_booking(GetBooking(booking.booking_id), CONTEXT)
    assert unchanged == booking
    assert unchanged.confirmation_intent is not None

    clock.advance(10)
    confirmed = await service.confirm_booking(command, CONTEXT)
    assert confirmed.status is BookingStatus.CONFIRMED
    assert confirmed.version == 2
    assert confirmed.confirmed_at == clock.now()
    assert confirmed.payment.status is PaymentStatus.PAID
    assert confirmed.payment.paid_at == paid_at
    assert confirmed.payment.query_id == booking.booking_id
    assert confirmed.confirmation_intent is None
    assert await service.get_booking(GetBooking(booking.booking_id), CONTEXT) == confirmed
    assert payments.queried_ids == [booking.booking_id, booking.booking_id]

    again = _confirm(booking, approval(booking, clock.now()))
    conflict = await _refusal(service.confirm_booking(again, CONTEXT))
    assert conflict.code == "VERSION_CONFLICT"
    wrong_state = _confirm(confirmed, approval(confirmed, clock.now()))
    assert (await _refusal(service.confirm_booking(wrong_state, CONTEXT))).code == "INVALID_STATE"
    assert await service.get_booking(GetBooking(booking.booking_id), CONTEXT) == confirmed
    assert len(payments.calls) == 2


async def test_a_paid_answer_with_a_wrong_amount_changes_nothing(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    booking = await _hold(service)
    payments.script(
        booking.booking_id, answer(booking, "PAID", paid_at=clock.now(), amount="500.0")
    )

    refused = await _refusal(
        service.confirm_booking(_confirm(booking, approval(booking, clock.now())), CONTEXT)
    )

    assert refused.code == "PAYMENT_MISMATCH"
    assert refused.details["fields"] == ["amount"]
    after = await service.get_booking(GetBooking(booking.booking_id), CONTEXT)
    assert after.status is BookingStatus.HELD
    assert after.payment.status is PaymentStatus.PENDING
    assert after.version == 1
    assert after == booking


async def test_a_replayed_hold_returns_the_same_booking_and_a_changed_one_conflicts(
    service: BookingService, db_path: Path
) -> None:
    key = _key()
    first = await _hold(service, key=key)
    replayed = await _hold(service, key=key)
    assert replayed == first
    assert _active_bookings(db_path, "slot-ai-001") == 1

    changed = await _refusal(_hold(service, key=key, customer=_customer("Grace Hopper")))
    assert changed.code == "IDEMPOTENCY_CONFLICT"
    other_slot = await _refusal(_hold(service, "slot-ai-002", key=key))
    assert other_slot.code == "IDEMPOTENCY_CONFLICT"
    assert "slot-ai-002" in _ids(await _search(service))


async def test_a_replayed_confirmation_returns_the_same_booking_and_a_changed_one_conflicts(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    booking = await _hold(service)
    payments.script(booking.booking_id, answer(booking, "PAID", paid_at=clock.now()))
    command = _confirm(booking, approval(booking, clock.now()))
    confirmed = await service.confirm_booking(command, CONTEXT)

    clock.advance(1000)  # a replay answers from the record, even with a stale approval
    assert await service.confirm_booking(command, CONTEXT) == confirmed
    drifted = replace(command, expected_version=2)
    assert (
        await _refusal(service.confirm_booking(drifted, CONTEXT))
    ).code == "IDEMPOTENCY_CONFLICT"
    assert len(payments.calls) == 1


async def test_a_stale_approval_never_queries_payment(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    booking = await _hold(service)
    approved = approval(booking, clock.now())
    clock.advance(126)

    refused = await _refusal(service.confirm_booking(_confirm(booking, approved), CONTEXT))

    assert refused.code == "HUMAN_APPROVAL_EXPIRED"
    assert payments.calls == []
    assert await service.get_booking(GetBooking(booking.booking_id), CONTEXT) == booking


# --- every error code of the core ------------------------------------------------------------


async def test_holding_an_unknown_slot_is_slot_not_found(service: BookingService) -> None:
    assert (await _refusal(_hold(service, "slot-nope"))).code == "SLOT_NOT_FOUND"


async def test_holding_a_slot_that_has_started_is_slot_unavailable(
    service: BookingService, clock: MutableClock
) -> None:
    clock.set(SLOT_AI_001_STARTS_AT)
    assert (await _refusal(_hold(service))).code == "SLOT_UNAVAILABLE"


async def test_an_unknown_booking_is_booking_not_found(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    assert (
        await _refusal(service.get_booking(GetBooking("booking-nope"), CONTEXT))
    ).code == "BOOKING_NOT_FOUND"
    ghost = replace(await _hold(service), booking_id="booking-nope")
    command = _confirm(ghost, approval(ghost, clock.now()))
    assert (await _refusal(service.confirm_booking(command, CONTEXT))).code == "BOOKING_NOT_FOUND"
    assert payments.calls == []


async def test_a_garbage_cursor_is_invalid_cursor(service: BookingService) -> None:
    search = SearchSlots(query=ALL, limit=2, cursor="garbage")
    assert (
        await _refusal(service.search_available_slots(search, CONTEXT))
    ).code == "INVALID_CURSOR"


async def test_confirming_an_expired_hold_is_booking_expired(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    booking = await _hold(service)
    clock.advance(300)
    command = _confirm(booking, approval(booking, clock.now()))
    refused = await _refusal(service.confirm_booking(command, CONTEXT))
    assert refused.code == "BOOKING_EXPIRED"
    assert payments.calls == []


async def test_confirming_with_another_expected_version_is_version_conflict(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    booking = await _hold(service)
    command = _confirm(booking, approval(booking, clock.now()), expected_version=2)
    refused = await _refusal(service.confirm_booking(command, CONTEXT))
    assert refused.code == "VERSION_CONFLICT"
    assert refused.details["current_version"] == 1
    assert payments.calls == []


@pytest.mark.parametrize(
    ("make_approval", "code"),
    [
        (lambda b, now: None, "HUMAN_APPROVAL_REQUIRED"),
        (lambda b, now: approval(b, now, decision="REJECT"), "HUMAN_APPROVAL_REJECTED"),
        (lambda b, now: approval(b, now + timedelta(seconds=6)), "HUMAN_APPROVAL_EXPIRED"),
        (
            lambda b, now: approval(b, now, intent_hash="sha256:" + "0" * 64),
            "APPROVAL_INTENT_HASH_MISMATCH",
        ),
        (
            lambda b, now: approval(b, now, intent=replace(b.intent, amount="5.00")),
            "APPROVAL_INTENT_MISMATCH",
        ),
        (
            lambda b, now: approval(b, now, intent=replace(b.intent, version=2)),
            "APPROVAL_INTENT_MISMATCH",
        ),
    ],
)
async def test_an_unusable_approval_is_refused_without_querying_payment(
    service: BookingService,
    clock: MutableClock,
    payments: FakePayments,
    make_approval: Any,
    code: str,
) -> None:
    booking = await _hold(service)
    command = _confirm(booking, make_approval(booking, clock.now()))
    assert (await _refusal(service.confirm_booking(command, CONTEXT))).code == code
    assert payments.calls == []
    assert await service.get_booking(GetBooking(booking.booking_id), CONTEXT) == booking


async def test_an_unreachable_payment_service_is_retryable_and_changes_nothing(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    booking = await _hold(service)
    payments.script(
        booking.booking_id,
        PaymentUnavailableError(reason="TIMEOUT"),
        answer(booking, "PAID", paid_at=clock.now()),
    )
    command = _confirm(booking, approval(booking, clock.now()))

    refused = await _refusal(service.confirm_booking(command, CONTEXT))
    assert refused.code == "PAYMENT_UNAVAILABLE"
    assert refused.retryable is True
    assert await service.get_booking(GetBooking(booking.booking_id), CONTEXT) == booking

    retried = await service.confirm_booking(command, CONTEXT)
    assert retried.status is BookingStatus.CONFIRMED


@pytest.mark.parametrize(
    ("status", "code", "released"),
    [
        ("FAILED", "PAYMENT_FAILED", BookingStatus.PAYMENT_FAILED),
        ("CLOSED", "PAYMENT_CLOSED", BookingStatus.PAYMENT_CLOSED),
    ],
)
async def test_a_failed_or_closed_payment_releases_the_slot(
    service: BookingService,
    clock: MutableClock,
    payments: FakePayments,
    *,
    status: str,
    code: str,
    released: BookingStatus,
) -> None:
    booking = await _hold(service)
    payments.script(booking.booking_id, answer(booking, status))
    command = _confirm(booking, approval(booking, clock.now()))

    refused = await _refusal(service.confirm_booking(command, CONTEXT))
    assert refused.code == code
    after = await service.get_booking(GetBooking(booking.booking_id), CONTEXT)
    assert after.status is released
    assert after.version == 2
    assert after.confirmation_intent is None
    assert refused.booking == after

    replayed = await _refusal(service.confirm_booking(command, CONTEXT))
    assert replayed.code == code
    assert len(payments.calls) == 1
    fresh = _confirm(after, approval(booking, clock.now()))
    assert (await _refusal(service.confirm_booking(fresh, CONTEXT))).code == "INVALID_STATE"

    rehold = await _hold(service, customer=_customer("Grace Hopper"))
    assert rehold.status is BookingStatus.HELD


async def test_a_store_locked_by_another_process_refuses_writes_as_storage_busy(
    db_path: Path, clock: MutableClock, payments: FakePayments
) -> None:
    store = await SqliteBookingStore.open(db_path, busy_timeout_ms=50)
    try:
        service = BookingService(store=store, payments=payments, clock=clock, policy=POLICY)
        with _raw(db_path) as competitor:
            competitor.execute("BEGIN IMMEDIATE")
            busy = await _refusal(_hold(service))
            competitor.execute("ROLLBACK")
        assert busy.code == "STORAGE_BUSY"
        assert busy.retryable is True
        assert (await _hold(service)).status is BookingStatus.HELD
    finally:
        await store.close()


async def test_reads_are_answered_while_another_process_writes_if_no_hold_is_overdue(
    db_path: Path, clock: MutableClock, payments: FakePayments
) -> None:
    store = await SqliteBookingStore.open(db_path, busy_timeout_ms=50)
    try:
        service = BookingService(store=store, payments=payments, clock=clock, policy=POLICY)
        booking = await _hold(service)
        clock.advance(299)
        with _raw(db_path) as competitor:
            competitor.execute("BEGIN IMMEDIATE")
            competitor.execute("DELETE FROM bookings")  # uncommitted: invisible to readers
            with anyio.fail_after(5):
                assert await service.get_booking(GetBooking(booking.booking_id), CONTEXT) == booking
                page = await _search(service)
            competitor.execute("ROLLBACK")
        assert _ids(page) == [slot for slot in SEED_ORDER if slot != "slot-ai-001"]
        assert page.total == 5
    finally:
        await store.close()


async def test_a_read_that_meets_an_overdue_hold_releases_it_in_a_write_transaction_first(
    db_path: Path, clock: MutableClock, payments: FakePayments
) -> None:
    store = await SqliteBookingStore.open(db_path, busy_timeout_ms=50)
    try:
        service = BookingService(store=store, payments=payments, clock=clock, policy=POLICY)
        booking = await _hold(service)
        clock.advance(300)  # expiresAt reached: the committed HELD row is overdue
        with _raw(db_path) as competitor:
            competitor.execute("BEGIN IMMEDIATE")
            # Neither read may answer from the unreleased row; both need the write lock.
            assert (
                await _refusal(service.get_booking(GetBooking(booking.booking_id), CONTEXT))
            ).code == ("STORAGE_BUSY")
            assert (await _refusal(_search(service))).code == "STORAGE_BUSY"
            competitor.execute("ROLLBACK")
        assert "slot-ai-001" in _ids(await _search(service))
        after = await service.get_booking(GetBooking(booking.booking_id), CONTEXT)
        assert (after.status, after.version) == (BookingStatus.EXPIRED, 2)
    finally:
        await store.close()


async def test_an_overdue_hold_of_another_slot_is_released_before_a_search_answers(
    service: BookingService, clock: MutableClock, db_path: Path
) -> None:
    await _hold(service, "slot-fin-002")
    clock.advance(300)
    page = await _search(
        service, SlotQuery(text="law", specialty=None, starts_after=None, starts_before=None)
    )
    assert _ids(page) == ["slot-law-001", "slot-law-002"]
    assert _active_bookings(db_path, "slot-fin-002") == 0


async def test_reads_do_not_wait_for_this_process_s_write_transaction_nor_see_it(
    service: BookingService, store: BookingStore
) -> None:
    booking = await _hold(service)
    expired = replace(booking, status=BookingStatus.EXPIRED, version=2)
    with anyio.fail_after(5):
        async with transaction_held_open(store, lambda tx: tx.update_booking(expired, 1)):
            assert await service.get_booking(GetBooking(booking.booking_id), CONTEXT) == booking
            assert "slot-ai-001" not in _ids(await _search(service))


async def test_a_hold_whose_caller_was_cancelled_runs_whole_and_drops_the_slot_cache(
    service: BookingService, store: BookingStore
) -> None:
    assert not (await _search(service)).cache_hit
    assert (await _search(service)).cache_hit
    with anyio.fail_after(5):
        async with transaction_held_open(store):
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(_hold, service)  # queued behind the open transaction
                    await anyio.wait_all_tasks_blocked()
                    scope.cancel()
            assert scope.cancelled_caught
            # Between the cancellation and the commit a search still sees the slot free,
            # and may cache that page...
            assert "slot-ai-001" in _ids(await _search(service))
        await store.run(lambda _tx: None)  # transactions run in order: the hold has finished
        await anyio.wait_all_tasks_blocked()
    # ...but the finished hold drops it: the next search reads the committed state.
    page = await _search(service)
    assert not page.cache_hit
    assert "slot-ai-001" not in _ids(page)


async def test_a_payment_that_succeeds_after_the_hold_expired_is_paid_after_expiry(
    service: BookingService,
    clock: MutableClock,
    payments: FakePayments,
    caplog: pytest.LogCaptureFixture,
) -> None:
    booking = await _hold(service)
    clock.advance(200)

    def slow_paid_answer() -> Any:
        clock.advance(101)  # the hold expires while the payment query is in flight
        return answer(booking, "PAID", paid_at=clock.now())

    payments.script(booking.booking_id, slow_paid_answer)
    command = _confirm(booking, approval(booking, clock.now()))

    with caplog.at_level(logging.WARNING, logger="expert_booking.services"):
        refused = await _refusal(service.confirm_booking(command, CONTEXT))

    assert refused.code == "PAID_AFTER_EXPIRY"
    assert refused.retryable is False
    after = await service.get_booking(GetBooking(booking.booking_id), CONTEXT)
    # Released (version 2), then the payment after expiry recorded (version 3).
    assert (after.status, after.version, after.refund_due) == (BookingStatus.EXPIRED, 3, True)
    assert after.payment.status is PaymentStatus.PAID
    assert after.payment.paid_at == clock.now()
    assert after.confirmed_at is None
    assert refused.booking == after
    assert any("paid after expiry" in record.getMessage() for record in caplog.records)
    listed = await service.list_bookings(ListBookings(limit=10), CONTEXT)
    assert [(b.booking_id, b.refund_due) for b in listed.bookings] == [(booking.booking_id, True)]
    # The same confirmation replays its outcome; another one learns the same; neither asks
    # the payment service again.
    again = await _refusal(service.confirm_booking(command, CONTEXT))
    other = await _refusal(
        service.confirm_booking(replace(command, idempotency_key=_key()), CONTEXT)
    )
    assert (again.code, again.booking) == ("PAID_AFTER_EXPIRY", after)
    assert (other.code, other.booking) == ("PAID_AFTER_EXPIRY", after)
    assert payments.queried_ids == [booking.booking_id]
    # The slot was released with the hold: someone else may hold it.
    assert (await _hold(service, customer=_customer("Grace Hopper"))).status is BookingStatus.HELD


@pytest.mark.parametrize("status", ["FAILED", "CLOSED", "PENDING"])
async def test_an_unpaid_answer_after_the_hold_expired_is_booking_expired_and_records_nothing(
    service: BookingService, clock: MutableClock, payments: FakePayments, status: str
) -> None:
    booking = await _hold(service)

    def slow_answer() -> Any:
        clock.advance(301)
        return answer(booking, status)

    payments.script(booking.booking_id, slow_answer)
    command = _confirm(booking, approval(booking, clock.now()))
    assert (await _refusal(service.confirm_booking(command, CONTEXT))).code == "BOOKING_EXPIRED"
    after = await service.get_booking(GetBooking(booking.booking_id), CONTEXT)
    assert (after.status, after.version, after.refund_due) == (BookingStatus.EXPIRED, 2, False)
    assert after.payment.status is PaymentStatus.PENDING


async def test_a_mismatching_paid_answer_after_the_hold_expired_records_nothing(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    booking = await _hold(service)

    def slow_answer() -> Any:
        clock.advance(301)
        return answer(booking, "PAID", paid_at=clock.now(), amount="1.00")

    payments.script(booking.booking_id, slow_answer)
    command = _confirm(booking, approval(booking, clock.now()))
    assert (await _refusal(service.confirm_booking(command, CONTEXT))).code == "BOOKING_EXPIRED"
    after = await service.get_booking(GetBooking(booking.booking_id), CONTEXT)
    assert (after.version, after.refund_due, after.payment.status) == (
        2,
        False,
        PaymentStatus.PENDING,
    )


async def test_an_approval_that_goes_stale_during_a_slow_payment_query_confirms_nothing(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    booking = await _hold(service)

    def slow_paid_answer() -> Any:
        clock.advance(130)  # beyond APPROVAL_TTL + skew, but the hold is still alive
        return answer(booking, "PAID", paid_at=clock.now())

    payments.script(booking.booking_id, slow_paid_answer)
    command = _confirm(booking, approval(booking, clock.now()))

    refused = await _refusal(service.confirm_booking(command, CONTEXT))

    assert refused.code == "HUMAN_APPROVAL_EXPIRED"
    after = await service.get_booking(GetBooking(booking.booking_id), CONTEXT)
    assert (after.status, after.version) == (BookingStatus.HELD, 1)


async def test_expiry_is_judged_by_the_time_the_store_was_acquired_not_requested(
    service: BookingService, store: BookingStore, clock: MutableClock, payments: FakePayments
) -> None:
    booking = await _hold(service)
    payments.script(booking.booking_id, answer(booking, "PAID", paid_at=clock.now()))
    clock.advance(295)
    command = _confirm(booking, approval(booking, clock.now()))
    async with anyio.create_task_group() as tasks, transaction_held_open(store):
        # Another request holds the store while time passes beyond expiresAt.
        tasks.start_soon(_confirm_expecting, service, command, "BOOKING_EXPIRED")
        await anyio.wait_all_tasks_blocked()
        clock.advance(30)
    after = await service.get_booking(GetBooking(booking.booking_id), CONTEXT)
    assert after.status is BookingStatus.EXPIRED
    assert payments.calls == []


async def _confirm_expecting(service: BookingService, command: ConfirmBooking, code: str) -> None:
    refused = await _refusal(service.confirm_booking(command, CONTEXT))
    assert refused.code == code


async def test_a_hold_never_outlives_the_start_of_its_slot(
    service: BookingService, clock: MutableClock
) -> None:
    clock.set(SLOT_AI_001_STARTS_AT - timedelta(seconds=60))
    booking = await _hold(service)
    assert booking.expires_at == SLOT_AI_001_STARTS_AT
    clock.advance(60)
    after = await service.get_booking(GetBooking(booking.booking_id), CONTEXT)
    assert after.status is BookingStatus.EXPIRED


# --- concurrency -------------------------------------------------------------------------------


async def test_fifty_concurrent_holds_of_one_slot_give_exactly_one_booking(
    service: BookingService, db_path: Path
) -> None:
    outcomes: list[Booking | BookingError] = []

    async def attempt(index: int) -> None:
        try:
            outcomes.append(await _hold(service, customer=_customer(f"Customer{index} X")))
        except BookingError as exc:
            outcomes.append(exc)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            for index in range(50):
                group.start_soon(attempt, index)

    held = [outcome for outcome in outcomes if isinstance(outcome, Booking)]
    refused = [outcome.code for outcome in outcomes if isinstance(outcome, BookingError)]
    assert len(held) == 1
    assert refused == ["SLOT_UNAVAILABLE"] * 49
    assert _active_bookings(db_path, "slot-ai-001") == 1


async def test_one_key_retried_on_two_servers_at_once_replays_one_hold_and_one_confirm(
    request: pytest.FixtureRequest,
    store: BookingStore,
    tmp_path: Path,
    clock: MutableClock,
    payments: FakePayments,
) -> None:
    """Two server processes on one database: a retry racing its original is its replay."""
    engine = request.node.callspec.params["store"]
    async with REPLICAS[engine](store, tmp_path) as other_store:

        async def ten_times_on_two_servers(
            call: Callable[[BookingService], Awaitable[Booking]],
        ) -> list[Booking]:
            """``call`` ten times at once, alternating between the two stores' services (each
            store's first transaction overlapping the other's)."""
            servers = [
                BookingService(store=each, payments=payments, clock=clock, policy=POLICY)
                for each in overlapping(store, other_store)
            ]
            answers: list[Booking] = []

            async def attempt(index: int) -> None:
                answers.append(await call(servers[index % 2]))

            with anyio.fail_after(10):
                async with anyio.create_task_group() as group:
                    for index in range(10):
                        group.start_soon(attempt, index)
            return answers

        hold = HoldSlot(slot_id="slot-ai-001", customer=_customer(), idempotency_key=_key())
        held = await ten_times_on_two_servers(lambda server: server.hold_slot(hold, CONTEXT))
        assert {booking.booking_id for booking in held} == {held[0].booking_id}
        booking = held[0]
        payments.script(booking.booking_id, answer(booking, "PAID", paid_at=clock.now()))
        confirm = _confirm(booking, approval(booking, clock.now()))
        confirmed = await ten_times_on_two_servers(
            lambda server: server.confirm_booking(confirm, CONTEXT)
        )
        assert {(b.status, b.version) for b in confirmed} == {(BookingStatus.CONFIRMED, 2)}


# --- search, pagination and the cache ---------------------------------------------------------


async def test_a_cursor_chain_lists_every_free_slot_exactly_once(
    service: BookingService,
) -> None:
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(10):
        page = await service.search_available_slots(
            SearchSlots(ALL, limit=2, cursor=cursor), CONTEXT
        )
        assert page.total == 6
        seen += _ids(page)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == SEED_ORDER


async def test_a_cursor_reused_with_another_query_is_invalid_cursor(
    service: BookingService,
) -> None:
    first = await service.search_available_slots(SearchSlots(ALL, limit=2), CONTEXT)
    assert first.next_cursor is not None
    other = SlotQuery(text="AI", specialty=None, starts_after=None, starts_before=None)
    search = SearchSlots(other, limit=2, cursor=first.next_cursor)
    assert (
        await _refusal(service.search_available_slots(search, CONTEXT))
    ).code == "INVALID_CURSOR"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("人工智能", ["slot-ai-001", "slot-ai-002"]),
        ("Steuer", ["slot-fin-001", "slot-fin-002"]),
        ("datenschutz", ["slot-law-001", "slot-law-002"]),
    ],
)
async def test_search_understands_chinese_and_german_keywords(
    service: BookingService, text: str, expected: list[str]
) -> None:
    query = SlotQuery(text=text, specialty=None, starts_after=None, starts_before=None)
    page = await _search(service, query)
    assert _ids(page) == expected
    assert page.total == len(expected)
    assert page.next_cursor is None


async def test_an_identical_search_is_served_from_the_cache_until_a_hold(
    service: BookingService, clock: MutableClock
) -> None:
    first = await _search(service)
    assert first.cache_hit is False
    clock.advance(1)
    second = await _search(service)
    assert second.cache_hit is True
    assert replace(second, cache_hit=False) == first

    await _hold(service)
    after_hold = await _search(service)
    assert after_hold.cache_hit is False
    assert "slot-ai-001" not in _ids(after_hold)


async def test_start_bounds_of_one_meaning_share_a_page_and_of_two_meanings_do_not(
    service: BookingService,
) -> None:
    """The cache and the cursor binding key on the bound as rounded up to a millisecond."""
    first = datetime(2030, 9, 2, 2, tzinfo=UTC)  # slot-ai-001's start

    def after(bound: datetime) -> SlotQuery:
        return SlotQuery(text="", specialty=None, starts_after=bound, starts_before=None)

    at_start = await _search(service, after(first))
    assert _ids(at_start) == SEED_ORDER
    just_after = await _search(service, after(first + timedelta(microseconds=100)))
    assert (just_after.cache_hit, _ids(just_after)) == (False, SEED_ORDER[1:])
    same_meaning = await _search(service, after(first + timedelta(microseconds=900)))
    assert (same_meaning.cache_hit, _ids(same_meaning)) == (True, SEED_ORDER[1:])
    paged = await service.search_available_slots(SearchSlots(after(first), limit=2), CONTEXT)
    moved = SearchSlots(
        after(first + timedelta(microseconds=100)), limit=2, cursor=paged.next_cursor
    )
    assert (await _refusal(service.search_available_slots(moved, CONTEXT))).code == "INVALID_CURSOR"


async def test_the_cache_expires_after_its_ttl(
    service: BookingService, clock: MutableClock
) -> None:
    await _search(service)
    clock.advance(5)
    assert (await _search(service)).cache_hit is False


async def test_the_cache_never_serves_a_page_past_a_hold_expiry(
    store: BookingStore, clock: MutableClock, payments: FakePayments
) -> None:
    long_cache = replace(POLICY, slot_cache_ttl=timedelta(hours=1))
    service = BookingService(store=store, payments=payments, clock=clock, policy=long_cache)
    await _hold(service)
    clock.advance(1)
    assert (await _search(service)).cache_hit is False
    clock.advance(298)
    cached = await _search(service)
    assert cached.cache_hit is True
    assert "slot-ai-001" not in _ids(cached)

    clock.advance(1)  # the hold's expiresAt
    released = await _search(service)
    assert released.cache_hit is False
    assert "slot-ai-001" in _ids(released)


async def test_a_confirmation_invalidates_the_cache(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    booking = await _hold(service)
    payments.script(booking.booking_id, answer(booking, "FAILED"))
    await _search(service)
    assert (await _search(service)).cache_hit is True
    await _refusal(
        service.confirm_booking(_confirm(booking, approval(booking, clock.now())), CONTEXT)
    )
    after = await _search(service)
    assert after.cache_hit is False
    assert "slot-ai-001" in _ids(after)


async def test_with_the_system_clock_a_stored_booking_reads_back_equal(
    store: BookingStore, payments: FakePayments
) -> None:
    """SystemClock has millisecond precision, the precision instants are stored with."""
    service = BookingService(store=store, payments=payments, clock=SystemClock(), policy=POLICY)
    held = await _hold(service)
    assert held.held_at.microsecond % 1000 == 0
    assert held.held_at.utcoffset() == timedelta(0)
    assert await service.get_booking(GetBooking(held.booking_id), CONTEXT) == held


async def test_a_slot_another_server_took_drops_this_servers_search_cache_on_refusal(
    service: BookingService, store: BookingStore, clock: MutableClock, payments: FakePayments
) -> None:
    """Another process's hold is invisible to this one's cache for up to its lifetime; a
    hold refused on that slot shows the cache is stale, so it goes (durability audit)."""
    other = BookingService(store=store, payments=payments, clock=clock, policy=POLICY)
    assert "slot-ai-001" in _ids(await _search(service))
    await _hold(other)
    stale = await _search(service)
    assert stale.cache_hit
    assert "slot-ai-001" in _ids(stale)
    assert (await _refusal(_hold(service))).code == "SLOT_UNAVAILABLE"
    page = await _search(service)
    assert not page.cache_hit
    assert "slot-ai-001" not in _ids(page)
