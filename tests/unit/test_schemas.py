"""The canonical JSON Schemas in schemas/ and the contract gate's breaking-change diff."""

from __future__ import annotations

import copy
import importlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped, unused-ignore]

from expert_booking.adapters.payments_http import MAX_ANSWER_BYTES
from expert_booking.domain.conflicts import ALTERNATIVES_LIMIT
from expert_booking.domain.errors import ErrorCode, PaymentPendingError
from expert_booking.domain.model import BookingStatus, Intent, PaymentStatus
from expert_booking.edge.error_texts import ERROR_TEXTS
from expert_booking.edge.observability import CacheStatus
from expert_booking.edge.tool_registry import LOGICAL_TOOLS
from expert_booking.settings import SETTING_NAMES, Settings
from harness.contract import document_directions, drift, major_version, walk
from harness.schema_breaking import Direction, breaking_changes
from tests.listed_errors import listed_errors

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
DOCUMENT_KEYS = ("$schema", "$id", "$defs")

# The catalog tools' documents, the shared ones, and each logical tool's input and result.
EXPECTED_DOCUMENTS = {
    "tool_catalog_search_input",
    "tool_catalog_read_input",
    "tool_catalog_call_input",
    "tool_catalog_search_result",
    "tool_catalog_read_result",
    "slot",
    "envelope",
    "error",
    "confirmation_intent",
    "human_approval",
    "payment_answer",
    *(tool.input_schema for tool in LOGICAL_TOOLS),
    *(tool.result_schema for tool in LOGICAL_TOOLS),
}


def _load_all() -> dict[str, dict[str, Any]]:
    return {
        path.stem: json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(SCHEMAS.glob("*.json"))
    }


DOCUMENTS = _load_all()


def _validator(stem: str) -> Draft202012Validator:
    return Draft202012Validator(DOCUMENTS[stem], format_checker=Draft202012Validator.FORMAT_CHECKER)


def _error_paths(stem: str, instance: Any) -> set[str]:
    return {
        "/" + "/".join(str(part) for part in error.absolute_path)
        for error in _validator(stem).iter_errors(instance)
    }


def _intent() -> dict[str, Any]:
    return {
        "amount": "500.00",
        "bookingId": "booking-6f1c2a9e4b7d4e0f8a3c5d2e1b0a9f8e",
        "currency": "CNY",
        "slotId": "slot-ai-001",
        "startsAt": "2030-09-02T02:00:00.000Z",
        "version": 1,
    }


def _intent_hash(intent: dict[str, Any]) -> str:
    return Intent(
        booking_id=intent["bookingId"],
        slot_id=intent["slotId"],
        starts_at=intent["startsAt"],
        amount=intent["amount"],
        currency=intent["currency"],
        version=intent["version"],
    ).digest()


def _approval() -> dict[str, Any]:
    intent = _intent()
    return {
        "approvalId": "2b7e1516-28ae-4d2a-9f5c-8a4b3c2d1e0f",
        "decision": "APPROVE",
        "approvedAt": "2030-09-01T09:30:00.000Z",
        "intent": intent,
        "intentHash": _intent_hash(intent),
    }


def _confirm_arguments() -> dict[str, Any]:
    return {
        "bookingId": _intent()["bookingId"],
        "expectedVersion": 1,
        "idempotencyKey": "7d444840-9dc0-11d1-b245-5ffdce74fad2",
        "humanApproval": _approval(),
    }


def _hold_arguments() -> dict[str, Any]:
    return {
        "slotId": "slot-ai-001",
        "customer": {"name": "Li Wei", "email": "Li.Wei@Example.com", "phone": "+86 10 1234"},
        "idempotencyKey": "0f8fad5b-d9cb-469f-a165-70867728950e",
    }


