"""Rendering domain values for the wire: instants as the exact RFC 3339 UTC text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from expert_booking.domain.model import Money, Slot
from expert_booking.edge.wire import render_slot


def slot_at(starts_at: datetime) -> Slot:
    return Slot(
        slot_id="slot-x",
        expert_id="exp-x",
        expert_name="X",
        specialty="AI",
        starts_at=starts_at,
        ends_at=starts_at + timedelta(hours=1),
        price=Money("500.00", "CNY"),
    )


def test_a_slot_shows_its_instants_in_utc_with_milliseconds() -> None:
    shown = render_slot(slot_at(datetime(2030, 9, 2, 2, tzinfo=UTC)))
    assert (shown["startsAt"], shown["endsAt"]) == (
        "2030-09-02T02:00:00.000Z",
        "2030-09-02T03:00:00.000Z",
    )


def test_equal_datetimes_of_another_fold_show_their_own_instant() -> None:
    """Equal and hash-equal, an hour apart: the formatting memo must not mix them up."""
    first = datetime(2025, 10, 26, 2, 30, tzinfo=ZoneInfo("Europe/Berlin"))
    second = first.replace(fold=1)
    assert first == second
    shown = [render_slot(slot_at(value))["startsAt"] for value in (first, second, first)]
    assert shown == [
        "2025-10-26T00:30:00.000Z",
        "2025-10-26T01:30:00.000Z",
        "2025-10-26T00:30:00.000Z",
    ]
