"""Races over real HTTP against the spawned CLI server: many clients, one slot or one booking.

Each simulated client has its own ``httpx2`` client and connection pool with the stamping
transport, and sends a real MCP 2026-07-28 ``tools/call``; all requests are released together.
The database file is then read directly (read-only) to check the storage-level outcome.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import AsyncExitStack, closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from expert_booking.testing.payment_stub import PaymentStub
from expert_booking.testing.server_process import ServerProcess
from harness.loadgen import Reply, make_http_client, send
from harness.mcp_calls import McpCall, confirm_arguments, hold_arguments, logical

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

HOLDERS = 200
CONFIRMERS = 100


@pytest.fixture(scope="module")
def server(stub: PaymentStub) -> Iterator[ServerProcess]:
    # A hundred payment queries at once reach the stub, which shares this test's event loop:
    # on a loaded box some took longer than the default deadline (PAYMENT_UNAVAILABLE), which
    # is not what these tests are about.
    env = {**os.environ, "PAYMENT_QUERY_BASE_URL": stub.base_url, "PAYMENT_TIMEOUT_SECONDS": "60"}
    with ServerProcess(env=env) as running:
        yield running
    assert running.returncode == 0  # a graceful stop after the load


def read_db(path: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return db.execute(sql, params).fetchall()


async def race(url: str, calls: list[McpCall]) -> list[Reply]:
    """Send every call from its own client at the same moment; the replies in call order."""
    replies: list[Reply | None] = [None] * len(calls)
    go = anyio.Event()
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(make_http_client(connections=1)) for _ in calls]

        async def one(index: int) -> None:
            await go.wait()
            replies[index] = await send(clients[index], url, calls[index])

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tasks:
                for index in range(len(calls)):
                    tasks.start_soon(one, index)
                go.set()
    assert all(reply is not None for reply in replies)
    return [reply for reply in replies if reply is not None]


async def hold(url: str, slot_id: str) -> dict[str, Any]:
    async with make_http_client(connections=1) as client:
        reply = await send(client, url, logical("booking.hold_slot", hold_arguments(slot_id)))
    assert reply.envelope["ok"], reply.message
    return dict(reply.envelope["data"])


def outcome(reply: Reply) -> str:
    assert reply.status_code == 200, reply.message
    envelope = reply.envelope
    return "ok" if envelope["ok"] else str(envelope["error"]["code"])


async def test_two_hundred_clients_holding_one_slot_produce_exactly_one_hold(
    server: ServerProcess,
) -> None:
    calls = [
        logical(
            "booking.hold_slot",
            hold_arguments("slot-law-001", name=f"Client {i}", email=f"client{i}@example.com"),
        )
        for i in range(HOLDERS)
    ]

    replies = await race(server.url, calls)

    outcomes = [outcome(reply) for reply in replies]
    assert sorted(set(outcomes)) == ["SLOT_UNAVAILABLE", "ok"]
    assert outcomes.count("ok") == 1
    assert outcomes.count("SLOT_UNAVAILABLE") == HOLDERS - 1
    winner = next(reply.envelope["data"] for reply in replies if reply.envelope["ok"])
    assert (winner["status"], winner["version"]) == ("HELD", 1)
    refusal = next(reply.envelope["error"] for reply in replies if not reply.envelope["ok"])
    assert refusal["retryable"] is False
    rows = read_db(
        server.db_path, "SELECT booking_id, status FROM bookings WHERE slot_id = ?", "slot-law-001"
    )
    assert rows == [(winner["bookingId"], "HELD")]


async def test_hundred_identical_confirmations_make_one_transition_and_all_see_it(
    server: ServerProcess, stub: PaymentStub
) -> None:
    booking = await hold(server.url, "slot-fin-001")
    stub.set_answer(booking["bookingId"], status="PAID", amount=booking["payment"]["amount"])
    arguments = confirm_arguments(booking, approved_at=datetime.now(UTC))
    calls = [logical("booking.confirm_booking", arguments) for _ in range(CONFIRMERS)]

    replies = await race(server.url, calls)

    confirmed = [reply.envelope["data"] for reply in replies if reply.envelope["ok"]]
    errors = [reply.envelope["error"] for reply in replies if not reply.envelope["ok"]]
    assert all(error["retryable"] for error in errors), errors
    assert confirmed, "no confirmation succeeded"
    assert all(data == confirmed[0] for data in confirmed)
    assert (confirmed[0]["status"], confirmed[0]["version"]) == ("CONFIRMED", 2)
    assert_one_paid_transition(server.db_path, booking["bookingId"], expected_records=1)


async def test_hundred_confirmations_with_different_keys_let_exactly_one_win(
    server: ServerProcess, stub: PaymentStub
) -> None:
    booking = await hold(server.url, "slot-fin-002")
    stub.set_answer(booking["bookingId"], status="PAID", amount=booking["payment"]["amount"])
    approved_at = datetime.now(UTC)
    calls = [
        logical("booking.confirm_booking", confirm_arguments(booking, approved_at=approved_at))
        for _ in range(CONFIRMERS)
    ]

    replies = await race(server.url, calls)

    outcomes = [outcome(reply) for reply in replies]
    assert outcomes.count("ok") == 1, outcomes
    assert set(outcomes) <= {"ok", "VERSION_CONFLICT", "INVALID_STATE"}, outcomes
    winner = next(reply.envelope["data"] for reply in replies if reply.envelope["ok"])
    assert (winner["status"], winner["version"]) == ("CONFIRMED", 2)
    assert_one_paid_transition(server.db_path, booking["bookingId"], expected_records=1)


def assert_one_paid_transition(db_path: Path, booking_id: str, *, expected_records: int) -> None:
    rows = read_db(
        db_path,
        "SELECT status, version, payment_status, paid_at IS NOT NULL, confirmed_at IS NOT NULL "
        "FROM bookings WHERE booking_id = ?",
        booking_id,
    )
    assert rows == [("CONFIRMED", 2, "PAID", 1, 1)]
    records = read_db(
        db_path,
        "SELECT COUNT(*) FROM idempotency WHERE scope = 'booking.confirm_booking' "
        "AND booking_json LIKE ?",
        f'%"booking_id":"{booking_id}"%',
    )
    assert records == [(expected_records,)]