def _snapshot() -> dict[str, Any]:
    intent = _intent()
    return {
        "bookingId": intent["bookingId"],
        "slotId": "slot-ai-001",
        "expertId": "expert-ai",
        "startsAt": "2030-09-02T02:00:00.000Z",
        "endsAt": "2030-09-02T03:00:00.000Z",
        "customer": {"name": "Li Wei", "email": "Li.Wei@Example.com"},
        "status": "HELD",
        "version": 1,
        "heldAt": "2030-09-01T09:29:00.000Z",
        "expiresAt": "2030-09-01T09:34:00.000Z",
        "confirmedAt": None,
        "paymentPageUrl": f"http://127.0.0.1:3100/pay/{intent['bookingId']}",
        "payment": {
            "queryId": intent["bookingId"],
            "status": "PENDING",
            "amount": "500.00",
            "currency": "CNY",
            "paidAt": None,
        },
        "refundDue": False,
        "confirmationIntent": {"intent": intent, "intentHash": _intent_hash(intent)},
        "history": [],
        "cancelledAt": None,
    }


def _meta() -> dict[str, Any]:
    return {
        "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
        "spanId": "00f067aa0ba902b7",
        "operationId": "9b2d3c4e-5f60-4718-8a9b-0c1d2e3f4a5b",
        "clientSentAt": "2030-09-01T09:29:00.000Z",
        "serverReceivedAt": "2030-09-01T09:29:00.002Z",
        "serverResultCreatedAt": "2030-09-01T09:29:00.010Z",
        "cache": "BYPASS",
    }


# ------------------------------------------------------------------------- document rules


def test_schemas_folder_holds_exactly_the_contract_documents():
    assert set(DOCUMENTS) == EXPECTED_DOCUMENTS


@pytest.mark.parametrize("stem", sorted(EXPECTED_DOCUMENTS))
def test_schema_is_a_valid_draft_2020_12_object_document_with_versioned_id(stem):
    document = DOCUMENTS[stem]
    Draft202012Validator.check_schema(document)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert document["$id"].startswith(f"urn:expert-booking:schema:{stem}:v")
    assert major_version(document) is not None
    assert document["type"] == "object"
    assert document["title"]
    assert document["description"]


@pytest.mark.parametrize("stem", sorted(EXPECTED_DOCUMENTS))
def test_every_object_with_properties_forbids_additional_properties(stem):
    open_objects = [
        pointer
        for pointer, node in walk(DOCUMENTS[stem])
        if node.get("type") == "object"
        and "properties" in node
        and node.get("additionalProperties") is not False
    ]
    assert open_objects == []


@pytest.mark.parametrize("stem", sorted(EXPECTED_DOCUMENTS))
def test_every_reference_is_local_and_points_into_the_same_document(stem):
    document = DOCUMENTS[stem]
    for _, node in walk(document):
        ref = node.get("$ref")
        if ref is None:
            continue
        assert ref.startswith("#/$defs/"), ref
        assert ref.removeprefix("#/$defs/") in document["$defs"], ref


@pytest.mark.parametrize("stem", sorted(EXPECTED_DOCUMENTS))
def test_schema_file_is_in_canonical_json_formatting(stem):
    text = (SCHEMAS / f"{stem}.json").read_text(encoding="utf-8")
    assert text == json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("stem", sorted(EXPECTED_DOCUMENTS))
def test_every_property_has_a_description_for_the_reading_model(stem):
    undocumented = [
        f"{pointer}/properties/{name}"
        for pointer, node in walk(DOCUMENTS[stem])
        if isinstance(node.get("properties"), dict)
        for name, schema in node["properties"].items()
        if not schema.get("description")
    ]
    assert undocumented == []


