"""Races of a booking's later life, on SQLite and on the memory store fake.

Each race pins one interleaving with a payment query held open (``GatedPayments``) or runs the
rivals concurrently; whatever the order, the store keeps one active booking per slot and every
loser is told why (VERSION_CONFLICT, SLOT_UNAVAILABLE, INVALID_STATE) with nothing changed.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import anyio
import pytest

from expert_booking.cancellation import CancelBooking
from expert_booking.confirmation import ConfirmBooking
from expert_booking.domain.errors import BookingError, PaymentUnavailableError, StorageBusyError
from expert_booking.domain.intents import ActionIntent, cancel_intent, reschedule_intent
from expert_booking.domain.model import (
    Booking,
    BookingStatus,
    Customer,
    HumanApproval,
    PaymentAnswer,
    PaymentStatus,
)
from expert_booking.edge.error_texts import wire_details
from expert_booking.ports import BookingStore, TraceContext, Transaction
from expert_booking.rescheduling import RescheduleBooking
from expert_booking.services import BookingService, GetBooking, HoldSlot
from tests.fakes import CONTEXT, POLICY, MutableClock, answer, approval
from tests.store_engines import ENGINES

pytestmark = pytest.mark.anyio

DEADLINE_S = 10
T = TypeVar("T")


class GatedPayments:
    """A payment port whose answers a test releases one by one (a query held in flight)."""

    def __init__(self) -> None:
        self.answers: dict[str, PaymentAnswer | PaymentUnavailableError] = {}
        """What the service answers, or raises, for a booking."""
        self.gates: dict[str, asyncio.Event] = {}
        self.asked: dict[str, asyncio.Event] = {}
        self.then: dict[str, PaymentAnswer | PaymentUnavailableError] = {}
        """What the service answers (or raises) after its next answer: the person acted."""
        self.queries = 0
        self.on_answer: Callable[[], None] | None = None
        """Run at each answer once ``then`` is used up: a test's hook into the look after."""

    def hold_open(self, booking_id: str) -> None:
        self.gates[booking_id] = asyncio.Event()
        self.asked[booking_id] = asyncio.Event()

    async def query_payment(self, booking_id: str, trace: TraceContext) -> PaymentAnswer:
        self.queries += 1
        gate = self.gates.pop(booking_id, None)
        if gate is not None:
            self.asked.pop(booking_id).set()
            await gate.wait()
        answered = self.answers[booking_id]
        if booking_id in self.then:
            self.answers[booking_id] = self.then.pop(booking_id)
        elif self.on_answer is not None:  # the answer after the person acted
            self.on_answer()
        if isinstance(answered, PaymentUnavailableError):
            raise answered
        return answered


class _BusyOnDemand:
    """``store`` whose next transaction, once asked for, fails as under another writer's lock."""

    def __init__(self, store: BookingStore) -> None:
        self._store = store
        self._fail = False

    def fail_next_run(self) -> None:
        self._fail = True

    async def run(self, work: Callable[[Transaction], T]) -> T:
        if self._fail:
            self._fail = False
            raise StorageBusyError
        return await self._store.run(work)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.fixture(params=sorted(ENGINES))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BookingStore]:
    async with ENGINES[request.param](tmp_path) as opened:
        yield opened


@pytest.fixture
def payments() -> GatedPayments:
    return GatedPayments()


def _key() -> str:
    return str(uuid.uuid4())


async def _outcome(call: Awaitable[Booking]) -> Booking | str:
    try:
        with anyio.fail_after(DEADLINE_S):
            return await call
    except BookingError as exc:
        return exc.code


def _approve(intent: ActionIntent, clock: MutableClock) -> HumanApproval:
    return HumanApproval(str(uuid.uuid4()), "APPROVE", clock.now(), intent, intent.digest())


async def _hold(service: BookingService, slot_id: str = "slot-ai-001") -> Booking:
    customer = Customer(name="Ada Lovelace", email="Ada@Example.com")
    return await service.hold_slot(HoldSlot(slot_id, customer, _key()), CONTEXT)


