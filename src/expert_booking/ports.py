"""Ports: what the use cases need from the outside world (clock, payment service, store)."""

from __future__ import annotations

import re
import secrets
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar

from expert_booking.domain.model import (
    Booking,
    BookingStatus,
    Money,
    PaymentAnswer,
    Slot,
    format_instant,
)

_CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f]")  # Unicode category Cc
# Default-ignorable format characters pasted text carries: soft hyphen, zero-width space and
# joiners, bidi marks and embeddings, word joiner and invisible operators, byte order mark.
_INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")

T = TypeVar("T")


class Clock(Protocol):
    """The only reader of the wall clock.

    ``now()`` must be safe to call from any thread: transactions read it on the store's
    worker thread (``BookingStore.run``), the edge on the event loop.
    """

    def now(self) -> datetime:
        """Return the current instant as an aware UTC datetime."""
        ...


def new_span_id() -> str:
    """A fresh, non-zero 16-hex W3C span id."""
    while (span_id := secrets.token_hex(8)) == "0" * 16:
        pass  # pragma: no cover - a 2**-64 event
    return span_id


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

    def tokens(self) -> list[str]:
        """The words a match holds, each somewhere in the expert's folded text.

        Folded (:func:`fold_text`), split at whitespace and at control characters (a NUL would
        otherwise cut a token short in an engine's C strings, and match nearly everything).
        Every store engine matches these, and only these.
        """
        return fold_text(_CONTROL_CHARACTERS.sub(" ", self.text)).split()

    def window(self) -> tuple[str | None, str | None]:
        """The start window as stored instants: each bound rounded up to a whole millisecond.

        Slots start on whole milliseconds, so ``starts_after <= start`` and
        ``start < starts_before`` hold exactly when they hold for the rounded bounds, while
        truncating a bound between two milliseconds (RFC 3339 allows any digits) would let in
        or leave out the slot at its millisecond. Bounds of one meaning get one text: engines
        compare these, the cursor binding and the search cache key on them.
        """
        return _whole_millisecond(self.starts_after), _whole_millisecond(self.starts_before)


def fold_text(text: str) -> str:
    """Text as slot search compares it: close to Unicode's NFKC_Casefold.

    NFKC, case-folded, NFKC again, invisible format characters (zero-width space, soft hyphen,
    bidi marks) removed. Full-width letters (as Chinese input methods type them) match ASCII
    ones, a decomposed ``ü`` the composed one, ``STRASSE`` ``Straße``. Every engine folds the
    query and the expert's text with this function.
    """
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return _INVISIBLE.sub("", folded)


_LAST_MILLISECOND = datetime.max.replace(microsecond=999_000, tzinfo=UTC)


def _whole_millisecond(value: datetime | None) -> str | None:
    """``value`` rounded up to a whole millisecond, as text.

    Year 9999's last millisecond stays: no slot can start there, as it must end after it starts.
    """
    if value is None:
        return None
    if value.tzinfo is None:
        msg = "naive datetime"
        raise ValueError(msg)
    value = value.astimezone(UTC)
    below = value.microsecond % 1000
    if below and value < _LAST_MILLISECOND:
        value += timedelta(microseconds=1000 - below)
    return format_instant(value)


LOCAL_OWNER = "local"
"""The owner key of the one unauthenticated principal (``AUTH_MODE=none``), and of every
booking stored before bookings recorded their owner (migration 7)."""


@dataclass(frozen=True, slots=True)
class BookingListQuery:
    """Filters of a booking list: whose bookings, which statuses, which idempotency key.

    Attributes:
        owner: The owner key of the caller (``Principal.owner``): only its bookings are listed.
        statuses: Only bookings with one of these statuses; empty for every status.
        idempotency_key: Only the booking an idempotency record of this owner with this key
            (of any scope: a hold's or a confirmation's) refers to.
    """

    owner: str
    statuses: frozenset[BookingStatus]
    idempotency_key: str | None


@dataclass(frozen=True, slots=True)
class ListPosition:
    """Where the next page of a booking list starts: after this booking, in list order.

    The list is newest first (``held_at``, then ``booking_id``, both descending), so the next
    page holds the bookings ordered after it. Paging by position instead of by offset, a booking
    that joins or leaves the list between two pages moves no other one: none is skipped or
    repeated.
    """

    held_at: datetime
    booking_id: str


