"""Shared fakes and builders for tests: a settable clock, a scripted payment service, bookings."""

from __future__ import annotations

import contextlib
import io
import logging
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import anyio.to_thread

from expert_booking.adapters.seed import SeedExpert, SeedSlot
from expert_booking.call_context import LOCAL, CallContext
from expert_booking.domain.model import (
    Booking,
    BookingStatus,
    Customer,
    HumanApproval,
    Intent,
    Money,
    Payment,
    PaymentAnswer,
    PaymentStatus,
    Slot,
)
from expert_booking.edge.json_logging import ROOT_LOGGER
from expert_booking.edge.log_writer import LoopBatchedWriter
from expert_booking.policy import BookingPolicy
from expert_booking.ports import (
    LOCAL_OWNER,
    BookingStore,
    SlotQuery,
    SlotSearchResult,
    TraceContext,
    Transaction,
)

T0 = datetime(2030, 9, 1, tzinfo=UTC)
SLOT_AI_001_STARTS_AT = datetime(2030, 9, 2, 2, tzinfo=UTC)
# Every slot, and the seed's slots in start order (the order a search lists them).
ALL = SlotQuery(text="", specialty=None, starts_after=None, starts_before=None)
SEED_ORDER = [
    "slot-ai-001",
    "slot-law-001",
    "slot-ai-002",
    "slot-law-002",
    "slot-fin-001",
    "slot-fin-002",
]
TRACE = TraceContext(trace_id="4bf92f3577b34da6a3ce929d0e0e4736", span_id="00f067aa0ba902b7")
# The settings' defaults (CONTRACT section 1) as the use cases see them.
POLICY = BookingPolicy(
    hold_ttl=timedelta(seconds=300),
    approval_ttl=timedelta(seconds=120),
    approval_skew=timedelta(seconds=5),
    slot_cache_ttl=timedelta(seconds=5),
    payment_page_base_url="http://127.0.0.1:3100/pay",
)
# The request every direct use-case call in the tests serves: the local caller, in TRACE.
CONTEXT = CallContext(principal=LOCAL, trace=TRACE, client_sent_at=T0, server_received_at=T0)


class MutableClock:
    """A ``Clock`` that moves only when a test moves it."""

    def __init__(self, start: datetime = T0) -> None:
        self._now = _aware_utc(start)

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> datetime:
        self._now += timedelta(seconds=seconds)
        return self._now

    def set(self, value: datetime) -> None:
        self._now = _aware_utc(value)


def _aware_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        msg = "MutableClock needs an aware datetime"
        raise ValueError(msg)
    return value.astimezone(UTC)


PaymentOutcome = PaymentAnswer | BaseException | Callable[[], PaymentAnswer]


@dataclass(frozen=True, slots=True)
class PaymentCall:
    booking_id: str
    trace: TraceContext


class FakePayments:
    """A ``PaymentQueryPort`` answering from per-booking scripts, recording every call.

    ``script(booking_id, a, b, c)`` answers the next queries with ``a``, ``b``, then ``c`` for
    every later query. An outcome is a ``PaymentAnswer``, an exception to raise, or a callable
    returning an answer (to act while "the network call is in flight", e.g. advance a clock).
    An unscripted booking is a test bug and fails loudly.
    """

    def __init__(self) -> None:
        self.calls: list[PaymentCall] = []
        self._scripts: dict[str, list[PaymentOutcome]] = {}

    def script(self, booking_id: str, *outcomes: PaymentOutcome) -> None:
        if not outcomes:
            msg = "script at least one outcome"
            raise ValueError(msg)
        self._scripts[booking_id] = list(outcomes)

    @property
    def queried_ids(self) -> list[str]:
        return [call.booking_id for call in self.calls]

    async def query_payment(self, booking_id: str, trace: TraceContext) -> PaymentAnswer:
        self.calls.append(PaymentCall(booking_id, trace))
        outcomes = self._scripts.get(booking_id)
        if not outcomes:
            msg = f"no scripted payment answer for {booking_id}"
            raise AssertionError(msg)
        outcome = outcomes.pop(0) if len(outcomes) > 1 else outcomes[0]
        if isinstance(outcome, BaseException):
            raise outcome
        if callable(outcome):
            return outcome()
        return outcome