def _confirm(held: Booking, clock: MutableClock) -> ConfirmBooking:
    return ConfirmBooking(held.booking_id, held.version, _key(), approval(held, clock.now()))


async def _confirmed(
    service: BookingService, payments: GatedPayments, clock: MutableClock, slot_id: str
) -> Booking:
    held = await _hold(service, slot_id)
    payments.answers[held.booking_id] = answer(held, "PAID", paid_at=clock.now())
    return await service.confirm_booking(_confirm(held, clock), CONTEXT)


async def _get(service: BookingService, booking: Booking) -> Booking:
    return await service.get_booking(GetBooking(booking.booking_id), CONTEXT)


async def _run_while_held_open(
    payments: GatedPayments, booking_id: str, first: Awaitable[Booking], then: Awaitable[Any]
) -> tuple[Booking | str, Any]:
    """Start ``first`` until it queries payment, run ``then`` to its end, let ``first`` finish."""
    payments.hold_open(booking_id)
    asked = payments.asked[booking_id]
    gate = payments.gates[booking_id]
    pending = asyncio.ensure_future(_outcome(first))
    with anyio.fail_after(DEADLINE_S):
        await asked.wait()
    second = await then
    gate.set()
    with anyio.fail_after(DEADLINE_S):
        return await pending, second


async def _cancel_then_the_person_pays(
    service: BookingService, payments: GatedPayments, clock: MutableClock, held: Booking
) -> Booking | str:
    """An unpaid cancel wins (the payment service says PENDING), then the person pays."""
    cancelled = await _outcome(
        service.cancel_booking(CancelBooking(held.booking_id, 1, _key(), None), CONTEXT)
    )
    clock.advance(5)
    payments.answers[held.booking_id] = answer(held, "PAID", paid_at=clock.now())
    return cancelled


async def test_a_confirm_that_lands_while_a_cancel_queries_payment_wins(
    service: BookingService, payments: GatedPayments, clock: MutableClock
) -> None:
    held = await _hold(service)
    payments.answers[held.booking_id] = answer(held, "PAID", paid_at=clock.now())
    cancel = CancelBooking(held.booking_id, held.version, _key(), None)
    cancelled, confirmed = await _run_while_held_open(
        payments,
        held.booking_id,
        service.cancel_booking(cancel, CONTEXT),
        _outcome(service.confirm_booking(_confirm(held, clock), CONTEXT)),
    )
    assert isinstance(confirmed, Booking)
    assert confirmed.status is BookingStatus.CONFIRMED
    assert cancelled == "VERSION_CONFLICT"
    assert await _get(service, held) == confirmed


async def test_a_cancel_that_lands_while_a_confirm_queries_payment_wins(
    service: BookingService, payments: GatedPayments, clock: MutableClock
) -> None:
    held = await _hold(service)
    payments.answers[held.booking_id] = answer(held, "PENDING")
    cancel = CancelBooking(held.booking_id, held.version, _key(), None)

    async def cancel_now() -> Booking | str:
        # The confirm's own query is held open; the cancel's query answers at once (PENDING).
        return await _outcome(service.cancel_booking(cancel, CONTEXT))

    confirmed, cancelled = await _run_while_held_open(
        payments,
        held.booking_id,
        service.confirm_booking(_confirm(held, clock), CONTEXT),
        cancel_now(),
    )
    assert isinstance(cancelled, Booking)
    assert cancelled.status is BookingStatus.CANCELLED
    assert confirmed == "VERSION_CONFLICT"
    assert await _get(service, held) == cancelled


