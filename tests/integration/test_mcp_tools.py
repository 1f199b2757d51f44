"""The three MCP tools through the official client: full stack in process, plus fault injection.

The full stack is ``bootstrap.build_asgi_app`` (SQLite on a temp file, a mocked payment
service) served in process and driven by ``client.open_client``. Faults that the real service
cannot produce use ``build_mcp_server`` with a fake service behind the SDK's in-process client.
"""

from __future__ import annotations

import io
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from expert_booking.bootstrap import build_asgi_app
from expert_booking.call_context import CallContext
from expert_booking.client import open_client
from expert_booking.confirmation import ConfirmBooking
from expert_booking.domain.errors import ErrorCode
from expert_booking.domain.model import Booking, Customer, format_instant
from expert_booking.edge.error_texts import ERROR_TEXTS, REASON_RECOVERIES
from expert_booking.edge.json_logging import ROOT_LOGGER, configure_logging
from expert_booking.edge.mcp_server import INSTRUCTIONS, build_mcp_server
from expert_booking.edge.mcp_tools import MCP_TOOLS
from expert_booking.edge.observability import ACTION_LOGGER
from expert_booking.edge.schemas import SchemaRegistry
from expert_booking.edge.tool_registry import LOGICAL_NAMES
from expert_booking.ports import TraceContext
from expert_booking.services import (
    BookingService,
    GetBooking,
    HoldSlot,
    SearchSlots,
    SlotPage,
)
from expert_booking.settings import Settings
from harness.contract import walk
from harness.inprocess import inprocess_app
from harness.openapi import RESULT_SCHEMAS
from tests.fakes import MutableClock, logged_text, make_booking
from tests.listed_errors import assert_listed

pytestmark = pytest.mark.anyio

# The server runs on a fake clock in 2030 while the client stamps the real time.
FAKE_CLOCK_TOLERANCE_SECONDS = 10**10

URL = "http://127.0.0.1:3000/mcp"
SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
REGISTRY = SchemaRegistry.load()
CUSTOMER = {"name": "Quentin Zyx-Distinctive", "email": "Quentin.ZYX@Distinct-Example.ORG"}


@dataclass
class PaymentService:
    """The payment status service behind an ``httpx.MockTransport``; PAID unless told else."""

    clock: MutableClock
    status: str = "PAID"
    requests: list[httpx.Request] = field(default_factory=list)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        booking_id = request.url.path.rsplit("/", 1)[-1]
        paid_at = format_instant(self.clock.now()) if self.status == "PAID" else None
        body = {
            "bookingId": booking_id,
            "status": self.status,
            "amount": "500.00",
            "currency": "CNY",
            "paidAt": paid_at,
        }
        return httpx.Response(200, json=body)


@dataclass
class Stack:
    client: Client
    clock: MutableClock
    payments: PaymentService
    log: io.StringIO

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call an MCP tool and check the envelope against the contract; return the envelope."""
        result = await self.client.call_tool(tool, arguments)
        return checked_envelope(result, tool, arguments)

    async def logical(self, name: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
        call = {"name": name, "arguments": arguments, "requestSpanId": str(uuid.uuid4())}
        return await self.call("tool_catalog.call", call | extra)


def checked_envelope(
    result: types.CallToolResult, tool: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    envelope = result.structured_content
    assert isinstance(envelope, dict)
    assert not list(REGISTRY["envelope"].validator.iter_errors(envelope)), envelope
    assert result.is_error is (not envelope["ok"])
    assert len(result.content) == 1
    assert json.loads(result.content[0].text) == envelope  # type: ignore[union-attr]
    name = arguments.get("name", tool) if tool == "tool_catalog.call" else tool
    if not envelope["ok"]:
        assert_listed(name, envelope["error"]["code"])
    elif name in RESULT_SCHEMAS:
        validator = REGISTRY[RESULT_SCHEMAS[name]].validator
        assert not list(validator.iter_errors(envelope["data"])), envelope["data"]
    return envelope


@pytest.fixture
def action_log() -> Iterator[io.StringIO]:
    """The server's JSON log lines (action lines and every other record), restored after."""
    stream = io.StringIO()
    loggers = [logging.getLogger(ROOT_LOGGER), logging.getLogger(ACTION_LOGGER)]
    saved = [(lg, lg.level, lg.propagate, list(lg.handlers)) for lg in loggers]
    configure_logging(stream)
    try:
        yield stream
    finally:
        for logger, level, propagate, handlers in saved:
            logger.handlers[:] = handlers
            logger.setLevel(level)
            logger.propagate = propagate


