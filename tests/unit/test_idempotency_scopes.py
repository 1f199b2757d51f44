"""The idempotency scopes are persisted: every stored record carries one of these strings."""

from __future__ import annotations

from expert_booking.replay import IdempotencyScope


def test_the_persisted_idempotency_scopes_never_change() -> None:
    """A new spelling would orphan every stored outcome: replays would run the write again."""
    assert {scope.name: scope.value for scope in IdempotencyScope} == {
        "HOLD": "booking.hold_slot",
        "CONFIRM": "booking.confirm_booking",
        "CANCEL": "booking.cancel_booking",
        "RESCHEDULE": "booking.reschedule_booking",
    }
