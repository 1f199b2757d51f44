"""Approval intents of cancel and reschedule (``domain.intents``): their bytes and digests."""

from __future__ import annotations

import hashlib

from expert_booking.domain.intents import ActionIntent

FIELDS = {
    "action": "CANCEL",
    "booking_id": "b-1",
    "slot_id": "s-1",
    "starts_at": "2030-09-02T02:00:00.000Z",
    "amount": "500.00",
    "currency": "CNY",
}


def test_an_action_intent_digest_covers_its_exact_version_value() -> None:
    """The digest memo never answers for an equal intent with other bytes (True == 1)."""
    as_int = ActionIntent(**FIELDS, version=1)
    as_bool = ActionIntent(**FIELDS, version=True)  # bool is an int subtype; never valid input
    assert as_int == as_bool
    assert as_int.digest() == "sha256:" + hashlib.sha256(as_int.canonical_bytes()).hexdigest()
    assert as_bool.digest() == "sha256:" + hashlib.sha256(as_bool.canonical_bytes()).hexdigest()
    assert as_int.digest() != as_bool.digest()


def test_an_action_intents_canonical_bytes_are_sorted_compact_utf8_json() -> None:
    intent = ActionIntent(
        **{**FIELDS, "action": "RESCHEDULE", "slot_id": "s-é"},
        version=3,
        new_slot_id="s-2",
        new_starts_at="2030-09-03T02:00:00.000Z",
    )
    assert (
        intent.canonical_bytes()
        == (
            '{"action":"RESCHEDULE","amount":"500.00","bookingId":"b-1","currency":"CNY",'
            '"newSlotId":"s-2","newStartsAt":"2030-09-03T02:00:00.000Z","slotId":"s-é",'
            '"startsAt":"2030-09-02T02:00:00.000Z","version":3}'
        ).encode()
    )