def action_records(log: io.StringIO) -> list[dict[str, Any]]:
    """The action lines of the log (other records have no ``action``)."""
    records = [json.loads(line) for line in logged_text(log).splitlines()]
    return [record for record in records if "action" in record]


@pytest.fixture
async def stack(tmp_path: Path, action_log: io.StringIO) -> AsyncIterator[Stack]:
    clock = MutableClock()
    payments = PaymentService(clock)
    app = build_asgi_app(
        Settings(
            db_path=tmp_path / "booking.db",
            client_clock_tolerance_seconds=FAKE_CLOCK_TOLERANCE_SECONDS,
        ),
        clock=clock,
        payments_transport=httpx.MockTransport(payments.handle),
    )
    with anyio.fail_after(20):
        async with inprocess_app(app) as transport, open_client(URL, transport=transport) as client:
            yield Stack(client, clock, payments, action_log)


@dataclass
class RawHttp:
    """JSON-RPC over plain HTTP: bodies the official client would refuse to encode."""

    http: httpx2.AsyncClient
    log: io.StringIO

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        sent = "2030-09-01T00:00:00.000Z"
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "clientSentAt": sent,
        }
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": meta},
        }
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/call",
            "mcp-name": tool,
            "x-mcp-client-sent-at": sent,
        }
        # json.dumps escapes a lone surrogate as \\ud800: valid JSON text, invalid Unicode.
        response = await self.http.post(URL, content=json.dumps(body).encode(), headers=headers)
        assert response.status_code == 200, response.text
        envelope: dict[str, Any] = response.json()["result"]["structuredContent"]
        return envelope


@pytest.fixture
async def raw_http(tmp_path: Path, action_log: io.StringIO) -> AsyncIterator[RawHttp]:
    app = build_asgi_app(
        Settings(
            db_path=tmp_path / "booking.db",
            client_clock_tolerance_seconds=FAKE_CLOCK_TOLERANCE_SECONDS,
        ),
        clock=MutableClock(),
    )
    with anyio.fail_after(20):
        async with inprocess_app(app) as transport, httpx2.AsyncClient(transport=transport) as c:
            yield RawHttp(c, action_log)


async def test_tools_list_is_exactly_three_tools_with_the_schema_files_verbatim(
    stack: Stack,
) -> None:
    listing = await stack.client.list_tools()
    tools = {tool.name: tool for tool in listing.tools}
    assert sorted(tools) == ["tool_catalog.call", "tool_catalog.read", "tool_catalog.search"]
    for name, tool in tools.items():
        expected = json.loads((SCHEMAS / f"{name.replace('.', '_')}_input.json").read_text())
        assert tool.input_schema == expected
        assert tool.output_schema is None
        assert tool.description
    assert listing.ttl_ms is not None
    assert listing.ttl_ms > 0
    assert listing.cache_scope == "public"


async def test_discovery_teaches_the_flow(stack: Stack) -> None:
    instructions = stack.client.instructions or ""
    for phrase in ("tool_catalog.search", "tool_catalog.read", "tool_catalog.call"):
        assert phrase in instructions
    for rule in ("a hold is not a booking", "intentHash unchanged", "paymentPageUrl", "UUID"):
        assert rule in instructions


async def test_catalog_search_ranks_and_memoises(stack: Stack) -> None:
    first = await stack.call("tool_catalog.search", {"query": "帮我确认这个预约", "limit": 2})
    assert first["data"]["items"][0]["name"] == "booking.confirm_booking"
    assert first["meta"]["cache"] == "MISS"
    again = await stack.call("tool_catalog.search", {"query": "帮我确认这个预约", "limit": 2})
    assert again["meta"]["cache"] == "HIT"
    assert again["data"] == first["data"]
    assert again["meta"]["traceId"] != first["meta"]["traceId"]  # no requestSpanId: random


