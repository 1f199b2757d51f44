"""Pure booking rules: approval checks, the payment transition, the canonical intent, instants."""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from expert_booking.domain.errors import BookingError
from expert_booking.domain.intents import cancel_intent
from expert_booking.domain.model import (
    BookingStatus,
    HumanApproval,
    Intent,
    PaymentStatus,
    format_instant,
    parse_instant,
)
from expert_booking.domain.rules import (
    apply_payment,
    check_approval,
    payment_refusal,
    record_paid_after_release,
)
from expert_booking.edge.error_texts import recovery_of, wire_details
from tests.fakes import T0, answer, approval, make_booking

TTL = timedelta(seconds=120)
SKEW = timedelta(seconds=5)
NOW = T0 + timedelta(seconds=30)
PAID_AT = T0 + timedelta(seconds=20)


# Held long before NOW, so the freshness tests below never meet the BEFORE_INTENT rule.
HELD_AT = NOW - timedelta(hours=2)


def _check(human_approval: HumanApproval | None, now: datetime = NOW) -> None:
    check_approval(human_approval, make_booking(held_at=HELD_AT), now=now, ttl=TTL, skew=SKEW)


def _refusal_code(human_approval: HumanApproval | None, now: datetime = NOW) -> str:
    with pytest.raises(BookingError) as excinfo:
        _check(human_approval, now)
    return excinfo.value.code


def test_a_fresh_approval_of_the_exact_intent_passes() -> None:
    _check(approval(make_booking(), NOW))


def test_a_missing_approval_is_required() -> None:
    assert _refusal_code(None) == "HUMAN_APPROVAL_REQUIRED"


def test_a_rejection_is_refused_before_freshness_is_checked() -> None:
    stale_rejection = approval(make_booking(), NOW - timedelta(hours=1), decision="REJECT")
    assert _refusal_code(stale_rejection) == "HUMAN_APPROVAL_REJECTED"


def test_the_decision_must_be_exactly_approve() -> None:
    assert _refusal_code(approval(make_booking(), NOW, decision="approve")) == (
        "HUMAN_APPROVAL_REJECTED"
    )


def test_an_approval_older_than_ttl_plus_skew_is_expired() -> None:
    stale = approval(make_booking(), NOW - TTL - SKEW - timedelta(milliseconds=1))
    with pytest.raises(BookingError) as excinfo:
        _check(stale)
    assert excinfo.value.code == "HUMAN_APPROVAL_EXPIRED"
    assert excinfo.value.details["reason"] == "STALE"


def test_an_approval_exactly_ttl_plus_skew_old_is_still_fresh() -> None:
    _check(approval(make_booking(), NOW - TTL - SKEW))


def test_an_approval_dated_in_the_future_within_the_skew_passes() -> None:
    _check(approval(make_booking(), NOW + SKEW))


def test_an_approval_dated_in_the_future_beyond_the_skew_is_expired() -> None:
    future = approval(make_booking(), NOW + SKEW + timedelta(milliseconds=1))
    with pytest.raises(BookingError) as excinfo:
        _check(future)
    assert excinfo.value.code == "HUMAN_APPROVAL_EXPIRED"
    assert excinfo.value.details["reason"] == "FUTURE"


def test_an_approval_dated_before_the_intent_was_issued_is_expired_with_its_reason() -> None:
    booking = make_booking(held_at=NOW - timedelta(seconds=30))
    early = approval(booking, booking.held_at - SKEW - timedelta(milliseconds=1))
    with pytest.raises(BookingError) as excinfo:
        check_approval(early, booking, now=NOW, ttl=TTL, skew=SKEW)
    assert excinfo.value.code == "HUMAN_APPROVAL_EXPIRED"
    assert excinfo.value.details == {
        "booking_id": booking.booking_id,
        "reason": "BEFORE_INTENT",
        "intent_issued_at": booking.held_at,
    }
    assert "BEFORE_INTENT" in recovery_of(excinfo.value)


def test_an_approval_dated_within_the_skew_before_the_intent_passes() -> None:
    booking = make_booking(held_at=NOW - timedelta(seconds=30))
    check_approval(approval(booking, booking.held_at - SKEW), booking, now=NOW, ttl=TTL, skew=SKEW)


