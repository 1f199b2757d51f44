"""Every test in this folder runs on each engine of ``tests.store_engines.ENGINES``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from expert_booking.ports import BookingStore
from tests.fakes import WIDER_CATALOG
from tests.store_engines import ENGINES


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