def answer(
    booking: Booking,
    status: str,
    *,
    paid_at: datetime | None = None,
    amount: str | None = None,
    currency: str | None = None,
    booking_id: str | None = None,
    received_at: datetime | None = None,
) -> PaymentAnswer:
    """A payment answer for ``booking``; exact match unless a field is overridden.

    ``received_at`` defaults to ``paid_at`` (or the hold's time when unpaid).
    """
    return PaymentAnswer(
        booking_id=booking.booking_id if booking_id is None else booking_id,
        status=PaymentStatus(status),
        amount=booking.payment.price.amount if amount is None else amount,
        currency=booking.payment.price.currency if currency is None else currency,
        paid_at=paid_at,
        received_at=received_at or paid_at or booking.held_at,
    )


def approval(
    booking: Booking,
    approved_at: datetime,
    *,
    decision: str = "APPROVE",
    intent: Intent | None = None,
    intent_hash: str | None = None,
    approval_id: str = "6f1c2f8e-3a5b-4c1d-9e7f-0a1b2c3d4e5f",
) -> HumanApproval:
    """A person's approval of ``booking``'s current intent (or of ``intent``, if given)."""
    approved = booking.intent if intent is None else intent
    return HumanApproval(
        approval_id=approval_id,
        decision=decision,
        approved_at=approved_at,
        intent=approved,
        intent_hash=approved.digest() if intent_hash is None else intent_hash,
    )


def make_slot(starts_at: datetime = SLOT_AI_001_STARTS_AT) -> Slot:
    """The seed's ``slot-ai-001`` (one hour, 500.00 CNY), starting at ``starts_at``."""
    return Slot(
        slot_id="slot-ai-001",
        expert_id="exp-ai-001",
        expert_name="Dr. Lin Wei",
        specialty="AI",
        starts_at=starts_at,
        ends_at=starts_at + timedelta(hours=1),
        price=Money("500.00", "CNY"),
    )


SEED_SLOT_AI_002 = Slot(
    slot_id="slot-ai-002",
    expert_id="exp-ai-001",
    expert_name="Dr. Lin Wei",
    specialty="AI",
    starts_at=SLOT_AI_001_STARTS_AT + timedelta(days=1),
    ends_at=SLOT_AI_001_STARTS_AT + timedelta(days=1, hours=1),
    price=Money("500.00", "CNY"),
)
"""The seed's other AI slot: the one alternative to a taken ``slot-ai-001`` in the seed."""


Catalog = tuple[Sequence[SeedExpert], Sequence[SeedSlot]]
"""Experts and slots beyond the seed's (a store's wider catalog)."""

# Two more AI experts with slots at slot-ai-001's start (02:00) and elsewhere, and more hours of
# exp-ai-001 on both sides of it, one (x01, 01:30) at another price.
WIDER_CATALOG: Catalog = (
    (
        SeedExpert("exp-ai-002", "Dr. Mei Zhou", "AI", "AI agents"),
        SeedExpert("exp-ai-003", "Dr. Jonas Berg", "AI", "AI vision"),
    ),
    tuple(
        SeedSlot(
            slot_id, expert, f"2030-09-0{start}:00.000Z", f"2030-09-0{end}:00.000Z", price, "CNY"
        )
        for slot_id, expert, start, end, price in (
            ("slot-ai-b01", "exp-ai-001", "1T22:00", "1T23:00", "500.00"),
            ("slot-ai-b02", "exp-ai-001", "1T23:00", "2T00:00", "500.00"),
            ("slot-ai-b03", "exp-ai-001", "2T00:00", "2T01:00", "500.00"),
            ("slot-ai-b04", "exp-ai-001", "2T01:00", "2T02:00", "500.00"),
            ("slot-ai-x01", "exp-ai-001", "2T01:30", "2T02:30", "900.00"),
            ("slot-ai-a01", "exp-ai-001", "2T03:00", "2T04:00", "500.00"),
            ("slot-ai-a02", "exp-ai-001", "2T04:00", "2T05:00", "500.00"),
            ("slot-mz-001", "exp-ai-002", "2T02:00", "2T03:00", "500.00"),
            ("slot-mz-002", "exp-ai-002", "2T03:00", "2T04:00", "500.00"),
            ("slot-jb-001", "exp-ai-003", "2T02:00", "2T03:00", "500.00"),
        )
    ),
)


