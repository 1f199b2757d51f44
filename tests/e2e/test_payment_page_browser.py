"""A person pays on the sandbox's page in a real browser, and the agent's confirm goes through.

Headless Chromium (Debian's) driven by Playwright for Python; the screenshots stay in
``test-artifacts/`` (git-ignored).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import pytest
from playwright.sync_api import Browser, expect, sync_playwright

from expert_booking.adapters.clock import SystemClock
from expert_booking.client import open_client
from expert_booking.domain.model import format_instant
from tests.e2e.browser import ARTIFACTS, LAUNCH_ARGS, ensure_chromium
from tests.e2e.sandbox_fixtures import Pair, confirm_arguments, hold_arguments, running_pair

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    yield from running_pair(tmp_path_factory.mktemp("browser"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = ensure_chromium()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=list(LAUNCH_ARGS))
        try:
            yield launched
        finally:
            launched.close()


def call(pair: Pair, arguments: dict[str, Any]) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with open_client(pair.server.url) as client:
            result = await client.call_tool("tool_catalog.call", arguments)
        envelope: dict[str, Any] | None = result.structured_content
        assert envelope is not None
        return envelope

    # Playwright's sync API keeps an event loop on this thread: the client runs on another.
    with ThreadPoolExecutor(max_workers=1) as worker:
        return worker.submit(anyio.run, go).result(timeout=60)


def test_a_person_pays_on_the_page_and_the_booking_confirms(pair: Pair, browser: Browser) -> None:
    held = call(pair, hold_arguments("slot-ai-001"))
    assert held["ok"], held
    booking = held["data"]
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(locale="de-DE", extra_http_headers={"accept-language": "de-DE,de"})
    page.goto(booking["paymentPageUrl"])
    expect(page.locator(".sandbox")).to_contain_text("SANDBOX")
    expect(page).to_have_title(f"SANDBOX · Zahlung {booking['bookingId']}")
    expect(page.locator("dl")).to_contain_text(booking["payment"]["amount"])
    expect(page.locator("#payment-status")).to_have_attribute("data-status", "PENDING")
    page.screenshot(path=str(ARTIFACTS / "payment-page-pending.png"), full_page=True)

    page.locator("#pay").click()
    expect(page.locator("#payment-status")).to_have_attribute("data-status", "PAID")
    expect(page.locator("#notice")).to_contain_text("bezahlt")
    expect(page.locator("form")).to_have_count(0)
    page.screenshot(path=str(ARTIFACTS / "payment-page-paid.png"), full_page=True)

    confirmed = call(pair, confirm_arguments(booking, format_instant(SystemClock().now())))
    assert confirmed["ok"], confirmed
    assert confirmed["data"]["status"] == "CONFIRMED"

    page.goto(pair.sandbox.url + "/mailbox")
    expect(page.locator("#mailbox")).to_contain_text(booking["bookingId"])
    page.screenshot(path=str(ARTIFACTS / "mailbox.png"), full_page=True)
    page.close()
