# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field


class BookingSearchAvailableSlotsInput(BaseModel):
    """
    Find free expert time slots. Read-only: it holds or reserves nothing; to reserve a slot call booking.hold_slot with one of the returned slotIds. query is matched against the expert's name, specialty and keywords, which may be English, Chinese or German words (e.g. "AI", "人工智能", "Steuer"); an empty string lists every free slot. Only slots that are neither held nor booked and have not started are returned, ordered by start time, limit per page, with total and nextCursor (null on the last page). Pass nextCursor as cursor together with the same query and filters to get the next page; a cursor is opaque and bound to its query, and reusing it with another query or other filters returns INVALID_CURSOR. Results may be served from a cache for up to 5 seconds by default (SLOT_CACHE_TTL_SECONDS); every hold, confirmation or release clears it, so a listed slot can still be taken by someone else before you hold it (SLOT_UNAVAILABLE). Errors: INVALID_ARGUMENTS, INVALID_CURSOR, STORAGE_BUSY, INTERNAL_ERROR.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    query: Annotated[str, Field(max_length=200)]
    """
    Words to match against expert name, specialty and keywords (English, Chinese or German); every word must occur, so pass topic words only ("AI", not "AI expert"); "" lists all free slots. At most 200 characters.
    """
    limit: Annotated[int, Field(ge=1, le=50)]
    """
    Maximum number of slots to return (1 to 50). Required: there is no default.
    """
    specialty: str | None = None
    """
    Optional: only slots of experts with this specialty.
    """
    startsAfter: AwareDatetime | None = None
    """
    Optional: only slots starting at or after this instant (RFC 3339 with offset, e.g. "2030-09-02T00:00:00.000Z").
    """
    startsBefore: AwareDatetime | None = None
    """
    Optional: only slots starting before this instant (RFC 3339 with offset).
    """
    cursor: str | None = None
    """
    Optional opaque nextCursor of a previous call with exactly the same query and filters; omit it for the first page.
    """
