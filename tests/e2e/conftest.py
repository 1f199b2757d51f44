"""Shared e2e fixtures: one event loop per module and a loopback payment stub per module."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from expert_booking.testing.payment_stub import PaymentStub


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module-scoped, so that a module's servers and stub can outlive one test."""
    return "asyncio"


@pytest.fixture(scope="module")
async def stub() -> AsyncIterator[PaymentStub]:
    async with PaymentStub.running() as running:
        yield running
