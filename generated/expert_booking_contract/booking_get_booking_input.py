# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class BookingGetBookingInput(BaseModel):
    """
    Read the current snapshot of one booking. No side effects: it changes nothing (a hold whose expiresAt has passed is reported as EXPIRED, with its slot released). While the booking is HELD with payment PENDING the snapshot carries the confirmationIntent to show the person; otherwise confirmationIntent is null. Use it after VERSION_CONFLICT, APPROVAL_INTENT_MISMATCH or any unclear outcome to learn the booking's status and version. Errors: INVALID_ARGUMENTS, BOOKING_NOT_FOUND, STORAGE_BUSY, INTERNAL_ERROR.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    bookingId: str
    """
    bookingId returned by booking.hold_slot.
    """
