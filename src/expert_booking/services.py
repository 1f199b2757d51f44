"""Use cases of the booking core: search, hold, get, list. Framework-free.

Confirm, cancel and reschedule run in their own modules (``confirmation``, ``cancellation``,
``rescheduling``); every write transaction goes through one ``writes.Writes``, which keeps the
slot-search cache true.

Every use case reads the clock once per transaction, releases overdue holds inside the same
transaction before it reads or writes, and commits idempotency records with the change they
describe.

Each transaction is one synchronous function handed to ``BookingStore.run``: the store runs
it off the event loop in one piece (one thread hop, nothing interleaved), commits when it
returns and rolls back when it raises. Refusals that must not undo the transaction's overdue
release are returned as values, not raised.

Ownership is the store's (``ports.Transaction``): every booking and idempotency lookup takes
the caller's owner key (``context.principal.owner``), so another principal's booking is not
found, exactly like an unknown id, and idempotency keys are scoped per principal. A new use
case inherits that by passing the owner; there is no lookup without one.

Reads (get, search, list) first peek at the last committed state without the write lock; only when
what they read depends on an overdue hold (the booking itself, or any hold for a search or a
list) do they fall back to a transaction that releases it and reads again. So a read never shows an
overdue hold as HELD, and it neither queues behind writers nor answers STORAGE_BUSY otherwise.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime

from expert_booking.call_context import CallContext
from expert_booking.cancellation import CancelBooking, Cancellation
from expert_booking.confirmation import Confirmation, ConfirmBooking
from expert_booking.domain.conflicts import ALTERNATIVES_LIMIT, rank_alternatives
from expert_booking.domain.cursor import (
    decode_cursor,
    decode_key_cursor,
    encode_cursor,
    encode_key_cursor,
    query_binding,
)
from expert_booking.domain.errors import (
    SLOT_STARTED,
    BookingError,
    BookingNotFoundError,
    SlotNotFoundError,
    SlotUnavailableError,
)
from expert_booking.domain.model import (
    Booking,
    BookingStatus,
    Customer,
    Money,
    Payment,
    PaymentStatus,
    Slot,
    canonical_idempotency_key,
)
from expert_booking.policy import BookingPolicy
from expert_booking.ports import (
    BookingListQuery,
    BookingListResult,
    BookingStore,
    Clock,
    IdempotencyRecord,
    ListPosition,
    PaymentQueryPort,
    SlotQuery,
    SlotSearchResult,
    Transaction,
)
from expert_booking.replay import (
    IdempotencyScope,
    release_due,
    replay_outcome,
    unwrap,
)
from expert_booking.replay import fingerprint as fingerprint_of
from expert_booking.rescheduling import RescheduleBooking, Rescheduling
from expert_booking.slot_cache import SlotSearchCache
from expert_booking.writes import Writes

logger = logging.getLogger("expert_booking.services")


@dataclass(frozen=True, slots=True)
class SearchSlots:
    query: SlotQuery
    limit: int
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class SlotPage:
    slots: tuple[Slot, ...]
    total: int
    next_cursor: str | None
    cache_hit: bool


@dataclass(frozen=True, slots=True)
class HoldSlot:
    """Hold ``slot_id``; ``idempotency_key`` is kept in its canonical (lower-case) form."""

    slot_id: str
    customer: Customer
    idempotency_key: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "idempotency_key", canonical_idempotency_key(self.idempotency_key))


@dataclass(frozen=True, slots=True)
class GetBooking:
    booking_id: str


@dataclass(frozen=True, slots=True)
class ListBookings:
    """Filters of a booking list; an empty ``statuses`` means every status."""

    limit: int
    statuses: frozenset[BookingStatus] = frozenset()
    idempotency_key: str | None = None
    cursor: str | None = None

    def __post_init__(self) -> None:
        if self.idempotency_key is not None:
            key = canonical_idempotency_key(self.idempotency_key)
            object.__setattr__(self, "idempotency_key", key)


@dataclass(frozen=True, slots=True)
class BookingPage:
    bookings: tuple[Booking, ...]
    total: int
    next_cursor: str | None


def new_booking_id() -> str:
    """Unguessable booking id (128 random bits); it doubles as the payment query id."""
    return f"booking-{secrets.token_hex(16)}"


class BookingService:
    """The booking core: one use case per logical tool, each ``(command, context)``."""

    def __init__(
        self,
        *,
        store: BookingStore,
        payments: PaymentQueryPort,
        clock: Clock,
        policy: BookingPolicy,
    ) -> None:
        self._store = store
        self._clock = clock
        self._policy = policy
        self._cache: SlotSearchCache[SlotPage] = SlotSearchCache()
        self._writes = Writes(store, self._cache)
        self._confirmation = Confirmation(
            writes=self._writes, payments=payments, clock=clock, policy=policy
        )
        self._cancellation = Cancellation(
            writes=self._writes, payments=payments, clock=clock, policy=policy
        )
        self._rescheduling = Rescheduling(
            writes=self._writes, clock=clock, policy=policy, alternatives=self.alternatives_to
        )

    async def confirm_booking(self, command: ConfirmBooking, context: CallContext) -> Booking:
        """``Confirmation.confirm_booking`` (module ``confirmation``)."""
        return await self._confirmation.confirm_booking(command, context)

    async def cancel_booking(self, command: CancelBooking, context: CallContext) -> Booking:
        """``Cancellation.cancel_booking`` (module ``cancellation``)."""
        return await self._cancellation.cancel_booking(command, context)

    async def reschedule_booking(self, command: RescheduleBooking, context: CallContext) -> Booking:
        """``Rescheduling.reschedule_booking`` (module ``rescheduling``)."""
        return await self._rescheduling.reschedule_booking(command, context)

    async def search_available_slots(self, command: SearchSlots, _context: CallContext) -> SlotPage:
        """Free slots matching the query, ordered by start time, one page at a time.

        Raises:
            InvalidCursorError: the cursor is malformed or belongs to another query.
        """
        query = command.query
        starts_after, starts_before = query.window()
        binding = query_binding(
            {
                "text": query.text,
                "specialty": query.specialty,
                "starts_after": starts_after,
                "starts_before": starts_before,
            }
        )
        offset = decode_cursor(command.cursor, binding) if command.cursor is not None else 0
        key = (binding, offset, command.limit)
        cached = self._cache.get(key, self._clock.now())
        if cached is not None:
            return dataclasses.replace(cached, cache_hit=True)
        # Taken before reading: a page read before any invalidation (a concurrent write, or
        # this search's own release) is never stored.
        generation = self._cache.generation
        # No lock to wait for: the clock is read right before the statement that judges it.
        now = self._clock.now()
        found = await self._store.peek_free_slots(query, now, offset, command.limit)
        if release_due(found.next_hold_expiry, now):
            # The peeked page still counts an overdue hold's slot as taken: release, re-read.
            found, now = await self._search_releasing(query, offset, command.limit)
        slots, next_expiry = found.slots, found.next_hold_expiry
        end = offset + len(slots)
        page = SlotPage(
            slots=tuple(slots),
            total=found.total,
            next_cursor=encode_cursor(end, binding) if end < found.total else None,
            cache_hit=False,
        )
        deadlines = [now + self._policy.slot_cache_ttl, *(slot.starts_at for slot in slots)]
        if next_expiry is not None:
            deadlines.append(next_expiry)
        self._cache.put(key, page, min(deadlines), generation)
        return page

    async def _search_releasing(
        self, query: SlotQuery, offset: int, limit: int
    ) -> tuple[SlotSearchResult, datetime]:
        def work(tx: Transaction) -> tuple[SlotSearchResult, datetime, int]:
            # Every use case reads the clock only once it holds the store: waiting for the lock
            # must not make it judge expiry or freshness by an earlier time.
            now = self._clock.now()
            released = tx.release_overdue(now)
            slots, total = tx.search_free_slots(query, now, offset, limit)
            return SlotSearchResult(slots, total, tx.next_hold_expiry()), now, released

        found, now, released = await self._writes.run_write(work)
        self._writes.after_write(released=released, changed=False)
        return found, now

    async def hold_slot(self, command: HoldSlot, context: CallContext) -> Booking:
        """Hold a free slot for ``hold_ttl``; the result carries the confirmation intent.

        Raises:
            IdempotencyConflictError, SlotNotFoundError, SlotUnavailableError.
        """
        fingerprint = fingerprint_of(command)
        owner = context.principal.owner

        def work(tx: Transaction) -> tuple[Booking | BookingError, int]:
            now = self._clock.now()
            found = tx.lookup_hold(
                IdempotencyScope.HOLD, command.idempotency_key, command.slot_id, owner=owner
            )
            # A release changes neither the record nor the slot row, only whether it is free:
            # it runs before the insert, and only when a hold is overdue (one statement less).
            due = release_due(found.next_hold_expiry, now)
            released = tx.release_overdue(now) if due else 0
            replayed = replay_outcome(found.record, command.idempotency_key, fingerprint)
            if replayed is not None:
                return replayed, released
            return self._hold(tx, command, found.slot, fingerprint, now, owner=owner), released

        try:
            outcome, released = await self._writes.run_write(work)
            self._writes.after_write(released=released, changed=isinstance(outcome, Booking))
            return unwrap(outcome)
        except SlotUnavailableError as refusal:
            self._writes.slot_was_taken(command.slot_id)
            refusal.details["alternatives"] = await self.alternatives_to(command.slot_id)
            raise

    async def alternatives_to(
        self, slot_id: str, *, price: Money | None = None
    ) -> tuple[Slot, ...]:
        """Free slots to offer instead of ``slot_id`` (``domain.conflicts``), best first.

        Read after the refusal, outside any transaction, from the last committed state: a
        hint, not a reservation (another caller may hold one first; the hold decides). With
        ``price`` only slots at it (a reschedule's: the booking's, as it charges no
        difference), filtered by the store before it caps each kind. A store failure here
        costs the hint only, not the refusal.
        """
        now = self._clock.now()
        try:
            near = await self._store.peek_slots_near(slot_id, now, ALTERNATIVES_LIMIT, price=price)
        except BookingError:
            logger.warning("alternatives to a taken slot could not be read", exc_info=True)
            return ()
        if near.slot is None:
            return ()
        return rank_alternatives(near.slot, near.candidates, now=now, price=price)

    async def get_booking(self, command: GetBooking, context: CallContext) -> Booking:
        """The caller's booking as it is now (overdue holds released first).

        Raises:
            BookingNotFoundError: no booking of the caller has this id.
        """
        booking_id = command.booking_id
        owner = context.principal.owner
        booking = await self._store.peek_booking(booking_id, owner=owner)
        # Judged after the read: a hold not overdue now was not overdue in the snapshot either.
        if booking is not None and booking.is_overdue(self._clock.now()):

            def work(tx: Transaction) -> tuple[Booking | None, int]:
                released = tx.release_overdue(self._clock.now())
                return tx.get_booking(booking_id, owner=owner), released

            booking, released = await self._writes.run_write(work)
            self._writes.after_write(released=released, changed=False)
        if booking is None:
            raise BookingNotFoundError(booking_id=booking_id)
        return booking

    async def list_bookings(self, command: ListBookings, context: CallContext) -> BookingPage:
        """The caller's bookings, newest first (held, then booking id), one page at a time.

        Paged by position (``ListPosition``: the cursor holds the last listed booking's key):
        bookings made or leaving the filter between two pages move no other one, so none is
        skipped or repeated. One more than a page is read to know whether another follows.

        Raises:
            InvalidCursorError: the cursor is malformed or belongs to other filters.
        """
        query = BookingListQuery(
            owner=context.principal.owner,
            statuses=command.statuses,
            idempotency_key=command.idempotency_key,
        )
        binding = query_binding(
            {
                "list": "bookings",
                "owner": query.owner,
                "status": sorted(query.statuses),
                "idempotency_key": query.idempotency_key,
            }
        )
        after = None
        if command.cursor is not None:
            after = ListPosition(*decode_key_cursor(command.cursor, binding))
        found = await self._store.peek_bookings(query, after, command.limit + 1)
        if release_due(found.next_hold_expiry, self._clock.now()):
            # The peek still shows an overdue hold as HELD: release, then list again.

            def work(tx: Transaction) -> tuple[BookingListResult, int]:
                released = tx.release_overdue(self._clock.now())
                bookings, total = tx.list_bookings(query, after, command.limit + 1)
                return BookingListResult(bookings, total, None), released

            found, released = await self._writes.run_write(work)
            self._writes.after_write(released=released, changed=False)
        page = found.bookings[: command.limit]
        last = page[-1] if len(found.bookings) > command.limit else None
        return BookingPage(
            bookings=tuple(page),
            total=found.total,
            next_cursor=None
            if last is None
            else encode_key_cursor(last.held_at, last.booking_id, binding),
        )

    def _hold(
        self,
        tx: Transaction,
        command: HoldSlot,
        slot: Slot | None,
        fingerprint: str,
        now: datetime,
        *,
        owner: str,
    ) -> Booking | BookingError:
        if slot is None:
            return SlotNotFoundError(slot_id=command.slot_id)
        if slot.starts_at <= now:
            return SlotUnavailableError(SLOT_STARTED, slot_id=slot.slot_id)
        booking_id = new_booking_id()
        booking = Booking(
            booking_id=booking_id,
            slot_id=slot.slot_id,
            expert_id=slot.expert_id,
            starts_at=slot.starts_at,
            ends_at=slot.ends_at,
            customer=command.customer,
            status=BookingStatus.HELD,
            version=1,
            held_at=now,
            # A hold never outlives the slot's start: nothing can be confirmed once it began.
            expires_at=min(now + self._policy.hold_ttl, slot.starts_at),
            confirmed_at=None,
            payment_page_url=f"{self._policy.payment_page_base_url.rstrip('/')}/{booking_id}",
            payment=Payment(query_id=booking_id, status=PaymentStatus.PENDING, price=slot.price),
            owner=owner,
        )
        tx.insert_booking(booking)
        tx.put_idempotency(
            IdempotencyRecord(
                scope=IdempotencyScope.HOLD,
                key=command.idempotency_key,
                fingerprint=fingerprint,
                booking=booking,
                error_code=None,
            )
        )
        return booking