def test_defs_copies_of_a_document_equal_that_document():
    compared: set[tuple[str, str]] = set()
    for host_stem, host in DOCUMENTS.items():
        for name, copied in host.get("$defs", {}).items():
            if name not in DOCUMENTS:
                continue
            canonical = copy.deepcopy(DOCUMENTS[name])
            nested_defs = canonical.get("$defs", {})
            for key in DOCUMENT_KEYS:
                canonical.pop(key, None)
            assert copied == canonical, f"{host_stem}: $defs/{name} differs from {name}.json"
            for nested_name, nested in nested_defs.items():
                assert host["$defs"].get(nested_name) == nested, (
                    f"{host_stem}: $defs/{nested_name} needed by $defs/{name} differs"
                )
            compared.add((host_stem, name))
    assert compared == {
        ("booking_confirm_booking_input", "human_approval"),
        ("booking_snapshot", "confirmation_intent"),
        ("booking_list_result", "booking_snapshot"),
        ("booking_list_result", "confirmation_intent"),
        ("envelope", "error"),
        ("envelope", "slot"),
        ("error", "slot"),
        ("slot_search_result", "slot"),
    }


def test_shared_defs_are_identical_in_every_document_that_repeats_them():
    seen: dict[str, tuple[str, Any]] = {}
    for stem, document in DOCUMENTS.items():
        for name, definition in document.get("$defs", {}).items():
            first = seen.setdefault(name, (stem, definition))
            assert definition == first[1], f"$defs/{name} differs in {stem} and {first[0]}"
    assert {"customer", "intent", "meta", "money", "payment"} <= seen.keys()


@pytest.mark.parametrize(
    "stem",
    sorted(stem for stem in EXPECTED_DOCUMENTS if stem.endswith("_input") and "call" not in stem),
)
def test_every_tool_description_ends_with_the_error_codes_it_can_answer(stem):
    # Which codes are reachable is checked where refusals happen (``tests/listed_errors.py``).
    listed = listed_errors(stem)
    assert listed <= set(ErrorCode)
    assert ErrorCode.INVALID_ARGUMENTS in listed


_STATED_DEFAULT = re.compile(r"(\d+) seconds (?:of clock skew )?by default[,( ]+([A-Z_]+)")


def test_the_defaults_the_schema_texts_state_are_the_servers_defaults():
    """A model is told the defaults in schema text; they must be the ones the server runs with."""
    defaults = Settings()
    stated = [
        (stem, match.group(2), int(match.group(1)))
        for stem, document in DOCUMENTS.items()
        for _, node in walk(document)
        for text in node.values()
        if isinstance(text, str)
        for match in _STATED_DEFAULT.finditer(text)
    ]
    assert {variable for _, variable, _ in stated} >= {
        "HOLD_TTL_SECONDS",
        "APPROVAL_TTL_SECONDS",
        "APPROVAL_CLOCK_SKEW_SECONDS",
        "SLOT_CACHE_TTL_SECONDS",
    }
    for stem, variable, seconds in stated:
        assert variable in SETTING_NAMES, (stem, variable)
        assert getattr(defaults, variable.lower()) == seconds, (stem, variable)
    limits = {stem for stem, document in DOCUMENTS.items() if "64 KiB" in json.dumps(document)}
    assert limits == {"booking_confirm_booking_input", "payment_answer"}
    assert MAX_ANSWER_BYTES == 64 * 1024


def test_error_schema_lists_every_code_of_the_error_catalog():
    assert DOCUMENTS["error"]["properties"]["code"]["enum"] == list(ErrorCode)


def test_the_alternatives_cap_of_the_schemas_is_the_domains_limit():
    caps = [
        (stem, node["properties"]["alternatives"].get("maxItems"))
        for stem, document in DOCUMENTS.items()
        for _, node in walk(document)
        if isinstance(node.get("properties"), dict) and "alternatives" in node["properties"]
    ]
    assert sorted(caps) == [("envelope", ALTERNATIVES_LIMIT), ("error", ALTERNATIVES_LIMIT)]


