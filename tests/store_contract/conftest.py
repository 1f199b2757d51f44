"""The engines the store contract suite runs on: each is a factory of a fresh, seeded store.

A new engine (PostgreSQL) adds its factory to ``ENGINES``; every test in this folder then
runs on it too. A factory takes the test's directory and a wider catalog (experts and slots
beyond the seed's six slots) that it writes before the store is used.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import astuple
from pathlib import Path

import pytest

from expert_booking.adapters.seed import SeedExpert, SeedSlot
from expert_booking.adapters.sqlite_store import SqliteBookingStore
from expert_booking.ports import BookingStore
from tests.memory_store import MemoryBookingStore

Catalog = tuple[Sequence[SeedExpert], Sequence[SeedSlot]]


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

# A wider catalog: two more AI experts, with slots at slot-ai-001's start and elsewhere, and
# more hours of exp-ai-001 on both sides of it (tests of ``peek_slots_near``).
WIDER_CATALOG: Catalog = (
    (
        SeedExpert("exp-ai-002", "Dr. Mei Zhou", "AI", "AI agents"),
        SeedExpert("exp-ai-003", "Dr. Jonas Berg", "AI", "AI vision"),
    ),
    tuple(
        SeedSlot(slot_id, expert, start, end, "500.00", "CNY")
        for slot_id, expert, start, end in (
            ("slot-ai-b01", "exp-ai-001", "2030-09-01T22:00:00.000Z", "2030-09-01T23:00:00.000Z"),
            ("slot-ai-b02", "exp-ai-001", "2030-09-01T23:00:00.000Z", "2030-09-02T00:00:00.000Z"),
            ("slot-ai-b03", "exp-ai-001", "2030-09-02T00:00:00.000Z", "2030-09-02T01:00:00.000Z"),
            ("slot-ai-b04", "exp-ai-001", "2030-09-02T01:00:00.000Z", "2030-09-02T02:00:00.000Z"),
            ("slot-ai-a01", "exp-ai-001", "2030-09-02T03:00:00.000Z", "2030-09-02T04:00:00.000Z"),
            ("slot-ai-a02", "exp-ai-001", "2030-09-02T04:00:00.000Z", "2030-09-02T05:00:00.000Z"),
            ("slot-mz-001", "exp-ai-002", "2030-09-02T02:00:00.000Z", "2030-09-02T03:00:00.000Z"),
            ("slot-mz-002", "exp-ai-002", "2030-09-02T03:00:00.000Z", "2030-09-02T04:00:00.000Z"),
            ("slot-jb-001", "exp-ai-003", "2030-09-02T02:00:00.000Z", "2030-09-02T03:00:00.000Z"),
        )
    ),
)


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
