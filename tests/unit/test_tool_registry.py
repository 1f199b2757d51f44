"""The logical tool registry: every surface that lists logical tools derives from its entries."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from expert_booking.cancellation import CancelBooking
from expert_booking.confirmation import ConfirmBooking
from expert_booking.edge.catalog import ToolCatalog
from expert_booking.edge.mcp_server import INSTRUCTIONS
from expert_booking.edge.schemas import SchemaRegistry
from expert_booking.edge.tool_registry import (
    BY_NAME,
    LOGICAL_NAMES,
    LOGICAL_TOOLS,
    READ_SCOPE,
    WRITE_SCOPE,
    ToolHints,
    call_hints,
    required_scope,
)
from expert_booking.rescheduling import RescheduleBooking
from expert_booking.services import (
    GetBooking,
    HoldSlot,
    ListBookings,
    SearchSlots,
)
from harness.openapi import LOGICAL_TOOLS as OPENAPI_INPUTS
from harness.openapi import RESULT_SCHEMAS, build_openapi

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
REGISTRY = SchemaRegistry.load()


def test_names_are_unique_and_every_schema_file_of_an_entry_exists():
    assert len(set(LOGICAL_NAMES)) == len(LOGICAL_NAMES) == len(BY_NAME)
    for tool in LOGICAL_TOOLS:
        assert (SCHEMAS / f"{tool.input_schema}.json").is_file(), tool.name
        assert (SCHEMAS / f"{tool.result_schema}.json").is_file(), tool.name
        assert tool.title
        assert tool.intent_words.strip()
        assert tool.topic_words.strip()


def test_the_scope_of_a_tool_follows_its_effects():
    for tool in LOGICAL_TOOLS:
        assert tool.scope == (READ_SCOPE if tool.hints.read_only else WRITE_SCOPE), tool.name
    assert BY_NAME["booking.hold_slot"].scope == WRITE_SCOPE
    assert BY_NAME["booking.get_booking"].scope == READ_SCOPE


def test_the_scope_of_a_call_is_the_scope_of_the_logical_tool_it_names():
    assert required_scope("tool_catalog.search", {"query": "x"}) == READ_SCOPE
    assert required_scope("tool_catalog.read", {}) == READ_SCOPE
    assert required_scope("tool_catalog.call", {"name": "booking.confirm_booking"}) == WRITE_SCOPE
    assert required_scope("tool_catalog.call", {"name": "booking.search_available_slots"}) == (
        READ_SCOPE
    )
    assert required_scope("tool_catalog.call", {"name": "booking.nope"}) == READ_SCOPE
    assert required_scope("tool_catalog.call", {"name": ["booking.hold_slot"]}) == READ_SCOPE


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ("2030-09-02T02:00:00.0000001Z", "2030-09-02T02:00:00.001Z"),
        ("2030-09-02T02:00:00.0000000Z", "2030-09-02T02:00:00.000Z"),
        ("2030-09-02T02:00:00.000001Z", "2030-09-02T02:00:00.001Z"),
        ("2030-09-02T10:00:00.9990000001+08:00", "2030-09-02T02:00:01.000Z"),
        ("9999-12-31T23:59:59.9999999Z", "9999-12-31T23:59:59.999Z"),
    ],
)
def test_a_start_bound_keeps_digits_past_the_microsecond_by_rounding_up(
    sent: str, stored: str
) -> None:
    arguments = {"query": "", "limit": 1, "startsAfter": sent, "startsBefore": sent}
    command = BY_NAME["booking.search_available_slots"].command(arguments)
    assert command.query.window() == (stored, stored)


def test_tool_catalog_call_claims_only_what_every_tool_it_reaches_does():
    # booking.cancel_booking and booking.reschedule_booking end or move a booking.
    assert call_hints() == ToolHints(read_only=False, destructive=True, idempotent=True)
    reads = tuple(tool for tool in LOGICAL_TOOLS if tool.hints.read_only)
    assert call_hints(reads).read_only
    keyed = tuple(tool for tool in LOGICAL_TOOLS if not tool.hints.destructive)
    assert call_hints(keyed) == ToolHints(read_only=False, destructive=False, idempotent=True)
    destructive = replace(
        LOGICAL_TOOLS[0], hints=ToolHints(read_only=False, destructive=True, idempotent=False)
    )
    assert call_hints((*LOGICAL_TOOLS, destructive)) == ToolHints(
        read_only=False, destructive=True, idempotent=False
    )


def test_the_catalog_lists_exactly_the_registry():
    catalog = ToolCatalog(REGISTRY)
    assert list(catalog.entries) == list(LOGICAL_NAMES)
    for name, entry in catalog.entries.items():
        assert entry.title == BY_NAME[name].title
        assert entry.document is REGISTRY[BY_NAME[name].input_schema]


def test_the_instructions_name_every_logical_tool_and_their_number():
    for name in LOGICAL_NAMES:
        assert name in INSTRUCTIONS
    assert f"{len(LOGICAL_TOOLS)} logical tools" in INSTRUCTIONS


def test_the_openapi_description_has_one_variant_per_registered_tool():
    assert {tool.name: tool.input_schema for tool in LOGICAL_TOOLS} == OPENAPI_INPUTS
    for tool in LOGICAL_TOOLS:
        assert RESULT_SCHEMAS[tool.name] == tool.result_schema
    variants = build_openapi()["paths"]["/mcp"]["post"]["requestBody"]["content"][
        "application/json"
    ]["schema"]["oneOf"]
    titles = {variant["title"] for variant in variants}
    for name in LOGICAL_NAMES:
        assert f"tools/call tool_catalog.call -> {name}" in titles


@pytest.mark.parametrize("name", LOGICAL_NAMES)
def test_every_entry_maps_its_schema_valid_arguments_to_a_command(name: str) -> None:
    examples: dict[str, dict[str, Any]] = {
        "booking.search_available_slots": {"query": "AI", "limit": 2},
        "booking.hold_slot": {
            "slotId": "slot-ai-001",
            "customer": {"name": "Ada", "email": "ada@example.com"},
            "idempotencyKey": "0f8fad5b-d9cb-469f-a165-70867728950e",
        },
        "booking.confirm_booking": {
            "bookingId": "booking-1",
            "expectedVersion": 1,
            "idempotencyKey": "0f8fad5b-d9cb-469f-a165-70867728950e",
        },
        "booking.get_booking": {"bookingId": "booking-1"},
        "booking.list_bookings": {
            "limit": 5,
            "status": ["HELD", "CONFIRMED"],
            "idempotencyKey": "0F8FAD5B-D9CB-469F-A165-70867728950E",
        },
        "booking.cancel_booking": {
            "bookingId": "booking-1",
            "expectedVersion": 2,
            "idempotencyKey": "0F8FAD5B-D9CB-469F-A165-70867728950E",
        },
        "booking.reschedule_booking": {
            "bookingId": "booking-1",
            "newSlotId": "slot-ai-002",
            "expectedVersion": 2,
            "idempotencyKey": "0f8fad5b-d9cb-469f-a165-70867728950e",
        },
    }
    tool = BY_NAME[name]
    tables: dict[str, Mapping[str, Any]] = {"examples": examples, "COMMANDS": COMMANDS}
    missing = [table for table, known in tables.items() if name not in known]
    assert not missing, (
        f"{name} is registered but missing from {' and '.join(missing)} in "
        "tests/unit/test_tool_registry.py: add schema-valid example arguments to `examples` "
        "(in this test) and its command class to `COMMANDS` (below the test)"
    )
    arguments = examples[name]
    assert REGISTRY[tool.input_schema].validator.is_valid(arguments)
    command = tool.command(arguments)
    assert isinstance(command, COMMANDS[name])
    sent = arguments.get("idempotencyKey")
    expected = None if sent is None else sent.lower()  # one spelling, whatever case was sent
    assert getattr(command, "idempotency_key", None) == expected


COMMANDS: dict[str, type] = {
    "booking.search_available_slots": SearchSlots,
    "booking.hold_slot": HoldSlot,
    "booking.confirm_booking": ConfirmBooking,
    "booking.get_booking": GetBooking,
    "booking.list_bookings": ListBookings,
    "booking.cancel_booking": CancelBooking,
    "booking.reschedule_booking": RescheduleBooking,
}
