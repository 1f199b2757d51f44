"""Rendering domain values for the wire: instants as the exact RFC 3339 UTC text."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from expert_booking.edge.wire import render_slot
from tests.fakes import make_slot


def test_a_slot_shows_its_instants_in_utc_with_milliseconds() -> None:
    shown = render_slot(make_slot(datetime(2030, 9, 2, 2, tzinfo=UTC)))
    assert (shown["startsAt"], shown["endsAt"]) == (
        "2030-09-02T02:00:00.000Z",
        "2030-09-02T03:00:00.000Z",
    )


def test_equal_datetimes_of_another_fold_show_their_own_instant() -> None:
    """Equal and hash-equal, an hour apart: each is shown as the instant it names."""
    first = datetime(2025, 10, 26, 2, 30, tzinfo=ZoneInfo("Europe/Berlin"))
    second = first.replace(fold=1)
    assert first == second
    shown = [render_slot(make_slot(value))["startsAt"] for value in (first, second, first)]
    assert shown == [
        "2025-10-26T00:30:00.000Z",
        "2025-10-26T01:30:00.000Z",
        "2025-10-26T00:30:00.000Z",
    ]
