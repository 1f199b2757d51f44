# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field


class Customer(BaseModel):
    """
    The person the booking is for. Every string is stored and echoed exactly as sent: no trimming, no lower-casing, no reformatting. phone and note appear in a snapshot only if they were sent. Customer data is never written to logs.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    name: Annotated[str, Field(max_length=200, min_length=1)]
    """
    Full name as the person wants it shown (1 to 200 characters).
    """
    email: Annotated[str, Field(max_length=254, min_length=3, pattern="^[^@\\s]+@[^@\\s]+$")]
    """
    E-mail address with exactly one @ and no spaces (3 to 254 characters). Kept exactly as typed; capitalisation is preserved.
    """
    phone: Annotated[str | None, Field(max_length=40)] = None
    """
    Optional phone number in any notation (at most 40 characters).
    """
    note: Annotated[str | None, Field(max_length=1000)] = None
    """
    Optional message for the expert (at most 1000 characters).
    """


class BookingHoldSlotInput(BaseModel):
    """
    Hold one free slot for a customer for a limited time, until the snapshot's expiresAt (300 seconds by default, HOLD_TTL_SECONDS). A hold is NOT a confirmed booking and takes no payment. A hold never lasts past the slot's start: expiresAt = min(heldAt + hold lifetime, startsAt). Side effects: creates a booking with status HELD and payment PENDING and makes the slot unavailable to everyone else; if the booking is not confirmed before expiresAt it becomes EXPIRED and the slot is released automatically. Returns the booking snapshot, including paymentPageUrl and a server-issued confirmationIntent. Idempotency: use a new UUID as idempotencyKey for each hold you intend; the same idempotencyKey with identical arguments returns the original result and changes nothing again; the same key with different arguments returns IDEMPOTENCY_CONFLICT. After a timeout or network error, retry with the same key and arguments. Flow after the hold: (1) show the person the booking, expert, time, amount, currency and version from confirmationIntent.intent; (2) only if the person approves, copy confirmationIntent.intent and confirmationIntent.intentHash unchanged into humanApproval (never rebuild them); (3) the person pays at paymentPageUrl, outside the agent; (4) call booking.confirm_booking with expectedVersion = version while the approval is fresh (120 seconds by default, APPROVAL_TTL_SECONDS) and before expiresAt. Errors: INVALID_ARGUMENTS, SLOT_NOT_FOUND, SLOT_UNAVAILABLE (held or booked by someone else, or already started), IDEMPOTENCY_CONFLICT, STORAGE_BUSY, INTERNAL_ERROR.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    slotId: str
    """
    slotId of a slot returned by booking.search_available_slots.
    """
    customer: Customer
    """
    Who the booking is for; stored and echoed exactly as sent.
    """
    idempotencyKey: UUID
    """
    A new UUID for this hold; reuse it only to retry the identical request. Compared case-insensitively (RFC 9562): the server lower-cases it before fingerprinting, lookup and storage, and echoes it in lower case.
    """
