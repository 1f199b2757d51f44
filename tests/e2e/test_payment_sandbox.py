"""``expert-booking-mcp payment-sandbox`` over HTTP: payment answers, the page's forms, refusals."""

from __future__ import annotations

import json
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from expert_booking.__main__ import _parser
from expert_booking.adapters.clock import SystemClock
from expert_booking.client import open_client
from expert_booking.domain.model import format_instant
from expert_booking.settings import Settings
from expert_booking.testing.sandbox_pair import server_with_sandbox
from expert_booking.testing.server_process import (
    SANDBOX_COMMAND,
    SANDBOX_READY_LINE,
    ServerProcess,
    ServerStartError,
)
from tests.e2e.sandbox_fixtures import (
    Pair,
    confirm_arguments,
    hold_arguments,
    running_pair,
)

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    yield from running_pair(tmp_path_factory.mktemp("sandbox"))


@pytest.fixture(scope="module")
async def law_booking(pair: Pair) -> dict[str, Any]:
    return await hold(pair, "slot-law-001")


async def hold(pair: Pair, slot_id: str) -> dict[str, Any]:
    async with open_client(pair.server.url) as client:
        result = await client.call_tool("tool_catalog.call", hold_arguments(slot_id))
    envelope = result.structured_content
    assert envelope is not None
    assert envelope["ok"], envelope
    booking: dict[str, Any] = envelope["data"]
    return booking


async def confirm(pair: Pair, booking: dict[str, Any]) -> dict[str, Any]:
    arguments = confirm_arguments(booking, format_instant(SystemClock().now()))
    async with open_client(pair.server.url) as client:
        result = await client.call_tool("tool_catalog.call", arguments)
    envelope: dict[str, Any] | None = result.structured_content
    assert envelope is not None
    return envelope


def test_the_defaults_of_serve_point_at_the_sandbox_default_port() -> None:
    settings = Settings()
    sandbox = _parser().parse_args(["payment-sandbox"])
    origin = f"http://{sandbox.host}:{sandbox.port}"
    assert settings.payment_query_base_url == origin
    assert settings.payment_page_base_url == f"{origin}/pay"


def test_serve_warns_at_start_that_its_payment_url_is_the_sandbox(pair: Pair) -> None:
    warning = pair.server.wait_for_stderr(lambda line: "SANDBOX payments" in line)
    assert '"level":"WARNING"' in warning
    assert pair.sandbox.url in warning


async def test_hold_then_pay_on_the_page_then_confirm(pair: Pair) -> None:
    booking = await hold(pair, "slot-ai-001")
    booking_id = booking["bookingId"]
    assert booking["paymentPageUrl"] == f"{pair.sandbox.url}/pay/{booking_id}"
    answer = httpx2.get(f"{pair.sandbox.url}/payments/{booking_id}")
    assert answer.status_code == 200
    assert answer.json() == {
        "bookingId": booking_id,
        "status": "PENDING",
        "amount": booking["payment"]["amount"],
        "currency": booking["payment"]["currency"],
        "paidAt": None,
    }
    assert "x-payment-responded-at" in answer.headers
    assert (await confirm(pair, booking))["error"]["code"] == "PAYMENT_PENDING"

    paid = httpx2.post(booking["paymentPageUrl"], data={"action": "pay"})
    assert paid.status_code == 303
    assert paid.headers["location"] == f"/pay/{booking_id}?changed=1"
    answer = httpx2.get(f"{pair.sandbox.url}/payments/{booking_id}")
    assert answer.json()["status"] == "PAID"
    assert answer.json()["paidAt"] is not None

    confirmed = await confirm(pair, booking)
    assert confirmed["ok"], confirmed
    assert confirmed["data"]["status"] == "CONFIRMED"

    again = httpx2.post(booking["paymentPageUrl"], data={"action": "fail"})
    assert again.headers["location"] == f"/pay/{booking_id}?already=1"
    assert httpx2.get(f"{pair.sandbox.url}/payments/{booking_id}").json()["status"] == "PAID"
    mailbox = httpx2.get(f"{pair.sandbox.url}/mailbox", headers={"accept": "application/json"})
    messages = [m for m in mailbox.json()["messages"] if m["bookingId"] == booking_id]
    assert [(m["kind"], m["status"]) for m in messages] == [("payment.paid", "PAID")]


@pytest.mark.parametrize(
    ("action", "status", "code"),
    [("fail", "FAILED", "PAYMENT_FAILED"), ("close", "CLOSED", "PAYMENT_CLOSED")],
)
async def test_fail_and_close_on_the_page_reach_the_server(
    pair: Pair, action: str, status: str, code: str
) -> None:
    booking = await hold(pair, "slot-ai-002" if action == "fail" else "slot-fin-001")
    httpx2.post(booking["paymentPageUrl"], data={"action": action})
    answer = httpx2.get(f"{pair.sandbox.url}/payments/{booking['bookingId']}").json()
    assert (answer["status"], answer["paidAt"]) == (status, None)
    assert (await confirm(pair, booking))["error"]["code"] == code


