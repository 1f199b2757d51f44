"""Strict argument validation: no coercion, every violation as a JSON Pointer."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from expert_booking.edge.schemas import SchemaLoadError, SchemaRegistry
from expert_booking.edge.validation import (
    LONE_SURROGATE_MESSAGE,
    ecma_regex,
    json_pointer,
    validate_arguments,
)

REGISTRY = SchemaRegistry.load()
HOLD = REGISTRY["booking_hold_slot_input"].validator
CONFIRM = REGISTRY["booking_confirm_booking_input"].validator
SEARCH = REGISTRY["booking_search_available_slots_input"].validator
CALL = REGISTRY["tool_catalog_call_input"].validator
CATALOG_SEARCH = REGISTRY["tool_catalog_search_input"].validator
CATALOG_READ = REGISTRY["tool_catalog_read_input"].validator

KEY = "0b6f3c1e-3f7e-4d52-9a66-6f3f0c7b9a10"


def hold_args(**overrides: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "slotId": "slot-ai-001",
        "customer": {"name": "Zoë Ünal", "email": "Zoe.Unal@Example.COM"},
        "idempotencyKey": KEY,
    }
    args.update(overrides)
    return args


def approval(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "approvalId": KEY,
        "decision": "APPROVE",
        "approvedAt": "2030-09-01T00:00:00.000Z",
        "intent": {
            "amount": "500.00",
            "bookingId": "booking-1",
            "currency": "CNY",
            "slotId": "slot-ai-001",
            "startsAt": "2030-09-02T02:00:00.000Z",
            "version": 1,
        },
        "intentHash": "sha256:" + "0" * 64,
    }
    doc.update(overrides)
    return doc


def pointers(violations: list[dict[str, str]]) -> list[str]:
    return [violation["pointer"] for violation in violations]


def test_valid_arguments_give_no_violations_and_stay_unchanged() -> None:
    args = hold_args(customer={"name": "A", "email": "MiXeD@Case.Example", "phone": "+49 1"})
    before = copy.deepcopy(args)
    assert validate_arguments(HOLD, args) == []
    assert args == before
    assert args["customer"]["email"] == "MiXeD@Case.Example"


def test_missing_required_property_points_at_where_it_belongs() -> None:
    args = hold_args()
    del args["idempotencyKey"]
    del args["customer"]["email"]
    assert validate_arguments(HOLD, args) == [
        {"pointer": "/customer/email", "message": "is required but missing."},
        {"pointer": "/idempotencyKey", "message": "is required but missing."},
    ]


def test_unknown_fields_are_rejected_by_their_own_pointer() -> None:
    args = hold_args(extra=1)
    args["customer"]["nickname"] = "z"
    assert pointers(validate_arguments(HOLD, args)) == ["/customer/nickname", "/extra"]


def test_wrong_type_is_reported_without_coercion() -> None:
    violations = validate_arguments(HOLD, hold_args(slotId=5))
    assert violations == [{"pointer": "/slotId", "message": "must be a string."}]


@pytest.mark.parametrize("limit", ["5", True, 5.5, None])
def test_an_integer_field_refuses_strings_booleans_fractions_and_null(limit: Any) -> None:
    violations = validate_arguments(SEARCH, {"query": "", "limit": limit})
    assert pointers(violations) == ["/limit"]
    assert violations[0]["message"].startswith("must be an integer")


@pytest.mark.parametrize("number", [3.0, 1e1, 20.0])
def test_an_integral_float_is_not_an_integer(number: float) -> None:
    assert pointers(validate_arguments(SEARCH, {"query": "", "limit": number})) == ["/limit"]
    assert pointers(validate_arguments(CATALOG_SEARCH, {"query": "", "limit": number})) == [
        "/limit"
    ]
    read = {"uri": "tool://booking.hold_slot", "offset": number, "limit": 5}
    assert pointers(validate_arguments(CATALOG_READ, read)) == ["/offset"]


def test_expected_version_and_intent_version_must_be_json_integers() -> None:
    bad = approval()
    bad["intent"] = {**bad["intent"], "version": 1.0}
    args = {"bookingId": "b", "expectedVersion": 1.0, "idempotencyKey": KEY, "humanApproval": bad}
    assert pointers(validate_arguments(CONFIRM, args)) == [
        "/expectedVersion",
        "/humanApproval/intent/version",
    ]
    good = {**args, "expectedVersion": 1, "humanApproval": approval()}
    assert validate_arguments(CONFIRM, good) == []


def test_a_lone_surrogate_in_any_string_is_reported_at_its_pointer() -> None:
    args = hold_args(
        slotId="slot-\ud800",
        customer={"name": "Zoë \udfff", "email": "a@b", "note": "fine 😀 预约"},
    )
    violations = validate_arguments(HOLD, args)
    assert pointers(violations) == ["/customer/name", "/slotId"]
    assert {v["message"] for v in violations} == {LONE_SURROGATE_MESSAGE}


def test_a_lone_surrogate_in_an_object_key_is_reported_without_echoing_it() -> None:
    args = hold_args()
    args["customer"] = {**args["customer"], "x\udc00": "y"}
    violations = validate_arguments(HOLD, args)
    assert set(pointers(violations)) == {"/customer/x\ufffd"}
    for violation in violations:
        violation["pointer"].encode("utf-8")  # valid Unicode text: no surrogate sent back


def test_catalog_tool_inputs_are_checked_for_lone_surrogates_too() -> None:
    assert pointers(validate_arguments(CATALOG_SEARCH, {"query": "\ud800", "limit": 1})) == [
        "/query"
    ]
    call = {"name": "booking.\ud800", "arguments": {}, "requestSpanId": KEY}
    assert pointers(validate_arguments(CALL, call)) == ["/name"]


def test_an_opaque_member_is_left_to_its_own_schema() -> None:
    call = {"name": "booking.hold_slot", "arguments": {"slotId": "\ud800"}, "requestSpanId": KEY}
    assert pointers(validate_arguments(CALL, call)) == ["/arguments/slotId"]
    assert validate_arguments(CALL, call, opaque=("arguments",)) == []


def test_deeply_nested_text_is_checked_without_recursion() -> None:
    deep: object = "\ud800"
    for _ in range(5000):
        deep = [deep]
    call = {"name": "booking.hold_slot", "arguments": {"a": deep}, "requestSpanId": KEY}
    assert pointers(validate_arguments(CALL, call)) == ["/arguments/a" + "/0" * 5000]


def test_format_checks_fire_for_uuid_and_date_time() -> None:
    args = {
        "bookingId": "booking-1",
        "expectedVersion": 1,
        "idempotencyKey": "not-a-uuid",
        "humanApproval": approval(approvedAt="yesterday at noon", approvalId="123"),
    }
    violations = validate_arguments(CONFIRM, args)
    assert pointers(violations) == [
        "/humanApproval/approvalId",
        "/humanApproval/approvedAt",
        "/idempotencyKey",
    ]
    assert "UUID" in violations[0]["message"]
    assert "RFC 3339" in violations[1]["message"]


@pytest.mark.parametrize(
    "instant", ["2030-09-02T02:00:00", "2030-09-02", "2030-13-02T02:00:00Z", "02:00:00Z"]
)
def test_date_time_needs_a_full_rfc_3339_instant_with_offset(instant: str) -> None:
    violations = validate_arguments(SEARCH, {"query": "", "limit": 1, "startsAfter": instant})
    assert pointers(violations) == ["/startsAfter"]


def test_every_violation_is_collected_sorted_and_deduplicated() -> None:
    args = {
        "slotId": 1,
        "customer": {"name": "", "email": "x", "zip": "1"},
        "idempotencyKey": "nope",
        "z": 1,
    }
    violations = validate_arguments(HOLD, args)
    assert pointers(violations) == sorted(pointers(violations))
    assert len({(v["pointer"], v["message"]) for v in violations}) == len(violations)
    assert set(pointers(violations)) == {
        "/customer/email",
        "/customer/name",
        "/customer/zip",
        "/idempotencyKey",
        "/slotId",
        "/z",
    }


def test_messages_never_repeat_the_offending_value() -> None:
    secret = "Very Private Person " * 20
    violations = validate_arguments(HOLD, hold_args(customer={"name": secret, "email": "a@b"}))
    assert pointers(violations) == ["/customer/name"]
    assert "Very Private" not in violations[0]["message"]
    assert violations[0]["message"] == "must have at most 200 characters."


def test_enum_and_pattern_violations_name_the_rule() -> None:
    bad = approval(decision="approve", intentHash="sha256:XYZ")
    args = {"bookingId": "b", "expectedVersion": 0, "idempotencyKey": KEY, "humanApproval": bad}
    violations = {v["pointer"]: v["message"] for v in validate_arguments(CONFIRM, args)}
    assert violations == {
        "/expectedVersion": "must be >= 1.",
        "/humanApproval/decision": 'must be one of "APPROVE", "REJECT".',
        "/humanApproval/intentHash": "must match the pattern ^sha256:[0-9a-f]{64}$.",
    }


def test_a_non_object_argument_document_is_reported_at_its_pointer() -> None:
    args = {"name": "booking.get_booking", "arguments": [], "requestSpanId": KEY}
    assert validate_arguments(CALL, args) == [
        {"pointer": "/arguments", "message": "must be an object."}
    ]


def test_a_root_that_is_not_an_object_points_at_the_root() -> None:
    assert pointers(validate_arguments(HOLD, "hold please")) == [""]


def test_json_pointer_escapes_tilde_and_slash() -> None:
    assert json_pointer(["a/b", "c~d", 0]) == "/a~1b/c~0d/0"
    assert json_pointer([]) == ""


@pytest.mark.parametrize(
    ("email", "valid"),
    [
        ("Ann@Example.COM", True),
        ("a@b\n", False),  # Python's $ would match before the final newline
        ("a b@c", False),
        ("a\u00a0b@c", False),
        ("a\ufeffb@c", False),  # ECMA-262 whitespace, not Python whitespace
        ("0@\u001f", True),  # Python whitespace, not ECMA-262 whitespace
    ],
)
def test_patterns_have_ecma_262_meaning(email: str, valid: bool) -> None:
    args = hold_args(customer={"name": "A", "email": email})
    assert (validate_arguments(HOLD, args) == []) is valid


def test_currency_pattern_rejects_a_trailing_newline() -> None:
    bad = approval()
    bad["intent"] = {**bad["intent"], "currency": "CNY\n"}
    args = {"bookingId": "b", "expectedVersion": 1, "idempotencyKey": KEY, "humanApproval": bad}
    assert pointers(validate_arguments(CONFIRM, args)) == ["/humanApproval/intent/currency"]


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        (r"^\d+$", "١٢", False),  # Arabic-Indic digits are \d in Python, not in ECMA-262
        (r"^\w+$", "é", False),
        (r"^[\w-]+$", "a-b_1", True),
        (r"^\S+$", "a\u00a0", False),
        (r"^a\$$", "a$", True),
        (r"^[$]$", "$", True),
    ],
)
def test_ecma_regex_translation(pattern: str, text: str, matches: bool) -> None:
    assert (ecma_regex(pattern).search(text) is not None) is matches


@pytest.mark.parametrize(
    "document",
    [
        b'{"type": "object"}\n',
        b'{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}\n',
        b'{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array"}\n',
        b"[]\n",
    ],
)
def test_the_registry_refuses_a_document_that_is_not_a_2020_12_object_schema(
    tmp_path: Path, document: bytes
) -> None:
    (tmp_path / "doc.json").write_bytes(document)
    with pytest.raises(SchemaLoadError):
        SchemaRegistry.load(tmp_path)


def test_a_leap_second_is_refused_by_a_message_that_says_so() -> None:
    """``23:59:60Z`` has an offset; the message named the offset (agent audit finding 9)."""
    instance = {"query": "AI", "limit": 5, "startsAfter": "2030-06-30T23:59:60Z"}
    [violation] = validate_arguments(SEARCH, instance)
    assert violation["pointer"] == "/startsAfter"
    assert "no leap second" in violation["message"]
