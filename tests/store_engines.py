"""The store engines the tests run on: each is a factory of a fresh, seeded store in a folder.

A new engine (PostgreSQL) adds its factory to ``ENGINES``; the store contract suite and the
service tests that run on every engine then run on it too.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from expert_booking.adapters.sqlite_store import SqliteBookingStore
from expert_booking.ports import BookingStore
from tests.memory_store import MemoryBookingStore


@contextlib.asynccontextmanager
async def _sqlite(folder: Path) -> AsyncIterator[BookingStore]:
    store = await SqliteBookingStore.open(folder / "booking.db")
    try:
        yield store
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def _memory(_folder: Path) -> AsyncIterator[BookingStore]:
    yield MemoryBookingStore()


ENGINES: dict[str, Callable[[Path], contextlib.AbstractAsyncContextManager[BookingStore]]] = {
    "sqlite": _sqlite,
    "memory": _memory,
}