@pytest.mark.parametrize(
    ("accept_language", "language", "words"),
    [
        ("en-GB,en;q=0.8", "en", ("SANDBOX", "Pay", "Fail", "Close", "Amount")),
        ("zh-CN,zh;q=0.9,en;q=0.5", "zh", ("SANDBOX", "支付", "关闭", "金额")),
        ("fr-FR, de;q=0.7, en;q=0.3", "de", ("SANDBOX", "Bezahlen", "abbrechen", "Betrag")),
        ("", "en", ("SANDBOX", "Pay")),
    ],
)
async def test_the_payment_page_speaks_the_browsers_language(
    pair: Pair,
    law_booking: dict[str, Any],
    accept_language: str,
    language: str,
    words: tuple[str, ...],
) -> None:
    booking = law_booking
    page = httpx2.get(booking["paymentPageUrl"], headers={"accept-language": accept_language})
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    for word in words:
        assert word in page.text
    assert booking["bookingId"] in page.text
    assert f"{booking['payment']['amount']} {booking['payment']['currency']}" in page.text
    assert page.headers["content-language"] == language
    assert f'<html lang="{language}">' in page.text


def test_an_unknown_booking_is_404_on_both_surfaces(pair: Pair) -> None:
    unknown = f"booking-{uuid.uuid4().hex}"
    assert httpx2.get(f"{pair.sandbox.url}/payments/{unknown}").status_code == 404
    page = httpx2.get(f"{pair.sandbox.url}/pay/{unknown}")
    assert page.status_code == 404
    assert "SANDBOX" in page.text


def test_only_loopback_hosts_and_same_origin_posts_are_served(pair: Pair) -> None:
    rebound = httpx2.get(f"{pair.sandbox.url}/mailbox", headers={"host": "attacker.example"})
    assert rebound.status_code == 421
    cross = httpx2.post(
        f"{pair.sandbox.url}/pay/booking-x",
        data={"action": "pay"},
        headers={"origin": "http://attacker.example"},
    )
    assert cross.status_code == 403
    mailbox = httpx2.get(f"{pair.sandbox.url}/mailbox")
    assert mailbox.status_code == 200
    assert "SANDBOX" in mailbox.text


def test_the_sandbox_refuses_a_non_loopback_bind_address(tmp_path: Path) -> None:
    command = [*SANDBOX_COMMAND]
    sandbox = ServerProcess(
        command=command,
        db_path=tmp_path / "b.db",
        ready_line=SANDBOX_READY_LINE,
        extra_args=("--host", "0.0.0.0"),  # noqa: S104 - the address it must refuse
    )
    with pytest.raises(ServerStartError, match="--host must be a loopback address"):
        sandbox.start()
    assert sys.executable


