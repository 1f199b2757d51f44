"""Shared e2e fixtures: one event loop, a loopback payment stub and a server using it per module."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest
from mcp import Client

from expert_booking.client import open_client
from expert_booking.testing.payment_stub import PaymentStub
from expert_booking.testing.server_process import ServerProcess


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module-scoped, so that a module's servers and stub can outlive one test."""
    return "asyncio"


@pytest.fixture(scope="module")
async def stub() -> AsyncIterator[PaymentStub]:
    async with PaymentStub.running() as running:
        yield running


@pytest.fixture(scope="module")
def stub_server(stub: PaymentStub) -> Iterator[ServerProcess]:
    """A spawned server (SQLite file, real clock) whose payment service is the module's stub."""
    env = {**os.environ, "PAYMENT_QUERY_BASE_URL": stub.base_url}
    with ServerProcess(env=env) as running:
        yield running


@pytest.fixture
async def stub_client(stub_server: ServerProcess) -> AsyncIterator[Client]:
    """The shipped client connected to ``stub_server``."""
    with anyio.fail_after(20):
        async with open_client(stub_server.url) as connected:
            yield connected
