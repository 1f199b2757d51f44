"""Entities and value objects of the booking domain (frozen, framework-free)."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from expert_booking.domain.intents import ActionIntent

# Reused: json.dumps with options builds a new encoder per call.
_CANONICAL_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(doc: object) -> bytes:
    """The canonical bytes every intent is hashed from (and cursors bound by).

    UTF-8 JSON, keys sorted, no whitespace, non-ASCII kept (canonical intent v1, CONTRACT
    section 3). The keys are the contract's camelCase ones: they are part of the hashed bytes.
    """
    return _CANONICAL_ENCODER.encode(doc).encode()


def sha256_digest(data: bytes) -> str:
    """``"sha256:"`` + lowercase hex SHA-256: the form of every ``intentHash``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


class BookingStatus(StrEnum):
    """Lifecycle of a booking (see NOTES.md, state machine)."""

    HELD = "HELD"
    CONFIRMED = "CONFIRMED"
    EXPIRED = "EXPIRED"
    PAYMENT_FAILED = "PAYMENT_FAILED"
    PAYMENT_CLOSED = "PAYMENT_CLOSED"
    CANCELLED = "CANCELLED"


class PaymentStatus(StrEnum):
    """Local view of the payment; the server only ever moves PENDING to one final value."""

    PENDING = "PENDING"
    PAID = "PAID"
    FAILED = "FAILED"
    CLOSED = "CLOSED"


ACTIVE_STATUSES = frozenset({BookingStatus.HELD, BookingStatus.CONFIRMED})


def format_instant(value: datetime) -> str:
    """Render an aware datetime as RFC 3339 UTC with milliseconds (``...T02:00:00.000Z``)."""
    if value.tzinfo is None:
        msg = "naive datetime"
        raise ValueError(msg)
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    # %-formatting of the fields: 1.7x faster than isoformat(timespec=...), 3x strftime; this
    # runs a dozen times per request (the same text as isoformat: tests/unit/test_rules.py).
    return "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ" % (  # noqa: UP031 - the fastest spelling
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond // 1000,
    )


def format_optional_instant(value: datetime | None) -> str | None:
    """:func:`format_instant`, or ``None`` for ``None``."""
    return None if value is None else format_instant(value)


# RFC 3339 section 5.6 ``date-time`` (``T`` and ``Z`` in either case, as JSON Schema's format
# check reads it); the calendar is checked by ``datetime`` below.
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def hold_is_over(expires_at: datetime, now: datetime) -> bool:
    """A hold ends at ``expires_at`` itself: from then on it is released, never confirmed."""
    return now >= expires_at


def parse_instant(text: str) -> datetime:
    """Parse an RFC 3339 date-time (``Z`` or an offset) into an aware UTC datetime.

    Only RFC 3339's own grammar is read: ``datetime.fromisoformat`` alone also accepts ISO
    8601 forms such as ``20300101T000000Z``, ``2030-W01-1T00:00:00+00:00`` or
    ``2030-01-01 00:00Z``, which no contract field allows.

    Raises:
        ValueError: not RFC 3339, a leap second, or outside years 1-9999 in UTC.
    """
    if _RFC3339.fullmatch(text) is None:
        msg = "not an RFC 3339 date-time"
        raise ValueError(msg)
    parsed = datetime.fromisoformat(text.upper())  # 3.11 reads Z as +00:00
    try:
        return parsed.astimezone(UTC)
    except OverflowError as exc:  # e.g. 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        msg = "timestamp outside years 0001-9999 in UTC"
        raise ValueError(msg) from exc


def canonical_idempotency_key(key: str) -> str:
    """The one spelling of an idempotency key: lower case (UUIDs are case-insensitive, RFC 9562).

    Every command that carries a key holds it in this form, so fingerprints, lookups, stored
    records and echoed keys agree whatever case the caller used.
    """
    return key.lower()


@dataclass(frozen=True, slots=True)
class Money:
    """An exact amount as a two-decimal string (``"500.00"``) and an ISO 4217 code.

    Amounts are compared and shown, never computed on, so the exact wire string is kept:
    ``"500.0"`` from a payment service does not match ``"500.00"``.
    """

    amount: str
    currency: str


@dataclass(frozen=True, slots=True)
class Slot:
    """A bookable time slot of one expert, joined with the expert's public data."""

    slot_id: str
    expert_id: str
    expert_name: str
    specialty: str
    starts_at: datetime
    ends_at: datetime
    price: Money


@dataclass(frozen=True, slots=True)
class Customer:
    """Customer data exactly as the caller sent it (never normalised, never logged)."""

    name: str
    email: str
    phone: str | None = None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class Payment:
    """Local record of the external payment; ``query_id`` is the booking id."""

    query_id: str
    status: PaymentStatus
    price: Money
    paid_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class PaymentAnswer:
    """A well-formed answer of the payment service (shape checked, match not yet checked).

    ``received_at`` is when the answer arrived (the server's clock): a payment cannot have
    been made after the server heard of it.
    """

    booking_id: str
    status: PaymentStatus
    amount: str
    currency: str
    paid_at: datetime | None
    received_at: datetime


