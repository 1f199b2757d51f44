"""Payment faults against a spawned server (real app, controlled clock) and a loopback stub.

CONTRACT section 4: a timeout, a connection error, a non-200 status or a malformed body is
PAYMENT_UNAVAILABLE (retryable) with nothing changed; a wrong bookingId, amount or currency,
or PAID without paidAt is PAYMENT_MISMATCH with nothing changed; FAILED / CLOSED release the
slot; a PAID answer that arrives after the hold expired confirms nothing and is recorded as
PAID_AFTER_EXPIRY with refundDue.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from expert_booking.client import open_client
from expert_booking.testing.payment_stub import PaymentStub, RecordedRequest
from expert_booking.testing.server_process import ServerProcess
from harness.clock import OffsetFileClock, read_offset, write_offset
from harness.mcp_calls import confirm_arguments, hold_arguments
from harness.serve_controlled import controlled_server

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

HOLD_TTL_SECONDS = 300
MOVED_CLOCK_TOLERANCE_SECONDS = 100 * HOLD_TTL_SECONDS
SEED_SLOTS = (
    "slot-ai-001",
    "slot-ai-002",
    "slot-law-001",
    "slot-law-002",
    "slot-fin-001",
    "slot-fin-002",
)


class _HookedRequests(list[RecordedRequest]):
    """The stub's request log; calls ``on_append`` inside the stub's handler, before it answers."""

    on_append: Callable[[RecordedRequest], None] | None = None

    def append(self, request: RecordedRequest) -> None:
        super().append(request)
        if self.on_append is not None:
            self.on_append(request)


@pytest.fixture(scope="module")
def offset_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clock") / "offset"
    write_offset(path, 0)
    return path


@pytest.fixture(scope="module")
async def stub(offset_file: Path) -> AsyncIterator[PaymentStub]:
    """A stub on the server's moved clock (its ``paidAt`` lies after the hold, as in life),
    with a request log the tests can hook into."""
    async with PaymentStub.running(clock=OffsetFileClock(offset_file)) as running:
        running.requests = _HookedRequests()
        yield running


def _spawn(tmp: Path, offset_file: Path, payment_url: str) -> ServerProcess:
    env = {
        **os.environ,
        "PAYMENT_QUERY_BASE_URL": payment_url,
        # Short enough for the 5 s stalls to time out quickly, long enough that a loaded box
        # answering a well-formed body late does not turn a mismatch into a timeout.
        "PAYMENT_TIMEOUT_SECONDS": "2",
        "HOLD_TTL_SECONDS": str(HOLD_TTL_SECONDS),
        # The tests move the server's clock ahead of the client's, a hold lifetime at a time.
        "CLIENT_CLOCK_TOLERANCE_SECONDS": str(MOVED_CLOCK_TOLERANCE_SECONDS),
    }
    return controlled_server(db_path=tmp / "booking.db", offset_file=offset_file, env=env)


@pytest.fixture(scope="module")
def server(
    stub: PaymentStub, offset_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    with _spawn(tmp_path_factory.mktemp("faults"), offset_file, stub.base_url) as running:
        yield running
    assert running.returncode == 0  # a graceful stop after the load


@pytest.fixture(scope="module")
def refused_port() -> Iterator[int]:
    """A loopback port that refuses connections: bound, never listening, kept bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture
async def client(server: ServerProcess, offset_file: Path) -> AsyncIterator[Client]:
    with anyio.fail_after(30):
        async with open_client(server.url) as connected:
            yield connected
    # Every hold a test left behind expires; the next test finds all unconfirmed slots free.
    write_offset(offset_file, read_offset(offset_file) + HOLD_TTL_SECONDS + 1)


def server_now(offset_file: Path) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=read_offset(offset_file))