async def test_a_hold_that_expires_while_its_cancel_queries_payment_is_not_cancelled(
    service: BookingService, payments: GatedPayments, clock: MutableClock
) -> None:
    held = await _hold(service)
    payments.answers[held.booking_id] = answer(held, "PENDING")
    cancel = CancelBooking(held.booking_id, held.version, _key(), None)

    async def expire() -> None:
        clock.set(held.expires_at)

    refused, _ = await _run_while_held_open(
        payments, held.booking_id, service.cancel_booking(cancel, CONTEXT), expire()
    )
    assert refused == "INVALID_STATE"
    after = await _get(service, held)
    assert (after.status, after.version) == (BookingStatus.EXPIRED, 2)
    late = await _outcome(
        service.cancel_booking(CancelBooking(held.booking_id, 2, _key(), None), CONTEXT)
    )
    assert late == "INVALID_STATE"
    assert (await _hold(service)).status is BookingStatus.HELD  # the slot was released


async def test_a_hold_paid_while_the_cancel_is_under_way_needs_an_approval_then_owes_a_refund(
    service: BookingService, payments: GatedPayments, clock: MutableClock
) -> None:
    held = await _hold(service)
    payments.answers[held.booking_id] = answer(held, "PENDING")

    async def person_pays() -> None:
        clock.advance(30)
        payments.answers[held.booking_id] = answer(held, "PAID", paid_at=clock.now())

    cancel = CancelBooking(held.booking_id, held.version, _key(), None)
    refused, _ = await _run_while_held_open(
        payments, held.booking_id, service.cancel_booking(cancel, CONTEXT), person_pays()
    )
    assert refused == "HUMAN_APPROVAL_REQUIRED"
    assert await _get(service, held) == held
    approved = CancelBooking(
        held.booking_id, held.version, _key(), _approve(cancel_intent(held), clock)
    )
    cancelled = await service.cancel_booking(approved, CONTEXT)
    assert (cancelled.status, cancelled.payment.status, cancelled.refund_due) == (
        BookingStatus.CANCELLED,
        PaymentStatus.PAID,
        True,
    )


