"""``expert-booking-mcp payment-sandbox`` over HTTP: payment answers, the page's forms, refusals."""

from __future__ import annotations

import json
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
        ("fr-FR, de;q=0.7, en;q=0.3", "de", ("SANDBOX", "Bezahlen", "Schließen", "Betrag")),
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
    assert "This booking is CANCELLED: it can no longer be paid." in page.text
    assert 'value="pay"' not in page.text
    for action in ("pay", "fail", "close"):
        refused = httpx2.post(booking["paymentPageUrl"], data={"action": action})
        assert refused.status_code == 409
        assert "can no longer be paid" in refused.text
    answer = httpx2.get(f"{pair.sandbox.url}/payments/{booking['bookingId']}").json()
    assert (answer["status"], answer["paidAt"]) == ("PENDING", None)
    mailbox = httpx2.get(f"{pair.sandbox.url}/mailbox", headers={"accept": "application/json"})
    assert booking["bookingId"] not in mailbox.text


def test_a_database_that_is_not_sqlite_is_no_booking_and_a_logged_warning(
    tmp_path: Path,
) -> None:
    """It was a bare 500 with nothing logged (operator audit)."""
    damaged = tmp_path / "expert-booking.db"
    damaged.write_bytes(b"this is not a SQLite database, only some text" * 100)
    with ServerProcess(
        command=SANDBOX_COMMAND, db_path=damaged, ready_line=SANDBOX_READY_LINE
    ) as sandbox:
        answer = httpx2.get(f"{sandbox.url}/payments/booking-x")
        assert answer.status_code == 404
        assert httpx2.get(f"{sandbox.url}/pay/booking-x").status_code == 404
        line = sandbox.wait_for_stderr(lambda text: "cannot read bookings" in text, timeout=10)
    record = json.loads(line)
    assert record["level"] == "WARNING"
    assert str(damaged) in record["message"]