def _enums_at(property_name: str) -> list[tuple[str, str, list[Any]]]:
    """Every ``enum`` of a property named ``property_name``, in every document."""
    return [
        (stem, pointer, node["properties"][property_name]["enum"])
        for stem, document in DOCUMENTS.items()
        for pointer, node in walk(document)
        if isinstance(node.get("properties"), dict)
        and "enum" in node["properties"].get(property_name, {})
    ]


def test_the_booking_status_enum_of_the_schemas_is_the_domain_enum():
    statuses = [
        (stem, pointer, enum)
        for stem, pointer, enum in _enums_at("status")
        if "HELD" in enum or "CONFIRMED" in enum
    ]
    assert statuses
    for stem, pointer, enum in statuses:
        assert enum == [status.value for status in BookingStatus], (stem, pointer)


def test_the_cache_enum_of_the_envelope_is_the_edges_enum():
    [(_, _, enum)] = _enums_at("cache")
    assert enum == [status.value for status in CacheStatus]


def test_the_payment_status_enum_of_the_schemas_is_the_domain_enum():
    statuses = [
        (stem, pointer, enum) for stem, pointer, enum in _enums_at("status") if "PAID" in enum
    ]
    assert {stem for stem, _, _ in statuses} >= {"booking_snapshot", "payment_answer"}
    for stem, pointer, enum in statuses:
        assert enum == [status.value for status in PaymentStatus], (stem, pointer)


def test_every_error_code_enum_of_the_schemas_is_the_error_catalog():
    codes = _enums_at("code")
    assert {stem for stem, _, _ in codes} >= {"error", "envelope"}
    for stem, pointer, enum in codes:
        assert enum == list(ErrorCode), (stem, pointer)


def test_booking_snapshot_requires_every_field():
    snapshot = DOCUMENTS["booking_snapshot"]
    assert snapshot["required"] == list(snapshot["properties"])


def test_mcp_tool_inputs_require_their_mandatory_arguments():
    assert DOCUMENTS["tool_catalog_search_input"]["required"] == ["query", "limit"]
    assert DOCUMENTS["tool_catalog_read_input"]["required"] == ["uri", "offset", "limit"]
    assert DOCUMENTS["tool_catalog_call_input"]["required"] == [
        "name",
        "arguments",
        "requestSpanId",
    ]


# ------------------------------------------------------------------------------- examples


def test_seed_human_approval_example_validates():
    assert _error_paths("human_approval", _approval()) == set()


def test_seed_human_approval_validates_inside_confirm_booking_arguments():
    assert _error_paths("booking_confirm_booking_input", _confirm_arguments()) == set()


def test_confirm_booking_arguments_without_human_approval_pass_the_schema():
    arguments = _confirm_arguments()
    del arguments["humanApproval"]
    assert _error_paths("booking_confirm_booking_input", arguments) == set()


def test_intent_hash_of_the_seed_example_matches_the_hash_pattern():
    assert _validator("confirmation_intent").is_valid(
        {"intent": _intent(), "intentHash": _intent_hash(_intent())}
    )
    assert not _validator("confirmation_intent").is_valid(
        {"intent": _intent(), "intentHash": _intent_hash(_intent()).upper()}
    )


