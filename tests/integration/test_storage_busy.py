"""A competing SQLite writer holds the write lock: writes answer STORAGE_BUSY and change nothing.

The whole app runs in process (``bootstrap.build_asgi_app``) on a temporary database file with a
200 ms busy timeout (``BOOKING_DB_BUSY_TIMEOUT_MS``); the competitor is a stdlib ``sqlite3``
connection on the same file holding ``BEGIN IMMEDIATE`` longer than that. After the competitor
lets go, the same call with the same idempotency key succeeds: a busy answer never records an
outcome.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from expert_booking.bootstrap import build_asgi_app
from expert_booking.client import open_client
from expert_booking.settings import Settings
from harness.inprocess import inprocess_app
from harness.mcp_calls import confirm_arguments, hold_arguments

pytestmark = pytest.mark.anyio

BUSY_TIMEOUT_MS = 200
PAYMENTS_URL = "http://payments.test"


class Competitor:
    """Another process's writer: a stdlib connection that takes and releases the write lock."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, isolation_level=None, timeout=5)

    def lock(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        self._db.execute("ROLLBACK")

    @property
    def locked(self) -> bool:
        return self._db.in_transaction

    def close(self) -> None:
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")
        self._db.close()


class Payments:
    """The payment service as an httpx handler: PAID for every booking, optional side effect."""

    def __init__(self) -> None:
        self.queries: list[str] = []
        self.price = ("500.00", "CNY")
        self.while_answering: Any = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        booking_id = request.url.path.rsplit("/", 1)[-1]
        self.queries.append(booking_id)
        if self.while_answering is not None:
            self.while_answering()
        body = {
            "bookingId": booking_id,
            "status": "PAID",
            "amount": self.price[0],
            "currency": self.price[1],
            "paidAt": request.headers["x-mcp-server-request-sent-at"],  # paid just now
        }
        return httpx.Response(200, json=body)


@pytest.fixture
def payments() -> Payments:
    return Payments()


@pytest.fixture
def competitor(db_path: Path) -> Iterator[Competitor]:
    competing = Competitor(db_path)
    try:
        yield competing
    finally:
        competing.close()


@pytest.fixture
async def client(db_path: Path, payments: Payments) -> AsyncIterator[Client]:
    settings = Settings(
        db_path=db_path, payment_query_base_url=PAYMENTS_URL, db_busy_timeout_ms=BUSY_TIMEOUT_MS
    )
    app = build_asgi_app(settings, payments_transport=httpx.MockTransport(payments))
    with anyio.fail_after(30):
        async with (
            inprocess_app(app) as transport,
            open_client("http://127.0.0.1/mcp", transport=transport) as connected,
        ):
            yield connected


async def call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    with anyio.fail_after(10):
        result = await client.call_tool(
            "tool_catalog.call",
            {"name": name, "arguments": arguments, "requestSpanId": str(uuid.uuid4())},
        )
    envelope = result.structured_content
    assert isinstance(envelope, dict)
    assert result.is_error is (envelope["ok"] is False)
    return envelope


def db_rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return db.execute(sql).fetchall()


def busy(envelope: dict[str, Any]) -> tuple[str, bool]:
    assert envelope["ok"] is False, envelope
    return envelope["error"]["code"], envelope["error"]["retryable"]


async def test_hold_answers_storage_busy_while_another_writer_holds_the_lock_then_succeeds(
    client: Client, competitor: Competitor, db_path: Path
) -> None:
    arguments = hold_arguments("slot-ai-001")
    competitor.lock()

    refused = await call(client, "booking.hold_slot", arguments)

    assert busy(refused) == ("STORAGE_BUSY", True)
    assert db_rows(db_path, "SELECT COUNT(*) FROM bookings") == [(0,)]
    assert db_rows(db_path, "SELECT COUNT(*) FROM idempotency") == [(0,)]
    competitor.release()
    held = await call(client, "booking.hold_slot", arguments)
    assert held["ok"], held
    assert (held["data"]["slotId"], held["data"]["status"]) == ("slot-ai-001", "HELD")


async def test_reads_are_answered_while_another_writer_holds_the_lock(
    client: Client, competitor: Competitor
) -> None:
    # Reads use a read-only connection (WAL): they only need the write lock to release an
    # overdue hold, and no hold is overdue here.
    competitor.lock()
    found = await call(client, "booking.search_available_slots", {"query": "law", "limit": 3})
    assert found["ok"], found
    assert [slot["slotId"] for slot in found["data"]["slots"]] == ["slot-law-001", "slot-law-002"]


async def test_confirm_busy_after_the_payment_query_changes_nothing_and_the_retry_confirms(
    client: Client, competitor: Competitor, payments: Payments, db_path: Path
) -> None:
    held = await call(client, "booking.hold_slot", hold_arguments("slot-fin-001"))
    booking = held["data"]
    arguments = confirm_arguments(booking, approved_at=datetime.now(UTC))
    payments.price = (booking["payment"]["amount"], booking["payment"]["currency"])
    # The competitor takes the lock while the payment service answers PAID: the commit that
    # follows the query finds the store busy.
    payments.while_answering = competitor.lock

    refused = await call(client, "booking.confirm_booking", arguments)

    assert busy(refused) == ("STORAGE_BUSY", True)
    assert payments.queries == [booking["bookingId"]]
    assert competitor.locked
    competitor.release()
    payments.while_answering = None
    assert db_rows(db_path, "SELECT status, version FROM bookings") == [("HELD", 1)]
    stored = db_rows(db_path, "SELECT scope FROM idempotency")
    assert stored == [("booking.hold_slot",)]

    confirmed = await call(client, "booking.confirm_booking", arguments)

    assert confirmed["ok"], confirmed
    assert (confirmed["data"]["status"], confirmed["data"]["version"]) == ("CONFIRMED", 2)
    assert payments.queries == [booking["bookingId"]] * 2
    record = db_rows(db_path, "SELECT booking_json FROM idempotency WHERE scope LIKE '%confirm%'")
    assert json.loads(record[0][0])["status"] == "CONFIRMED"