def make_booking(booking_id: str = "booking-x", **changes: Any) -> Booking:
    """A HELD booking of slot-ai-001 held at ``T0``; ``changes`` replace fields."""
    base = Booking(
        booking_id=booking_id,
        slot_id="slot-ai-001",
        expert_id="exp-ai-001",
        starts_at=SLOT_AI_001_STARTS_AT,
        ends_at=SLOT_AI_001_STARTS_AT + timedelta(hours=1),
        customer=Customer(name="Ada Lovelace", email="Ada.Lovelace@Example.com"),
        status=BookingStatus.HELD,
        version=1,
        held_at=T0,
        expires_at=T0 + timedelta(seconds=300),
        confirmed_at=None,
        payment_page_url=f"http://127.0.0.1:3100/pay/{booking_id}",
        payment=Payment(
            query_id=booking_id, status=PaymentStatus.PENDING, price=Money("500.00", "CNY")
        ),
        owner=LOCAL_OWNER,
    )
    return replace(base, **changes)


def make_confirmed_booking() -> Booking:
    """A CONFIRMED, paid booking whose customer has non-ASCII text and every optional key."""
    return make_booking(
        customer=Customer(name="李雷", email="li@Example.cn", phone="+86 10"),
        status=BookingStatus.CONFIRMED,
        version=2,
        confirmed_at=T0 + timedelta(seconds=61),
        payment=Payment(
            "booking-x", PaymentStatus.PAID, Money("500.00", "CNY"), T0 + timedelta(seconds=59)
        ),
    )


async def insert_bookings(store: BookingStore, *bookings: Booking) -> None:
    """Insert ``bookings`` in one transaction."""

    def work(tx: Transaction) -> None:
        for booking in bookings:
            tx.insert_booking(booking)

    await store.run(work)


async def search_both_ways(
    store: BookingStore,
    query: SlotQuery = ALL,
    *,
    now: datetime = T0,
    offset: int = 0,
    limit: int = 20,
) -> tuple[list[str], int]:
    """Search in a write transaction, and check the lock-free peek answers the same."""

    def work(tx: Transaction) -> SlotSearchResult:
        slots, total = tx.search_free_slots(query, now, offset, limit)
        return SlotSearchResult(slots, total, tx.next_hold_expiry())

    found = await store.run(work)
    assert await store.peek_free_slots(query, now, offset, limit) == found
    return [slot.slot_id for slot in found.slots], found.total


@contextlib.asynccontextmanager
async def transaction_held_open(
    store: BookingStore, setup: Callable[[Transaction], object] | None = None
) -> AsyncIterator[None]:
    """Keep one write transaction of ``store`` open (after ``setup``) for the ``async with`` body.

    The transaction's work blocks its worker thread on an event until the body ends, so the
    event loop stays free and other transactions queue behind it. It then commits.
    """
    entered, release = threading.Event(), threading.Event()

    def work(tx: Transaction) -> None:
        try:
            if setup is not None:
                setup(tx)
        finally:
            entered.set()  # a failing setup ends the wait too; its error ends the task group
        if not release.wait(timeout=_HOLD_OPEN_LIMIT_S):
            msg = "transaction_held_open: the body did not end in time"
            raise TimeoutError(msg)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(store.run, work)
        with anyio.fail_after(_HOLD_OPEN_LIMIT_S):
            # Abandoned on cancellation: if the transaction never starts, the task group's
            # error (or the deadline) ends this wait instead of a thread waiting forever.
            await anyio.to_thread.run_sync(entered.wait, abandon_on_cancel=True)
        try:
            yield
        finally:
            release.set()


_HOLD_OPEN_LIMIT_S = 10


def logged_text(stream: io.StringIO) -> str:
    """What the server logged to ``stream`` so far, including lines an event loop still keeps.

    ``configure_logging`` writes the lines of one loop iteration at its end; a test reading the
    log within that iteration drains them first.
    """
    for handler in logging.getLogger(ROOT_LOGGER).handlers:
        writer = getattr(handler, "stream", None)
        if isinstance(writer, LoopBatchedWriter):
            writer.drain()
    return stream.getvalue()
