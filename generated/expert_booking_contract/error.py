# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


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
    Code-specific facts, e.g. bookingId; for INVALID_ARGUMENTS, violations lists each offending field by JSON Pointer.
    """
    recovery: Recovery
    """
    What an agent should do next.
    """
