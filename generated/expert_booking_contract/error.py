# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field


class IntentChange(BaseModel):
    """
    One field of the approved intent whose value differs from the intent as it is now.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    field: str
    """
    The field's key in the intent, e.g. "newSlotId"; a nested key is the dotted path of its keys ("outer.inner").
    """
    approvedValue: Any
    """
    Its value in the approved intent; null if the approved intent lacks the field.
    """
    currentValue: Any
    """
    Its value in the current intent (details.intent); null if that lacks the field.
    """


class Money(BaseModel):
    """
    A price: an exact decimal string and its currency (no floating point).
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    amount: Annotated[str, Field(pattern="^[0-9]+\\.[0-9]{2}$")]
    """
    Amount with exactly two decimals, e.g. "500.00".
    """
    currency: Annotated[str, Field(pattern="^[A-Z]{3}$")]
    """
    ISO 4217 currency code, three capital letters, e.g. "CNY".
    """


class Recovery(BaseModel):
    """
    What to do next.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    action: str
    """
    One sentence telling an agent what to do next for this error code.
    """


class Slot(BaseModel):
    """
    A free time slot of one expert, as returned by booking.search_available_slots.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    slotId: str
    """
    Pass this to booking.hold_slot to hold the slot.
    """
    expertId: str
    """
    Id of the expert.
    """
    expertName: str
    """
    Name of the expert.
    """
    specialty: str
    """
    The expert's specialty.
    """
    startsAt: AwareDatetime
    """
    Start, RFC 3339 UTC with milliseconds, e.g. "2030-09-02T02:00:00.000Z".
    """
    endsAt: AwareDatetime
    """
    End, RFC 3339 UTC with milliseconds.
    """
    price: Money
    """
    Price of the slot.
    """


class Error(BaseModel):
    """
    A machine-readable failure. Act on code (stable) and recovery.action; message is for people. No stack traces or internal details are ever included.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    code: Literal[
        "INVALID_ARGUMENTS",
        "INVALID_CURSOR",
        "TOOL_NOT_FOUND",
        "BOOKING_NOT_FOUND",
        "SLOT_NOT_FOUND",
        "SLOT_UNAVAILABLE",
        "BOOKING_EXPIRED",
        "VERSION_CONFLICT",
        "IDEMPOTENCY_CONFLICT",
        "PAYMENT_PENDING",
        "PAYMENT_FAILED",
        "PAYMENT_CLOSED",
        "PAYMENT_MISMATCH",
        "PAYMENT_UNAVAILABLE",
        "HUMAN_APPROVAL_REQUIRED",
        "HUMAN_APPROVAL_REJECTED",
        "HUMAN_APPROVAL_EXPIRED",
        "APPROVAL_INTENT_HASH_MISMATCH",
        "APPROVAL_INTENT_MISMATCH",
        "INVALID_STATE",
        "STORAGE_BUSY",
        "INTERNAL_ERROR",
        "CATALOG_STALE",
        "PAID_AFTER_EXPIRY",
        "RATE_LIMITED",
        "TOOL_DISABLED",
        "RESCHEDULE_PRICE_DIFFERS",
    ]
    """
    Stable error code.
    """
    message: str
    """
    Short explanation for people.
    """
    retryable: bool
    """
    true: the same call with the same idempotencyKey may succeed later, and nothing was changed. false: retrying unchanged will fail again.
    """
    details: dict[str, Any]
    """
    Code-specific facts, e.g. bookingId; for INVALID_ARGUMENTS, violations lists each offending field by JSON Pointer. SLOT_UNAVAILABLE: alternatives, free slots to offer instead (a hint, not a reservation). APPROVAL_INTENT_MISMATCH: changes, and the current intent and intentHash to show the person for a new approval.
    """
    recovery: Recovery
    """
    What an agent should do next.
    """
