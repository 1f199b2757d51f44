# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field


class Intent(BaseModel):
    """
    Exactly what the person approves: booking, slot, start, price and booking version. Issued by the server in a booking's confirmationIntent; copy all six fields unchanged. The canonical form (v1) is the UTF-8 JSON of these six keys sorted by name (amount, bookingId, currency, slotId, startsAt, version) with no whitespace.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    amount: Annotated[str, Field(pattern="^[0-9]+\\.[0-9]{2}$")]
    """
    Price as a string with two decimals, e.g. "500.00".
    """
    bookingId: str
    """
    The booking being approved.
    """
    currency: Annotated[str, Field(pattern="^[A-Z]{3}$")]
    """
    ISO 4217 currency code, three capital letters, e.g. "CNY".
    """
    slotId: str
    """
    The slot the booking holds.
    """
    startsAt: AwareDatetime
    """
    Start of the slot, RFC 3339 UTC with milliseconds, e.g. "2030-09-02T02:00:00.000Z". Compared as an exact string: do not reformat it.
    """
    version: Annotated[int, Field(ge=1)]
    """
    Booking version the approval is for; it must equal the current version of the booking.
    """


class HumanApproval(BaseModel):
    """
    Proof that a person saw this booking's confirmationIntent and decided. Built by the host after asking the person, never invented by the agent. The server refuses, without querying payment, an approval that is rejected (HUMAN_APPROVAL_REJECTED), no longer fresh (HUMAN_APPROVAL_EXPIRED; an approval is fresh for 120 seconds by default, APPROVAL_TTL_SECONDS, with 5 seconds of clock skew by default, APPROVAL_CLOCK_SKEW_SECONDS, tolerated either way), whose intentHash is not the hash of its intent (APPROVAL_INTENT_HASH_MISMATCH), or whose intent differs from the booking as it is now (APPROVAL_INTENT_MISMATCH).
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
    When the person decided, RFC 3339 UTC, e.g. "2030-09-01T09:30:00.000Z". The approval is fresh for 120 seconds by default (APPROVAL_TTL_SECONDS) with 5 seconds of clock skew by default (APPROVAL_CLOCK_SKEW_SECONDS): the confirm call must come within the lifetime plus the skew after it, and approvedAt must not be further ahead of the server's clock than the skew.
    """
    intent: Intent
    """
    The intent the person decided on, copied unchanged from the booking's confirmationIntent.intent.
    """
    intentHash: Annotated[str, Field(pattern="^sha256:[0-9a-f]{64}$")]
    """
    "sha256:" followed by the 64 lowercase hex digits of the SHA-256 of the canonical intent (UTF-8 JSON of intent with keys sorted, no whitespace). Issued by the server; copy it unchanged, never compute or edit it.
    """


class BookingConfirmBookingInput(BaseModel):
    """
    Confirm a HELD booking after the person approved it and paid. This tool never pays and never starts a payment: the person pays outside the agent at the booking's paymentPageUrl, and this tool only reads the payment status from the payment service. humanApproval is optional in this schema only so that its absence gets a clear answer: without it the server refuses with HUMAN_APPROVAL_REQUIRED and does not query payment. Before querying payment the server checks, in this order, and on failure changes nothing: the booking exists (else BOOKING_NOT_FOUND), has not expired (else BOOKING_EXPIRED; a hold never lasts past the slot's start: expiresAt = min(heldAt + hold lifetime, startsAt)), has version expectedVersion (else VERSION_CONFLICT) and is HELD (else INVALID_STATE); humanApproval is present (else HUMAN_APPROVAL_REQUIRED), its decision is APPROVE (else HUMAN_APPROVAL_REJECTED), the approval is fresh, that is approvedAt is at most 120 seconds by default (APPROVAL_TTL_SECONDS) plus 5 seconds of clock skew by default (APPROVAL_CLOCK_SKEW_SECONDS) in the past and at most that skew in the future, and not dated more than that skew before the server issued the intent (heldAt for version 1), since a person cannot approve an intent that did not exist yet (else HUMAN_APPROVAL_EXPIRED with details.reason STALE, FUTURE or BEFORE_INTENT), intentHash is the hash of intent (else APPROVAL_INTENT_HASH_MISMATCH) and intent equals the booking as it is now (else APPROVAL_INTENT_MISMATCH). Then, by payment status: PAID with matching bookingId, amount and currency confirms the booking (status CONFIRMED, version + 1, confirmedAt set, confirmationIntent null), unless the hold expired while payment was queried: then PAID_AFTER_EXPIRY, the booking stays EXPIRED with refundDue true (version + 1); PENDING returns PAYMENT_PENDING and keeps the hold, so ask the person to finish paying and retry while the approval is still fresh and before expiresAt (otherwise ask the person to approve again); FAILED returns PAYMENT_FAILED and CLOSED returns PAYMENT_CLOSED, and in both cases the booking ends (version + 1) and the slot is released; a well-formed answer that does not match the booking (bookingId, amount or currency differ, PAID without paidAt, or a paidAt earlier than heldAt or later than the answer's arrival, each by more than the approval clock skew) returns PAYMENT_MISMATCH; an unreachable payment service or a malformed answer, including a malformed or unknown payment status, a paidAt that is not RFC 3339, a compressed body or one over 64 KiB, returns PAYMENT_UNAVAILABLE (retryable). Side effects: only a final payment status changes the booking. Idempotency: the same idempotencyKey with identical arguments returns the original result and changes nothing again; the same key with different arguments returns IDEMPOTENCY_CONFLICT. Retryable errors (PAYMENT_PENDING, PAYMENT_UNAVAILABLE, STORAGE_BUSY) change nothing and may be retried with the same key and arguments while the approval is fresh; a new approval is a new request and needs a new idempotencyKey. Flow: booking.hold_slot, show confirmationIntent to the person, the person approves, copy intent and intentHash unchanged into humanApproval, the person pays at paymentPageUrl, then call this tool with expectedVersion = the booking's version. Errors: INVALID_ARGUMENTS, BOOKING_NOT_FOUND, INVALID_STATE, BOOKING_EXPIRED, VERSION_CONFLICT, IDEMPOTENCY_CONFLICT, HUMAN_APPROVAL_REQUIRED, HUMAN_APPROVAL_REJECTED, HUMAN_APPROVAL_EXPIRED, APPROVAL_INTENT_HASH_MISMATCH, APPROVAL_INTENT_MISMATCH, PAYMENT_PENDING, PAYMENT_FAILED, PAYMENT_CLOSED, PAYMENT_MISMATCH, PAYMENT_UNAVAILABLE, PAID_AFTER_EXPIRY, STORAGE_BUSY, INTERNAL_ERROR.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    bookingId: str
    """
    bookingId returned by booking.hold_slot.
    """
    expectedVersion: Annotated[int, Field(ge=1)]
    """
    The booking's current version (snapshot field version); it must also equal humanApproval.intent.version. A different version returns VERSION_CONFLICT.
    """
    idempotencyKey: UUID
    """
    A new UUID for this confirmation; reuse it only to retry the identical request. Compared case-insensitively (RFC 9562): the server lower-cases it before fingerprinting, lookup and storage, and echoes it in lower case.
    """
    humanApproval: HumanApproval | None = None
    """
    The person's decision on the booking's confirmationIntent. Omitted: HUMAN_APPROVAL_REQUIRED, payment not queried.
    """