def test_an_approval_before_the_intent_is_refused_before_the_hash_is_checked() -> None:
    booking = make_booking(held_at=NOW - timedelta(seconds=30))
    early = approval(booking, booking.held_at - timedelta(minutes=1), intent_hash="sha256:0")
    with pytest.raises(BookingError) as excinfo:
        check_approval(early, booking, now=NOW, ttl=TTL, skew=SKEW)
    assert excinfo.value.details["reason"] == "BEFORE_INTENT"


def test_freshness_is_checked_before_the_hash() -> None:
    stale_and_tampered = approval(
        make_booking(), NOW - timedelta(hours=1), intent_hash="sha256:" + "0" * 64
    )
    assert _refusal_code(stale_and_tampered) == "HUMAN_APPROVAL_EXPIRED"


def test_a_hash_that_is_not_the_digest_of_the_intent_is_refused() -> None:
    tampered = approval(make_booking(), NOW, intent_hash="sha256:" + "0" * 64)
    assert _refusal_code(tampered) == "APPROVAL_INTENT_HASH_MISMATCH"


def test_the_hash_is_checked_before_the_fields() -> None:
    other = replace(make_booking().intent, amount="1.00")
    assert _refusal_code(approval(make_booking(), NOW, intent=other, intent_hash="sha256:x")) == (
        "APPROVAL_INTENT_HASH_MISMATCH"
    )


@pytest.mark.parametrize(
    ("field", "value", "camel"),
    [
        ("booking_id", "booking-other", "bookingId"),
        ("slot_id", "slot-ai-002", "slotId"),
        ("starts_at", "2030-09-03T02:00:00.000Z", "startsAt"),
        ("amount", "500.0", "amount"),
        ("currency", "USD", "currency"),
        ("version", 2, "version"),
    ],
)
def test_each_of_the_six_intent_fields_must_match_the_booking(
    field: str, value: Any, camel: str
) -> None:
    other = replace(make_booking().intent, **{field: value})
    with pytest.raises(BookingError) as excinfo:
        _check(approval(make_booking(), NOW, intent=other))
    assert excinfo.value.code == "APPROVAL_INTENT_MISMATCH"
    assert wire_details(excinfo.value)["fields"] == [camel]


def test_an_exact_paid_answer_confirms_the_booking() -> None:
    booking = make_booking()
    confirmed = apply_payment(booking, answer(booking, "PAID", paid_at=PAID_AT), now=NOW, skew=SKEW)
    assert confirmed.status is BookingStatus.CONFIRMED
    assert confirmed.version == 2
    assert confirmed.confirmed_at == NOW
    assert confirmed.payment.status is PaymentStatus.PAID
    assert confirmed.payment.paid_at == PAID_AT
    assert confirmed.payment.price == booking.payment.price
    assert confirmed.payment.query_id == booking.booking_id
    assert confirmed.confirmation_intent is None
    assert payment_refusal(confirmed) is None


def test_an_action_approval_sent_to_a_confirm_names_the_same_fields_as_its_changes() -> None:
    booking = make_booking(held_at=HELD_AT)
    cancel = cancel_intent(booking)  # another action's intent of the very booking
    with pytest.raises(BookingError) as excinfo:
        _check(HumanApproval(str(uuid.uuid4()), "APPROVE", NOW, cancel, cancel.digest()))
    details = excinfo.value.details
    assert [change.field for change in details["changes"]] == ["action"]
    assert wire_details(excinfo.value)["fields"] == ["action"]


@pytest.mark.parametrize(
    ("overrides", "fields"),
    [
        ({"booking_id": "booking-other"}, ["bookingId"]),
        ({"amount": "500.0"}, ["amount"]),
        ({"amount": "500"}, ["amount"]),
        ({"currency": "cny"}, ["currency"]),
        ({"paid_at": None}, ["paidAt"]),
        ({"status": "PENDING", "amount": "5.00"}, ["amount"]),
    ],
)
def test_a_paid_answer_that_does_not_match_exactly_changes_nothing(
    overrides: dict[str, Any], fields: list[str]
) -> None:
    booking = make_booking()
    values: dict[str, Any] = {"status": "PAID", "paid_at": PAID_AT, **overrides}
    mismatched = answer(booking, **values)
    with pytest.raises(BookingError) as excinfo:
        apply_payment(booking, mismatched, now=NOW, skew=SKEW)
    assert excinfo.value.code == "PAYMENT_MISMATCH"
    assert wire_details(excinfo.value)["fields"] == fields


