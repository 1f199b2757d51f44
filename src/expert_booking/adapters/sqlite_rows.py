"""Row and JSON mapping of the SQLite store: domain objects to bound parameters and back.

Instants are RFC 3339 UTC strings with milliseconds (``format_instant``), which order as text;
money is kept as the exact strings; the customer as JSON exactly as given, without absent
optional keys. Idempotency records store the booking as its columns in JSON
(``booking_to_json``): one mapping of a booking each way, whether row or record.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from expert_booking.domain.model import (
    Booking,
    BookingStatus,
    Customer,
    Money,
    Payment,
    PaymentStatus,
    Slot,
    SlotChange,
    format_instant,
    format_optional_instant,
    parse_instant,
)

SLOT_COLUMNS = """
    s.slot_id, s.expert_id, e.name AS expert_name, e.specialty, s.starts_at, s.ends_at,
    s.price_amount, s.price_currency
"""

BOOKING_COLUMN_NAMES = (
    "booking_id",
    "slot_id",
    "expert_id",
    "starts_at",
    "ends_at",
    "customer_json",
    "status",
    "version",
    "held_at",
    "expires_at",
    "confirmed_at",
    "payment_page_url",
    "payment_status",
    "payment_amount",
    "payment_currency",
    "paid_at",
    "refund_due",
    "history_json",
    "cancelled_at",
    "owner",
)
BOOKING_COLUMNS = ", ".join(BOOKING_COLUMN_NAMES)
Columns = sqlite3.Row | Mapping[str, Any]
"""A booking's columns: a row of the bookings table, or the same columns as a JSON object."""


# Stored instants repeat (a slot's times on every search, a booking's on every read) and are
# canonical texts: each is parsed once. Safe to share, datetimes are immutable; bounded.
stored_instant = functools.lru_cache(maxsize=8192)(parse_instant)


def optional_instant(value: str | None) -> datetime | None:
    return None if value is None else stored_instant(value)


def slot_from_row(row: sqlite3.Row) -> Slot:
    return Slot(
        slot_id=row["slot_id"],
        expert_id=row["expert_id"],
        expert_name=row["expert_name"],
        specialty=row["specialty"],
        starts_at=stored_instant(row["starts_at"]),
        ends_at=stored_instant(row["ends_at"]),
        price=Money(amount=row["price_amount"], currency=row["price_currency"]),
    )


# Reused: json.dumps with options builds a new encoder per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _customer_doc(customer: Customer) -> dict[str, str]:
    doc = {"name": customer.name, "email": customer.email}
    if customer.phone is not None:
        doc["phone"] = customer.phone
    if customer.note is not None:
        doc["note"] = customer.note
    return doc


def customer_to_json(customer: Customer) -> str:
    """The customer as compact JSON, exactly as given; absent optional keys are omitted."""
    return _ENCODER.encode(_customer_doc(customer))


def _customer_from_doc(doc: dict[str, Any]) -> Customer:
    return Customer(
        name=doc["name"], email=doc["email"], phone=doc.get("phone"), note=doc.get("note")
    )


def booking_params(booking: Booking) -> tuple[Any, ...]:
    payment = booking.payment
    return (
        booking.booking_id,
        booking.slot_id,
        booking.expert_id,
        format_instant(booking.starts_at),
        format_instant(booking.ends_at),
        customer_to_json(booking.customer),
        booking.status.value,
        booking.version,
        format_instant(booking.held_at),
        format_instant(booking.expires_at),
        format_optional_instant(booking.confirmed_at),
        booking.payment_page_url,
        payment.status.value,
        payment.price.amount,
        payment.price.currency,
        format_optional_instant(payment.paid_at),
        1 if booking.refund_due else 0,
        history_to_json(booking.history),
        format_optional_instant(booking.cancelled_at),
        booking.owner,
    )


def booking_from_row(row: Columns) -> Booking:
    return Booking(
        booking_id=row["booking_id"],
        slot_id=row["slot_id"],
        expert_id=row["expert_id"],
        starts_at=stored_instant(row["starts_at"]),
        ends_at=stored_instant(row["ends_at"]),
        customer=_customer_from_doc(json.loads(row["customer_json"])),
        status=BookingStatus(row["status"]),
        version=row["version"],
        held_at=stored_instant(row["held_at"]),
        expires_at=stored_instant(row["expires_at"]),
        confirmed_at=optional_instant(row["confirmed_at"]),
        payment_page_url=row["payment_page_url"],
        # The booking id is the immutable payment query id (spec, payment seam).
        payment=Payment(
            query_id=row["booking_id"],
            status=PaymentStatus(row["payment_status"]),
            price=Money(amount=row["payment_amount"], currency=row["payment_currency"]),
            paid_at=optional_instant(row["paid_at"]),
        ),
        refund_due=bool(row["refund_due"]),
        history=history_from_json(row["history_json"]),
        cancelled_at=optional_instant(row["cancelled_at"]),
        owner=row["owner"],
    )


def history_to_json(history: tuple[SlotChange, ...]) -> str:
    """The slots a booking was moved away from, oldest first, as a compact JSON array."""
    return _ENCODER.encode(
        [
            {
                "slot_id": change.slot_id,
                "expert_id": change.expert_id,
                "starts_at": format_instant(change.starts_at),
                "ends_at": format_instant(change.ends_at),
                "changed_at": format_instant(change.changed_at),
            }
            for change in history
        ]
    )


def history_from_json(text: str) -> tuple[SlotChange, ...]:
    """Inverse of :func:`history_to_json` (``"[]"``, the column's default, is no change)."""
    if text == "[]":
        return ()
    return tuple(
        SlotChange(
            slot_id=entry["slot_id"],
            expert_id=entry["expert_id"],
            starts_at=stored_instant(entry["starts_at"]),
            ends_at=stored_instant(entry["ends_at"]),
            changed_at=stored_instant(entry["changed_at"]),
        )
        for entry in json.loads(text)
    )


def booking_to_json(booking: Booking) -> str:
    """The booking stored with an idempotency record: its bookings-table columns as JSON.

    The same column mapping as the table (``booking_params``), so the store has one mapping
    of a booking each way; :func:`booking_from_json` restores it through ``booking_from_row``.
    """
    return _ENCODER.encode(dict(zip(BOOKING_COLUMN_NAMES, booking_params(booking), strict=True)))


def booking_from_json(text: str) -> Booking:
    """Inverse of :func:`booking_to_json`."""
    columns: dict[str, Any] = json.loads(text)
    return booking_from_row(columns)
