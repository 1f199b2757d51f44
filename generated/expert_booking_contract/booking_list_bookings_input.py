# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field


class BookingListBookingsInput(BaseModel):
    """
    List your bookings, newest first (by heldAt, then bookingId). Read-only: it changes nothing (a hold whose expiresAt has passed is listed as EXPIRED). Filter by status, or by idempotencyKey to learn what became of a hold, confirm, cancel or reschedule whose answer you never got (a timeout): the key of either call finds its booking; an empty page means nothing is committed under that key yet (a call cut off may still be running), so retry the same call with the same key, never a new one. limit per page, with total and nextCursor (null on the last page); pass nextCursor as cursor with the same filters (other filters: INVALID_CURSOR). Errors: INVALID_ARGUMENTS, INVALID_CURSOR, STORAGE_BUSY, INTERNAL_ERROR.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    limit: Annotated[int, Field(ge=1, le=50)]
    """
    Maximum number of bookings to return (1 to 50). Required: there is no default.
    """
    status: Annotated[
        list[
            Literal["HELD", "CONFIRMED", "EXPIRED", "PAYMENT_FAILED", "PAYMENT_CLOSED", "CANCELLED"]
        ]
        | None,
        Field(min_length=1),
    ] = None
    """
    Optional: only bookings with one of these statuses.
    """
    idempotencyKey: UUID | None = None
    """
    Optional: only the booking that a hold, confirm, cancel or reschedule call with this idempotencyKey committed.
    """
    cursor: str | None = None
    """
    Optional opaque nextCursor of a previous call with exactly the same filters; omit it for the first page.
    """