@pytest.mark.parametrize(
    ("paid_at", "received_at", "matches"),
    [
        (T0 - SKEW, T0 + timedelta(seconds=1), True),  # at the hold, less the skew
        (T0 - SKEW - timedelta(milliseconds=1), T0 + timedelta(seconds=1), False),
        (NOW + SKEW, NOW, True),  # at the answer's arrival, plus the skew
        (NOW + SKEW + timedelta(milliseconds=1), NOW, False),
        (datetime(2999, 1, 1, tzinfo=UTC), NOW, False),
    ],
    ids=["hold-minus-skew", "before-the-hold", "arrival-plus-skew", "after-arrival", "year-2999"],
)
def test_a_paid_at_outside_the_hold_to_arrival_window_is_a_mismatch(
    paid_at: datetime, received_at: datetime, matches: bool
) -> None:
    booking = make_booking()
    paid = answer(booking, "PAID", paid_at=paid_at, received_at=received_at)
    if matches:
        assert apply_payment(booking, paid, now=NOW, skew=SKEW).payment.paid_at == paid_at
        return
    with pytest.raises(BookingError) as excinfo:
        apply_payment(booking, paid, now=NOW, skew=SKEW)
    assert excinfo.value.code == "PAYMENT_MISMATCH"
    assert excinfo.value.details == {"booking_id": booking.booking_id, "fields": ["paid_at"]}


@pytest.mark.parametrize("status", ["FAILED", "CLOSED"])
def test_a_failed_or_closed_answer_carrying_paid_at_records_no_paid_time(status: str) -> None:
    booking = make_booking()
    after = apply_payment(booking, answer(booking, status, paid_at=PAID_AT), now=NOW, skew=SKEW)
    assert after.payment.paid_at is None
    assert after.confirmed_at is None


def test_a_pending_answer_keeps_the_booking_held() -> None:
    booking = make_booking()
    with pytest.raises(BookingError) as excinfo:
        apply_payment(booking, answer(booking, "PENDING"), now=NOW, skew=SKEW)
    assert excinfo.value.code == "PAYMENT_PENDING"
    assert excinfo.value.retryable is True
    assert excinfo.value.booking == booking


@pytest.mark.parametrize(
    ("status", "released", "code"),
    [
        ("FAILED", BookingStatus.PAYMENT_FAILED, "PAYMENT_FAILED"),
        ("CLOSED", BookingStatus.PAYMENT_CLOSED, "PAYMENT_CLOSED"),
    ],
)
def test_a_failed_or_closed_payment_releases_the_booking(
    status: str, released: BookingStatus, code: str
) -> None:
    booking = make_booking()
    after = apply_payment(booking, answer(booking, status), now=NOW, skew=SKEW)
    assert after.status is released
    assert after.version == 2
    assert after.confirmed_at is None
    assert after.payment.status is PaymentStatus(status)
    assert after.payment.paid_at is None
    assert after.confirmation_intent is None
    refusal = payment_refusal(after)
    assert refusal is not None
    assert refusal.code == code
    assert refusal.booking == after


def test_an_exact_paid_answer_for_an_expired_booking_records_a_refund_due() -> None:
    expired = make_booking(status=BookingStatus.EXPIRED, version=2)
    owed = record_paid_after_release(expired, answer(expired, "PAID", paid_at=PAID_AT), skew=SKEW)
    assert owed is not None
    assert (owed.status, owed.version, owed.refund_due) == (BookingStatus.EXPIRED, 3, True)
    assert (owed.payment.status, owed.payment.paid_at) == (PaymentStatus.PAID, PAID_AT)
    assert owed.confirmed_at is None
    assert owed.confirmation_intent is None
    refusal = payment_refusal(owed)
    assert refusal is not None
    assert (refusal.code, refusal.retryable, refusal.booking) == ("PAID_AFTER_EXPIRY", False, owed)
    # Recorded once: the booking's payment is no longer PENDING.
    assert record_paid_after_release(owed, answer(owed, "PAID", paid_at=PAID_AT), skew=SKEW) is None


