"""The result envelope, the single error mapper, and the wire mapping of commands and results."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import mcp_types as types
import pytest
from mcp_types.methods import serialize_server_result

from expert_booking.domain.errors import (
    BookingError,
    BookingExpiredError,
    InvalidArgumentsError,
    PaymentPendingError,
    SlotUnavailableError,
)
from expert_booking.domain.model import (
    BookingStatus,
    Customer,
    Money,
    Payment,
    PaymentStatus,
)
from expert_booking.edge import tool_registry, wire
from expert_booking.edge.envelope import build_meta, failure, guarded, success, to_call_result
from expert_booking.edge.error_texts import recovery_of
from expert_booking.edge.schemas import SchemaRegistry
from expert_booking.edge.wire_time import (
    CLIENT_SENT_META,
    SERVER_RECEIVED_META,
    SERVER_RESULT_CREATED_META,
)
from expert_booking.services import SlotPage
from tests.fakes import T0, make_booking, make_slot

pytestmark = pytest.mark.anyio

REGISTRY = SchemaRegistry.load()
KEY = "0b6f3c1e-3f7e-4d52-9a66-6f3f0c7b9a10"
META = build_meta(
    trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
    span_id="00f067aa0ba902b7",
    operation_id="8d0c5c1e-2c0b-4a53-8f0e-3b8c3a6f2d11",
    client_sent_at="2030-09-01T00:00:00.000Z",
    server_received_at="2030-09-01T00:00:00.001Z",
    server_result_created_at="2030-09-01T00:00:00.002Z",
    cache="BYPASS",
)


def assert_valid(stem: str, instance: Any) -> None:
    validator = REGISTRY[stem].validator
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(instance)]
    assert errors == [], errors


def test_meta_uses_the_wire_time_key_names() -> None:
    assert {CLIENT_SENT_META, SERVER_RECEIVED_META, SERVER_RESULT_CREATED_META} <= set(META)
    assert META[SERVER_RESULT_CREATED_META] == "2030-09-01T00:00:00.002Z"


def test_success_envelope_matches_the_contract() -> None:
    envelope = success({"items": [], "total": 0, "nextCursor": None}, META)
    assert envelope == {"ok": True, "data": envelope["data"], "meta": META}
    assert_valid("envelope", envelope)


def test_failure_envelope_carries_code_retry_rule_details_and_recovery() -> None:
    envelope = failure(PaymentPendingError(bookingId="booking-x"), META, wire.render_booking)
    assert envelope["error"] == {
        "code": "PAYMENT_PENDING",
        "message": "Payment has not completed; the booking remains held until expiresAt.",
        "retryable": True,
        "details": {"bookingId": "booking-x"},
        "recovery": {"action": recovery_of(PaymentPendingError())},
    }
    assert_valid("envelope", envelope)


def test_a_booking_on_an_error_is_rendered_into_details() -> None:
    booking = make_booking(status=BookingStatus.EXPIRED, version=2)
    envelope = failure(
        BookingExpiredError(bookingId=booking.booking_id, booking=booking),
        META,
        wire.render_booking,
    )
    assert envelope["error"]["details"]["booking"] == wire.render_booking(booking)
    assert envelope["error"]["details"]["booking"]["confirmationIntent"] is None
    assert_valid("envelope", envelope)


async def test_guarded_passes_booking_errors_through_unchanged() -> None:
    error = SlotUnavailableError(slotId="slot-ai-001")

    async def refuse() -> None:
        raise error

    assert await guarded(refuse, operation_id="op-1") is error


async def test_guarded_turns_anything_else_into_a_bare_internal_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def explode() -> None:
        raise RuntimeError("SELECT secret FROM /var/lib/booking.db")

    with caplog.at_level(logging.ERROR, logger="expert_booking.edge"):
        mapped = await guarded(explode, operation_id="op-42")
    assert isinstance(mapped, BookingError)
    envelope = failure(mapped, META, wire.render_booking)
    assert envelope["error"]["code"] == "INTERNAL_ERROR"
    assert envelope["error"]["message"] == "An unexpected error occurred."
    assert envelope["error"]["details"] == {"operationId": "op-42"}
    assert "secret" not in json.dumps(envelope)
    assert "Traceback" not in json.dumps(envelope)
    assert "op-42" in caplog.text
    assert caplog.records[0].exc_info is not None  # the stack trace goes to the log only


async def test_guarded_returns_the_result_of_a_successful_run() -> None:
    async def work() -> int:
        return 7

    assert await guarded(work, operation_id="op") == 7


def test_call_result_is_what_the_sdk_sends_for_the_protocol_version() -> None:
    """The SDK checks a handler's dict against the 2026-07-28 result schema and sends its dump."""
    wire_result = to_call_result(success({"summary": "预约 Bestätigung"}, META))
    assert serialize_server_result("tools/call", "2026-07-28", wire_result) == wire_result


