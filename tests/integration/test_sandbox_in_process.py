"""The payment sandbox in process: by its own clock, and with a ledger it cannot write.

The booking is a real hold in a real server's database (the sandbox reads it as it does in
use); the sandbox app runs in process with a clock a test moves past ``expiresAt``, so the
booking is still stored ``HELD`` (no transaction released it yet) but its hold is over.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import uuid
from contextlib import closing
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from expert_booking.client import open_client
from expert_booking.domain.model import parse_instant
from expert_booking.sandbox.app import build_sandbox_app
from expert_booking.sandbox.bookings import BookingReader
from expert_booking.sandbox.ledger import Ledger
from expert_booking.testing.server_process import ServerProcess
from tests.fakes import MutableClock

pytestmark = pytest.mark.anyio

SANDBOX = "http://127.0.0.1:3100"
DEADLINE_S = 10


async def held_in(database: Path) -> dict[str, Any]:
    """A real hold made by a server on ``database``, which is stopped again."""
    call = {
        "name": "booking.hold_slot",
        "arguments": {
            "slotId": "slot-ai-002",
            "customer": {"name": "Li Hua", "email": "li@example.com"},
            "idempotencyKey": str(uuid.uuid4()),
        },
        "requestSpanId": str(uuid.uuid4()),
    }
    with ServerProcess(db_path=database) as server:
        async with open_client(server.url) as client:
            result = await client.call_tool("tool_catalog.call", call)
    assert result.structured_content is not None
    assert result.structured_content["ok"], result.structured_content
    booking: dict[str, Any] = result.structured_content["data"]
    return booking


async def test_a_hold_that_ran_out_is_not_payable_though_still_stored_held(
    tmp_path: Path,
) -> None:
    database = tmp_path / "expert-booking.db"
    booking = await held_in(database)
    expires = parse_instant(booking["expiresAt"])
    clock = MutableClock(expires - timedelta(seconds=1))
    app = build_sandbox_app(database, Ledger(tmp_path / "ledger.json"), clock=clock)
    page_url = f"{SANDBOX}/pay/{booking['bookingId']}"
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
        open_page = await http.get(page_url)
        assert 'value="pay"' in open_page.text
        clock.set(expires)  # the hold ends at expiresAt itself
        closed = await http.get(page_url, headers={"accept-language": "de"})
        assert "abgelaufen" in closed.text
        assert booking["expiresAt"] in closed.text
        assert 'value="pay"' not in closed.text
        refused = await http.post(page_url, data={"action": "pay"})
        assert refused.status_code == 409
        assert "ran out" in refused.text
        answer = (await http.get(f"{SANDBOX}/payments/{booking['bookingId']}")).json()
        assert answer["status"] == "PENDING"


async def test_a_payment_the_ledger_cannot_record_is_503_and_stays_pending(
    tmp_path: Path,
) -> None:
    database = tmp_path / "expert-booking.db"
    booking = await held_in(database)
    folder = tmp_path / "ledgers"
    ledger = Ledger(folder / "ledger.json")
    folder.rmdir()
    folder.write_text("")  # a file where the ledger's directory was: every write fails
    clock = MutableClock(parse_instant(booking["heldAt"]))
    app = build_sandbox_app(database, ledger, clock=clock)
    page_url = f"{SANDBOX}/pay/{booking['bookingId']}"
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
        refused = await http.post(page_url, data={"action": "pay"})
        answer = (await http.get(f"{SANDBOX}/payments/{booking['bookingId']}")).json()
        mailbox = await http.get(f"{SANDBOX}/mailbox", headers={"accept": "application/json"})
    assert refused.status_code == 503
    assert "nothing changed" in refused.text
    assert refused.headers["content-type"] == "text/plain; charset=utf-8"  # it said JSON
    assert (refused.headers["x-payment-sandbox"], refused.headers["cache-control"]) == (
        "1",
        "no-store",
    )
    assert "x-payment-responded-at" in refused.headers
    assert (answer["status"], answer["paidAt"]) == ("PENDING", None)
    assert mailbox.json() == {"messages": []}


class _SlowLedger(Ledger):
    """A ledger whose next change stops before its write until the test lets it go on."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.changing = threading.Event()
        self.go_on = threading.Event()
        self.read_mid_change: list[str] = []

    def settle(self, booking_id: str, status: str, *, at: str, amount: str, currency: str) -> Any:
        self.changing.set()
        assert self.go_on.wait(DEADLINE_S)
        try:
            return super().settle(booking_id, status, at=at, amount=amount, currency=currency)
        finally:
            self.changing.clear()

    def payment(self, booking_id: str) -> Any:
        if self.changing.is_set():
            self.read_mid_change.append(booking_id)
        return super().payment(booking_id)


async def test_a_payment_answer_waits_for_a_change_in_progress(tmp_path: Path) -> None:
    """The server's question after its cancel commit hears a Pay that read the booking held."""
    database = tmp_path / "expert-booking.db"
    booking = await held_in(database)
    ledger = _SlowLedger(tmp_path / "ledger.json")
    app = build_sandbox_app(database, ledger, clock=MutableClock(parse_instant(booking["heldAt"])))
    booking_id = booking["bookingId"]
    async with (
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http,
        anyio.create_task_group() as tasks,
    ):
        with anyio.fail_after(DEADLINE_S):
            tasks.start_soon(
                partial(http.post, f"{SANDBOX}/pay/{booking_id}", data={"action": "pay"})
            )
            assert await anyio.to_thread.run_sync(ledger.changing.wait, DEADLINE_S)
            answers: list[httpx.Response] = []

            async def ask() -> None:
                answers.append(await http.get(f"{SANDBOX}/payments/{booking_id}"))

            tasks.start_soon(ask)
            while not (answers or ledger.turn.statistics().tasks_waiting):
                await anyio.wait_all_tasks_blocked()
                await anyio.to_thread.run_sync(lambda: None)  # a worker thread may be reading
            ledger.go_on.set()
    assert ledger.read_mid_change == []
    (answer,) = answers
    assert answer.json()["status"] == "PAID"


@pytest.mark.parametrize(
    ("schema", "logged"),
    [
        ("CREATE TABLE unrelated (x)", False),  # not migrated yet: simply no booking
        ("CREATE TABLE bookings (booking_id); CREATE TABLE experts (expert_id)", True),
    ],
)
def test_a_booking_database_it_cannot_read_is_no_booking_and_said_unless_unmigrated(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, schema: str, *, logged: bool
) -> None:
    database = tmp_path / "expert-booking.db"
    with closing(sqlite3.connect(database)) as connection:
        connection.executescript(schema)
    with caplog.at_level(logging.WARNING, logger="expert_booking.sandbox"):
        assert BookingReader(database).find("booking-x") is None
    warnings = [record.getMessage() for record in caplog.records]
    assert bool(warnings) is logged, warnings
    if logged:  # a schema this reader no longer matches (a renamed column) is not "not found"
        assert "no such column" in warnings[0]
