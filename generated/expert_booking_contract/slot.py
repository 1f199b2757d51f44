# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field


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