async def call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a logical tool through tool_catalog.call; the envelope (isError mirrors ok)."""
    with anyio.fail_after(15):
        result = await client.call_tool(
            "tool_catalog.call",
            {
                "name": name,
                "arguments": arguments,
                "requestSpanId": "0b6f6d1e-2f7d-4d8e-9a51-6c3f1d2e4a10",
            },
        )
    envelope = result.structured_content
    assert isinstance(envelope, dict)
    assert result.is_error is (envelope["ok"] is False)
    return envelope


async def hold_free_slot(client: Client) -> dict[str, Any]:
    """Hold the first seed slot that is free; its booking snapshot."""
    for slot_id in SEED_SLOTS:
        envelope = await call(client, "booking.hold_slot", hold_arguments(slot_id))
        if envelope["ok"]:
            return dict(envelope["data"])
        assert envelope["error"]["code"] == "SLOT_UNAVAILABLE", envelope
    pytest.fail("no free seed slot left")


async def get_booking(client: Client, booking_id: str) -> dict[str, Any]:
    envelope = await call(client, "booking.get_booking", {"bookingId": booking_id})
    assert envelope["ok"], envelope
    return dict(envelope["data"])


def answer_body(booking: dict[str, Any], **changes: Any) -> str:
    body = {
        "bookingId": booking["bookingId"],
        "status": "PAID",
        "amount": booking["confirmationIntent"]["intent"]["amount"],
        "currency": booking["confirmationIntent"]["intent"]["currency"],
        "paidAt": booking["heldAt"],  # paid right at the hold: inside the allowed window
    }
    body.update(changes)
    return json.dumps({key: value for key, value in body.items() if value is not ABSENT})


ABSENT = object()
"""A change that leaves the member out of the answer."""


def _error(envelope: dict[str, Any]) -> tuple[str, bool]:
    assert envelope["ok"] is False, envelope
    return envelope["error"]["code"], envelope["error"]["retryable"]


UNCHANGED_FAULTS: dict[str, tuple[Callable[[dict[str, Any]], dict[str, Any]], str, bool]] = {
    "timeout": (lambda b: {"status": "PAID", "delay_seconds": 5.0}, "PAYMENT_UNAVAILABLE", True),
    "http-500": (lambda b: {"status": "PAID", "http_status": 500}, "PAYMENT_UNAVAILABLE", True),
    "http-404": (lambda b: {"status": "PAID", "http_status": 404}, "PAYMENT_UNAVAILABLE", True),
    "malformed-json": (lambda b: {"raw_body": '{"status": "PAID", '}, "PAYMENT_UNAVAILABLE", True),
    "json-without-fields": (
        lambda b: {"raw_body": '{"status": "PAID"}'},
        "PAYMENT_UNAVAILABLE",
        True,
    ),
    "json-array": (lambda b: {"raw_body": "[]"}, "PAYMENT_UNAVAILABLE", True),
    "wrong-booking-id": (
        lambda b: {"raw_body": answer_body(b, bookingId="booking-" + "0" * 32)},
        "PAYMENT_MISMATCH",
        False,
    ),
    "wrong-amount": (
        lambda b: {"raw_body": answer_body(b, amount="1.00")},
        "PAYMENT_MISMATCH",
        False,
    ),
    "amount-not-the-exact-string": (
        lambda b: {"raw_body": answer_body(b, amount=b["payment"]["amount"].rstrip("0"))},
        "PAYMENT_MISMATCH",
        False,
    ),
    "wrong-currency": (
        lambda b: {"raw_body": answer_body(b, currency="USD")},
        "PAYMENT_MISMATCH",
        False,
    ),
    "paid-without-paid-at": (
        lambda b: {"raw_body": answer_body(b, paidAt=None)},
        "PAYMENT_MISMATCH",
        False,
    ),
    "paid-without-a-paid-at-member": (
        lambda b: {"raw_body": answer_body(b, paidAt=ABSENT)},
        "PAYMENT_MISMATCH",
        False,
    ),
    "pending-without-a-paid-at-member": (
        lambda b: {"raw_body": answer_body(b, status="PENDING", paidAt=ABSENT)},
        "PAYMENT_PENDING",
        True,
    ),
    "still-pending": (
        lambda b: {"raw_body": answer_body(b, status="PENDING", paidAt=None)},
        "PAYMENT_PENDING",
        True,
    ),
    "paid-at-iso-8601-basic": (
        lambda b: {
            "raw_body": answer_body(b, paidAt=b["heldAt"].replace("-", "").replace(":", ""))
        },
        "PAYMENT_UNAVAILABLE",
        True,
    ),
    "paid-at-with-a-space": (
        lambda b: {"raw_body": answer_body(b, paidAt=b["heldAt"].replace("T", " "))},
        "PAYMENT_UNAVAILABLE",
        True,
    ),
    "paid-at-year-2999": (
        lambda b: {"raw_body": answer_body(b, paidAt="2999-01-01T00:00:00.000Z")},
        "PAYMENT_MISMATCH",
        False,
    ),
    "paid-at-a-day-before-the-hold": (
        lambda b: {"raw_body": answer_body(b, paidAt=_shifted(b["heldAt"], days=-1))},
        "PAYMENT_MISMATCH",
        False,
    ),
    "body-over-64-kib": (
        lambda b: {"raw_body": answer_body(b) + " " * (64 * 1024)},
        "PAYMENT_UNAVAILABLE",
        True,
    ),
}


def _shifted(instant: str, **delta: float) -> str:
    moved = datetime.fromisoformat(instant) + timedelta(**delta)
    return moved.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


async def test_an_approval_dated_before_the_hold_is_refused_without_a_payment_query(
    client: Client, stub: PaymentStub, offset_file: Path
) -> None:
    booking = await hold_free_slot(client)
    stub.set_answer(booking["bookingId"], raw_body=answer_body(booking))
    early = datetime.fromisoformat(booking["heldAt"]) - timedelta(seconds=110)
    envelope = await call(
        client, "booking.confirm_booking", confirm_arguments(booking, approved_at=early)
    )
    assert _error(envelope) == ("HUMAN_APPROVAL_EXPIRED", False)
    assert envelope["error"]["details"]["reason"] == "BEFORE_INTENT"
    assert envelope["error"]["details"]["intentIssuedAt"] == booking["heldAt"]
    assert stub.requests_for(booking["bookingId"]) == []
    assert await get_booking(client, booking["bookingId"]) == booking


@pytest.mark.parametrize("fault", list(UNCHANGED_FAULTS))
async def test_payment_fault_leaves_the_held_booking_unchanged_with_the_right_error(
    client: Client, stub: PaymentStub, offset_file: Path, fault: str
) -> None:
    answer, code, retryable = UNCHANGED_FAULTS[fault]
    booking = await hold_free_slot(client)
    stub.set_answer(booking["bookingId"], **answer(booking))

    arguments = confirm_arguments(booking, approved_at=server_now(offset_file))
    envelope = await call(client, "booking.confirm_booking", arguments)

    assert _error(envelope) == (code, retryable)
    assert len(stub.requests_for(booking["bookingId"])) == 1
    after = await get_booking(client, booking["bookingId"])
    assert after == booking
    # Nothing was recorded under the key: the same call reaches the payment service again.
    stub.set_answer(booking["bookingId"], raw_body=answer_body(booking, status="PENDING"))
    again = await call(client, "booking.confirm_booking", arguments)
    assert _error(again) == ("PAYMENT_PENDING", True)
    assert len(stub.requests_for(booking["bookingId"])) == 2


async def test_after_a_payment_timeout_the_same_confirmation_succeeds_once_paid(
    client: Client, stub: PaymentStub, offset_file: Path
) -> None:
    booking = await hold_free_slot(client)
    stub.set_answer(booking["bookingId"], status="PAID", delay_seconds=5.0)
    arguments = confirm_arguments(booking, approved_at=server_now(offset_file))
    assert _error(await call(client, "booking.confirm_booking", arguments)) == (
        "PAYMENT_UNAVAILABLE",
        True,
    )

    stub.set_answer(booking["bookingId"], raw_body=answer_body(booking))
    envelope = await call(client, "booking.confirm_booking", arguments)

    assert envelope["ok"], envelope
    confirmed = envelope["data"]
    assert (confirmed["status"], confirmed["version"]) == ("CONFIRMED", booking["version"] + 1)
    assert confirmed["payment"]["status"] == "PAID"
    assert confirmed["payment"]["paidAt"] == booking["heldAt"]


@pytest.mark.parametrize("paid_at", [None, ABSENT], ids=["null-paid-at", "no-paid-at"])
@pytest.mark.parametrize("payment_status", ["FAILED", "CLOSED"])
async def test_failed_or_closed_payment_releases_the_slot(
    client: Client, stub: PaymentStub, offset_file: Path, payment_status: str, paid_at: object
) -> None:
    code = booking_status = f"PAYMENT_{payment_status}"
    booking = await hold_free_slot(client)
    stub.set_answer(
        booking["bookingId"], raw_body=answer_body(booking, status=payment_status, paidAt=paid_at)
    )
    arguments = confirm_arguments(booking, approved_at=server_now(offset_file))

    envelope = await call(client, "booking.confirm_booking", arguments)

    assert _error(envelope) == (code, False)
    after = await get_booking(client, booking["bookingId"])
    assert (after["status"], after["version"]) == (booking_status, booking["version"] + 1)
    assert after["payment"]["status"] == payment_status
    assert after["confirmationIntent"] is None
    # The outcome is recorded: a replay returns it without asking the payment service again.
    assert _error(await call(client, "booking.confirm_booking", arguments)) == (code, False)
    assert len(stub.requests_for(booking["bookingId"])) == 1
    rehold = await call(client, "booking.hold_slot", hold_arguments(booking["slotId"]))
    assert rehold["ok"], rehold
    assert rehold["data"]["status"] == "HELD"


async def test_paid_answer_arriving_after_the_hold_expired_is_paid_after_expiry_on_record(
    client: Client, stub: PaymentStub, offset_file: Path
) -> None:
    booking = await hold_free_slot(client)
    stub.set_answer(booking["bookingId"], raw_body=answer_body(booking))
    arguments = confirm_arguments(booking, approved_at=server_now(offset_file))
    requests = stub.requests
    assert isinstance(requests, _HookedRequests)

    def expire_while_answering(request: RecordedRequest) -> None:
        # Runs in the stub's handler: the server's clock passes expiresAt before PAID arrives.
        if request.booking_id == booking["bookingId"]:
            write_offset(offset_file, read_offset(offset_file) + HOLD_TTL_SECONDS + 1)

    requests.on_append = expire_while_answering
    try:
        envelope = await call(client, "booking.confirm_booking", arguments)
    finally:
        requests.on_append = None

    assert _error(envelope) == ("PAID_AFTER_EXPIRY", False)
    assert "support" in envelope["error"]["recovery"]["action"]
    assert len(stub.requests_for(booking["bookingId"])) == 1
    after = await get_booking(client, booking["bookingId"])
    assert envelope["error"]["details"]["booking"] == after
    # Released (version + 1), then the payment after expiry recorded (version + 1).
    assert (after["status"], after["version"]) == ("EXPIRED", booking["version"] + 2)
    assert (after["refundDue"], after["payment"]["status"]) == (True, "PAID")
    assert after["payment"]["paidAt"] == booking["heldAt"]
    assert after["confirmedAt"] is None
    listed = await call(client, "booking.list_bookings", {"limit": 50})
    assert listed["ok"], listed
    assert after in listed["data"]["bookings"]
    # The same confirmation replays its outcome without asking the payment service again.
    again = await call(client, "booking.confirm_booking", arguments)
    assert again["error"] == envelope["error"]
    assert len(stub.requests_for(booking["bookingId"])) == 1
    rehold = await call(client, "booking.hold_slot", hold_arguments(booking["slotId"]))
    assert rehold["ok"], rehold


async def test_refused_payment_connection_is_retryable_and_changes_nothing(
    offset_file: Path, refused_port: int, tmp_path: Path
) -> None:
    refused_url = f"http://127.0.0.1:{refused_port}"
    with _spawn(tmp_path, offset_file, refused_url) as server:
        with anyio.fail_after(30):
            async with open_client(server.url) as client:
                booking = await hold_free_slot(client)
                arguments = confirm_arguments(booking, approved_at=server_now(offset_file))

                envelope = await call(client, "booking.confirm_booking", arguments)

                assert _error(envelope) == ("PAYMENT_UNAVAILABLE", True)
                assert await get_booking(client, booking["bookingId"]) == booking
    assert server.returncode is not None
