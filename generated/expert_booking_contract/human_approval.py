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
