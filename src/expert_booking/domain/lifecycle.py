"""Pure rules of a booking's life after the hold: cancel and reschedule. Time comes in as ``now``.

Transitions (NOTES.md, state machine): HELD and CONFIRMED may become CANCELLED (the slot is
released: the partial unique index covers HELD and CONFIRMED only); a CONFIRMED booking may
move to another free slot at the same price and currency, in place (same id, same payment).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from expert_booking.domain.errors import (
    SLOT_STARTED,
    BookingError,
    InvalidStateError,
    ReschedulePriceDiffersError,
    SlotNotFoundError,
    SlotUnavailableError,
    VersionConflictError,
)
from expert_booking.domain.model import (
    Booking,
    BookingStatus,
    Payment,
    PaymentAnswer,
    PaymentStatus,
    Slot,
    SlotChange,
)

CANCELLABLE = frozenset({BookingStatus.HELD, BookingStatus.CONFIRMED})


def changeable(
    booking: Booking, expected_version: int, allowed: frozenset[BookingStatus], *, now: datetime
) -> BookingError | None:
    """Status first (a final booking has nothing to change), then time, then the version.

    Once its appointment has begun a booking is what happened: cancelling it would owe a
    refund for a session given, moving it a second session for one payment (a hold never
    lives that long: it expires at the slot's start). ``now`` alone decides: a booking's last
    change is always before its start (see ``reschedule_refusal``), so ``Booking.change_time``
    would judge the same.
    """
    if booking.status not in allowed:
        return InvalidStateError(
            booking_id=booking.booking_id, status=booking.status.value, booking=booking
        )
    if now >= booking.starts_at:
        return InvalidStateError(
            "The appointment has already started; it can no longer be changed.",
            booking_id=booking.booking_id,
            status=booking.status.value,
            reason="STARTED",
            starts_at=booking.starts_at,
            booking=booking,
        )
    if booking.version != expected_version:
        return VersionConflictError(
            booking_id=booking.booking_id,
            expected_version=expected_version,
            current_version=booking.version,
        )
    return None


def cancelled(booking: Booking, *, now: datetime, answer: PaymentAnswer | None) -> Booking:
    """The booking CANCELLED at ``now`` (``Booking.change_time``; version + 1); its slot is free.

    ``answer`` is the payment answer a hold's cancellation read (already checked to match):
    a final status (PAID, FAILED, CLOSED) is recorded on the payment; ``None`` (a confirmed
    booking) or PENDING keeps the payment as it is. A paid booking that is cancelled is owed a
    refund outside this server (``refund_due``).
    """
    payment = booking.payment
    if answer is not None and answer.status is not PaymentStatus.PENDING:
        paid = answer.status is PaymentStatus.PAID
        payment = Payment(
            query_id=payment.query_id,
            status=answer.status,
            price=payment.price,
            paid_at=answer.paid_at if paid else None,
        )
    return replace(
        booking,
        status=BookingStatus.CANCELLED,
        version=booking.version + 1,
        cancelled_at=booking.change_time(now),
        payment=payment,
        refund_due=booking.refund_due or is_paid(booking, answer),
    )


def is_paid(booking: Booking, answer: PaymentAnswer | None) -> bool:
    """Whether the person has paid: CONFIRMED, or a hold whose payment answer says PAID."""
    if booking.status is BookingStatus.CONFIRMED:
        return True
    return answer is not None and answer.status is PaymentStatus.PAID


def reschedule_refusal(
    booking: Booking, slot_id: str, target: Slot | None, *, free: bool, now: datetime
) -> BookingError | None:
    """Why ``booking`` cannot move to slot ``slot_id`` (``target``, ``None`` if no such slot).

    ``free`` says whether no active booking has the target now; a taken slot is refused here,
    before a person is asked to approve the move (the store still secures it on the move). A
    target begun by the instant the move would record (``Booking.change_time``) has started.
    """
    if target is None:
        return SlotNotFoundError(slot_id=slot_id)
    if target.slot_id == booking.slot_id:
        return SlotUnavailableError("The booking already has this slot.", slot_id=slot_id)
    if target.starts_at <= booking.change_time(now):
        return SlotUnavailableError(SLOT_STARTED, slot_id=slot_id)
    price = booking.payment.price
    if (target.price.amount, target.price.currency) != (price.amount, price.currency):
        return ReschedulePriceDiffersError(
            booking_id=booking.booking_id,
            slot_id=slot_id,
            booking_amount=price.amount,
            booking_currency=price.currency,
            slot_amount=target.price.amount,
            slot_currency=target.price.currency,
        )
    if not free:
        return SlotUnavailableError(slot_id=slot_id)
    return None


def rescheduled(booking: Booking, target: Slot, *, now: datetime) -> Booking:
    """The booking moved to ``target`` at ``now`` (``Booking.change_time``; version + 1).

    The old slot is kept in ``history``.
    """
    previous = SlotChange(
        slot_id=booking.slot_id,
        expert_id=booking.expert_id,
        starts_at=booking.starts_at,
        ends_at=booking.ends_at,
        changed_at=booking.change_time(now),
    )
    return replace(
        booking,
        slot_id=target.slot_id,
        expert_id=target.expert_id,
        starts_at=target.starts_at,
        ends_at=target.ends_at,
        version=booking.version + 1,
        history=(*booking.history, previous),
    )
