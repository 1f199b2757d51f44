"""``expert-booking-mcp demo``: the whole booking story against a real server process.

Starts the payment sandbox and the installed server on a fresh temporary database (the sandbox
reads the server's bookings from it), then walks discover → list → catalog search → paged schema
read → slot search → hold → a second user's refused hold → an expired approval refused →
confirm while payment is PENDING → the payer presses Pay on the sandbox's page → confirm → get.
The demo itself plays the person (who approves and pays); the agent part is the MCP client.
Exits non-zero when anything behaves otherwise.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import tempfile
import textwrap
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2

from expert_booking.adapters.clock import SystemClock
from expert_booking.client import ExchangeRecorder, ServerConnectionError, chain_error, open_client
from expert_booking.domain.model import format_instant
from expert_booking.edge.wire_time import SUPPORTED_PROTOCOL_VERSION
from expert_booking.settings import SETTING_NAMES
from expert_booking.testing.sandbox_pair import server_with_sandbox
from expert_booking.testing.server_process import ServerStartError

_CLOCK = SystemClock()  # the demo plays the person who approves and pays
SUMMARY_WIDTH = 72
SEE_OTHER = 303

INTRODUCTION = """\
Who is who: the MCP client below is the agent. The demo also plays the person: it approves the
booking's exact intent and presses Pay on the payment sandbox's page (SANDBOX: no money moves).

Each step ends with a "time:" line, the HTTP exchange's instants (UTC, HH:MM:SS.mmm):
  clientSentAt <= serverReceivedAt [<= serverResultCreatedAt]
               <= serverRespondedAt <= clientReceivedAt