@dataclass(frozen=True, slots=True)
class BookingListResult:
    """A page of bookings, newest first, their total and the earliest hold expiry (one snapshot)."""

    bookings: list[Booking]
    total: int
    next_hold_expiry: datetime | None


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """The committed outcome of one idempotent request (stored with the change it describes).

    Keyed by ``(owner, scope, key)``, its owner being ``booking.owner``: two principals using
    one key never see each other's record.
    """

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
class SlotNeighbours:
    """A slot and free slots that could stand in for it (``BookingStore.peek_slots_near``).

    ``slot`` is ``None`` when no slot has the id (then there are no candidates).
    """

    slot: Slot | None
    candidates: list[Slot]


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

    Ownership lives here, in the store's lookups, and nowhere else: a booking or an
    idempotency record is read only together with its owner's key (``Principal.owner``), so a
    booking of another principal is ``None`` exactly like an unknown id, and a use case (hold,
    confirm, get, list, cancel, reschedule...) cannot reach one by forgetting a check. Writes
    carry the owner in ``Booking.owner``: an update matches a stored booking only of that
    owner. ``release_overdue`` alone spans owners (a hold's expiry is nobody's choice).

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

    def lookup_hold(self, scope: str, key: str, slot_id: str, *, owner: str) -> HoldLookup:
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
        self, query: BookingListQuery, after: ListPosition | None, limit: int
    ) -> tuple[list[Booking], int]:
        """The query's bookings, newest first (``held_at``, then ``booking_id``, descending).

        Returns at most ``limit`` of them, those ordered after ``after`` (from the first when
        ``None``), and the total of the query's bookings over all pages.
        """
        ...

    def get_booking(self, booking_id: str, *, owner: str) -> Booking | None:
        """The booking if it exists AND belongs to ``owner``; else ``None``, either way alike."""
        ...

    def insert_booking(self, booking: Booking) -> None:
        """Insert a new booking (owned by ``booking.owner``).

        Raises:
            SlotUnavailableError: the slot already has an active booking.
        """
        ...

    def update_booking(self, booking: Booking, expected_version: int) -> None:
        """Replace the stored booking of ``booking.owner`` if its version is ``expected_version``.

        A changed ``slot_id`` moves the booking in one step: the new slot is secured (no other
        active booking may have it) as the old one is released, never one without the other.

        Raises:
            VersionConflictError: the stored version differs.
            SlotUnavailableError: the booking would be a second active booking of its slot.
            BookingNotFoundError: no booking of that owner has this id.
        """
        ...

    def get_idempotency(self, scope: str, key: str, *, owner: str) -> IdempotencyRecord | None:
        """The record ``owner`` stored under ``(scope, key)``; another owner's is invisible."""
        ...

    def put_idempotency(self, record: IdempotencyRecord) -> None:
        """Store a record under ``(record.booking.owner, scope, key)`` (written once)."""
        ...

    def replace_idempotency(self, record: IdempotencyRecord) -> None:
        """Replace the outcome stored under that key: the call's answer grew after its commit.

        Raises:
            InternalError: no record is stored under ``(record.booking.owner, scope, key)``.
        """
        ...


class BookingStore(Protocol):
    """A transactional store; a second engine (PostgreSQL) implements the same port.

    The ``peek_*`` reads see the last committed state without taking the write lock and do NOT
    release overdue holds: a caller that finds an overdue hold (``expires_at <= now``) in what
    it read must release and read again inside ``run``.
    """

    async def peek_booking(self, booking_id: str, *, owner: str) -> Booking | None:
        """The last committed state of ``owner``'s booking (overdue holds not released)."""
        ...

    async def peek_free_slots(
        self, query: SlotQuery, now: datetime, offset: int, limit: int
    ) -> SlotSearchResult:
        """``search_free_slots`` and ``next_hold_expiry`` from one committed snapshot."""
        ...

    async def peek_bookings(
        self, query: BookingListQuery, after: ListPosition | None, limit: int
    ) -> BookingListResult:
        """``list_bookings`` and ``next_hold_expiry`` from one committed snapshot."""
        ...

    async def peek_slots_near(
        self, slot_id: str, now: datetime, limit: int, *, price: Money | None = None
    ) -> SlotNeighbours:
        """Slot ``slot_id`` and free slots near it, from one committed snapshot.

        Free: no HELD or CONFIRMED booking, starting after ``now``; an overdue hold
        (``expires_at <= now``) does not count, as the next transaction releases it (nothing
        is released here). With ``price``, only slots at that price (amount and currency) are
        candidates, before any limit. The candidates, never the slot itself,
        are at most ``limit`` of each: the same expert's slots starting before the slot,
        latest first; the same expert's starting at or after it, earliest first (ties by slot
        id); other experts' of the same specialty starting at the same instant, by slot id.
        In no promised order: ranking them is ``domain.conflicts``'s.
        """
        ...

    async def run(self, work: Callable[[Transaction], T]) -> T:
        """Run ``work`` as one write transaction and return what it returns.

        ``work`` is called synchronously, off the event loop; it must only compute and use
        its ``Transaction`` (no awaiting, no other I/O). The transaction commits when ``work``
        returns and rolls back when it raises (the exception propagates). Once started it runs
        to its end even if the awaiting task is cancelled.

        Serializable across every store on the database (other server processes included):
        what ``work`` read is still so when it commits, so a use case's read of an idempotency
        record and the writes it decides are one step. SQLite gets this from its one writer
        (``BEGIN IMMEDIATE``); an engine with concurrent writers must lock before ``work``
        reads (the key, say). Running ``work`` again after a serialization failure would also
        need ``work`` free of effects outside its transaction, which the paid-after-release
        WARNING (``replay.warn_paid_after_release``) is not yet. The store contract suite
        checks this with two stores on one database (``tests/store_contract``).

        Raises:
            StorageBusyError: the store stayed locked past its busy timeout.
        """
        ...
