"""Domain values to the JSON-ready dicts of tool results (the one mapping of each value).

An error's ``details`` show intents and slots in these same forms (``error_texts.wire_details``:
an intent as its canonical document, a slot through :func:`render_slot`).
"""

from __future__ import annotations

from typing import Any

from expert_booking.domain.model import (
    Booking,
    Intent,
    Slot,
    format_instant,
    format_optional_instant,
)
from expert_booking.services import BookingPage, SlotPage


def render_booking(booking: Booking) -> dict[str, Any]:
    """The booking snapshot of CONTRACT section 3 (every key present; absent optionals omitted).

    Built as a plain dict, not through the generated pydantic model: that model parses
    date-times and dumps ``2030-09-02T02:00:00Z``, losing the ``.000`` of the exact string the
    intent hash covers (its ~22 us cost was within budget; correctness ruled it out). Tests
    validate the output against ``schemas/booking_snapshot.json`` instead.
    """
    customer: dict[str, str] = {"name": booking.customer.name, "email": booking.customer.email}
    if booking.customer.phone is not None:
        customer["phone"] = booking.customer.phone
    if booking.customer.note is not None:
        customer["note"] = booking.customer.note
    payment = booking.payment
    challenge = booking.confirmation_intent
    return {
        "bookingId": booking.booking_id,
        "slotId": booking.slot_id,
        "expertId": booking.expert_id,
        "startsAt": format_instant(booking.starts_at),
        "endsAt": format_instant(booking.ends_at),
        "customer": customer,
        "status": booking.status.value,
        "version": booking.version,
        "heldAt": format_instant(booking.held_at),
        "expiresAt": format_instant(booking.expires_at),
        "confirmedAt": format_optional_instant(booking.confirmed_at),
        "paymentPageUrl": booking.payment_page_url,
        "payment": {
            "queryId": payment.query_id,
            "status": payment.status.value,
            "amount": payment.price.amount,
            "currency": payment.price.currency,
            "paidAt": format_optional_instant(payment.paid_at),
        },
        "refundDue": booking.refund_due,
        "confirmationIntent": None
        if challenge is None
        else {"intent": render_intent(challenge.intent), "intentHash": challenge.intent_hash},
        "history": [
            {
                "slotId": change.slot_id,
                "expertId": change.expert_id,
                "startsAt": format_instant(change.starts_at),
                "endsAt": format_instant(change.ends_at),
                "changedAt": format_instant(change.changed_at),
            }
            for change in booking.history
        ],
        "cancelledAt": format_optional_instant(booking.cancelled_at),
    }


def render_intent(intent: Intent) -> dict[str, Any]:
    """The six approved fields, keyed as in the canonical intent (the hashed document itself)."""
    return intent.canonical_doc()


def render_slot(slot: Slot) -> dict[str, Any]:
    """One free slot as ``booking.search_available_slots`` lists it."""
    return {
        "slotId": slot.slot_id,
        "expertId": slot.expert_id,
        "expertName": slot.expert_name,
        "specialty": slot.specialty,
        "startsAt": format_instant(slot.starts_at),
        "endsAt": format_instant(slot.ends_at),
        "price": {"amount": slot.price.amount, "currency": slot.price.currency},
    }


def render_slot_page(page: SlotPage) -> dict[str, Any]:
    """``data`` of a slot search: ``slots``, ``total``, ``nextCursor``."""
    return {
        "slots": [render_slot(slot) for slot in page.slots],
        "total": page.total,
        "nextCursor": page.next_cursor,
    }


def render_booking_page(page: BookingPage) -> dict[str, Any]:
    """``data`` of a booking list: ``bookings`` (snapshots), ``total``, ``nextCursor``."""
    return {
        "bookings": [render_booking(booking) for booking in page.bookings],
        "total": page.total,
        "nextCursor": page.next_cursor,
    }
