"""Every test in this folder runs on each engine of ``tests.store_engines.ENGINES``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from expert_booking.ports import BookingStore
from tests.fakes import WIDER_CATALOG
from tests.store_engines import ENGINES, REPLICAS


@pytest.fixture(params=sorted(ENGINES))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BookingStore]:
    """A fresh store of each engine, seeded with the six 2030 slots."""
    async with ENGINES[request.param](tmp_path) as opened:
        yield opened


@pytest.fixture(params=sorted(ENGINES))
async def wider_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[BookingStore]:
    """A fresh store of each engine: the seed plus ``tests.fakes.WIDER_CATALOG``."""
    async with ENGINES[request.param](tmp_path, WIDER_CATALOG) as opened:
        yield opened


@pytest.fixture(params=sorted(ENGINES))
async def replicas(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[BookingStore, BookingStore]]:
    """Two stores of each engine on one fresh database: two server processes sharing it."""
    async with (
        ENGINES[request.param](tmp_path) as first,
        REPLICAS[request.param](first, tmp_path) as second,
    ):
        yield first, second