async def test_a_long_catalog_query_is_answered_but_never_a_memo_hit(stack: Stack) -> None:
    query = ("please hold a slot for me " * 10)[:201]
    first = await stack.call("tool_catalog.search", {"query": query, "limit": 2})
    again = await stack.call("tool_catalog.search", {"query": query, "limit": 2})
    assert first["data"]["items"][0]["name"] == "booking.hold_slot"
    assert (first["meta"]["cache"], again["meta"]["cache"]) == ("MISS", "MISS")
    assert again["data"] == first["data"]


async def test_catalog_items_carry_human_titles(stack: Stack) -> None:
    envelope = await stack.call("tool_catalog.search", {"query": "", "limit": 4})
    titles = {item["name"]: item["title"] for item in envelope["data"]["items"]}
    assert titles["booking.hold_slot"] == "Hold a slot for a customer"
    assert not any(title.endswith(" input") for title in titles.values())


async def test_catalog_read_pages_reproduce_the_schema_file(stack: Stack) -> None:
    raw = (SCHEMAS / "booking_confirm_booking_input.json").read_text()
    lines: list[str] = []
    page: dict[str, Any] | None = {"offset": 0, "limit": 50}
    while page is not None:
        envelope = await stack.call(
            "tool_catalog.read", {"uri": "tool://booking.confirm_booking", **page}
        )
        lines.extend(envelope["data"]["lines"])
        page = envelope["data"]["next"]
    assert "\n".join(lines) + "\n" == raw


_TOOL_NAME = re.compile(r"(?<![\w./-])(?:booking|tool_catalog)\.[a-z_]+\b")


