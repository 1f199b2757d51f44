"""The engines the store contract suite runs on: each is a factory of a fresh, seeded store.

A new engine (PostgreSQL) adds its factory to ``ENGINES``; every test in this folder then
runs on it too. A factory takes the test's directory and a wider catalog (experts and slots
beyond the seed's six slots) that it writes before the store is used.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable
from dataclasses import astuple
from pathlib import Path

import pytest

from expert_booking.adapters.sqlite_store import SqliteBookingStore
from expert_booking.ports import BookingStore
from tests.fakes import WIDER_CATALOG, Catalog
from tests.memory_store import MemoryBookingStore


@contextlib.asynccontextmanager
async def _sqlite(tmp_path: Path, catalog: Catalog) -> AsyncIterator[BookingStore]:
    path = tmp_path / "booking.db"
    store = await SqliteBookingStore.open(path)
    try:
        experts, slots = catalog
        if experts or slots:
            with contextlib.closing(sqlite3.connect(path)) as connection, connection:
                connection.executemany(
                    "INSERT INTO experts VALUES (?, ?, ?, ?)", [astuple(e) for e in experts]
                )
                connection.executemany(
                    "INSERT INTO slots VALUES (?, ?, ?, ?, ?, ?)", [astuple(s) for s in slots]
                )
        yield store
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def _memory(_tmp_path: Path, catalog: Catalog) -> AsyncIterator[BookingStore]:
    experts, slots = catalog
    yield MemoryBookingStore(experts=experts, slots=slots)


ENGINES: dict[
    str, Callable[[Path, Catalog], contextlib.AbstractAsyncContextManager[BookingStore]]
] = {
    "sqlite": _sqlite,
    "memory": _memory,
}


@pytest.fixture(params=sorted(ENGINES))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BookingStore]:
    """A fresh store of each engine, seeded with the six 2030 slots."""
    async with ENGINES[request.param](tmp_path, ((), ())) as opened:
        yield opened


@pytest.fixture(params=sorted(ENGINES))
async def wider_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[BookingStore]:
    """A fresh store of each engine: the seed plus ``WIDER_CATALOG``."""
    async with ENGINES[request.param](tmp_path, WIDER_CATALOG) as opened:
        yield opened
