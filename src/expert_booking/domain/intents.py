"""Approval intents of the actions after a confirmation: cancel and reschedule.

The confirmation intent (``model.Intent``, CONTRACT section 3, canonical v1) stays as it is.
A cancel or reschedule intent carries the same six fields of the booking as it is now plus an
``action`` key (``CANCEL`` or ``RESCHEDULE``; a reschedule also ``newSlotId`` and
``newStartsAt``). Its canonical bytes are hashed like v1 (UTF-8 JSON, keys sorted, no
whitespace), so an intent of one kind never has the bytes, nor the hash, of another: a v1
intent has no ``action`` key, and two actions differ in it.

Issue time: the server issues such an intent when a call without an approval answers
HUMAN_APPROVAL_REQUIRED, and it describes the booking at its current version, which exists
since ``Booking.last_changed_at`` (the hold, the confirmation or the last reschedule). That
instant is the intent's issue time: an approval dated before it (less the skew) approved a
booking that did not exist yet (BEFORE_INTENT).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from expert_booking.domain.model import (
    Booking,
    Intent,
    Slot,
    canonical_json,
    format_instant,
    intent_digest,
)


class Action(StrEnum):
    """What an action intent asks a person to approve."""

    CANCEL = "CANCEL"
    RESCHEDULE = "RESCHEDULE"


@dataclass(frozen=True, slots=True)
class ActionIntent:
    """A cancel or reschedule intent: the booking now, the action and (reschedule) the target."""

    action: str
    booking_id: str
    slot_id: str
    starts_at: str
    amount: str
    currency: str
    version: int
    new_slot_id: str | None = None
    new_starts_at: str | None = None

    def canonical_doc(self) -> dict[str, Any]:
        """The v1 intent's six fields, ``action`` and (reschedule) the target keys."""
        booking = Intent(
            booking_id=self.booking_id,
            slot_id=self.slot_id,
            starts_at=self.starts_at,
            amount=self.amount,
            currency=self.currency,
            version=self.version,
        )
        doc: dict[str, Any] = {"action": self.action, **booking.canonical_doc()}
        if self.new_slot_id is not None:
            doc["newSlotId"] = self.new_slot_id
        if self.new_starts_at is not None:
            doc["newStartsAt"] = self.new_starts_at
        return doc

    def canonical_bytes(self) -> bytes:
        """UTF-8 JSON, keys sorted, no whitespace (``model.canonical_json``)."""
        return canonical_json(self.canonical_doc())

    def digest(self) -> str:
        """``"sha256:"`` + lowercase hex SHA-256 of the canonical bytes."""
        return intent_digest(self)


def cancel_intent(booking: Booking) -> ActionIntent:
    """The intent a person approves to cancel ``booking`` as it is now."""
    return ActionIntent(
        action=Action.CANCEL.value,
        booking_id=booking.booking_id,
        slot_id=booking.slot_id,
        starts_at=format_instant(booking.starts_at),
        amount=booking.payment.price.amount,
        currency=booking.payment.price.currency,
        version=booking.version,
    )


def reschedule_intent(booking: Booking, target: Slot) -> ActionIntent:
    """The intent a person approves to move ``booking`` as it is now to ``target``."""
    return ActionIntent(
        action=Action.RESCHEDULE.value,
        booking_id=booking.booking_id,
        slot_id=booking.slot_id,
        starts_at=format_instant(booking.starts_at),
        amount=booking.payment.price.amount,
        currency=booking.payment.price.currency,
        version=booking.version,
        new_slot_id=target.slot_id,
        new_starts_at=format_instant(target.starts_at),
    )
