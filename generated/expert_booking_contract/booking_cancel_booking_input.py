# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field


class CancelIntent(BaseModel):
    """
    Exactly what the person approves: to cancel this booking as it is now. Issued by the server in details.intent of HUMAN_APPROVAL_REQUIRED from booking.cancel_booking; copy it unchanged (canonical form: UTF-8 JSON, keys sorted, no whitespace).
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    action: Literal["CANCEL"]
    """
    Always CANCEL: this intent approves exactly that action.
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


class CancelApproval(BaseModel):
    """
    Proof that a person saw the CANCEL intent (details.intent of HUMAN_APPROVAL_REQUIRED) and decided. Built by the host after asking the person, never invented by the agent. Fresh for 120 seconds by default (APPROVAL_TTL_SECONDS) with 5 seconds of skew (APPROVAL_CLOCK_SKEW_SECONDS), and not dated before the booking's last change (its hold, confirmation or last reschedule), when the intent's booking version began.
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
    intent: CancelIntent
    """
    details.intent, copied unchanged.
    """
    intentHash: Annotated[str, Field(pattern="^sha256:[0-9a-f]{64}$")]
    """
    details.intentHash, copied unchanged; never compute or edit it.
    """


class BookingCancelBookingInput(BaseModel):
    """
    Cancel a HELD or CONFIRMED booking; once paid, only with human approval. It becomes CANCELLED (version + 1, cancelledAt set) and its slot is free again. A HELD booking: the payment service is asked first (read-only). Not paid: cancelled at once, no approval needed. Paid (the person paid on the page meanwhile) or CONFIRMED: only with a human approval. Call without humanApproval first: the answer is HUMAN_APPROVAL_REQUIRED with details.intent (action CANCEL) and details.intentHash; show it to the person and, if they approve, call again with both copied unchanged into humanApproval and a new idempotencyKey. The server never moves money: a paid booking that is cancelled is owed a refund outside this server (refundDue: true). Any other status, or an appointment that has started, returns INVALID_STATE. Idempotency: the same idempotencyKey with identical arguments returns the original result; different arguments return IDEMPOTENCY_CONFLICT. Errors: INVALID_ARGUMENTS, BOOKING_NOT_FOUND, INVALID_STATE, VERSION_CONFLICT, IDEMPOTENCY_CONFLICT, HUMAN_APPROVAL_REQUIRED, HUMAN_APPROVAL_REJECTED, HUMAN_APPROVAL_EXPIRED, APPROVAL_INTENT_HASH_MISMATCH, APPROVAL_INTENT_MISMATCH, PAYMENT_MISMATCH, PAYMENT_UNAVAILABLE, PAID_AFTER_EXPIRY, STORAGE_BUSY, INTERNAL_ERROR.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    bookingId: str
    """
    bookingId of the booking.
    """
    expectedVersion: Annotated[int, Field(ge=1)]
    """
    The booking's current version (snapshot field version); a different one returns VERSION_CONFLICT.
    """
    idempotencyKey: UUID
    """
    A new UUID for this request; reuse it only to retry the identical request. Compared case-insensitively (lower-cased by the server).
    """
    humanApproval: CancelApproval | None = None
    """
    The person's decision on details.intent of an earlier HUMAN_APPROVAL_REQUIRED. Omit it on the first call and for an unpaid hold.
    """