the client stamps its send time, the server its receipt (and a tool result's creation) and its
response, the client its receipt; the demo checks the order (CONTRACT section 2)."""


class DemoFailedError(Exception):
    """A step did not behave as the contract says."""


class _Story:
    def __init__(self, client: Any, exchanges: ExchangeRecorder) -> None:
        self.client = client
        self.exchanges = exchanges
        self.step = 0

    def say(self, title: str, lines: list[str], created_at: str | None = None) -> None:
        self.step += 1
        print(f"\n[{self.step:02d}] {title}")
        for line in lines:
            print(f"     {line}")
        if self.exchanges.exchanges:
            parts = self.exchanges.exchanges[-1].chain(created_at or None)
            print("     time: " + " <= ".join((p or "?")[11:] for p in parts))
            problem = chain_error(parts)
            if problem is not None:
                raise DemoFailedError(f"timestamps out of order: {problem}")

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments)
        envelope = result.structured_content
        if not isinstance(envelope, dict) or result.is_error != (not envelope.get("ok")):
            raise DemoFailedError(f"{tool}: isError does not mirror the envelope")
        return envelope

    async def logical(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.call(
            "tool_catalog.call",
            {"name": name, "arguments": arguments, "requestSpanId": str(uuid.uuid4())},
        )


def _expect(condition: bool, what: str) -> None:  # noqa: FBT001 - reads as an assertion
    if not condition:
        raise DemoFailedError(what)


def _expect_error(envelope: dict[str, Any], code: str) -> None:
    actual = envelope.get("error", {}).get("code") if not envelope["ok"] else "ok"
    _expect(actual == code, f"expected {code}, got {actual}")


def _approval(intent: dict[str, Any], *, approved_at: datetime) -> dict[str, Any]:
    return {
        "approvalId": str(uuid.uuid4()),
        "decision": "APPROVE",
        "approvedAt": format_instant(approved_at),
        "intent": intent["intent"],
        "intentHash": intent["intentHash"],
    }


async def _walk(story: _Story) -> None:  # noqa: PLR0915 - one linear story, read top to bottom
    client = story.client
    discover = client.session.discover_result
    story.say(
        "server/discover",
        [f"protocol {client.protocol_version}", f"server {client.server_info.name}"],
    )
    _expect(client.protocol_version == SUPPORTED_PROTOCOL_VERSION, "modern protocol negotiated")
    del discover

    tools = await client.list_tools()
    names = [tool.name for tool in tools.tools]
    story.say("tools/list", [", ".join(names)])
    _expect(names == ["tool_catalog.search", "tool_catalog.read", "tool_catalog.call"], "3 tools")

    found = await story.call("tool_catalog.search", {"query": "hold a slot", "limit": 3})
    top = found["data"]["items"][0]
    story.say(
        "tool_catalog.search 'hold a slot'",
        [
            f"{item['name']}: " + textwrap.shorten(item["summary"], SUMMARY_WIDTH, placeholder=" …")
            for item in found["data"]["items"]
        ],
        found["meta"]["serverResultCreatedAt"],
    )
    _expect(top["name"] == "booking.hold_slot", "search ranks booking.hold_slot first")

    lines: list[str] = []
    offset: int | None = 0
    pages = 0
    sha = created_at = ""
    while offset is not None:
        page = await story.call(
            "tool_catalog.read", {"uri": "tool://booking.hold_slot", "offset": offset, "limit": 40}
        )
        data = page["data"]
        lines += data["lines"]
        sha = data["sha256"]
        created_at = page["meta"]["serverResultCreatedAt"]
        pages += 1
        offset = data["next"]["offset"] if data["next"] else None
    text = "\n".join(lines) + "\n"
    story.say(
        "tool_catalog.read tool://booking.hold_slot",
        [f"{len(lines)} lines in {pages} pages; sha256 {sha[:16]}…"],
        created_at,
    )
    _expect(hashlib.sha256(text.encode()).hexdigest() == sha, "paged read reproduces the schema")

    slots = await story.logical("booking.search_available_slots", {"query": "AI", "limit": 5})
    story.say(
        "booking.search_available_slots 'AI'",
        [
            " ".join(
                (
                    s["slotId"],
                    s["startsAt"],
                    s["expertName"],
                    s["price"]["amount"],
                    s["price"]["currency"],
                )
            )
            for s in slots["data"]["slots"]
        ],
        slots["meta"]["serverResultCreatedAt"],
    )
    _expect(any(s["slotId"] == "slot-ai-001" for s in slots["data"]["slots"]), "slot-ai-001 free")

    hold = await story.logical(
        "booking.hold_slot",
        {
            "slotId": "slot-ai-001",
            "customer": {"name": "Li Hua", "email": "Li.Hua@Example.com"},
            "idempotencyKey": str(uuid.uuid4()),
        },
    )
    _expect(hold["ok"], f"hold succeeds: {hold.get('error')}")
    booking = hold["data"]
    story.say(
        "booking.hold_slot slot-ai-001 (user A)",
        [
            (
                f"{booking['bookingId']} {booking['status']} v{booking['version']} "
                f"until {booking['expiresAt']}"
            ),
            f"pay at {booking['paymentPageUrl']}",
            f"intentHash {booking['confirmationIntent']['intentHash'][:23]}…",
        ],
        hold["meta"]["serverResultCreatedAt"],
    )
    _expect(booking["customer"]["email"] == "Li.Hua@Example.com", "e-mail kept exactly")

    second = await story.logical(
        "booking.hold_slot",
        {
            "slotId": "slot-ai-001",
            "customer": {"name": "Second User", "email": "second@example.com"},
            "idempotencyKey": str(uuid.uuid4()),
        },
    )
    story.say(
        "booking.hold_slot slot-ai-001 (user B)",
        [second.get("error", {}).get("code", "")],
        second["meta"]["serverResultCreatedAt"],
    )
    _expect_error(second, "SLOT_UNAVAILABLE")

    intent = booking["confirmationIntent"]
    stale = await story.logical(
        "booking.confirm_booking",
        {
            "bookingId": booking["bookingId"],
            "expectedVersion": booking["version"],
            "idempotencyKey": str(uuid.uuid4()),
            "humanApproval": _approval(intent, approved_at=_CLOCK.now() - timedelta(hours=1)),
        },
    )
    story.say(
        "confirm with an approval from an hour ago",
        [f"{stale['error']['code']} (refused before payment is asked)"],
        stale["meta"]["serverResultCreatedAt"],
    )
    _expect_error(stale, "HUMAN_APPROVAL_EXPIRED")

    confirm_args = {
        "bookingId": booking["bookingId"],
        "expectedVersion": booking["version"],
        "idempotencyKey": str(uuid.uuid4()),
        "humanApproval": _approval(intent, approved_at=_CLOCK.now()),
    }
    pending = await story.logical("booking.confirm_booking", confirm_args)
    story.say(
        "confirm while payment is PENDING",
        [f"{pending['error']['code']} retryable={pending['error']['retryable']}"],
        pending["meta"]["serverResultCreatedAt"],
    )
    _expect_error(pending, "PAYMENT_PENDING")

    _pay_on_the_page(booking["paymentPageUrl"])
    story.exchanges.exchanges.clear()  # the person's step is no MCP exchange
    story.say(
        "the payer presses Pay on the payment page (the demo plays the payer)",
        [f"POST {booking['paymentPageUrl']} action=pay -> the sandbox records PAID"],
    )
    confirmed = await story.logical("booking.confirm_booking", confirm_args)
    _expect(confirmed["ok"], f"confirm after PAID succeeds: {confirmed.get('error')}")
    data = confirmed["data"]
    story.say(
        "confirm after PAID (same idempotencyKey, retried)",
        [f"{data['status']} v{data['version']} paidAt {data['payment']['paidAt']}"],
        confirmed["meta"]["serverResultCreatedAt"],
    )
    _expect(data["status"] == "CONFIRMED" and data["confirmationIntent"] is None, "confirmed")

    got = await story.logical("booking.get_booking", {"bookingId": booking["bookingId"]})
    story.say(
        "booking.get_booking",
        [json.dumps({k: got["data"][k] for k in ("status", "version", "confirmedAt")})],
        got["meta"]["serverResultCreatedAt"],
    )
    _expect(got["data"]["status"] == "CONFIRMED", "get shows CONFIRMED")


def _pay_on_the_page(page_url: str) -> None:
    """What the person's browser sends when they press Pay on the sandbox's page."""
    response = httpx2.post(page_url, data={"action": "pay"}, timeout=10)
    _expect(response.status_code == SEE_OTHER, f"the page took the payment: {response.status_code}")


async def run() -> None:
    """Run the demo once; raises DemoFailedError on the first deviation."""
    exchanges = ExchangeRecorder(limit=1)
    with tempfile.TemporaryDirectory(prefix="expert-booking-demo-") as directory:
        database = Path(directory) / "expert-booking.db"
        # Its own server on the defaults: none of the operator's settings, no ./.env of theirs.
        own = {
            name: value
            for name, value in os.environ.items()
            if name not in SETTING_NAMES and not name.startswith("OTEL_")
        }
        with server_with_sandbox(database, own, cwd=Path(directory)) as (server, sandbox):
            print(f"server {server.url} (pid {server.pid}), payment sandbox {sandbox.url}")
            print(INTRODUCTION)
            async with open_client(server.url, on_exchange=exchanges) as client:
                await _walk(_Story(client, exchanges))
    print("\ndemo finished: every step behaved as the contract says")


def main() -> int:
    """Console entry point for ``expert-booking-mcp demo``."""
    try:
        asyncio.run(run())
    except (DemoFailedError, ServerStartError, ServerConnectionError) as exc:
        print(f"\nDEMO FAILED: {exc}", file=sys.stderr)
        return 1
    return 0