def _with(arguments: dict[str, Any], pointer: str, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(arguments)
    *parents, last = pointer.strip("/").split("/")
    node = changed
    for part in parents:
        node = node[part]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return changed


_DELETE = object()


@pytest.mark.parametrize(
    ("pointer", "value", "reported_at"),
    [
        ("/idempotencyKey", "not-a-uuid", "/idempotencyKey"),
        ("/idempotencyKey", "7d4448409dc011d1b2455ffdce74fad2", "/idempotencyKey"),
        ("/humanApproval/intent/amount", "500", "/humanApproval/intent/amount"),
        ("/humanApproval/intent/amount", 500.0, "/humanApproval/intent/amount"),
        ("/humanApproval/intent/currency", "cny", "/humanApproval/intent/currency"),
        ("/humanApproval/approvedAt", "2030-09-01 09:30", "/humanApproval/approvedAt"),
        ("/humanApproval/decision", "approve", "/humanApproval/decision"),
        ("/humanApproval/intentHash", "sha256:abc", "/humanApproval/intentHash"),
        ("/humanApproval/note", "extra", "/humanApproval"),
        ("/extra", 1, "/"),
        ("/expectedVersion", True, "/expectedVersion"),
        ("/expectedVersion", "1", "/expectedVersion"),
        ("/expectedVersion", 0, "/expectedVersion"),
        ("/humanApproval/intent/version", True, "/humanApproval/intent/version"),
        ("/idempotencyKey", _DELETE, "/"),
        ("/humanApproval/intentHash", _DELETE, "/humanApproval"),
    ],
)
def test_confirm_booking_arguments_are_rejected_without_coercion(pointer, value, reported_at):
    arguments = _with(_confirm_arguments(), pointer, value)
    assert _error_paths("booking_confirm_booking_input", arguments) == {reported_at}


@pytest.mark.parametrize(
    ("arguments", "reported_at"),
    [
        ({"query": "AI", "limit": "5"}, "/limit"),
        ({"query": "AI", "limit": 5.5}, "/limit"),
        ({"query": "AI", "limit": True}, "/limit"),
        ({"query": "AI", "limit": 0}, "/limit"),
        ({"query": "AI", "limit": 51}, "/limit"),
        ({"query": "AI"}, "/"),
        ({"query": "AI", "limit": 5, "startsAfter": "tomorrow"}, "/startsAfter"),
        ({"query": "x" * 201, "limit": 5}, "/query"),
        ({"query": "AI", "limit": 5, "sort": "price"}, "/"),
    ],
)
def test_slot_search_arguments_are_rejected_without_coercion(arguments, reported_at):
    assert _error_paths("booking_search_available_slots_input", arguments) == {reported_at}


def test_slot_search_arguments_with_every_filter_validate():
    arguments = {
        "query": "人工智能",
        "limit": 50,
        "specialty": "AI",
        "startsAfter": "2030-09-01T00:00:00.000Z",
        "startsBefore": "2030-09-03T00:00:00+08:00",
        "cursor": "eyJvIjo1fQ",
    }
    assert _error_paths("booking_search_available_slots_input", arguments) == set()


def test_hold_arguments_keep_email_case_and_accept_optional_phone():
    assert _error_paths("booking_hold_slot_input", _hold_arguments()) == set()


@pytest.mark.parametrize(
    ("pointer", "value", "reported_at"),
    [
        ("/customer/email", "li.wei.example.com", "/customer/email"),
        ("/customer/email", "li wei@example.com", "/customer/email"),
        ("/customer/name", "", "/customer/name"),
        ("/customer/phone", None, "/customer/phone"),
        ("/customer/age", 30, "/customer"),
        ("/idempotencyKey", 12345, "/idempotencyKey"),
        ("/slotId", _DELETE, "/"),
    ],
)
def test_hold_arguments_are_rejected_when_malformed(pointer, value, reported_at):
    arguments = _with(_hold_arguments(), pointer, value)
    assert _error_paths("booking_hold_slot_input", arguments) == {reported_at}


@pytest.mark.parametrize(
    ("stem", "arguments"),
    [
        ("tool_catalog_search_input", {"query": "", "limit": 20}),
        ("tool_catalog_read_input", {"uri": "tool://booking.hold_slot", "offset": 0, "limit": 200}),
        (
            "tool_catalog_call_input",
            {
                "name": "booking.get_booking",
                "arguments": {"bookingId": "booking-1", "anything": ["goes", 1]},
                "requestSpanId": "6a2f41a3-c54c-4c8b-9a5d-0e9f1b2c3d4e",
            },
        ),
        ("booking_get_booking_input", {"bookingId": "booking-1"}),
    ],
)
def test_catalog_and_get_arguments_validate(stem, arguments):
    assert _error_paths(stem, arguments) == set()


@pytest.mark.parametrize(
    ("stem", "arguments", "reported_at"),
    [
        ("tool_catalog_search_input", {"query": "", "limit": 21}, "/limit"),
        ("tool_catalog_read_input", {"uri": "tool://booking.hold_slot", "offset": 0}, "/"),
        ("tool_catalog_read_input", {"uri": "booking.hold_slot", "offset": 0, "limit": 5}, "/uri"),
        ("tool_catalog_read_input", {"uri": "tool://a.b", "offset": -1, "limit": 5}, "/offset"),
        ("tool_catalog_call_input", {"name": "booking.get_booking", "arguments": {}}, "/"),
        (
            "tool_catalog_call_input",
            {"name": "x", "arguments": [], "requestSpanId": "6a2f41a3-c54c-4c8b-9a5d-0e9f1b2c3d4e"},
            "/arguments",
        ),
    ],
)
def test_catalog_arguments_are_rejected_when_malformed(stem, arguments, reported_at):
    assert _error_paths(stem, arguments) == {reported_at}


def test_held_booking_snapshot_validates():
    assert _error_paths("booking_snapshot", _snapshot()) == set()


def test_confirmed_booking_snapshot_has_no_confirmation_intent_and_validates():
    snapshot = _snapshot()
    snapshot.update(status="CONFIRMED", version=2, confirmedAt="2030-09-01T09:31:00.000Z")
    snapshot["payment"].update(status="PAID", paidAt="2030-09-01T09:30:30.000Z")
    snapshot["confirmationIntent"] = None
    assert _error_paths("booking_snapshot", snapshot) == set()


def test_success_and_error_envelopes_validate_and_a_mixed_one_does_not():
    success = {"ok": True, "data": _snapshot(), "meta": _meta()}
    text = ERROR_TEXTS[ErrorCode.PAYMENT_PENDING]
    error = {
        "code": "PAYMENT_PENDING",
        "message": "Payment has not completed; the booking remains held until expiresAt.",
        "retryable": PaymentPendingError.retryable,
        "details": {"bookingId": "booking-1"},
        "recovery": {"action": text.recovery},
    }
    failure = {"ok": False, "error": error, "meta": _meta()}
    assert _validator("envelope").is_valid(success)
    assert _validator("envelope").is_valid(failure)
    assert _validator("error").is_valid(error)
    assert not _validator("envelope").is_valid({**failure, "ok": True})
    assert not _validator("envelope").is_valid({**success, "error": error})
    assert not _validator("envelope").is_valid({**failure, "meta": {**_meta(), "cache": "NONE"}})


def test_payment_answer_accepts_any_amount_string_so_a_mismatch_is_reported_later():
    answer = {
        "bookingId": "booking-1",
        "status": "PAID",
        "amount": "500.0",
        "currency": "CNY",
        "paidAt": "2030-09-01T09:30:30.000Z",
    }
    assert _error_paths("payment_answer", answer) == set()
    assert _error_paths("payment_answer", {**answer, "status": "REFUNDED"}) == {"/status"}
    assert _error_paths("payment_answer", {**answer, "amount": 500}) == {"/amount"}


def test_read_result_next_is_either_a_page_or_null():
    page = {
        "uri": "tool://booking.hold_slot",
        "lines": ["{", '  "type": "object"'],
        "offset": 0,
        "totalLines": 3,
        "truncated": True,
        "omittedLines": 1,
        "next": {"offset": 2, "limit": 2},
        "continuation": "Call tool_catalog.read with offset 2 to read on.",
        "sha256": "a" * 64,
        "catalogVersion": "0123456789abcdef",
    }
    assert _error_paths("tool_catalog_read_result", page) == set()
    assert _error_paths("tool_catalog_read_result", {**page, "next": None}) == set()
    assert _error_paths("tool_catalog_read_result", {**page, "next": {"offset": 2}}) == {"/next"}


@pytest.mark.parametrize("stem", sorted(EXPECTED_DOCUMENTS))
def test_generated_module_exposes_a_model_named_after_its_schema(stem):
    try:
        module = importlib.import_module(f"expert_booking_contract.{stem}")
    except ModuleNotFoundError:
        pytest.fail(f"generated/expert_booking_contract has no {stem}.py: run `nox -s codegen`")
    class_name = "".join(part.title() for part in stem.split("_"))
    assert hasattr(module, class_name)


def test_generated_models_accept_the_examples_the_schemas_accept():
    from expert_booking_contract.booking_confirm_booking_input import BookingConfirmBookingInput
    from expert_booking_contract.booking_snapshot import BookingSnapshot
    from expert_booking_contract.envelope import Envelope

    confirm = BookingConfirmBookingInput.model_validate(_confirm_arguments())
    assert confirm.humanApproval is not None
    assert confirm.humanApproval.intentHash == _approval()["intentHash"]
    assert BookingSnapshot.model_validate(_snapshot()).confirmationIntent is not None
    envelope = Envelope.model_validate({"ok": True, "data": {}, "meta": _meta()})
    assert envelope.root.ok is True


# ----------------------------------------------------------------------- breaking changes

_BASE: dict[str, Any] = {
    "$id": "urn:expert-booking:schema:example:v1",
    "type": "object",
    "required": ["slotId"],
    "properties": {
        "slotId": {"type": "string", "maxLength": 50},
        "status": {"type": "string", "enum": ["HELD", "CONFIRMED"]},
        "count": {"type": ["integer", "null"], "minimum": 0},
        "items": {"type": "array", "items": {"$ref": "#/$defs/thing"}},
    },
    "$defs": {
        "thing": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
        }
    },
}


