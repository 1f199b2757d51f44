"""Domain errors (``domain.errors``): what an error reads as where it is shown as text."""

from __future__ import annotations

from expert_booking.domain.errors import SlotUnavailableError


def test_a_booking_error_reads_as_its_specific_message_or_else_its_code() -> None:
    """Logs and tracebacks show ``str(error)``: the case's message, or the stable code."""
    assert str(SlotUnavailableError(slot_id="slot-ai-001")) == "SLOT_UNAVAILABLE"
    started = SlotUnavailableError("The slot has already started.", slot_id="slot-ai-001")
    assert str(started) == "The slot has already started."
    assert (started.message, started.details) == (
        "The slot has already started.",
        {"slot_id": "slot-ai-001"},
    )