@pytest.mark.parametrize(
    "changes",
    [
        {"status": "PENDING"},
        {"status": "FAILED"},
        {"status": "CLOSED"},
        {"amount": "500.0"},
        {"currency": "USD"},
        {"booking_id": "booking-other"},
        {"paid_at": None},
        {"paid_at": T0 - timedelta(seconds=6)},
    ],
)
def test_only_an_exact_paid_answer_for_an_expired_booking_records_anything(
    changes: dict[str, Any],
) -> None:
    expired = make_booking(status=BookingStatus.EXPIRED, version=2)
    arguments: dict[str, Any] = {"status": "PAID", "paid_at": PAID_AT, **changes}
    status = arguments.pop("status")
    late = answer(expired, status, received_at=NOW, **arguments)
    assert record_paid_after_release(expired, late, skew=SKEW) is None


def test_an_exact_paid_answer_for_a_booking_cancelled_unpaid_records_a_refund_due() -> None:
    cancelled = make_booking(status=BookingStatus.CANCELLED, version=2)
    paid = answer(cancelled, "PAID", paid_at=PAID_AT)
    owed = record_paid_after_release(cancelled, paid, skew=SKEW)
    assert owed is not None
    assert (owed.status, owed.version, owed.refund_due) == (BookingStatus.CANCELLED, 3, True)
    assert (owed.payment.status, owed.payment.paid_at) == (PaymentStatus.PAID, PAID_AT)


@pytest.mark.parametrize("status", ["HELD", "CONFIRMED", "PAYMENT_FAILED", "PAYMENT_CLOSED"])
def test_a_paid_answer_records_a_refund_due_only_for_a_released_booking(status: str) -> None:
    booking = make_booking(status=BookingStatus(status))
    paid = answer(booking, "PAID", paid_at=PAID_AT)
    assert record_paid_after_release(booking, paid, skew=SKEW) is None


def test_the_canonical_intent_of_the_seed_example_hashes_as_specified() -> None:
    intent = Intent(
        booking_id="booking-x",
        slot_id="slot-ai-001",
        starts_at="2030-09-02T02:00:00.000Z",
        amount="500.00",
        currency="CNY",
        version=1,
    )
    literal = (
        '{"amount":"500.00","bookingId":"booking-x","currency":"CNY",'
        '"slotId":"slot-ai-001","startsAt":"2030-09-02T02:00:00.000Z","version":1}'
    )
    assert intent.canonical_bytes() == literal.encode("utf-8")
    assert intent.digest() == "sha256:" + hashlib.sha256(literal.encode("utf-8")).hexdigest()
    assert make_booking().intent == intent


def test_the_canonical_intent_keeps_non_ascii_as_utf8() -> None:
    intent = replace(make_booking().intent, slot_id="slot-ü")
    assert '"slotId":"slot-ü"'.encode() in intent.canonical_bytes()


def test_a_confirmation_intent_is_issued_only_while_held_with_payment_pending() -> None:
    held = make_booking()
    issued = held.confirmation_intent
    assert issued is not None
    assert issued.intent == held.intent
    assert issued.intent_hash == held.intent.digest()
    assert replace(held, status=BookingStatus.EXPIRED).confirmation_intent is None


def test_a_hold_is_overdue_from_its_expiry_instant_on() -> None:
    held = make_booking()
    assert not held.is_overdue(held.expires_at - timedelta(milliseconds=1))
    assert held.is_overdue(held.expires_at)
    assert not replace(held, status=BookingStatus.CONFIRMED).is_overdue(held.expires_at)


def test_instants_are_formatted_as_utc_with_milliseconds() -> None:
    assert format_instant(datetime(2030, 9, 2, 2, tzinfo=UTC)) == "2030-09-02T02:00:00.000Z"
    plus8 = datetime(2030, 9, 2, 10, 0, 0, 123999, tzinfo=timezone(timedelta(hours=8)))
    assert format_instant(plus8) == "2030-09-02T02:00:00.123Z"


