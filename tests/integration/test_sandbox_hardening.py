"""The payment sandbox's answers under hostile requests, in process (security review).

Framing and sniffing guards on every answer, a small body limit, one ``Host`` and one ``Origin``,
escaped pages and a not-found page that repeats a bounded, printable id. The booking is a real
hold in a real server's database, made once for the module; every test has a ledger of its own.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx
import pytest

from expert_booking.domain.model import parse_instant
from expert_booking.sandbox.app import build_sandbox_app
from expert_booking.sandbox.ledger import SHOWN_ID_CHARS, Ledger, Payment
from tests.fakes import MutableClock
from tests.integration.test_sandbox_in_process import held_in

pytestmark = pytest.mark.anyio

SANDBOX = "http://127.0.0.1:3100"
GUARDS = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}
FORM = {"content-type": "application/x-www-form-urlencoded"}


@dataclass(frozen=True)
class Held:
    database: Path
    booking: dict[str, Any]

    @property
    def booking_id(self) -> str:
        booking_id: str = self.booking["bookingId"]
        return booking_id

    @property
    def page(self) -> str:
        return f"{SANDBOX}/pay/{self.booking_id}"


@pytest.fixture(scope="module")
def held(tmp_path_factory: pytest.TempPathFactory) -> Held:
    database = tmp_path_factory.mktemp("hardening") / "expert-booking.db"
    return Held(database, anyio.run(held_in, database))


def _client(held: Held, ledger: Ledger) -> httpx.AsyncClient:
    clock = MutableClock(parse_instant(held.booking["heldAt"]))  # the hold is open
    app = build_sandbox_app(held.database, ledger, clock=clock)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app))


@pytest.fixture
async def http(held: Held, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(held, Ledger(tmp_path / "ledger.json")) as client:
        yield client


async def _status(http: httpx.AsyncClient, held: Held) -> str:
    status: str = (await http.get(f"{SANDBOX}/payments/{held.booking_id}")).json()["status"]
    return status


async def test_every_kind_of_answer_forbids_framing_sniffing_and_referrers(
    http: httpx.AsyncClient, held: Held
) -> None:
    """Clickjacking: a page elsewhere could frame the payment page under a decoy button."""
    requests: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", held.page, {}),
        ("GET", f"{SANDBOX}/pay/booking-unknown", {}),
        ("GET", f"{SANDBOX}/payments/{held.booking_id}", {}),
        ("GET", f"{SANDBOX}/mailbox", {}),
        ("GET", f"{SANDBOX}/mailbox", {"headers": {"accept": "application/json"}}),
        ("GET", f"{SANDBOX}/", {}),
        ("POST", held.page, {"data": {"action": "bogus"}}),
        ("POST", held.page, {"data": {"action": "close"}}),
        ("POST", held.page, {"data": {"action": "pay"}}),  # already final: 303 ?already=1
        ("DELETE", held.page, {}),
        ("POST", held.page, {"content": b"x" * 100_000, "headers": FORM}),
        ("GET", f"{SANDBOX}/mailbox", {"headers": {"host": "attacker.example"}}),
        ("POST", held.page, {"headers": {"origin": "http://attacker.example"}}),
        ("GET", f"{SANDBOX}/mailbox", {"headers": {"host": "127.0.0.1:evil"}}),
    ]
    statuses = []
    for method, url, options in requests:
        answer = await http.request(method, url, **options)
        statuses.append(answer.status_code)
        for name, value in GUARDS.items():
            assert answer.headers.get(name) == value, (method, url, answer.status_code, name)
        policy = answer.headers.get("content-security-policy", "")
        assert "frame-ancestors 'none'" in policy, (method, url, answer.status_code)
    assert statuses == [200, 404, 200, 200, 200, 303, 400, 303, 303, 405, 413, 421, 403, 400]


async def test_the_policy_lets_the_pages_own_style_through_and_nothing_else(
    http: httpx.AsyncClient, held: Held
) -> None:
    page = await http.get(held.page)
    (style,) = re.findall(r"<style>(.*?)</style>", page.text)
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    policy = page.headers["content-security-policy"]
    assert f"style-src 'sha256-{digest}'" in policy
    assert "default-src 'none'" in policy
    assert "form-action 'self'" in policy
    assert "<script" not in page.text


async def test_plain_text_answers_are_text_with_the_sandbox_headers(
    http: httpx.AsyncClient, held: Held
) -> None:
    refused = await http.post(held.page, data={"action": "bogus"})
    assert refused.status_code == 400
    assert refused.text == "unknown action: use pay, fail or close"
    assert refused.headers["content-type"] == "text/plain; charset=utf-8"
    assert refused.headers["x-payment-sandbox"] == "1"
    assert "x-payment-responded-at" in refused.headers
    assert refused.headers["cache-control"] == "no-store"
    answer = await http.get(f"{SANDBOX}/payments/{held.booking_id}")
    unknown = await http.get(f"{SANDBOX}/payments/booking-unknown")
    assert answer.headers["content-type"] == "application/json"
    assert (answer.headers["cache-control"], unknown.headers["cache-control"]) == (
        "no-store",
        "no-store",
    )


@pytest.mark.parametrize("streamed", [False, True], ids=["announced", "streamed"])
async def test_a_body_over_the_limit_is_413_before_it_is_parsed(
    http: httpx.AsyncClient, held: Held, *, streamed: bool
) -> None:
    """2.4 million fields stalled the event loop for longer than the server's payment timeout."""
    body = b"action=pay&" + b"x=1&" * 25_000  # 100 KB: far more than one field needs

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 4096):
            yield body[start : start + 4096]

    content = chunks() if streamed else body
    refused = await http.post(held.page, content=content, headers=FORM)
    assert refused.status_code == 413
    assert refused.headers["content-type"] == "text/plain; charset=utf-8"
    assert refused.headers["x-payment-sandbox"] == "1"
    assert await _status(http, held) == "PENDING"
    paid = await http.post(held.page, data={"action": "pay"})  # a real form still goes through
    assert paid.status_code == 303
    assert await _status(http, held) == "PAID"


