"""Pure rules of a booking's life after the hold (``domain.lifecycle``): the move, the cancel."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from expert_booking.domain.lifecycle import cancelled, rescheduled
from expert_booking.domain.model import (
    BookingStatus,
    Money,
    Payment,
    PaymentStatus,
    Slot,
    SlotChange,
)
from tests.fakes import T0, answer, make_booking, make_confirmed_booking

NOW = T0 + timedelta(days=1)


def test_a_rescheduled_booking_takes_the_target_slots_expert_start_and_end() -> None:
    booking = make_confirmed_booking()
    target = Slot(
        slot_id="slot-other-007",
        expert_id="exp-other-001",  # another expert, at the same price
        expert_name="Someone Else",
        specialty="AI",
        starts_at=booking.starts_at + timedelta(days=3, hours=5),
        ends_at=booking.starts_at + timedelta(days=3, hours=5, minutes=45),
        price=Money("500.00", "CNY"),
    )
    moved = rescheduled(booking, target, now=NOW)
    assert (moved.slot_id, moved.expert_id, moved.starts_at, moved.ends_at) == (
        "slot-other-007",
        "exp-other-001",
        target.starts_at,
        target.ends_at,
    )
    assert moved.version == booking.version + 1
    assert moved.history == (
        SlotChange(
            slot_id=booking.slot_id,
            expert_id=booking.expert_id,
            starts_at=booking.starts_at,
            ends_at=booking.ends_at,
            changed_at=NOW,
        ),
    )
    # Everything else is the booking's own: same id, payment, customer, status.
    assert (
        replace(
            moved,
            slot_id=booking.slot_id,
            expert_id=booking.expert_id,
            starts_at=booking.starts_at,
            ends_at=booking.ends_at,
            version=booking.version,
            history=(),
        )
        == booking
    )


def test_a_cancelled_hold_whose_payment_failed_records_no_paid_time() -> None:
    """A FAILED or CLOSED answer that (wrongly) carries ``paidAt`` never marks a payment time."""
    held = make_booking()
    for status in ("FAILED", "CLOSED"):
        done = cancelled(held, now=NOW, answer=answer(held, status, paid_at=NOW))
        assert done.status is BookingStatus.CANCELLED
        assert done.payment == Payment(
            query_id=held.payment.query_id,  # the booking's payment query id never changes
            status=PaymentStatus(status),
            price=held.payment.price,
            paid_at=None,
        )
        assert done.refund_due is False
    paid = cancelled(held, now=NOW, answer=answer(held, "PAID", paid_at=NOW))
    assert (paid.payment.status, paid.payment.paid_at, paid.refund_due) == (
        PaymentStatus.PAID,
        NOW,
        True,
    )