async def call_logical(pair: Pair, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {"name": name, "arguments": arguments, "requestSpanId": str(uuid.uuid4())}
    async with open_client(pair.server.url) as client:
        result = await client.call_tool("tool_catalog.call", call)
    envelope: dict[str, Any] | None = result.structured_content
    assert envelope is not None
    return envelope


async def test_a_cancelled_booking_can_no_longer_be_paid_on_the_page(pair: Pair) -> None:
    """Money paid for a released booking would confirm nothing (agent audit finding 2)."""
    booking = await hold(pair, "slot-fin-002")
    cancelled = await call_logical(
        pair,
        "booking.cancel_booking",
        {
            "bookingId": booking["bookingId"],
            "expectedVersion": booking["version"],
            "idempotencyKey": str(uuid.uuid4()),
        },
    )
    assert cancelled["data"]["status"] == "CANCELLED", cancelled
    page = httpx2.get(booking["paymentPageUrl"])
    assert page.status_code == 200
    ended = "The status of this booking is \u201ccancelled\u201d: it can no longer be paid."
    assert ended in page.text
    assert 'value="pay"' not in page.text
    for action in ("pay", "fail", "close"):
        refused = httpx2.post(booking["paymentPageUrl"], data={"action": action})
        assert refused.status_code == 409
        assert "can no longer be paid" in refused.text
    answer = httpx2.get(f"{pair.sandbox.url}/payments/{booking['bookingId']}").json()
    assert (answer["status"], answer["paidAt"]) == ("PENDING", None)
    mailbox = httpx2.get(f"{pair.sandbox.url}/mailbox", headers={"accept": "application/json"})
    assert booking["bookingId"] not in mailbox.text


def test_a_database_that_turns_out_not_sqlite_is_no_booking_and_a_logged_warning(
    tmp_path: Path,
) -> None:
    """It was a bare 500 with nothing logged (operator audit); such a file at start stops it."""
    damaged = tmp_path / "expert-booking.db"
    with ServerProcess(
        command=SANDBOX_COMMAND, db_path=damaged, ready_line=SANDBOX_READY_LINE
    ) as sandbox:
        damaged.write_bytes(b"this is not a SQLite database, only some text" * 100)
        answer = httpx2.get(f"{sandbox.url}/payments/booking-x")
        assert answer.status_code == 404
        assert httpx2.get(f"{sandbox.url}/pay/booking-x").status_code == 404
        line = sandbox.wait_for_stderr(lambda text: "cannot read bookings" in text, timeout=10)
    record = json.loads(line)
    assert record["level"] == "WARNING"
    assert str(damaged) in record["message"]


def _refused_start(database: Path, *extra_args: str) -> tuple[str, int | None]:
    """The one stderr line and the exit status of a sandbox that must not start."""
    sandbox = ServerProcess(
        command=SANDBOX_COMMAND,
        db_path=database,
        ready_line=SANDBOX_READY_LINE,
        extra_args=extra_args,
    )
    try:
        with pytest.raises(ServerStartError):
            sandbox.start()
    finally:
        sandbox.close()  # one that started after all is stopped, not left running
    (line,) = sandbox.stderr_lines
    return line, sandbox.returncode


def test_a_database_that_is_not_sqlite_stops_the_sandbox_at_start(tmp_path: Path) -> None:
    """Like serve: its pages said "No booking" for every booking (security review)."""
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a SQLite database, only some text" * 100)
    line, status = _refused_start(junk)
    assert status == 2
    assert f"cannot read bookings from {junk}" in line
    assert "not a readable SQLite database" in line
    assert not (tmp_path / "junk.payments.json").exists()


def test_a_directory_given_as_the_database_stops_the_sandbox_at_start(tmp_path: Path) -> None:
    line, status = _refused_start(tmp_path)
    assert status == 2
    assert line.endswith(f"cannot read bookings from {tmp_path} (--db): it is not a file")


def test_a_database_in_a_missing_directory_stops_the_sandbox_and_makes_no_directory(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "missing" / "dir"
    line, status = _refused_start(missing / "expert-booking.db")
    assert status == 2
    assert f"its directory {missing} does not exist" in line
    assert not missing.parent.exists()


@pytest.mark.parametrize(
    "ledger",
    [{"version": 1}, {"version": 1, "payments": [], "mailbox": []}],
    ids=["no-payments", "payments-a-list"],
)
def test_a_ledger_of_another_shape_stops_the_sandbox_at_start(
    tmp_path: Path, ledger: dict[str, Any]
) -> None:
    """It started, then every request was an unlogged 500 (security review)."""
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps(ledger), encoding="utf-8")
    line, status = _refused_start(tmp_path / "expert-booking.db", "--ledger", str(path))
    assert status == 2
    assert f"{path} is not a version 1 ledger: " in line
    assert json.loads(path.read_text(encoding="utf-8")) == ledger


async def test_a_second_sandbox_on_the_same_ledger_is_refused_and_the_first_keeps_serving(
    tmp_path: Path,
) -> None:
    """Two sandboxes on one ledger each rewrote it from memory: one lost the other's PAID."""
    database = tmp_path / "expert-booking.db"
    ledger = tmp_path / "expert-booking.payments.json"
    with server_with_sandbox(database) as (server, first):
        pair = Pair(server, first)
        booking = await hold(pair, "slot-ai-001")
        line, status = _refused_start(database)
        assert status == 2
        assert f"another payment sandbox uses the ledger {ledger}" in line
        paid = httpx2.post(booking["paymentPageUrl"], data={"action": "pay"})
        assert paid.status_code == 303
        assert (await confirm(pair, booking))["ok"]
    with ServerProcess(
        command=SANDBOX_COMMAND, db_path=database, ready_line=SANDBOX_READY_LINE
    ) as after:  # the first one's lock ended with it
        answer = httpx2.get(f"{after.url}/payments/{booking['bookingId']}")
    assert answer.json()["status"] == "PAID"


def test_the_real_server_refuses_a_second_host_and_guards_every_answer(pair: Pair) -> None:
    """Two Hosts were judged by the last one: a rebinding page could name itself first."""
    address = pair.sandbox.url.removeprefix("http://")
    name, port = address.rsplit(":", 1)
    with socket.create_connection((name, int(port)), timeout=10) as connection:
        connection.sendall(
            f"GET /mailbox HTTP/1.1\r\nHost: attacker.example\r\nHost: {address}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        reply = b""
        while chunk := connection.recv(65536):
            reply += chunk
    head = reply.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
    assert head.startswith("http/1.1 400")
    assert "x-frame-options: deny" in head
    page = httpx2.get(f"{pair.sandbox.url}/mailbox")
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
