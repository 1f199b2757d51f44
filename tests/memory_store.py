"""An in-memory ``BookingStore``: the fake of the store port that the service tests also run on.

It keeps the seed's experts and slots and answers every port operation as the store contract
(``tests/store_contract``) requires of any engine: all-or-nothing transactions run one at a
time off the event loop, at most one active (HELD or CONFIRMED) booking per slot, compare-and-
set updates by version, idempotency records written once per owner (then only replaced),
bookings and records found only with their owner's key, and peeks that see the last commit
only. It is a test
double, never shipped: an engine for production implements the port on a real database
(SQLite today, PostgreSQL next) and passes the same suite.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TypeVar

from expert_booking.adapters.seed import SEED_EXPERTS, SEED_SLOTS, SeedExpert, SeedSlot
from expert_booking.domain.errors import (
    BookingNotFoundError,
    InternalError,
    SlotUnavailableError,
    VersionConflictError,
)
from expert_booking.domain.model import (
    ACTIVE_STATUSES,
    Booking,
    BookingStatus,
    Money,
    Slot,
    format_instant,
    parse_instant,
)
from expert_booking.ports import (
    BookingListQuery,
    BookingListResult,
    HoldLookup,
    IdempotencyRecord,
    ListPosition,
    SlotNeighbours,
    SlotQuery,
    SlotSearchResult,
    SlotStanding,
    Transaction,
    fold_text,
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Expert:
    name: str
    specialty: str
    keywords: str

    def matches(self, query: SlotQuery) -> bool:
        if query.specialty is not None and fold_text(self.specialty) != fold_text(query.specialty):
            return False
        text = fold_text(f"{self.name} {self.specialty} {self.keywords}")
        return all(token in text for token in query.tokens())


@dataclass(slots=True)
class _State:
    """Everything the store holds; a transaction works on a copy and commits by replacing it."""

    bookings: dict[str, Booking] = field(default_factory=dict)
    records: dict[tuple[str, str, str], IdempotencyRecord] = field(default_factory=dict)

    def copy(self) -> _State:
        return _State(dict(self.bookings), dict(self.records))


def _seed(
    extra_experts: Sequence[SeedExpert] = (), extra_slots: Sequence[SeedSlot] = ()
) -> tuple[dict[str, _Expert], dict[str, Slot]]:
    experts = {
        e.expert_id: _Expert(e.name, e.specialty, e.keywords)
        for e in (*SEED_EXPERTS, *extra_experts)
    }
    slots = {
        s.slot_id: Slot(
            slot_id=s.slot_id,
            expert_id=s.expert_id,
            expert_name=experts[s.expert_id].name,
            specialty=experts[s.expert_id].specialty,
            starts_at=parse_instant(s.starts_at),
            ends_at=parse_instant(s.ends_at),
            price=Money(s.price_amount, s.price_currency),
        )
        for s in (*SEED_SLOTS, *extra_slots)
    }
    return experts, slots


class MemoryTransaction:
    """``ports.Transaction`` over a private copy of the state; valid only while its work runs."""

    def __init__(self, state: _State, experts: dict[str, _Expert], slots: dict[str, Slot]):
        self.state = state
        self.finished = False
        self._experts = experts
        self._slots = slots

    def release_overdue(self, now: datetime) -> int:
        overdue = [
            booking
            for booking in self._bookings().values()
            if booking.status is BookingStatus.HELD and booking.expires_at <= now
        ]
        for booking in overdue:
            self.state.bookings[booking.booking_id] = replace(
                booking, status=BookingStatus.EXPIRED, version=booking.version + 1
            )
        return len(overdue)

    def next_hold_expiry(self) -> datetime | None:
        return min(
            (b.expires_at for b in self._bookings().values() if b.status is BookingStatus.HELD),
            default=None,
        )

    def search_free_slots(
        self, query: SlotQuery, now: datetime, offset: int, limit: int
    ) -> tuple[list[Slot], int]:
        taken = {b.slot_id for b in self._bookings().values() if b.status in ACTIVE_STATUSES}
        free = sorted(
            (
                slot
                for slot in self._slots.values()
                if slot.slot_id not in taken
                and slot.starts_at > now
                and (query.starts_after is None or slot.starts_at >= query.starts_after)
                and (query.starts_before is None or slot.starts_at < query.starts_before)
                and self._experts[slot.expert_id].matches(query)
            ),
            key=lambda slot: (slot.starts_at, slot.slot_id),
        )
        start = max(0, offset)
        return free[start : start + max(0, limit)], len(free)

    def lookup_hold(self, scope: str, key: str, slot_id: str, *, owner: str) -> HoldLookup:
        return HoldLookup(
            self.get_idempotency(scope, key, owner=owner),
            self._slots.get(slot_id),
            self.next_hold_expiry(),
        )

    def lookup_slot(self, slot_id: str) -> SlotStanding | None:
        slot = self._slots.get(slot_id)
        if slot is None:
            return None
        taken = any(
            b.slot_id == slot_id and b.status in ACTIVE_STATUSES for b in self._bookings().values()
        )
        return SlotStanding(slot, free=not taken)

    def list_bookings(
        self, query: BookingListQuery, after: ListPosition | None, limit: int
    ) -> tuple[list[Booking], int]:
        bookings = {
            booking_id: booking
            for booking_id, booking in self._bookings().items()
            if booking.owner == query.owner
        }
        if query.idempotency_key is None:
            chosen = list(bookings.values())
        else:
            ids = {
                record.booking.booking_id
                for (owner, _, key), record in self.state.records.items()
                if owner == query.owner and key == query.idempotency_key
            }
            chosen = [bookings[booking_id] for booking_id in ids if booking_id in bookings]
        # Ordered as SQLite orders its stored text: instants at millisecond precision.
        listed = sorted(
            (b for b in chosen if not query.statuses or b.status in query.statuses),
            key=lambda b: (format_instant(b.held_at), b.booking_id),
            reverse=True,
        )
        following = [
            b
            for b in listed
            if after is None
            or (format_instant(b.held_at), b.booking_id)
            < (format_instant(after.held_at), after.booking_id)
        ]
        return following[: max(0, limit)], len(listed)

    def get_booking(self, booking_id: str, *, owner: str) -> Booking | None:
        return _owned(self._bookings().get(booking_id), owner)

    def insert_booking(self, booking: Booking) -> None:
        if booking.slot_id not in self._slots or booking.booking_id in self._bookings():
            raise InternalError
        self._check_free(booking)
        self.state.bookings[booking.booking_id] = booking

    def update_booking(self, booking: Booking, expected_version: int) -> None:
        stored = _owned(self._bookings().get(booking.booking_id), booking.owner)
        if stored is None:
            raise BookingNotFoundError(booking_id=booking.booking_id)
        if stored.version != expected_version:
            raise VersionConflictError(
                booking_id=booking.booking_id,
                expected_version=expected_version,
                current_version=stored.version,
            )
        self._check_free(booking)
        self.state.bookings[booking.booking_id] = booking

    def get_idempotency(self, scope: str, key: str, *, owner: str) -> IdempotencyRecord | None:
        self._check_open()
        return self.state.records.get((owner, scope, key))

    def put_idempotency(self, record: IdempotencyRecord) -> None:
        self._check_open()
        stored_as = (record.booking.owner, record.scope, record.key)
        if stored_as in self.state.records:
            raise InternalError
        self.state.records[stored_as] = record

    def replace_idempotency(self, record: IdempotencyRecord) -> None:
        self._check_open()
        stored_as = (record.booking.owner, record.scope, record.key)
        if stored_as not in self.state.records:
            raise InternalError
        self.state.records[stored_as] = record

    def _check_free(self, booking: Booking) -> None:
        if booking.status in ACTIVE_STATUSES and any(
            other.slot_id == booking.slot_id
            and other.booking_id != booking.booking_id
            and other.status in ACTIVE_STATUSES
            for other in self._bookings().values()
        ):
            raise SlotUnavailableError(slot_id=booking.slot_id)

    def _bookings(self) -> dict[str, Booking]:
        self._check_open()
        return self.state.bookings

    def _check_open(self) -> None:
        if self.finished:
            msg = "the transaction has already ended"
            raise RuntimeError(msg)


def _owned(booking: Booking | None, owner: str) -> Booking | None:
    """The booking if ``owner`` owns it: another owner's reads as a missing one."""
    return booking if booking is not None and booking.owner == owner else None