@pytest.mark.parametrize(
    "hosts",
    [
        ["attacker.example", "127.0.0.1:3100"],
        ["127.0.0.1:3100", "127.0.0.1:3100"],
        ["127.0.0.1:3100@attacker.example"],
        ["127.0.0.1:evil"],
        ["127.0.0.1:"],
        ["::1:3100"],
        ["[::1]x"],
        ["127.0.0.1:0"],
        ["127.0.0.1:65536"],
        ["[::1]:99999"],
        ["localhost:" + "9" * 5_000],  # more digits than int() converts
    ],
)
async def test_a_request_naming_several_or_a_malformed_host_is_400(
    http: httpx.AsyncClient, hosts: list[str]
) -> None:
    answer = await http.get(f"{SANDBOX}/mailbox", headers=[("host", host) for host in hosts])
    assert answer.status_code == 400
    assert "one Host" in answer.text


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:3100", "localhost:3100", "[::1]:3100", "127.0.0.1", "127.0.0.1:1", "[::1]:65535"],
)
async def test_a_single_loopback_host_with_or_without_a_port_is_served(
    http: httpx.AsyncClient, host: str
) -> None:
    assert (await http.get(f"{SANDBOX}/mailbox", headers={"host": host})).status_code == 200


async def test_a_post_with_two_origins_is_refused_whichever_comes_last(
    http: httpx.AsyncClient, held: Held
) -> None:
    for origins in (
        ["http://attacker.example", SANDBOX],
        [SANDBOX, SANDBOX],
    ):
        answer = await http.post(
            held.page,
            content=b"action=pay",
            headers=[("content-type", FORM["content-type"])]
            + [("origin", origin) for origin in origins],
        )
        assert answer.status_code == 403, origins
    assert await _status(http, held) == "PENDING"
    own = await http.post(held.page, data={"action": "pay"}, headers={"origin": SANDBOX})
    assert own.status_code == 303


async def test_the_not_found_page_repeats_a_short_printable_id(http: httpx.AsyncClient) -> None:
    head = "\u202ebooking-\x07" + "x" * 70  # 80 characters: a bidi override, a bell
    page = await http.get(f"{SANDBOX}/pay/{quote(head + 'y' * 30_000)}")
    assert page.status_code == 404
    assert "\u202e" not in page.text
    assert "\x07" not in page.text
    assert "\ufffdbooking-\ufffd" + "x" * 70 + "…" in page.text
    assert "xy" not in page.text
    assert len(page.text) < 2_000


async def test_the_json_not_found_answer_repeats_a_short_id(http: httpx.AsyncClient) -> None:
    head = "booking-" + "x" * (SHOWN_ID_CHARS - len("booking-"))
    long = await http.get(f"{SANDBOX}/payments/{head + 'y' * 30_000}")
    short = await http.get(f"{SANDBOX}/payments/booking-unknown")
    assert (long.status_code, short.status_code) == (404, 404)
    assert long.json() == {"error": "payment not found", "bookingId": f"{head}…"}
    assert short.json() == {"error": "payment not found", "bookingId": "booking-unknown"}


class _BrokenLedger(Ledger):
    """A ledger that fails in a way no handler expects."""

    def payment(self, booking_id: str) -> Payment:
        raise RuntimeError(f"ledger internals for {booking_id}")


async def test_an_unexpected_error_is_logged_with_its_traceback_and_answered_a_bare_500(
    held: Held, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with _client(held, _BrokenLedger(tmp_path / "ledger.json")) as http:
        with caplog.at_level(logging.INFO, logger="expert_booking.sandbox"):
            answer = await http.get(f"{SANDBOX}/payments/{held.booking_id}")
            unknown_path = await http.get(f"{SANDBOX}/nowhere")  # an HTTP refusal: not logged
    assert (answer.status_code, unknown_path.status_code) == (500, 404)
    assert answer.text == "SANDBOX: Internal Server Error"
    assert answer.headers["content-type"] == "text/plain; charset=utf-8"
    assert answer.headers["x-frame-options"] == "DENY"
    (record,) = [r for r in caplog.records if r.name == "expert_booking.sandbox"]
    assert record.levelno == logging.ERROR
    assert record.getMessage() == "GET /payments/{booking_id} failed; answered 500"
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)


class _OddLedger(Ledger):
    """A ledger that hands the page a status with markup in it."""

    def payment(self, booking_id: str) -> Payment:
        del booking_id
        return Payment('"><script>alert(1)</script>', None)


async def test_the_payment_status_is_escaped_in_the_page(held: Held, tmp_path: Path) -> None:
    async with _client(held, _OddLedger(tmp_path / "ledger.json")) as http:
        page = await http.get(held.page)
    assert page.status_code == 200
    assert "<script>" not in page.text
    assert 'data-status="&quot;&gt;&lt;script&gt;' in page.text
