"""kill -9 of the server during a concurrent hold/confirm load, then a restart on the same file.

Spec (state machine and transactions): every state change is one SQLite transaction, overdue
holds are released inside the next related read or write (so a restart loses no release), and
idempotent replays return the original outcome. After the crash: no confirmed booking is lost,
no slot has two active bookings, overdue holds read EXPIRED, and replays of requests that
succeeded before the crash return exactly what they returned then.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from expert_booking.testing.payment_stub import PaymentStub
from expert_booking.testing.server_process import ServerProcess
from harness.bench_db import bench_slot_id, create_bench_db
from harness.clock import read_offset, write_offset
from harness.loadgen import Reply, make_http_client, send
from harness.mcp_calls import McpCall, confirm_arguments, hold_arguments, logical
from harness.serve_controlled import controlled_server

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.slow]

HOLD_TTL_SECONDS = 300
WORKERS = 8
SLOTS_PER_WORKER = 12
KILL_AFTER_CONFIRMED = 8


@dataclass
class Ledger:
    """What the clients saw before the crash."""

    succeeded: list[tuple[McpCall, dict[str, Any]]] = field(default_factory=list)
    in_flight: list[McpCall] = field(default_factory=list)
    held: dict[str, dict[str, Any]] = field(default_factory=dict)
    confirmed: dict[str, dict[str, Any]] = field(default_factory=dict)


def read_db(path: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return db.execute(sql, params).fetchall()


async def drive_until_killed(server: ServerProcess, stub: PaymentStub, offset_file: Path) -> Ledger:
    """Hold and confirm concurrently; SIGKILL the server once enough confirmations arrived."""
    ledger = Ledger()
    killed = anyio.Event()

    async def call(client: httpx2.AsyncClient, request: McpCall) -> dict[str, Any] | None:
        """The envelope, or None when the crash cut the exchange (outcome unknown)."""
        try:
            reply: Reply = await send(client, server.url, request)
        except httpx2.HTTPError:
            ledger.in_flight.append(request)
            return None
        envelope = reply.envelope
        if envelope["ok"]:
            ledger.succeeded.append((request, dict(envelope["data"])))
        return dict(envelope)

    async def worker(number: int) -> None:
        async with make_http_client(connections=1) as client:
            for index in range(number * SLOTS_PER_WORKER, (number + 1) * SLOTS_PER_WORKER):
                if killed.is_set():
                    return
                held = await call(
                    client, logical("booking.hold_slot", hold_arguments(bench_slot_id(index)))
                )
                if held is None or not held["ok"]:
                    continue
                booking = held["data"]
                ledger.held[booking["bookingId"]] = booking
                # Two of three payments are PAID, the rest still PENDING (the hold stays).
                status = "PAID" if index % 3 else "PENDING"
                stub.set_answer(booking["bookingId"], status=status)
                approved_at = datetime.now(UTC) + timedelta(seconds=read_offset(offset_file))
                confirm = logical(
                    "booking.confirm_booking", confirm_arguments(booking, approved_at=approved_at)
                )
                confirmed = await call(client, confirm)
                if confirmed is not None and confirmed["ok"]:
                    ledger.confirmed[booking["bookingId"]] = confirmed["data"]
                    if len(ledger.confirmed) >= KILL_AFTER_CONFIRMED and not killed.is_set():
                        killed.set()
                        assert server.kill() == -9  # SIGKILL + reap: immediate

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tasks:
            for number in range(WORKERS):
                tasks.start_soon(worker, number)
    assert killed.is_set(), "the load finished before the crash"
    return ledger


async def test_kill_during_load_loses_nothing_and_replays_return_the_original_outcome(
    stub: PaymentStub, tmp_path: Path
) -> None:
    db_path = tmp_path / "booking.db"
    offset_file = tmp_path / "offset"
    write_offset(offset_file, 0)
    await create_bench_db(db_path, WORKERS * SLOTS_PER_WORKER)
    env = {
        **os.environ,
        "PAYMENT_QUERY_BASE_URL": stub.base_url,
        "HOLD_TTL_SECONDS": str(HOLD_TTL_SECONDS),
        # The second server's clock runs a hold lifetime ahead of the client's.
        "CLIENT_CLOCK_TOLERANCE_SECONDS": str(10 * HOLD_TTL_SECONDS),
    }

    first = controlled_server(db_path=db_path, offset_file=offset_file, env=env).start()
    try:
        ledger = await drive_until_killed(first, stub, offset_file)
    finally:
        if first.returncode is None:
            first.kill()
    assert first.returncode == -9
    assert len(ledger.confirmed) >= KILL_AFTER_CONFIRMED

    # The database survived the crash intact and never had two active bookings of one slot.
    assert read_db(db_path, "PRAGMA integrity_check") == [("ok",)]
    assert not read_db(
        db_path,
        "SELECT slot_id FROM bookings WHERE status IN ('HELD', 'CONFIRMED') "
        "GROUP BY slot_id HAVING COUNT(*) > 1",
    )

    # Restart on the same file, with the clock past every hold's expiry.
    write_offset(offset_file, HOLD_TTL_SECONDS + 1)
    with controlled_server(db_path=db_path, offset_file=offset_file, env=env) as second:
        async with make_http_client(connections=4) as client:
            with anyio.fail_after(60):
                await check_after_restart(second, client, db_path, ledger)
    assert second.returncode == 0  # a graceful stop


async def check_after_restart(
    server: ServerProcess, client: httpx2.AsyncClient, db_path: Path, ledger: Ledger
) -> None:
    async def get(booking_id: str) -> dict[str, Any]:
        reply = await send(
            client, server.url, logical("booking.get_booking", {"bookingId": booking_id})
        )
        assert reply.envelope["ok"], reply.message
        return dict(reply.envelope["data"])

    # No confirmed booking lost.
    for booking_id, confirmed in ledger.confirmed.items():
        now = await get(booking_id)
        assert (now["status"], now["version"]) == ("CONFIRMED", confirmed["version"])

    # Holds the clients saw and that were not confirmed are overdue: released on the next read.
    unconfirmed = [booking_id for booking_id in ledger.held if booking_id not in ledger.confirmed]
    assert unconfirmed, "the load produced no unconfirmed hold"
    for booking_id in unconfirmed:
        now = await get(booking_id)
        if now["status"] == "CONFIRMED":  # the confirmation committed, its answer unseen
            assert (now["version"], now["payment"]["status"]) == (2, "PAID")
        else:
            assert (now["status"], now["version"]) == ("EXPIRED", 2)
    assert read_db(db_path, "SELECT COUNT(*) FROM bookings WHERE status = 'HELD'") == [(0,)]

    # Replays of requests that succeeded before the crash return the original outcome.
    for request, original in ledger.succeeded:
        reply = await send(client, server.url, request)
        assert reply.envelope["ok"], (request, reply.message)
        assert reply.envelope["data"] == original

    # A request cut by the crash either committed (its replay returns the stored outcome) or
    # left no trace.
    for request in ledger.in_flight:
        arguments = request.params["arguments"]["arguments"]
        scope = request.params["arguments"]["name"]
        stored = read_db(
            db_path,
            "SELECT booking_json FROM idempotency WHERE scope = ? AND key = ?",
            scope,
            arguments["idempotencyKey"],
        )
        if not stored:  # no trace: each slot is held once, each booking confirmed once
            if scope == "booking.hold_slot":
                sql = "SELECT status FROM bookings WHERE slot_id = ?"
                assert read_db(db_path, sql, arguments["slotId"]) == [], request
            else:
                sql = "SELECT status FROM bookings WHERE booking_id = ?"
                assert read_db(db_path, sql, arguments["bookingId"]) == [("EXPIRED",)], request
            continue
        reply = await send(client, server.url, request)
        assert reply.envelope["ok"], (request, reply.message)
        assert f'"booking_id":"{reply.envelope["data"]["bookingId"]}"' in stored[0][0]

    assert not read_db(
        db_path,
        "SELECT slot_id FROM bookings WHERE status IN ('HELD', 'CONFIRMED') "
        "GROUP BY slot_id HAVING COUNT(*) > 1",
    )