def test_an_intent_digest_covers_its_exact_version_value() -> None:
    """The digest memo never answers for an equal intent with other bytes (True == 1)."""
    fields = {
        "booking_id": "b-1",
        "slot_id": "s-1",
        "starts_at": "2030-09-02T02:00:00.000Z",
        "amount": "500.00",
        "currency": "CNY",
    }
    as_int = Intent(**fields, version=1)
    as_bool = Intent(**fields, version=True)  # bool is an int subtype; never valid input
    assert as_int == as_bool
    assert as_int.digest() == "sha256:" + hashlib.sha256(as_int.canonical_bytes()).hexdigest()
    assert as_bool.digest() == "sha256:" + hashlib.sha256(as_bool.canonical_bytes()).hexdigest()
    assert as_int.digest() != as_bool.digest()


@given(
    instant=st.datetimes(
        min_value=datetime(1, 1, 2),  # noqa: DTZ001 - hypothesis bounds are naive
        max_value=datetime(9999, 12, 30),  # noqa: DTZ001 - hypothesis bounds are naive
        timezones=st.builds(
            timezone, st.timedeltas(min_value=timedelta(hours=-23), max_value=timedelta(hours=23))
        ),
    )
)
def test_formatting_equals_isoformat_in_utc_truncated_to_milliseconds(instant: datetime) -> None:
    expected = instant.astimezone(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"
    assert format_instant(instant) == expected


def test_formatting_a_naive_datetime_is_refused() -> None:
    with pytest.raises(ValueError, match="naive") as excinfo:
        format_instant(datetime(2030, 9, 2, 2))  # noqa: DTZ001 - the naive value under test
    assert str(excinfo.value) == "naive datetime"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("2030-09-02 02:00:00Z", "not an RFC 3339 date-time"),
        ("0001-01-01T00:00:00+01:00", "timestamp outside years 0001-9999 in UTC"),
    ],
)
def test_parsing_refuses_with_a_message_that_says_why(text: str, said: str) -> None:
    with pytest.raises(ValueError, match=re.escape(said)) as excinfo:
        parse_instant(text)
    assert str(excinfo.value) == said


@pytest.mark.parametrize(
    "text",
    ["2030-09-02T02:00:00.000Z", "2030-09-02T10:00:00.000+08:00", "2030-09-02T02:00:00z"],
)
def test_parsing_and_formatting_round_trip_to_the_same_utc_instant(text: str) -> None:
    parsed = parse_instant(text)
    assert parsed == datetime(2030, 9, 2, 2, tzinfo=UTC)
    assert parsed.tzinfo is UTC
    assert parse_instant(format_instant(parsed)) == parsed


def test_the_tests_run_in_a_local_time_zone_other_than_utc() -> None:
    local = datetime(2030, 9, 2, 2).astimezone()
    assert local.utcoffset() == timedelta(hours=5, minutes=30)


def test_a_local_time_is_rendered_as_the_same_instant_in_utc() -> None:
    local = datetime(2030, 9, 2, 7, 30).astimezone()
    assert format_instant(local) == "2030-09-02T02:00:00.000Z"
    assert parse_instant("2030-09-02T07:30:00+05:30") == datetime(2030, 9, 2, 2, tzinfo=UTC)


@pytest.mark.parametrize(
    "text",
    [
        "2030-09-02T02:00:00",  # no offset
        "20300902T020000Z",  # ISO 8601 basic format
        "2030-W36-1T02:00:00+00:00",  # ISO week date
        "2030-09-02 02:00:00Z",  # space instead of T
        "2030-09-02T02:00Z",  # no seconds
        "2030-09-02T02:00:00+0800",  # offset without colon
        "2030-09-02T02:00:00.000Z\n",  # trailing line break
        "\uff12\uff10\uff13\uff10-09-02T02:00:00Z",  # non-ASCII digits
    ],
)
def test_parsing_reads_only_rfc_3339_date_times(text: str) -> None:
    with pytest.raises(ValueError, match="RFC 3339"):
        parse_instant(text)


def test_parse_instant_refuses_instants_outside_the_representable_utc_range():
    for text in ("0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-14:00"):
        with pytest.raises(ValueError, match="outside years"):
            parse_instant(text)