def _changed(pointer: str, value: Any) -> dict[str, Any]:
    return _with(_BASE, pointer, value)


def test_identical_schemas_have_no_breaking_change():
    assert breaking_changes(_BASE, copy.deepcopy(_BASE)) == []


@pytest.mark.parametrize("stem", sorted(EXPECTED_DOCUMENTS))
def test_committed_schema_compared_with_itself_has_no_breaking_change(stem):
    both = Direction.RECEIVED | Direction.SENT
    assert breaking_changes(DOCUMENTS[stem], copy.deepcopy(DOCUMENTS[stem]), direction=both) == []


def test_adding_an_optional_property_is_not_breaking():
    new = _changed("/properties/note", {"type": "string"})
    assert breaking_changes(_BASE, new) == []


def test_loosening_bounds_enum_and_types_is_not_breaking():
    new = _changed("/properties/slotId", {"type": "string", "maxLength": 100})
    new["properties"]["status"]["enum"].append("EXPIRED")
    new["properties"]["count"] = {"type": ["integer", "null", "string"]}
    new["required"] = []
    assert breaking_changes(_BASE, new) == []


def test_removed_property_is_breaking():
    new = _changed("/properties/status", _DELETE)
    assert breaking_changes(_BASE, new) == ["/: property 'status' removed or renamed"]