def test_call_result_mirrors_the_envelope_as_structured_and_text_content() -> None:
    envelope = success({"summary": "预约 Bestätigung"}, META)
    result = types.CallToolResult.model_validate(to_call_result(envelope))
    assert result.structured_content == envelope
    assert result.is_error is False
    assert len(result.content) == 1
    text = result.content[0].text  # type: ignore[union-attr]
    assert json.loads(text) == envelope
    assert "预约 Bestätigung" in text
    assert ": " not in text

    failed = to_call_result(failure(PaymentPendingError(), META, wire.render_booking))
    assert types.CallToolResult.model_validate(failed).is_error is True


def test_held_booking_snapshot_has_every_contract_key_and_a_valid_intent() -> None:
    booking = make_booking()
    snapshot = wire.render_booking(booking)
    assert_valid("booking_snapshot", snapshot)
    assert snapshot["startsAt"] == "2030-09-02T02:00:00.000Z"
    assert snapshot["customer"] == {"name": "Ada Lovelace", "email": "Ada.Lovelace@Example.com"}
    assert snapshot["payment"] == {
        "queryId": booking.booking_id,
        "status": "PENDING",
        "amount": "500.00",
        "currency": "CNY",
        "paidAt": None,
    }
    challenge = snapshot["confirmationIntent"]
    canonical = json.dumps(challenge["intent"], sort_keys=True, separators=(",", ":"))
    assert canonical.encode() == booking.intent.canonical_bytes()
    assert challenge["intentHash"] == booking.intent.digest()


def test_confirmed_snapshot_shows_payment_and_no_intent() -> None:
    paid_at = T0 + timedelta(seconds=30)
    booking = make_booking(
        status=BookingStatus.CONFIRMED,
        version=2,
        confirmed_at=paid_at,
        customer=Customer(name="Zoë", email="Z@X.ORG", phone="", note="Bitte pünktlich"),
        payment=Payment("booking-x", PaymentStatus.PAID, Money("500.00", "CNY"), paid_at),
    )
    snapshot = wire.render_booking(booking)
    assert_valid("booking_snapshot", snapshot)
    assert snapshot["confirmationIntent"] is None
    assert snapshot["confirmedAt"] == "2030-09-01T00:00:30.000Z"
    assert snapshot["payment"]["paidAt"] == "2030-09-01T00:00:30.000Z"
    assert snapshot["customer"] == {
        "name": "Zoë",
        "email": "Z@X.ORG",
        "phone": "",
        "note": "Bitte pünktlich",
    }


def test_slot_page_renders_the_slot_search_result() -> None:
    slot = make_slot()
    data = wire.render_slot_page(SlotPage((slot,), total=3, next_cursor="abc", cache_hit=False))
    assert_valid("slot_search_result", data)
    assert data["slots"][0] == {
        "slotId": "slot-ai-001",
        "expertId": "exp-ai-001",
        "expertName": "Dr. Lin Wei",
        "specialty": "AI",
        "startsAt": "2030-09-02T02:00:00.000Z",
        "endsAt": "2030-09-02T03:00:00.000Z",
        "price": {"amount": "500.00", "currency": "CNY"},
    }


def test_hold_command_keeps_the_customer_exactly_and_absent_keys_absent() -> None:
    args = {
        "slotId": "slot-ai-001",
        "customer": {"name": "  Ann  ", "email": "ANN@Example.COM"},
        "idempotencyKey": KEY,
    }
    command = tool_registry.hold_command(args)
    assert command.customer == Customer(name="  Ann  ", email="ANN@Example.COM")
    booking = make_booking(customer=command.customer)
    assert wire.render_booking(booking)["customer"] == args["customer"]


def test_confirm_command_parses_the_approval_and_keeps_the_intent_strings() -> None:
    booking = make_booking()
    intent = wire.render_intent(booking.intent)
    args = {
        "bookingId": booking.booking_id,
        "expectedVersion": 1,
        "idempotencyKey": KEY,
        "humanApproval": {
            "approvalId": KEY,
            "decision": "APPROVE",
            "approvedAt": "2030-09-01T08:00:00+08:00",
            "intent": intent,
            "intentHash": booking.intent.digest(),
        },
    }
    command = tool_registry.confirm_command(args)
    assert command.expected_version == 1
    assert isinstance(command.expected_version, int)
    assert command.human_approval is not None
    assert command.human_approval.approved_at == datetime(2030, 9, 1, tzinfo=UTC)
    assert command.human_approval.intent == booking.intent
    assert command.human_approval.intent.digest() == booking.intent.digest()
    without = {key: value for key, value in args.items() if key != "humanApproval"}
    assert tool_registry.confirm_command(without).human_approval is None


def test_search_command_maps_filters_and_rejects_an_unparsable_instant() -> None:
    command = tool_registry.search_command(
        {"query": "AI", "limit": 5, "startsAfter": "2030-09-02T00:00:00Z", "cursor": "c"}
    )
    assert command.query.starts_after == datetime(2030, 9, 2, tzinfo=UTC)
    assert command.query.starts_before is None
    assert command.query.specialty is None
    assert (command.limit, command.cursor) == (5, "c")
    with pytest.raises(InvalidArgumentsError) as excinfo:
        tool_registry.search_command(
            {"query": "", "limit": 1, "startsBefore": "2030-12-31T23:59:60Z"}
        )
    assert [v["pointer"] for v in excinfo.value.details["violations"]] == ["/startsBefore"]
