# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Annotated

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


class ConfirmationIntent(BaseModel):
    """
    A server-issued approval challenge, present in a booking snapshot while the booking is HELD with payment PENDING (null otherwise). Show the person the booking, expert, time, amount, currency and version it describes; if they approve, copy intent and intentHash unchanged into humanApproval of booking.confirm_booking. Never rebuild, reorder or edit them. The hash binds the content but is not a signature of who approved.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    intent: Intent
    """
    The intent to approve, copied unchanged from confirmationIntent.intent.
    """
    intentHash: Annotated[str, Field(pattern="^sha256:[0-9a-f]{64}$")]
    """
    "sha256:" followed by the 64 lowercase hex digits of the SHA-256 of the canonical intent (UTF-8 JSON of intent with keys sorted, no whitespace). Issued by the server; copy it unchanged, never compute or edit it.
    """
