# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field


class RescheduleIntent(BaseModel):
    """
    Exactly what the person approves: to reschedule this booking as it is now to the new slot. Issued by the server in details.intent of HUMAN_APPROVAL_REQUIRED from booking.reschedule_booking; copy it unchanged (canonical form: UTF-8 JSON, keys sorted, no whitespace).
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    action: Literal["RESCHEDULE"]
    """
    Always RESCHEDULE: this intent approves exactly that action.
    """
    amount: Annotated[str, Field(pattern="^[0-9]+\\.[0-9]{2}$")]
    """
    Price as a string with two decimals, e.g. "500.00".
    """
    bookingId: str
    """
    The booking.
    """
    currency: Annotated[str, Field(pattern="^[A-Z]{3}$")]
    """
    ISO 4217 currency code, three capital letters, e.g. "CNY".
    """
    newSlotId: str
    """
    The slot the booking moves to.
    """
    newStartsAt: AwareDatetime
    """
    Start of the new slot, exactly as issued.
    """
    slotId: str
    """
    The booking's slot now.
    """
    startsAt: AwareDatetime
    """
    Start of the booking's slot now, exactly as issued.
    """
    version: Annotated[int, Field(ge=1)]
    """
    Booking version the approval is for; it must equal the current version.
    """


class RescheduleApproval(BaseModel):
    """
    Proof that a person saw the RESCHEDULE intent (details.intent of HUMAN_APPROVAL_REQUIRED) and decided. Built by the host after asking the person, never invented by the agent. Fresh for 120 seconds by default (APPROVAL_TTL_SECONDS) with 5 seconds of skew (APPROVAL_CLOCK_SKEW_SECONDS), and not dated before the booking's last change (its hold, confirmation or last reschedule), when the intent's booking version began.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    approvalId: UUID
    """
    A new UUID for this approval decision.
    """
    decision: Literal["APPROVE", "REJECT"]
    """
    APPROVE only if the person explicitly agreed to exactly this intent; REJECT otherwise.
    """
    approvedAt: AwareDatetime
    """
    When the person decided, RFC 3339 UTC.
    """
    intent: RescheduleIntent
    """
    details.intent, copied unchanged.
    """
    intentHash: Annotated[str, Field(pattern="^sha256:[0-9a-f]{64}$")]
    """
    details.intentHash, copied unchanged; never compute or edit it.
    """


class BookingRescheduleBookingInput(BaseModel):
    """
    Move a CONFIRMED booking to another free slot at the same price, with human approval. In place: bookingId, payment and payment.queryId stay; slotId, expertId, startsAt and endsAt change; version + 1; the old slot is appended to history and released. Only with a human approval: call without humanApproval first; the answer is HUMAN_APPROVAL_REQUIRED with details.intent (action RESCHEDULE, the new slot and its start) and details.intentHash; show it to the person and, if they approve, call again with both copied unchanged into humanApproval and a new idempotencyKey. A slot that is taken or started returns SLOT_UNAVAILABLE, another price or currency RESCHEDULE_PRICE_DIFFERS (this server charges no differences), a booking not CONFIRMED or whose appointment has started INVALID_STATE; nothing changes then. Idempotency: as booking.cancel_booking. Errors: INVALID_ARGUMENTS, BOOKING_NOT_FOUND, SLOT_NOT_FOUND, SLOT_UNAVAILABLE, RESCHEDULE_PRICE_DIFFERS, INVALID_STATE, VERSION_CONFLICT, IDEMPOTENCY_CONFLICT, HUMAN_APPROVAL_REQUIRED, HUMAN_APPROVAL_REJECTED, HUMAN_APPROVAL_EXPIRED, APPROVAL_INTENT_HASH_MISMATCH, APPROVAL_INTENT_MISMATCH, STORAGE_BUSY, INTERNAL_ERROR.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    bookingId: str
    """
    bookingId of the booking.
    """
    newSlotId: str
    """
    slotId of a free slot from booking.search_available_slots, same price and currency.
    """
    expectedVersion: Annotated[int, Field(ge=1)]
    """
    The booking's current version (snapshot field version); a different one returns VERSION_CONFLICT.
    """
    idempotencyKey: UUID
    """
    A new UUID for this request; reuse it only to retry the identical request. Compared case-insensitively (lower-cased by the server).
    """
    humanApproval: RescheduleApproval | None = None
    """
    The person's decision on details.intent of an earlier HUMAN_APPROVAL_REQUIRED. Omit it on the first call.
    """
