"""The engines the store contract suite runs on: each is a factory of a fresh, seeded store.

A new engine (PostgreSQL) adds its factory to ``ENGINES``; every test in this folder then
runs on it too.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from expert_booking.adapters.sqlite_store import SqliteBookingStore
from expert_booking.ports import BookingStore
from tests.memory_store import MemoryBookingStore


@contextlib.asynccontextmanager
async def _sqlite(tmp_path: Path) -> AsyncIterator[BookingStore]:
    store = await SqliteBookingStore.open(tmp_path / "booking.db")
    try:
        yield store
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def _memory(_tmp_path: Path) -> AsyncIterator[BookingStore]:
    yield MemoryBookingStore()


ENGINES: dict[str, Callable[[Path], contextlib.AbstractAsyncContextManager[BookingStore]]] = {
    "sqlite": _sqlite,
    "memory": _memory,
}


@pytest.fixture(params=sorted(ENGINES))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BookingStore]:
    """A fresh store of each engine, seeded with the six 2030 slots."""
    async with ENGINES[request.param](tmp_path) as opened:
        yield opened