@dataclass(frozen=True, slots=True)
class Intent:
    """The six fields a person approves (canonical intent v1, CONTRACT section 3)."""

    booking_id: str
    slot_id: str
    starts_at: str
    amount: str
    currency: str
    version: int

    def canonical_doc(self) -> dict[str, object]:
        """The six fields keyed as in the canonical intent (and on the wire)."""
        return {
            "amount": self.amount,
            "bookingId": self.booking_id,
            "currency": self.currency,
            "slotId": self.slot_id,
            "startsAt": self.starts_at,
            "version": self.version,
        }

    def canonical_bytes(self) -> bytes:
        """UTF-8 JSON, keys sorted, no whitespace (:func:`canonical_json`)."""
        return canonical_json(self.canonical_doc())

    def digest(self) -> str:
        """``"sha256:"`` + lowercase hex SHA-256 of the canonical bytes."""
        return intent_digest(self)


class _Hashable(Protocol):
    @property
    def version(self) -> int: ...

    def __hash__(self) -> int: ...

    def canonical_bytes(self) -> bytes: ...


def intent_digest(intent: _Hashable) -> str:
    """The ``intentHash`` of any intent (v1, cancel, reschedule): of its canonical bytes.

    A held booking's intent is hashed on every read of it (get, hold replays, confirm
    checks); an intent is a frozen value, so its digest is computed once (bounded cache),
    unless its version is not an int (``True == 1`` are equal keys with other bytes).
    """
    if type(intent.version) is int:
        return _cached_digest(intent)
    return sha256_digest(intent.canonical_bytes())


@functools.lru_cache(maxsize=4096)
def _cached_digest(intent: _Hashable) -> str:
    return sha256_digest(intent.canonical_bytes())


@dataclass(frozen=True, slots=True)
class ConfirmationIntent:
    intent: Intent
    intent_hash: str


@dataclass(frozen=True, slots=True)
class HumanApproval:
    """What the host sends after a person approved (or rejected) an exact intent."""

    approval_id: str
    decision: str
    approved_at: datetime
    intent: Intent | ActionIntent
    intent_hash: str


@dataclass(frozen=True, slots=True)
class SlotChange:
    """A slot a booking held before a reschedule moved it, and when it moved."""

    slot_id: str
    expert_id: str
    starts_at: datetime
    ends_at: datetime
    changed_at: datetime


@dataclass(frozen=True, slots=True)
class Booking:
    """A booking of one slot by one customer; ``version`` grows with every state change.

    ``history`` lists the slots a reschedule moved it away from, oldest first;
    ``cancelled_at`` is set when it became CANCELLED.
    ``owner`` is the key of the principal that held it (``call_context.Principal.owner``):
    the store finds a booking only for its owner, so nobody else can read or change it.
    It never changes and is never shown on the wire.
    """

    booking_id: str
    slot_id: str
    expert_id: str
    starts_at: datetime
    ends_at: datetime
    customer: Customer
    status: BookingStatus
    version: int
    held_at: datetime
    expires_at: datetime
    confirmed_at: datetime | None
    payment_page_url: str
    payment: Payment
    owner: str
    refund_due: bool = False
    """A refund is owed outside this server (paid, but the booking cannot stand)."""
    history: tuple[SlotChange, ...] = ()
    cancelled_at: datetime | None = None

    @property
    def intent(self) -> Intent:
        """The intent a person must approve for the booking as it is now."""
        return Intent(
            booking_id=self.booking_id,
            slot_id=self.slot_id,
            starts_at=format_instant(self.starts_at),
            amount=self.payment.price.amount,
            currency=self.payment.price.currency,
            version=self.version,
        )

    @property
    def intent_issued_at(self) -> datetime:
        """When the server issued the current intent: the hold, for the version-1 intent.

        A booking has a confirmation intent only while HELD with payment PENDING, which today
        is version 1 only, issued by ``hold_slot`` at ``held_at``.
        """
        return self.held_at

    @property
    def last_changed_at(self) -> datetime:
        """When the booking last reached the state it is in: hold, confirmation or reschedule.

        The issue time of a cancel or reschedule intent (``domain.intents``): such an intent
        describes the booking at its current version, which exists since this instant.
        """
        times = [self.held_at]
        if self.confirmed_at is not None:
            times.append(self.confirmed_at)
        if self.history:
            times.append(self.history[-1].changed_at)
        return max(times)

    def change_time(self, now: datetime) -> datetime:
        """The instant a change judged at ``now`` records: ``now``, never before the last change.

        A wall clock stepped back (NTP, a restored VM) must not record a confirmation, a
        cancellation or a reschedule before the state it leaves: callers check that order.
        """
        return max(now, self.last_changed_at)

    @property
    def confirmation_intent(self) -> ConfirmationIntent | None:
        """Issued only while HELD with payment PENDING; ``None`` once anything is final."""
        if self.status is BookingStatus.HELD and self.payment.status is PaymentStatus.PENDING:
            intent = self.intent
            return ConfirmationIntent(intent=intent, intent_hash=intent.digest())
        return None

    def is_overdue(self, now: datetime) -> bool:
        """A hold whose ``expires_at`` has been reached must be released."""
        return self.status is BookingStatus.HELD and hold_is_over(self.expires_at, now)