def test_newly_required_property_is_breaking():
    new = _changed("/required", ["slotId", "status"])
    assert breaking_changes(_BASE, new) == ["/: property 'status' is newly required"]


def test_new_required_property_is_breaking():
    new = _changed("/properties/note", {"type": "string"})
    new["required"].append("note")
    assert breaking_changes(_BASE, new) == ["/: property 'note' is newly required"]


def test_a_new_required_property_of_a_result_breaks_no_caller():
    new = _changed("/$defs/thing/properties/size", {"type": "integer"})
    new["required"].append("note")
    new["properties"]["note"] = {"type": "string"}
    new["$defs"]["thing"]["required"] = ["size"]

    assert breaking_changes(_BASE, new, direction=Direction.SENT) == []


def test_a_result_property_that_existed_and_becomes_required_is_still_judged():
    new = _changed("/required", ["slotId", "status"])
    assert breaking_changes(_BASE, new, direction=Direction.SENT) == [
        "/: property 'status' is newly required"
    ]


_RECEIVED, _SENT = Direction.RECEIVED, Direction.SENT


# The documents no registry entry names as its own input or result: the catalog tools', the
# payment service's answer, and what the envelopes, errors and results embed.
_SHARED_DIRECTIONS = {
    "tool_catalog_call_input": _RECEIVED,
    "tool_catalog_read_input": _RECEIVED,
    "tool_catalog_search_input": _RECEIVED,
    "payment_answer": _RECEIVED,
    "human_approval": _RECEIVED,
    "booking_snapshot": _SENT,
    "confirmation_intent": _SENT,
    "envelope": _SENT,
    "error": _SENT,
    "slot": _SENT,
    "tool_catalog_read_result": _SENT,
    "tool_catalog_search_result": _SENT,
}


