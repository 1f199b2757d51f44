"""Idempotent writes: a command's fingerprint and the replay of a stored outcome.

Also what every write use case shares: ``release_due``, the persisted
``IdempotencyScope`` names and the operator's paid-after-expiry warning.

Every write use case (hold, confirm, cancel, reschedule) stores its committed outcome under
``(scope, key)`` with the fingerprint of its arguments; a repeated key with the same
fingerprint gets that outcome again, one with another fingerprint IDEMPOTENCY_CONFLICT.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from expert_booking.domain.errors import (
    BookingError,
    IdempotencyConflictError,
    InvalidStateError,
)
from expert_booking.domain.model import Booking, BookingStatus, format_instant, hold_is_over
from expert_booking.domain.rules import payment_refusal
from expert_booking.ports import IdempotencyRecord

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


# The warning of a payment after release (confirm or cancel saw it) is the services' line.
_services_log = logging.getLogger("expert_booking.services")


def warn_paid_after_release(booking: Booking) -> None:
    """The operator's WARNING line when a payment arrived for a booking already released."""
    cancelled = booking.status is BookingStatus.CANCELLED
    _services_log.warning(
        "paid after %s: booking %s was paid after %s; refund due",
        "cancellation" if cancelled else "expiry",
        booking.booking_id,
        "it was cancelled" if cancelled else "its hold expired",
    )


class IdempotencyScope(StrEnum):
    """The namespace each write stores its idempotency records under.

    Persisted: every stored record carries one, so a value never changes. They equal the
    logical tools' names by history only; renaming a tool keeps its scope.
    """

    HOLD = "booking.hold_slot"
    CONFIRM = "booking.confirm_booking"
    CANCEL = "booking.cancel_booking"
    RESCHEDULE = "booking.reschedule_booking"


def replay_outcome(
    record: IdempotencyRecord | None, key: str, fingerprint: str
) -> Booking | BookingError | None:
    """The stored outcome for a repeated idempotency key, or ``None`` for a first request."""
    if record is None:
        return None
    if record.fingerprint != fingerprint:
        return IdempotencyConflictError(idempotency_key=key)
    if record.error_code is None:
        return record.booking
    return payment_refusal(record.booking) or InvalidStateError(
        booking_id=record.booking.booking_id
    )


def release_due(next_hold_expiry: datetime | None, now: datetime) -> bool:
    """Whether some HELD booking is overdue at ``now`` (so a release must run first)."""
    return next_hold_expiry is not None and hold_is_over(next_hold_expiry, now)


def unwrap(outcome: Booking | BookingError) -> Booking:
    """The booking, or raise the refusal."""
    if isinstance(outcome, BookingError):
        raise outcome
    return outcome


def fingerprint(command: DataclassInstance) -> str:
    """Digest of a command's arguments; equal arguments give equal fingerprints."""
    doc = dataclasses.asdict(command)
    doc.pop("idempotency_key")
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=_json_default)
    return hashlib.sha256(text.encode()).hexdigest()


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_instant(value)
    raise TypeError(type(value).__name__)
