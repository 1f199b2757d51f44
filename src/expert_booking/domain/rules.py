"""Pure booking rules: approval checks and the payment transition. Time comes in as ``now``."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from expert_booking.domain.conflicts import intent_changes
from expert_booking.domain.errors import (
    ApprovalIntentHashMismatchError,
    ApprovalIntentMismatchError,
    HumanApprovalExpiredError,
    HumanApprovalRejectedError,
    HumanApprovalRequiredError,
    PaidAfterExpiryError,
    PaymentClosedError,
    PaymentFailedError,
    PaymentMismatchError,
    PaymentPendingError,
)
from expert_booking.domain.intents import ActionIntent
from expert_booking.domain.model import (
    Booking,
    BookingStatus,
    HumanApproval,
    Intent,
    Payment,
    PaymentAnswer,
    PaymentStatus,
)


def check_approval(
    approval: HumanApproval | None,
    booking: Booking,
    *,
    now: datetime,
    ttl: timedelta,
    skew: timedelta,
) -> None:
    """Refuse unless a person approved exactly this booking's confirmation intent, recently.

    Raises:
        HumanApprovalRequiredError, HumanApprovalRejectedError, HumanApprovalExpiredError,
        ApprovalIntentHashMismatchError, ApprovalIntentMismatchError.
    """
    check_intent_approval(
        approval,
        booking.intent,
        issued_at=booking.intent_issued_at,
        now=now,
        ttl=ttl,
        skew=skew,
        offer_intent=False,
    )


def check_intent_approval(
    approval: HumanApproval | None,
    current: Intent | ActionIntent,
    *,
    issued_at: datetime,
    now: datetime,
    ttl: timedelta,
    skew: timedelta,
    offer_intent: bool,
) -> None:
    """Refuse unless a person approved exactly ``current``, issued at ``issued_at``, recently.

    Order: present, APPROVE, fresh (``ttl`` old at most, ``skew`` either way), not dated before
    the intent was issued (less ``skew``: a person cannot approve what did not exist yet), hash,
    fields. With ``offer_intent`` a missing approval's error carries the intent to show
    (``details.intent``, ``details.intent_hash``): cancel and reschedule intents are issued
    only that way. A field mismatch always carries the current intent and its hash, and
    ``details.changes`` (``conflicts.intent_changes`` of the approved and the current one).

    Raises:
        HumanApprovalRequiredError, HumanApprovalRejectedError, HumanApprovalExpiredError,
        ApprovalIntentHashMismatchError, ApprovalIntentMismatchError.
    """
    booking_id = current.booking_id
    if approval is None:
        if offer_intent:
            raise HumanApprovalRequiredError(
                booking_id=booking_id, intent=current, intent_hash=current.digest()
            )
        raise HumanApprovalRequiredError(booking_id=booking_id)
    if approval.decision != "APPROVE":
        raise HumanApprovalRejectedError(booking_id=booking_id)
    if approval.approved_at > now + skew:
        raise HumanApprovalExpiredError(
            "The approval is dated in the future.", booking_id=booking_id, reason="FUTURE"
        )
    if now - approval.approved_at > ttl + skew:
        raise HumanApprovalExpiredError(
            "The approval is older than the approval lifetime.",
            booking_id=booking_id,
            reason="STALE",
            approval_ttl_seconds=int(ttl.total_seconds()),
        )
    if approval.approved_at < issued_at - skew:
        raise HumanApprovalExpiredError(
            "The approval is dated before the server issued the intent it approves.",
            booking_id=booking_id,
            reason="BEFORE_INTENT",
            intent_issued_at=issued_at,
        )
    if approval.intent.digest() != approval.intent_hash:
        raise ApprovalIntentHashMismatchError(booking_id=booking_id)
    if approval.intent != current:
        # Help on conflict: what the person approved against what they would approve now,
        # and the current intent to show them again (as HUMAN_APPROVAL_REQUIRED offers it).
        # ``fields`` names the changes' fields (the intent's keys), so the two never disagree.
        changes = intent_changes(approval.intent.canonical_doc(), current.canonical_doc())
        raise ApprovalIntentMismatchError(
            booking_id=booking_id,
            fields=[change.field for change in changes],
            changes=changes,
            intent=current,
            intent_hash=current.digest(),
        )


def apply_payment(
    booking: Booking, answer: PaymentAnswer, *, now: datetime, skew: timedelta
) -> Booking:
    """Return the booking after a payment answer, or raise when it must not change.

    FAILED/CLOSED produce a released booking that the caller commits, then reports with
    :func:`payment_refusal`; PAID with an exact match produces the CONFIRMED booking. A PAID
    answer's paid time must lie between the hold (``held_at``) and the answer's arrival,
    each with ``skew`` of tolerance: a payment cannot precede the booking it pays for, nor
    follow the answer that reports it.

    Raises:
        PaymentMismatchError: another booking, amount or currency, PAID without a paid time
            or with one outside that window (``details.fields`` names them).
        PaymentPendingError: the payment is still PENDING (nothing changes).
    """
    check_payment_matches(booking, answer, skew=skew)
    price = booking.payment.price
    status = answer.status
    if status is PaymentStatus.PENDING:
        raise PaymentPendingError(
            booking_id=booking.booking_id,
            expires_at=booking.expires_at,
            booking=booking,
        )
    final = {
        PaymentStatus.PAID: BookingStatus.CONFIRMED,
        PaymentStatus.FAILED: BookingStatus.PAYMENT_FAILED,
        PaymentStatus.CLOSED: BookingStatus.PAYMENT_CLOSED,
    }[status]
    return replace(
        booking,
        status=final,
        version=booking.version + 1,
        confirmed_at=booking.change_time(now) if final is BookingStatus.CONFIRMED else None,
        payment=Payment(
            query_id=booking.payment.query_id,
            status=status,
            price=price,
            paid_at=answer.paid_at if status is PaymentStatus.PAID else None,
        ),
    )


RELEASED_UNPAID = frozenset({BookingStatus.EXPIRED, BookingStatus.CANCELLED})


def record_paid_after_release(
    booking: Booking, answer: PaymentAnswer, *, skew: timedelta
) -> Booking | None:
    """The released booking with its payment PAID and a refund due, or ``None``.

    Only for a booking that expired or was cancelled unpaid (payment still PENDING) while a
    confirm or cancel queried its payment, and an answer that is an exact PAID of it (booking,
    amount, currency, a paid time in the window of :func:`apply_payment`): the person paid for
    a slot that was released and may be someone else's now. The status stays; the change is
    a change like any other (version + 1). Any other answer changes nothing.
    """
    if booking.status not in RELEASED_UNPAID or booking.payment.status is not PaymentStatus.PENDING:
        return None
    price = booking.payment.price
    exact = (
        answer.status is PaymentStatus.PAID
        and answer.booking_id == booking.booking_id
        and answer.amount == price.amount
        and answer.currency == price.currency
        and _paid_in_window(booking, answer, skew)
    )
    if not exact:
        return None
    return replace(
        booking,
        version=booking.version + 1,
        payment=replace(booking.payment, status=PaymentStatus.PAID, paid_at=answer.paid_at),
        refund_due=True,
    )


def check_payment_matches(booking: Booking, answer: PaymentAnswer, *, skew: timedelta) -> None:
    """Refuse an answer about another booking, amount or currency, or with a bad paid time.

    Raises:
        PaymentMismatchError: ``details.fields`` names what does not match.
    """
    price = booking.payment.price
    mismatched = [
        field
        for field, ok in (
            ("booking_id", answer.booking_id == booking.booking_id),
            ("amount", answer.amount == price.amount),
            ("currency", answer.currency == price.currency),
            (
                "paid_at",
                answer.status is not PaymentStatus.PAID or _paid_in_window(booking, answer, skew),
            ),
        )
        if not ok
    ]
    if mismatched:
        raise PaymentMismatchError(booking_id=booking.booking_id, fields=mismatched)


def _paid_in_window(booking: Booking, answer: PaymentAnswer, skew: timedelta) -> bool:
    paid_at = answer.paid_at
    return paid_at is not None and booking.held_at - skew <= paid_at <= answer.received_at + skew


def payment_refusal(
    booking: Booking,
) -> PaymentFailedError | PaymentClosedError | PaidAfterExpiryError | None:
    """The error that reports a committed payment outcome other than a confirmation.

    FAILED/CLOSED (the slot released), or a payment PAID for an EXPIRED booking (a refund due:
    :func:`record_paid_after_release`); ``None`` for a confirmed booking.
    """
    if booking.status is BookingStatus.EXPIRED and booking.payment.status is PaymentStatus.PAID:
        return PaidAfterExpiryError(booking_id=booking.booking_id, booking=booking)
    if booking.status is BookingStatus.PAYMENT_FAILED:
        return PaymentFailedError(booking_id=booking.booking_id, booking=booking)
    if booking.status is BookingStatus.PAYMENT_CLOSED:
        return PaymentClosedError(booking_id=booking.booking_id, booking=booking)
    return None