async def test_an_unpaid_hold_cancelled_while_its_payment_completes_owes_a_refund(
    service: BookingService,
    payments: GatedPayments,
    clock: MutableClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The cancel sees PENDING and wins; the confirm in flight then hears PAID, too late.

    The confirm is told VERSION_CONFLICT (the cancel moved the version), and the payment it
    heard is on record as confirm records one after expiry: payment PAID, ``refundDue``.
    """
    held = await _hold(service)
    payments.answers[held.booking_id] = answer(held, "PENDING")

    confirm = _confirm(held, clock)
    refusals: list[BookingError] = []

    async def confirm_in_flight() -> Booking:
        try:
            return await service.confirm_booking(confirm, CONTEXT)
        except BookingError as exc:
            refusals.append(exc)
            raise

    with caplog.at_level(logging.WARNING, logger="expert_booking.services"):
        confirmed, cancelled = await _run_while_held_open(
            payments,
            held.booking_id,
            confirm_in_flight(),
            _cancel_then_the_person_pays(service, payments, clock, held),
        )
    assert isinstance(cancelled, Booking)
    assert (cancelled.status, cancelled.refund_due) == (BookingStatus.CANCELLED, False)
    assert confirmed == "VERSION_CONFLICT"  # the re-read after the payment query saw the cancel
    now = await _get(service, held)
    assert (now.status, now.version) == (BookingStatus.CANCELLED, cancelled.version + 1)
    assert (now.payment.status, now.refund_due) == (PaymentStatus.PAID, True)
    (refusal,) = refusals
    assert wire_details(refusal) == {  # the version the agent reads on, the refund recorded
        "bookingId": held.booking_id,
        "expectedVersion": 1,
        "currentVersion": now.version,
    }
    assert [r.getMessage() for r in caplog.records] == [
        (
            f"paid after cancellation: booking {held.booking_id} was paid after it was cancelled; "
            "refund due"
        )
    ]
    # Recorded once: a retry of the confirm is refused before any payment query.
    assert await _outcome(service.confirm_booking(confirm, CONTEXT)) == "VERSION_CONFLICT"
    assert await _get(service, held) == now


async def test_a_hold_paid_between_its_cancels_payment_query_and_commit_owes_a_refund(
    service: BookingService,
    payments: GatedPayments,
    clock: MutableClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The service said PENDING, the person pressed Pay, then the cancel committed.

    The cancel asks once more after its commit and records what it hears: PAID, ``refundDue``.
    """
    held = await _hold(service)
    payments.answers[held.booking_id] = answer(held, "PENDING")
    payments.then[held.booking_id] = answer(held, "PAID", paid_at=clock.now())
    cancel = CancelBooking(held.booking_id, 1, _key(), None)
    with caplog.at_level(logging.WARNING, logger="expert_booking.services"):
        cancelled = await service.cancel_booking(cancel, CONTEXT)
    assert (cancelled.status, cancelled.version) == (BookingStatus.CANCELLED, 3)
    assert (cancelled.payment.status, cancelled.refund_due) == (PaymentStatus.PAID, True)
    assert cancelled.payment.paid_at == clock.now()
    assert await _get(service, held) == cancelled
    assert [r.getMessage() for r in caplog.records] == [
        (
            f"paid after cancellation: booking {held.booking_id} was paid after it was cancelled; "
            "refund due"
        )
    ]
    # The key answers what the call answered, and asks nothing again.
    asked = payments.queries
    assert await service.cancel_booking(cancel, CONTEXT) == cancelled
    assert payments.queries == asked
    assert await _get(service, held) == cancelled
    assert len(caplog.records) == 1  # recorded once


async def test_a_paid_heard_after_the_cancel_that_is_not_this_bookings_is_said_not_recorded(
    service: BookingService,
    payments: GatedPayments,
    clock: MutableClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    held = await _hold(service)
    payments.answers[held.booking_id] = answer(held, "PENDING")
    payments.then[held.booking_id] = answer(held, "PAID", paid_at=clock.now(), amount="1.00")
    with caplog.at_level(logging.WARNING, logger="expert_booking.services"):
        cancelled = await service.cancel_booking(
            CancelBooking(held.booking_id, 1, _key(), None), CONTEXT
        )
    assert (cancelled.version, cancelled.payment.status) == (2, PaymentStatus.PENDING)
    assert await _get(service, held) == cancelled
    assert [r.getMessage() for r in caplog.records] == [
        (
            f"cancelled hold {held.booking_id}: the payment service answers PAID, but not "
            "exactly this booking's payment; not recorded"
        )
    ]


async def test_a_paid_the_store_fails_to_record_after_the_cancel_leaves_it_cancelled_and_said(
    store: BookingStore,
    payments: GatedPayments,
    clock: MutableClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The cancel committed; recording the PAID it heard then failed: the cancel still stands."""
    busy = _BusyOnDemand(store)
    service = BookingService(
        store=cast("BookingStore", busy), payments=payments, clock=clock, policy=POLICY
    )
    held = await _hold(service)
    payments.answers[held.booking_id] = answer(held, "PENDING")
    payments.then[held.booking_id] = answer(held, "PAID", paid_at=clock.now())
    payments.on_answer = busy.fail_next_run  # the look's answer: the write after it fails
    cancel = CancelBooking(held.booking_id, 1, _key(), None)
    with caplog.at_level(logging.WARNING, logger="expert_booking.services"):
        cancelled = await service.cancel_booking(cancel, CONTEXT)
    assert (cancelled.version, cancelled.payment.status) == (2, PaymentStatus.PENDING)
    assert await _get(service, held) == cancelled
    assert [r.getMessage() for r in caplog.records] == [
        (
            f"cancelled hold {held.booking_id}: the payment service says PAID after the cancel, "
            "but it could not be recorded (STORAGE_BUSY); refund due"
        )
    ]
    payments.on_answer = None
    assert await service.cancel_booking(cancel, CONTEXT) == cancelled  # replayed as answered


async def test_a_cancel_whose_second_payment_look_fails_still_cancels_and_says_so(
    service: BookingService,
    payments: GatedPayments,
    caplog: pytest.LogCaptureFixture,
) -> None:
    held = await _hold(service)
    payments.answers[held.booking_id] = answer(held, "PENDING")
    payments.then[held.booking_id] = PaymentUnavailableError(reason="TIMEOUT")
    cancel = CancelBooking(held.booking_id, 1, _key(), None)
    with caplog.at_level(logging.WARNING, logger="expert_booking.services"):
        cancelled = await service.cancel_booking(cancel, CONTEXT)
    assert (cancelled.status, cancelled.version) == (BookingStatus.CANCELLED, 2)
    assert (cancelled.payment.status, cancelled.refund_due) == (PaymentStatus.PENDING, False)
    assert await _get(service, held) == cancelled
    assert [r.getMessage() for r in caplog.records] == [
        (
            f"cancelled hold {held.booking_id}: its payment could not be checked again after the "
            "cancel; a payment made meanwhile is not on record"
        )
    ]
    assert payments.queries == 2
    assert await service.cancel_booking(cancel, CONTEXT) == cancelled  # replayed, not re-asked
    assert payments.queries == 2


async def test_a_cancel_that_hears_paid_after_another_cancel_won_records_the_refund(
    service: BookingService, payments: GatedPayments, clock: MutableClock
) -> None:
    held = await _hold(service)
    payments.answers[held.booking_id] = answer(held, "PENDING")
    late = CancelBooking(held.booking_id, 1, _key(), None)

    refused, cancelled = await _run_while_held_open(
        payments,
        held.booking_id,
        service.cancel_booking(late, CONTEXT),
        _cancel_then_the_person_pays(service, payments, clock, held),
    )
    assert isinstance(cancelled, Booking)
    assert refused == "INVALID_STATE"
    now = await _get(service, held)
    assert (now.status, now.version) == (BookingStatus.CANCELLED, cancelled.version + 1)
    assert (now.payment.status, now.refund_due) == (PaymentStatus.PAID, True)
    # Committed with its idempotency record: a retry of the key answers the same.
    assert await _outcome(service.cancel_booking(late, CONTEXT)) == "INVALID_STATE"
    assert await _get(service, held) == now


async def test_a_reschedule_and_holds_of_its_target_slot_leave_one_winner(
    service: BookingService, payments: GatedPayments, clock: MutableClock, store: BookingStore
) -> None:
    confirmed = await _confirmed(service, payments, clock, "slot-ai-001")
    target = await store.run(lambda tx: tx.lookup_slot("slot-ai-002"))
    assert target is not None
    move = RescheduleBooking(
        confirmed.booking_id,
        "slot-ai-002",
        confirmed.version,
        _key(),
        _approve(reschedule_intent(confirmed, target.slot), clock),
    )
    rivals = [_outcome(_hold(service, "slot-ai-002")) for _ in range(5)]
    outcomes = await asyncio.gather(
        *rivals[:2], _outcome(service.reschedule_booking(move, CONTEXT)), *rivals[2:]
    )
    winners = [outcome for outcome in outcomes if isinstance(outcome, Booking)]
    assert len(winners) == 1
    assert [o for o in outcomes if not isinstance(o, Booking)] == ["SLOT_UNAVAILABLE"] * 5
    after = await _get(service, confirmed)
    moved = winners[0].booking_id == confirmed.booking_id
    assert after.slot_id == ("slot-ai-002" if moved else "slot-ai-001")
    assert len(after.history) == (1 if moved else 0)


async def test_two_reschedules_of_one_booking_move_it_once(
    service: BookingService, payments: GatedPayments, clock: MutableClock, store: BookingStore
) -> None:
    confirmed = await _confirmed(service, payments, clock, "slot-fin-001")
    target = await store.run(lambda tx: tx.lookup_slot("slot-fin-002"))
    assert target is not None
    intent = reschedule_intent(confirmed, target.slot)
    moves = [
        RescheduleBooking(
            confirmed.booking_id, "slot-fin-002", confirmed.version, _key(), _approve(intent, clock)
        )
        for _ in range(2)
    ]
    first, second = await asyncio.gather(
        *(_outcome(service.reschedule_booking(move, CONTEXT)) for move in moves)
    )
    outcomes = sorted([first, second], key=lambda o: isinstance(o, Booking))
    assert outcomes[0] == "VERSION_CONFLICT"
    assert isinstance(outcomes[1], Booking)
    after = await _get(service, confirmed)
    assert (after.slot_id, after.version, len(after.history)) == (
        "slot-fin-002",
        confirmed.version + 1,
        1,
    )


async def test_a_cancel_and_a_reschedule_of_one_booking_let_one_through(
    service: BookingService, payments: GatedPayments, clock: MutableClock, store: BookingStore
) -> None:
    confirmed = await _confirmed(service, payments, clock, "slot-law-001")
    target = await store.run(lambda tx: tx.lookup_slot("slot-law-002"))
    assert target is not None
    move = RescheduleBooking(
        confirmed.booking_id,
        "slot-law-002",
        confirmed.version,
        _key(),
        _approve(reschedule_intent(confirmed, target.slot), clock),
    )
    cancel = CancelBooking(
        confirmed.booking_id, confirmed.version, _key(), _approve(cancel_intent(confirmed), clock)
    )
    outcomes = await asyncio.gather(
        _outcome(service.reschedule_booking(move, CONTEXT)),
        _outcome(service.cancel_booking(cancel, CONTEXT)),
    )
    assert sorted(o if isinstance(o, str) else "ok" for o in outcomes) == ["VERSION_CONFLICT", "ok"]
    after = await _get(service, confirmed)
    assert after.version == confirmed.version + 1


async def test_a_hold_paid_that_expires_while_its_cancel_queries_payment_owes_a_refund(
    service: BookingService, payments: GatedPayments, clock: MutableClock
) -> None:
    held = await _hold(service)
    clock.advance(60)
    payments.answers[held.booking_id] = answer(held, "PAID", paid_at=clock.now())
    cancel = CancelBooking(held.booking_id, held.version, _key(), None)

    async def expire() -> None:
        clock.set(held.expires_at)

    refused, _ = await _run_while_held_open(
        payments, held.booking_id, service.cancel_booking(cancel, CONTEXT), expire()
    )
    assert refused == "PAID_AFTER_EXPIRY"
    after = await _get(service, held)
    assert (after.status, after.payment.status, after.refund_due) == (
        BookingStatus.EXPIRED,
        PaymentStatus.PAID,
        True,
    )
    assert after.version == 3  # expired (2), then the payment on record (3)
    # The outcome is committed with its idempotency record: a retry of the key answers the same.
    assert await _outcome(service.cancel_booking(cancel, CONTEXT)) == "PAID_AFTER_EXPIRY"
    assert (await _get(service, held)).version == 3


async def test_a_cancel_that_finds_its_hold_paid_after_expiry_logs_and_names_the_booking(
    service: BookingService,
    payments: GatedPayments,
    clock: MutableClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    held = await _hold(service)
    clock.advance(60)
    payments.answers[held.booking_id] = answer(held, "PAID", paid_at=clock.now())
    cancel = CancelBooking(held.booking_id, held.version, _key(), None)

    payments.hold_open(held.booking_id)
    asked, gate = payments.asked[held.booking_id], payments.gates[held.booking_id]
    pending = asyncio.ensure_future(service.cancel_booking(cancel, CONTEXT))
    with anyio.fail_after(DEADLINE_S):
        await asked.wait()
    clock.set(held.expires_at)  # the hold expires while its payment is queried
    gate.set()
    with (
        caplog.at_level(logging.WARNING, logger="expert_booking.services"),
        anyio.fail_after(DEADLINE_S),
        pytest.raises(BookingError) as excinfo,
    ):
        await pending
    refused = excinfo.value
    after = await _get(service, held)
    assert (refused.code, wire_details(refused), refused.booking) == (
        "PAID_AFTER_EXPIRY",
        {"bookingId": held.booking_id},
        after,
    )
    line = f"paid after expiry: booking {held.booking_id} was paid after its hold expired"
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", f"{line}; refund due")
    ]