@dataclass(slots=True)
class _Database:
    """What the stores of one database share: the catalog, the last commit, the one writer."""

    experts: dict[str, _Expert]
    slots: dict[str, Slot]
    committed: _State
    worker: ThreadPoolExecutor


class MemoryBookingStore:
    """``ports.BookingStore`` in process memory, seeded like a new SQLite database."""

    def __init__(
        self, *, experts: Sequence[SeedExpert] = (), slots: Sequence[SeedSlot] = ()
    ) -> None:
        """Seeded like a new database, plus ``experts`` and ``slots`` (a wider catalog)."""
        all_experts, all_slots = _seed(experts, slots)
        worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-store")
        self._db = _Database(all_experts, all_slots, _State(), worker)
        self._experts, self._slots = all_experts, all_slots

    def replica(self) -> MemoryBookingStore:
        """Another store on the same data, as a second server process on one database."""
        other = MemoryBookingStore.__new__(MemoryBookingStore)
        other._db = self._db
        other._experts, other._slots = self._db.experts, self._db.slots
        return other

    @property
    def _committed(self) -> _State:
        return self._db.committed

    async def peek_booking(self, booking_id: str, *, owner: str) -> Booking | None:
        return _owned(self._committed.bookings.get(booking_id), owner)

    async def peek_free_slots(
        self, query: SlotQuery, now: datetime, offset: int, limit: int
    ) -> SlotSearchResult:
        tx = MemoryTransaction(self._committed, self._experts, self._slots)
        slots, total = tx.search_free_slots(query, now, offset, limit)
        return SlotSearchResult(slots, total, tx.next_hold_expiry())

    async def peek_bookings(
        self, query: BookingListQuery, after: ListPosition | None, limit: int
    ) -> BookingListResult:
        tx = MemoryTransaction(self._committed, self._experts, self._slots)
        bookings, total = tx.list_bookings(query, after, limit)
        return BookingListResult(bookings, total, tx.next_hold_expiry())

    async def peek_slots_near(
        self, slot_id: str, now: datetime, limit: int, *, price: Money | None = None
    ) -> SlotNeighbours:
        target = self._slots.get(slot_id)
        if target is None:
            return SlotNeighbours(None, [])
        taken = {
            b.slot_id
            for b in self._committed.bookings.values()
            if b.status in ACTIVE_STATUSES and not b.is_overdue(now)
        }
        free = [
            slot
            for slot in self._slots.values()
            if slot.slot_id != slot_id
            and slot.slot_id not in taken
            and slot.starts_at > now
            and (price is None or slot.price == price)
        ]
        mine = [slot for slot in free if slot.expert_id == target.expert_id]
        before = sorted(
            (slot for slot in mine if slot.starts_at < target.starts_at),
            key=lambda slot: (slot.starts_at, slot.slot_id),
            reverse=True,
        )
        after = sorted(
            (slot for slot in mine if slot.starts_at >= target.starts_at),
            key=lambda slot: (slot.starts_at, slot.slot_id),
        )
        colleagues = sorted(
            (
                slot
                for slot in free
                if slot.expert_id != target.expert_id
                and slot.specialty == target.specialty
                and slot.starts_at == target.starts_at
            ),
            key=lambda slot: slot.slot_id,
        )
        count = max(0, limit)
        return SlotNeighbours(target, [*before[:count], *after[:count], *colleagues[:count]])

    async def run(self, work: Callable[[Transaction], T]) -> T:
        """One transaction at a time on the store's one worker thread, in submission order.

        Shielded: a submitted transaction runs to its end even if its caller is cancelled.
        """
        submitted = self._db.worker.submit(self._transact, work)
        return await asyncio.shield(asyncio.wrap_future(submitted))

    def _transact(self, work: Callable[[Transaction], T]) -> T:
        tx = MemoryTransaction(self._committed.copy(), self._experts, self._slots)
        try:
            result = work(tx)
        finally:
            tx.finished = True
        if inspect.isawaitable(result):
            close = getattr(result, "close", None)
            if close is not None:
                close()
            msg = "work must be a plain function, not a coroutine function"
            raise TypeError(msg)
        self._db.committed = tx.state
        return result
