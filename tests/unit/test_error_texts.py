"""Error codes: one domain enum, one class per code, and the edge's words for each."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from expert_booking import services
from expert_booking.adapters import sqlite_transaction
from expert_booking.domain import conflicts, errors, rules
from expert_booking.domain.errors import (
    BookingError,
    ErrorCode,
    HumanApprovalExpiredError,
    InvalidArgumentsError,
    PaymentMismatchError,
    PaymentPendingError,
    SlotUnavailableError,
)
from expert_booking.edge.error_texts import (
    ERROR_TEXTS,
    camel_case,
    message_of,
    recovery_of,
    wire_details,
)
from expert_booking.edge.tool_registry import LOGICAL_NAMES


def _error_classes() -> list[type[BookingError]]:
    return [
        value
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, BookingError) and value is not BookingError
    ]


def test_every_code_has_exactly_one_error_class_and_words_at_the_edge() -> None:
    codes = [cls.code for cls in _error_classes()]
    assert sorted(codes) == sorted(ErrorCode)
    assert set(ERROR_TEXTS) == set(ErrorCode)
    for text in ERROR_TEXTS.values():
        assert text.message.endswith(".")
        assert text.recovery


def test_only_the_codes_that_change_nothing_are_retryable() -> None:
    retryable = {cls.code for cls in _error_classes() if cls.retryable}
    assert retryable == {
        ErrorCode.PAYMENT_PENDING,
        ErrorCode.PAYMENT_UNAVAILABLE,
        ErrorCode.STORAGE_BUSY,
        ErrorCode.RATE_LIMITED,  # nothing ran, and the quota frees within the window
    }


def test_a_specific_message_wins_over_the_standard_one() -> None:
    assert message_of(PaymentPendingError()) == ERROR_TEXTS[ErrorCode.PAYMENT_PENDING].message
    assert message_of(HumanApprovalExpiredError("The approval is dated in the future.")) == (
        "The approval is dated in the future."
    )
    assert recovery_of(PaymentPendingError()) == ERROR_TEXTS[ErrorCode.PAYMENT_PENDING].recovery


def test_a_taken_slots_recovery_says_how_a_hold_and_a_reschedule_take_an_alternative() -> None:
    recovery = recovery_of(SlotUnavailableError())
    assert "details.alternatives" in recovery
    assert "Hold the chosen slotId; for a reschedule, send it as newSlotId" in recovery


def test_details_are_shown_with_camel_case_keys_field_names_and_instants() -> None:
    expires = datetime(2030, 9, 1, 0, 5, tzinfo=UTC)
    pending = PaymentPendingError(booking_id="booking-1", expires_at=expires)
    assert wire_details(pending) == {
        "bookingId": "booking-1",
        "expiresAt": "2030-09-01T00:05:00.000Z",
    }
    mismatch = PaymentMismatchError(booking_id="b", fields=["booking_id", "paid_at", "amount"])
    assert wire_details(mismatch)["fields"] == ["bookingId", "paidAt", "amount"]
    violations = [{"pointer": "/slotId", "message": "is required"}]
    assert wire_details(InvalidArgumentsError(violations=violations)) == {"violations": violations}
    assert camel_case("approval_ttl_seconds") == "approvalTtlSeconds"
    assert camel_case("uri") == "uri"


def test_the_domain_errors_and_rules_speak_no_wire_words() -> None:
    for module in (errors, rules, conflicts):
        text = Path(module.__file__ or "").read_text(encoding="utf-8")
        for wire_word in (*LOGICAL_NAMES, "tool_catalog", "idempotencyKey", "bookingId", "paidAt"):
            assert wire_word not in text, (module.__name__, wire_word)


def test_no_error_is_raised_with_camel_case_details_behind_the_edge() -> None:
    for module in (errors, rules, conflicts, services, sqlite_transaction):
        text = Path(module.__file__ or "").read_text(encoding="utf-8")
        assert re.findall(r"\b[a-z]+[A-Z]\w*=", text) == [], module.__name__


def test_recovery_sentences_lead_an_agent_the_right_way_on_audited_codes() -> None:
    """Followed literally, these sent agents astray (agent audit findings 1, 3, 4, 5)."""
    expired = ERROR_TEXTS[ErrorCode.BOOKING_EXPIRED].recovery
    assert "do not ask them to pay for it again" in expired  # a paid person is owed a refund
    assert "refund" in expired
    rejected = ERROR_TEXTS[ErrorCode.HUMAN_APPROVAL_REJECTED]
    assert "booking" not in rejected.message  # a rejected cancel leaves the booking as it was
    assert "cancellation or reschedule" in rejected.recovery
    conflict = ERROR_TEXTS[ErrorCode.VERSION_CONFLICT].recovery
    assert "act on its status" in conflict  # a final or already confirmed booking: no approval
    assert "(query or filters)" in ERROR_TEXTS[ErrorCode.INVALID_CURSOR].recovery  # list too