async def test_every_tool_name_a_model_reads_is_a_registered_one(stack: Stack) -> None:
    """Instructions, tools/list, error texts and every schema name only tools that exist."""
    listed = await stack.client.list_tools()
    texts = [INSTRUCTIONS, *(tool.description or "" for tool in listed.tools)]
    texts += [part for text in ERROR_TEXTS.values() for part in (text.message, text.recovery)]
    texts += REASON_RECOVERIES.values()
    for path in sorted(SCHEMAS.glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        texts += [v for _, node in walk(document) for v in node.values() if isinstance(v, str)]
    named = {found for text in texts for found in _TOOL_NAME.findall(text)}

    assert named - set(LOGICAL_NAMES) - set(MCP_TOOLS) == set()
    assert named >= set(LOGICAL_NAMES) | set(MCP_TOOLS)


async def test_the_whole_booking_flow_through_tool_catalog_call(stack: Stack) -> None:
    found = await stack.logical("booking.search_available_slots", {"query": "AI", "limit": 2})
    assert found["ok"] is True
    assert found["meta"]["cache"] == "MISS"
    slot = found["data"]["slots"][0]

    held = await stack.logical(
        "booking.hold_slot",
        {"slotId": slot["slotId"], "customer": CUSTOMER, "idempotencyKey": str(uuid.uuid4())},
    )
    assert held["ok"] is True, held
    snapshot = held["data"]
    assert snapshot["customer"] == CUSTOMER
    assert snapshot["status"] == "HELD"
    assert held["meta"]["cache"] == "BYPASS"

    read = await stack.logical("booking.get_booking", {"bookingId": snapshot["bookingId"]})
    assert read["data"] == snapshot

    request_span = str(uuid.uuid4())
    approval = {
        "approvalId": str(uuid.uuid4()),
        "decision": "APPROVE",
        "approvedAt": format_instant(stack.clock.now()),
        "intent": snapshot["confirmationIntent"]["intent"],
        "intentHash": snapshot["confirmationIntent"]["intentHash"],
    }
    confirm = {
        "bookingId": snapshot["bookingId"],
        "expectedVersion": snapshot["version"],
        "idempotencyKey": str(uuid.uuid4()),
        "humanApproval": approval,
    }
    confirmed = await stack.logical("booking.confirm_booking", confirm, requestSpanId=request_span)
    assert confirmed["ok"] is True, confirmed
    assert confirmed["data"]["status"] == "CONFIRMED"
    assert confirmed["data"]["confirmationIntent"] is None
    assert confirmed["meta"]["traceId"] == uuid.UUID(request_span).hex

    (payment_request,) = stack.payments.requests
    _, trace_id, parent_span, _ = payment_request.headers["traceparent"].split("-")
    assert trace_id == uuid.UUID(request_span).hex
    assert parent_span != confirmed["meta"]["spanId"]  # the payment query is a child span
    confirm_records = [r for r in action_records(stack.log) if r["trace_id"] == trace_id]
    assert [r["action"] for r in confirm_records] == [
        "booking.confirm_booking",
        "tool_catalog.call",
    ]
    logical, catalog = confirm_records
    assert logical["span_id"] == confirmed["meta"]["spanId"]
    assert logical["operation_id"] == confirmed["meta"]["operationId"]
    assert logical["parent_span_id"] == catalog["span_id"]


async def test_log_lines_never_contain_customer_data(stack: Stack) -> None:
    found = await stack.logical("booking.search_available_slots", {"query": "", "limit": 1})
    arguments = {
        "slotId": found["data"]["slots"][0]["slotId"],
        "customer": {**CUSTOMER, "phone": "+49 30 9999-7777", "note": "NOTE-XYZZY"},
        "idempotencyKey": str(uuid.uuid4()),
    }
    held = await stack.logical("booking.hold_slot", arguments)
    assert held["ok"] is True
    text = logged_text(stack.log)
    assert held["meta"]["operationId"] in text
    for secret in ("Quentin", "Zyx", "Distinct-Example", "9999-7777", "XYZZY", "slot-"):
        assert secret not in text


@pytest.mark.parametrize(
    ("arguments", "pointers"),
    [
        ({"slotId": 7}, ["/slotId"]),
        ({"coupon": "FREE"}, ["/coupon"]),
        ({"customer": {"name": "A"}}, ["/customer/email"]),
        ({"customer": {**CUSTOMER, "vip": True}}, ["/customer/vip"]),
        ({"idempotencyKey": "retry-1"}, ["/idempotencyKey"]),
        ({"idempotencyKey": None}, ["/idempotencyKey"]),
    ],
    ids=["wrong-type", "extra-field", "missing-field", "nested-extra", "bad-uuid", "null"],
)
async def test_hold_arguments_are_validated_strictly(
    stack: Stack, arguments: dict[str, Any], pointers: list[str]
) -> None:
    base = {"slotId": "slot-ai-001", "customer": CUSTOMER, "idempotencyKey": str(uuid.uuid4())}
    envelope = await stack.logical("booking.hold_slot", base | arguments)
    assert envelope["ok"] is False
    assert envelope["error"]["code"] == "INVALID_ARGUMENTS"
    assert [v["pointer"] for v in envelope["error"]["details"]["violations"]] == pointers


async def test_missing_required_field_and_bad_date_time_are_pointed_at(stack: Stack) -> None:
    envelope = await stack.logical(
        "booking.search_available_slots", {"query": "AI", "startsAfter": "next monday"}
    )
    violations = envelope["error"]["details"]["violations"]
    assert [v["pointer"] for v in violations] == ["/limit", "/startsAfter"]


async def test_catalog_tool_input_is_validated_too(stack: Stack) -> None:
    envelope = await stack.call("tool_catalog.search", {"query": "hold", "limit": "5"})
    assert envelope["error"]["code"] == "INVALID_ARGUMENTS"
    assert envelope["error"]["details"]["violations"][0]["pointer"] == "/limit"
    envelope = await stack.call(
        "tool_catalog.call", {"name": "booking.get_booking", "arguments": {"bookingId": "b"}}
    )
    assert envelope["error"]["details"]["violations"][0]["pointer"] == "/requestSpanId"


@pytest.mark.parametrize(
    ("tool", "arguments", "pointers"),
    [
        (
            "booking.hold_slot",
            {"slotId": "slot-ai-001", "customer": {**CUSTOMER, "name": "Ann \ud800"}},
            ["/customer/name"],
        ),
        (
            "booking.hold_slot",
            {"slotId": "slot-ai-001", "customer": {**CUSTOMER, "note": "\udc00\ud800"}},
            ["/customer/note"],
        ),
        (
            "booking.search_available_slots",
            {"query": "AI \udfff", "limit": 1},
            ["/query"],
        ),
        (
            "booking.get_booking",
            {"bookingId": "b\ud83d"},  # the first half of an emoji, alone
            ["/bookingId"],
        ),
        ("tool_catalog.search", {"query": "hold \ud800", "limit": 2}, ["/query"]),
        ("tool_catalog.call", {"name": "booking.\ud800", "arguments": {}}, ["/name"]),
        (
            "tool_catalog.search",
            {"query": "hold", "limit": 2, "requestSpanId": "\ud800"},
            ["/requestSpanId", "/requestSpanId"],  # not a UUID, not Unicode text
        ),
        (
            "tool_catalog.call",
            {
                "name": "booking.get_booking",
                "arguments": {"bookingId": "b"},
                "requestSpanId": "\udc00",
            },
            ["/requestSpanId", "/requestSpanId"],  # not a UUID, not Unicode text
        ),
    ],
    ids=[
        "customer-name",
        "customer-note",
        "slot-query",
        "booking-id",
        "catalog-query",
        "name",
        "catalog-span-id",
        "call-span-id",
    ],
)
async def test_text_with_a_lone_surrogate_is_invalid_arguments_not_internal_error(
    raw_http: RawHttp, tool: str, arguments: dict[str, Any], pointers: list[str]
) -> None:
    if tool.startswith("booking."):
        if tool == "booking.hold_slot":
            arguments = arguments | {"idempotencyKey": str(uuid.uuid4())}
        arguments = {"name": tool, "arguments": arguments}
        tool = "tool_catalog.call"
    if tool == "tool_catalog.call" and "requestSpanId" not in arguments:
        arguments = arguments | {"requestSpanId": str(uuid.uuid4())}
    envelope = await raw_http.call(tool, arguments)
    assert envelope["ok"] is False
    assert envelope["error"]["code"] == "INVALID_ARGUMENTS"
    assert [v["pointer"] for v in envelope["error"]["details"]["violations"]] == pointers
    logged_text(raw_http.log).encode("utf-8")  # the log stays writable as UTF-8


async def test_a_key_with_a_lone_surrogate_is_pointed_at_without_being_echoed(
    raw_http: RawHttp,
) -> None:
    arguments = {
        "slotId": "slot-ai-001",
        "customer": {**CUSTOMER, "vip\ud800": True},
        "idempotencyKey": str(uuid.uuid4()),
    }
    call = {"name": "booking.hold_slot", "arguments": arguments, "requestSpanId": str(uuid.uuid4())}
    envelope = await raw_http.call("tool_catalog.call", call)
    assert envelope["error"]["code"] == "INVALID_ARGUMENTS"
    assert {v["pointer"] for v in envelope["error"]["details"]["violations"]} == {
        "/customer/vip\ufffd"
    }
    json.dumps(envelope, ensure_ascii=False).encode("utf-8")  # no surrogate sent back


async def test_an_integral_float_is_not_an_integer_anywhere(stack: Stack) -> None:
    searched = await stack.call("tool_catalog.search", {"query": "hold", "limit": 3.0})
    read = await stack.call(
        "tool_catalog.read", {"uri": "tool://booking.hold_slot", "offset": 0.0, "limit": 5}
    )
    slots = await stack.logical("booking.search_available_slots", {"query": "", "limit": 1.0})
    confirmed = await stack.logical(
        "booking.confirm_booking",
        {"bookingId": "b", "expectedVersion": 1.0, "idempotencyKey": str(uuid.uuid4())},
    )
    outcomes = [
        (e["error"]["code"], [v["pointer"] for v in e["error"]["details"]["violations"]])
        for e in (searched, read, slots, confirmed)
    ]
    assert outcomes == [
        ("INVALID_ARGUMENTS", ["/limit"]),
        ("INVALID_ARGUMENTS", ["/offset"]),
        ("INVALID_ARGUMENTS", ["/limit"]),
        ("INVALID_ARGUMENTS", ["/expectedVersion"]),
    ]


async def test_an_approval_dated_ahead_of_the_server_says_to_fix_that_clock(stack: Stack) -> None:
    """Asking the person again would not help: a new approval dated by that clock fails too."""
    found = await stack.logical("booking.search_available_slots", {"query": "AI", "limit": 1})
    slot_id = found["data"]["slots"][0]["slotId"]
    hold = {"slotId": slot_id, "customer": CUSTOMER, "idempotencyKey": str(uuid.uuid4())}
    snapshot = (await stack.logical("booking.hold_slot", hold))["data"]
    intent = snapshot["confirmationIntent"]
    refusals = []
    for ahead in (timedelta(minutes=10), -timedelta(minutes=10)):  # FUTURE, then STALE
        approval = {
            "approvalId": str(uuid.uuid4()),
            "decision": "APPROVE",
            "approvedAt": format_instant(stack.clock.now() + ahead),
            "intent": intent["intent"],
            "intentHash": intent["intentHash"],
        }
        confirm = {
            "bookingId": snapshot["bookingId"],
            "expectedVersion": snapshot["version"],
            "idempotencyKey": str(uuid.uuid4()),
            "humanApproval": approval,
        }
        refusals.append((await stack.logical("booking.confirm_booking", confirm))["error"])

    future, stale = refusals
    expired = ErrorCode.HUMAN_APPROVAL_EXPIRED
    assert (future["code"], future["details"]["reason"]) == (expired, "FUTURE")
    assert future["recovery"]["action"] == REASON_RECOVERIES[(expired, "FUTURE")]
    assert "meta.serverReceivedAt" in future["recovery"]["action"]
    assert (stale["code"], stale["details"]["reason"]) == (expired, "STALE")
    assert stale["recovery"]["action"] == ERROR_TEXTS[expired].recovery


async def test_unknown_logical_tool_and_uri_are_tool_not_found(stack: Stack) -> None:
    envelope = await stack.logical("booking.forget_booking", {"bookingId": "b"})
    assert envelope["error"]["code"] == "TOOL_NOT_FOUND"
    assert envelope["error"]["recovery"]["action"]
    envelope = await stack.call(
        "tool_catalog.read", {"uri": "tool://booking.cancel", "offset": 0, "limit": 5}
    )
    assert envelope["error"]["code"] == "TOOL_NOT_FOUND"


@pytest.mark.parametrize(
    ("name", "details"),
    [
        ("booking.forget_booking", {"name": "booking.forget_booking"}),
        ("Booking.Cancel", {}),
        ("<script>alert(1)</script>", {}),
        ("booking." + "x" * 5000 + "!", {}),
    ],
    ids=["tool-shaped", "capitals", "markup", "long"],
)
async def test_tool_not_found_echoes_the_name_only_when_it_looks_like_a_tool_name(
    stack: Stack, name: str, details: dict[str, str]
) -> None:
    envelope = await stack.logical(name, {})
    assert envelope["error"]["code"] == "TOOL_NOT_FOUND"
    assert envelope["error"]["details"] == details


async def test_a_cursor_of_another_query_is_invalid_cursor(stack: Stack) -> None:
    first = await stack.call("tool_catalog.search", {"query": "", "limit": 1})
    cursor = first["data"]["nextCursor"]
    envelope = await stack.call(
        "tool_catalog.search", {"query": "hold", "limit": 1, "cursor": cursor}
    )
    assert envelope["error"]["code"] == "INVALID_CURSOR"
    slots = await stack.logical("booking.search_available_slots", {"query": "", "limit": 1})
    envelope = await stack.logical(
        "booking.search_available_slots",
        {"query": "AI", "limit": 1, "cursor": slots["data"]["nextCursor"]},
    )
    assert envelope["error"]["code"] == "INVALID_CURSOR"


async def test_an_unknown_mcp_tool_is_a_protocol_error(stack: Stack) -> None:
    with pytest.raises(MCPError) as excinfo:
        await stack.client.call_tool("booking.hold_slot", {})
    assert excinfo.value.error.code == types.INVALID_PARAMS


async def test_a_logical_tool_called_directly_is_told_to_go_through_tool_catalog_call(
    stack: Stack,
) -> None:
    with pytest.raises(MCPError) as excinfo:
        await stack.client.call_tool("booking.search_available_slots", {"query": "", "limit": 1})
    error = excinfo.value.error
    assert error.code == types.INVALID_PARAMS
    assert "tool_catalog.call" in error.message
    assert '"name": "booking.search_available_slots"' in error.message
    assert error.data == {
        "name": "booking.search_available_slots",
        "callThrough": "tool_catalog.call",
    }
    with pytest.raises(MCPError) as excinfo:
        await stack.client.call_tool("booking.nope", {})
    assert "tool_catalog.call" not in excinfo.value.error.message


async def test_tool_annotations_are_honest_about_what_each_tool_reaches(stack: Stack) -> None:
    listing = await stack.client.list_tools()
    hints = {
        tool.name: tool.annotations.model_dump(exclude_none=True)
        for tool in listing.tools
        if tool.annotations is not None
    }
    read_only = {
        "read_only_hint": True,
        "destructive_hint": False,
        "idempotent_hint": True,
        "open_world_hint": False,
    }
    assert hints == {
        "tool_catalog.search": read_only,
        "tool_catalog.read": read_only,
        # It proxies holds, confirmations and cancellations: a destructive write, reaching the
        # payment service.
        "tool_catalog.call": {
            "read_only_hint": False,
            "destructive_hint": True,
            "idempotent_hint": True,
            "open_world_hint": True,
        },
    }


class ExplodingService(BookingService):
    """A booking service whose every use case fails with an unexpected exception."""

    def __init__(self) -> None:
        """Nothing behind it: every use case is overridden."""

    async def search_available_slots(self, command: SearchSlots, _: CallContext) -> SlotPage:
        raise RuntimeError("sqlite3.OperationalError at /srv/secret/booking.db")

    async def hold_slot(self, command: HoldSlot, _: CallContext) -> Booking:
        raise RuntimeError("sqlite3.OperationalError at /srv/secret/booking.db")

    async def confirm_booking(self, command: ConfirmBooking, _: CallContext) -> Booking:
        raise RuntimeError("unreachable")

    async def get_booking(self, command: GetBooking, _: CallContext) -> Booking:
        raise RuntimeError("unreachable")


async def test_an_unexpected_exception_becomes_internal_error_without_details(
    action_log: io.StringIO,
) -> None:
    server = build_mcp_server(
        service=ExplodingService(), clock=MutableClock(), registry=REGISTRY, version="test"
    )
    meta: Any = {"clientSentAt": "2030-09-01T00:00:00.000Z"}
    arguments = {
        "name": "booking.hold_slot",
        "arguments": {"slotId": "s", "customer": CUSTOMER, "idempotencyKey": str(uuid.uuid4())},
        "requestSpanId": str(uuid.uuid4()),
    }
    async with Client(server, cache=None) as client:
        result = await client.call_tool("tool_catalog.call", arguments, meta=meta)
    envelope = checked_envelope(result, "tool_catalog.call", arguments)
    assert envelope["error"] == {
        "code": "INTERNAL_ERROR",
        "message": "An unexpected error occurred.",
        "retryable": False,
        "details": {"operationId": envelope["meta"]["operationId"]},
        "recovery": envelope["error"]["recovery"],
    }
    text = result.content[0].text  # type: ignore[union-attr]
    for leak in ("sqlite3", "/srv/secret", "Traceback", "RuntimeError"):
        assert leak not in text
    error, *actions = [json.loads(line) for line in logged_text(action_log).splitlines()]
    # The traceback is in the server log only: one JSON line, tied to the caller's operationId.
    assert error["operation_id"] == envelope["meta"]["operationId"]
    assert error["exc_type"] == "RuntimeError"
    assert "/srv/secret" in error["traceback"]
    assert [(r["action"], r["errorCode"]) for r in actions] == [
        ("booking.hold_slot", "INTERNAL_ERROR"),
        ("tool_catalog.call", "INTERNAL_ERROR"),
    ]


async def test_in_process_calls_without_a_client_timestamp_are_refused() -> None:
    server = build_mcp_server(
        service=ExplodingService(), clock=MutableClock(), registry=REGISTRY, version="test"
    )
    async with Client(server, cache=None) as client:
        with pytest.raises(MCPError) as excinfo:
            await client.call_tool("tool_catalog.search", {"query": "", "limit": 1})
    assert excinfo.value.error.code == types.INVALID_REQUEST
    assert excinfo.value.error.data == {"code": "MISSING_CLIENT_TIMESTAMP"}


class RecordingService(BookingService):
    """Answers every use case with one booking and records what it was given."""

    def __init__(self, booking: Booking) -> None:
        self.booking = booking
        self.seen: list[object] = []

    async def search_available_slots(self, command: SearchSlots, _: CallContext) -> SlotPage:
        self.seen.append(command)
        return SlotPage((), total=0, next_cursor=None, cache_hit=True)

    async def hold_slot(self, command: HoldSlot, _: CallContext) -> Booking:
        self.seen.append(command)
        return self.booking

    async def confirm_booking(self, command: ConfirmBooking, context: CallContext) -> Booking:
        self.seen.append((command, context.trace))
        return self.booking

    async def get_booking(self, command: GetBooking, _: CallContext) -> Booking:
        self.seen.append(command.booking_id)
        return self.booking


async def test_arguments_reach_the_use_case_unchanged_and_confirm_gets_the_logical_span() -> None:
    booking = make_booking()
    service = RecordingService(booking)
    server = build_mcp_server(
        service=service, clock=MutableClock(), registry=REGISTRY, version="test"
    )
    meta: Any = {"clientSentAt": "2030-09-01T00:00:00.000Z"}
    customer = {"name": "  Ann  ", "email": "ANN@Example.COM", "note": ""}
    hold = {"slotId": "slot-ai-001", "customer": customer, "idempotencyKey": str(uuid.uuid4())}
    span = str(uuid.uuid4())
    confirm = {
        "bookingId": booking.booking_id,
        "expectedVersion": 1,
        "idempotencyKey": str(uuid.uuid4()),
    }
    async with Client(server, cache=None) as client:
        calls = [
            ("booking.hold_slot", hold),
            ("booking.confirm_booking", confirm),
            ("booking.search_available_slots", {"query": " AI ", "limit": 3}),
        ]
        envelopes = []
        for name, arguments in calls:
            request = {"name": name, "arguments": arguments, "requestSpanId": span}
            result = await client.call_tool("tool_catalog.call", request, meta=meta)
            envelopes.append(checked_envelope(result, "tool_catalog.call", request))
    held, confirmed, searched = service.seen
    assert isinstance(held, HoldSlot)
    assert held.customer == Customer(name="  Ann  ", email="ANN@Example.COM", note="")
    assert isinstance(confirmed, tuple)
    command, trace = confirmed
    assert command.human_approval is None
    assert trace == TraceContext(uuid.UUID(span).hex, envelopes[1]["meta"]["spanId"])
    assert isinstance(searched, SearchSlots)
    assert searched.query.text == " AI "
    assert envelopes[2]["meta"]["cache"] == "HIT"
    assert envelopes[0]["data"]["customer"] == {
        "name": "Ada Lovelace",
        "email": booking.customer.email,
    }


async def test_prompt_and_resource_listings_are_empty_and_cacheable(stack: Stack) -> None:
    prompts = await stack.client.list_prompts()
    resources = await stack.client.list_resources()
    templates = await stack.client.list_resource_templates()
    assert (prompts.prompts, resources.resources, templates.resource_templates) == ([], [], [])
    assert {prompts.cache_scope, resources.cache_scope, templates.cache_scope} == {"public"}
    with pytest.raises(MCPError) as excinfo:
        await stack.client.read_resource("tool://booking.hold_slot")
    assert excinfo.value.error.code == types.INVALID_PARAMS
    assert excinfo.value.error.data == {"uri": "tool://booking.hold_slot"}
