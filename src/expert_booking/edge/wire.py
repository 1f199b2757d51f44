"""Mapping between validated wire arguments, domain commands and JSON-ready result dicts."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from expert_booking.domain.errors import InvalidArgumentsError
from expert_booking.domain.model import (
    Booking,
    Customer,
    HumanApproval,
    Intent,
    Slot,
    format_instant,
    parse_instant,
)
from expert_booking.edge.validation import json_pointer
from expert_booking.ports import SlotQuery
from expert_booking.services import ConfirmBooking, HoldSlot, SearchSlots, SlotPage


def search_command(args: Mapping[str, Any]) -> SearchSlots:
    """``booking.search_available_slots`` arguments as a command."""
    return SearchSlots(
        query=SlotQuery(
            text=args["query"],
            specialty=args.get("specialty"),
            starts_after=_optional_instant(args, "startsAfter"),
            starts_before=_optional_instant(args, "startsBefore"),
        ),
        limit=args["limit"],
        cursor=args.get("cursor"),
    )


def hold_command(args: Mapping[str, Any]) -> HoldSlot:
    """``booking.hold_slot`` arguments as a command; the customer is kept exactly as sent."""
    customer = args["customer"]
    return HoldSlot(
        slot_id=args["slotId"],
        customer=Customer(
            name=customer["name"],
            email=customer["email"],
            phone=customer.get("phone"),
            note=customer.get("note"),
        ),
        idempotency_key=args["idempotencyKey"],
    )


def confirm_command(args: Mapping[str, Any]) -> ConfirmBooking:
    """``booking.confirm_booking`` arguments as a command (``humanApproval`` may be absent)."""
    approval = args.get("humanApproval")
    return ConfirmBooking(
        booking_id=args["bookingId"],
        expected_version=args["expectedVersion"],
        idempotency_key=args["idempotencyKey"],
        human_approval=None if approval is None else _approval(approval),
    )


def booking_id_of(args: Mapping[str, Any]) -> str:
    """``booking.get_booking`` arguments: the booking id."""
    return str(args["bookingId"])


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
        "confirmedAt": _optional_text(booking.confirmed_at),
        "paymentPageUrl": booking.payment_page_url,
        "payment": {
            "queryId": payment.query_id,
            "status": payment.status.value,
            "amount": payment.price.amount,
            "currency": payment.price.currency,
            "paidAt": _optional_text(payment.paid_at),
        },
        "confirmationIntent": None
        if challenge is None
        else {"intent": render_intent(challenge.intent), "intentHash": challenge.intent_hash},
    }


def render_intent(intent: Intent) -> dict[str, Any]:
    """The six approved fields, keyed as in the canonical intent."""
    return {
        "amount": intent.amount,
        "bookingId": intent.booking_id,
        "currency": intent.currency,
        "slotId": intent.slot_id,
        "startsAt": intent.starts_at,
        "version": intent.version,
    }


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


def _approval(approval: Mapping[str, Any]) -> HumanApproval:
    intent = approval["intent"]
    return HumanApproval(
        approval_id=approval["approvalId"],
        decision=approval["decision"],
        approved_at=_instant(approval["approvedAt"], ["humanApproval", "approvedAt"]),
        intent=Intent(
            booking_id=intent["bookingId"],
            slot_id=intent["slotId"],
            starts_at=intent["startsAt"],  # compared as the exact string the person approved
            amount=intent["amount"],
            currency=intent["currency"],
            version=intent["version"],
        ),
        intent_hash=approval["intentHash"],
    )


def _optional_instant(args: Mapping[str, Any], key: str) -> datetime | None:
    value = args.get(key)
    return None if value is None else _instant(value, [key])


def _instant(text: str, path: list[str]) -> datetime:
    """Parse an RFC 3339 string the format check accepted (leap seconds still fail here)."""
    try:
        return parse_instant(text)
    except ValueError as exc:
        raise InvalidArgumentsError(
            violations=[
                {
                    "pointer": json_pointer(path),
                    "message": "must be an RFC 3339 date-time within years 0001-9999 UTC, "
                    "without a leap second.",
                }
            ]
        ) from exc


def _optional_text(value: datetime | None) -> str | None:
    return None if value is None else format_instant(value)
