# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict


class PaymentAnswer(BaseModel):
    """
    Body of a 200 answer of the read-only payment service to GET {PAYMENT_QUERY_BASE_URL}/payments/{bookingId}. Any other body (wrong shape, unknown field, unknown status, a paidAt that is not RFC 3339, a Content-Encoding other than identity, more than 64 KiB) is treated as the service being unavailable (PAYMENT_UNAVAILABLE, nothing changed). A well-formed answer whose bookingId, amount or currency differs from the booking, that says PAID without paidAt (null or absent), or whose paidAt lies before heldAt or after the answer arrived (each by more than APPROVAL_CLOCK_SKEW_SECONDS), is PAYMENT_MISMATCH (nothing changed).
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    bookingId: str
    """
    Must equal the booking's id exactly.
    """
    status: Literal["PENDING", "PAID", "FAILED", "CLOSED"]
    """
    PENDING: not paid yet. PAID: paid. FAILED: the payment failed. CLOSED: the payment was closed without paying.
    """
    amount: str
    """
    Amount as a string; must equal the booking's amount exactly ("500.0" does not match "500.00"), so any string is accepted here and compared later.
    """
    currency: str
    """
    Currency code; must equal the booking's currency exactly.
    """
    paidAt: AwareDatetime | None = None
    """
    When the payment was made; required (not null) for PAID. Absent counts as null: a provider may leave it out while the payment is not PAID.
    """