def _expected_directions() -> dict[str, Direction]:
    """Each logical tool's input is received and its result sent; the shared ones as listed."""
    expected = dict(_SHARED_DIRECTIONS)
    for tool in LOGICAL_TOOLS:
        for stem, direction in ((tool.input_schema, _RECEIVED), (tool.result_schema, _SENT)):
            assert expected.setdefault(stem, direction) == direction, (
                f"{stem} is both received and sent ({tool.name})"
            )
    return expected


def test_every_schema_file_is_classified_by_who_reads_it():
    """Received: the inputs, the payment service's answer, what they embed; sent: the rest."""
    assert document_directions(DOCUMENTS) == _expected_directions()


def test_narrowed_enum_is_breaking():
    new = _changed("/properties/status/enum", ["HELD"])
    assert breaking_changes(_BASE, new) == [
        '/properties/status: enum value(s) removed: "CONFIRMED"'
    ]


def test_type_removed_from_a_type_list_is_breaking():
    new = _changed("/properties/count/type", "integer")
    assert breaking_changes(_BASE, new) == ["/properties/count: type no longer allows null"]


def test_tightened_bounds_and_pattern_are_breaking():
    new = _changed("/properties/slotId", {"type": "string", "maxLength": 40, "pattern": "^s"})
    new["properties"]["count"]["minimum"] = 1
    assert breaking_changes(_BASE, new) == [
        "/properties/slotId: maxLength tightened to 40 (was 50)",
        "/properties/slotId: pattern changed to '^s' (was 'unset')",
        "/properties/count: minimum tightened to 1 (was 0)",
    ]


def test_closing_an_object_inside_defs_is_breaking():
    new = _changed("/$defs/thing/additionalProperties", False)
    assert breaking_changes(_BASE, new) == ["/$defs/thing: additionalProperties became false"]


def test_change_inside_array_items_is_breaking():
    new = _changed("/properties/items/items", {"type": "string"})
    lost = "array, boolean, integer, null, number, object"
    assert breaking_changes(_BASE, new) == [
        f"/properties/items/items: type no longer allows {lost}"
    ]


def test_major_version_is_read_from_the_id():
    assert major_version(_BASE) == 1
    assert major_version({"$id": "urn:expert-booking:schema:example:v12"}) == 12
    assert major_version({"$id": "urn:other"}) is None


# ---------------------------------------------------------------------------------- drift


def test_drift_reports_changed_missing_and_extra_files():
    expected = {"a.py": "x = 1\n", "b.py": "y = 2\n"}
    actual = {"a.py": "x = 2\n", "c.py": "z = 3\n"}
    diff = "".join(drift(expected, actual))
    assert "-x = 2\n+x = 1\n" in diff
    assert "+++ generated/b.py" in diff
    assert "--- committed/c.py" in diff
    assert drift(expected, dict(expected)) == []
