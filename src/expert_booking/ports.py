"""Ports: what the use cases need from the outside world (clock, payment service, store)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

from expert_booking.domain.model import Booking, BookingStatus, PaymentAnswer, Slot

T = TypeVar("T")


class Clock(Protocol):
    """The only reader of the wall clock.

    ``now()`` must be safe to call from any thread: transactions read it on the store's
    worker thread (``BookingStore.run``), the edge on the event loop.
    """

    def now(self) -> datetime:
        """Return the current instant as an aware UTC datetime."""
        ...


@dataclass(frozen=True, slots=True)
class TraceContext:
    """W3C trace context of the current action: 32-hex trace id, 16-hex span id."""

    trace_id: str
    span_id: str

    @property
    def traceparent(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-01"


class PaymentQueryPort(Protocol):
    """Read-only payment status service (CONTRACT section 4)."""

    async def query_payment(self, booking_id: str, trace: TraceContext) -> PaymentAnswer:
        """Return the payment's current state.

        Raises:
            PaymentUnavailableError: timeout, connection error, non-200 or malformed body.
        """
        ...


@dataclass(frozen=True, slots=True)
class SlotQuery:
    """Filters of a slot search; ``text`` matches expert name, specialty and keywords."""

    text: str
    specialty: str | None
    starts_after: datetime | None
    starts_before: datetime | None


LOCAL_OWNER = "local"
"""The owner of every stored booking until bookings record their owner (access control)."""


@dataclass(frozen=True, slots=True)
class BookingListQuery:
    """Filters of a booking list: whose bookings, which statuses, which idempotency key.

    Attributes:
        owner: The owner key of the caller (``Principal.owner``). No booking records its owner
            yet: every stored booking belongs to ``LOCAL_OWNER``, so another owner sees none.
            An owner column, once stored, replaces that one comparison.
        statuses: Only bookings with one of these statuses; empty for every status.
        idempotency_key: Only the booking an idempotency record with this key (of any scope:
            a hold's or a confirmation's) refers to.
    """

    owner: str
    statuses: frozenset[BookingStatus]
    idempotency_key: str | None


@dataclass(frozen=True, slots=True)
class BookingListResult:
    """A page of bookings, newest first, their total and the earliest hold expiry (one snapshot)."""

    bookings: list[Booking]
    total: int
    next_hold_expiry: datetime | None


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """The committed outcome of one idempotent request (stored with the change it describes)."""

    scope: str
    key: str
    fingerprint: str
    booking: Booking
    error_code: str | None


@dataclass(frozen=True, slots=True)
class SlotSearchResult:
    """A page of free slots, their total and the earliest hold expiry, from one snapshot."""

    slots: list[Slot]
    total: int
    next_hold_expiry: datetime | None


@dataclass(frozen=True, slots=True)
class SlotStanding:
    """A slot (joined with its expert) and whether it is free (no HELD or CONFIRMED booking)."""

    slot: Slot
    free: bool


@dataclass(frozen=True, slots=True)
class HoldLookup:
    """What a hold reads before it writes; ``next_hold_expiry`` says whether a release is due."""

    record: IdempotencyRecord | None
    slot: Slot | None
    next_hold_expiry: datetime | None


class Transaction(Protocol):
    """Operations available inside one store transaction (all or nothing).

    Synchronous on purpose: a transaction's whole body runs as one call on the store's own
    worker (``BookingStore.run``), so it costs one hand-off between threads instead of one per
    statement, and nothing else interleaves with it.
    """

    def release_overdue(self, now: datetime) -> int:
        """Mark HELD bookings with ``expires_at <= now`` EXPIRED (version + 1); return count."""
        ...

    def next_hold_expiry(self) -> datetime | None:
        """The earliest ``expires_at`` of a HELD booking, if any."""
        ...

    def search_free_slots(
        self, query: SlotQuery, now: datetime, offset: int, limit: int
    ) -> tuple[list[Slot], int]:
        """Free slots (no active booking, starting after ``now``) by start time; page and total."""
        ...

    def lookup_hold(self, scope: str, key: str, slot_id: str) -> HoldLookup:
        """``get_idempotency``, the slot (joined with its expert) and ``next_hold_expiry`` at once.

        Valid before ``release_overdue``: a release changes neither the record nor the slot.
        """
        ...

    def lookup_slot(self, slot_id: str) -> SlotStanding | None:
        """The slot and whether it is free now, or ``None`` when no slot has this id.

        Free means no HELD or CONFIRMED booking has it (call after ``release_overdue``); it
        does not judge the start time. Securing it is ``update_booking``'s or
        ``insert_booking``'s (the store's uniqueness guarantee), not this read's.
        """
        ...

    def list_bookings(
        self, query: BookingListQuery, offset: int, limit: int
    ) -> tuple[list[Booking], int]:
        """The query's bookings, newest first (``held_at``, then ``booking_id``, descending).

        Returns the page from ``offset`` (at most ``limit``) and the total over all pages.
        """
        ...

    def get_booking(self, booking_id: str) -> Booking | None: ...

    def insert_booking(self, booking: Booking) -> None:
        """Insert a new booking.

        Raises:
            SlotUnavailableError: the slot already has an active booking.
        """
        ...

    def update_booking(self, booking: Booking, expected_version: int) -> None:
        """Replace the stored booking if its stored version is ``expected_version``.

        A changed ``slot_id`` moves the booking in one step: the new slot is secured (no other
        active booking may have it) as the old one is released, never one without the other.

        Raises:
            VersionConflictError: the stored version differs.
            SlotUnavailableError: the booking would be a second active booking of its slot.
        """
        ...

    def get_idempotency(self, scope: str, key: str) -> IdempotencyRecord | None: ...

    def put_idempotency(self, record: IdempotencyRecord) -> None: ...


class BookingStore(Protocol):
    """A transactional store; a second engine (PostgreSQL) implements the same port.

    The ``peek_*`` reads see the last committed state without taking the write lock and do NOT
    release overdue holds: a caller that finds an overdue hold (``expires_at <= now``) in what
    it read must release and read again inside ``run``.
    """

    async def peek_booking(self, booking_id: str) -> Booking | None:
        """The last committed state of a booking (overdue holds not released)."""
        ...

    async def peek_free_slots(
        self, query: SlotQuery, now: datetime, offset: int, limit: int
    ) -> SlotSearchResult:
        """``search_free_slots`` and ``next_hold_expiry`` from one committed snapshot."""
        ...

    async def peek_bookings(
        self, query: BookingListQuery, offset: int, limit: int
    ) -> BookingListResult:
        """``list_bookings`` and ``next_hold_expiry`` from one committed snapshot."""
        ...

    async def run(self, work: Callable[[Transaction], T]) -> T:
        """Run ``work`` as one write transaction and return what it returns.

        ``work`` is called once, synchronously, off the event loop; it must only compute and
        use its ``Transaction`` (no awaiting, no other I/O). The transaction commits when
        ``work`` returns and rolls back when it raises (the exception propagates). Once
        started it runs to its end even if the awaiting task is cancelled.

        Raises:
            StorageBusyError: the store stayed locked past its busy timeout.
        """
        ...
