"""The benchmark's database: the store's own migrations and seed plus numbered bench slots.

Used by ``harness.bench`` (the ``real+slots`` server and the in-process mode) and by the crash
recovery e2e test, so that every hold is a successful hold transaction of its own slot.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

from expert_booking.adapters.sqlite_store import SqliteBookingStore
from expert_booking.domain.model import format_instant

BENCH_EXPERT_ID = "exp-bench-001"
BENCH_SLOT_PREFIX = "slot-bench-"
BENCH_PRICE = ("500.00", "CNY")
_BENCH_FIRST_START = datetime(2031, 1, 1, tzinfo=UTC)


def bench_slot_id(index: int) -> str:
    return f"{BENCH_SLOT_PREFIX}{index:06d}"


async def create_bench_db(db_path: Path, slots: int) -> None:
    """Create ``db_path`` with the store's own migrations and seed, plus ``slots`` bench slots.

    The extra slots belong to one extra expert (``exp-bench-001``, specialty ``BENCH``), start
    hourly from 2031-01-01 and cost 500.00 CNY; ids are ``slot-bench-000000``, ... . Callable on
    an existing database too (already present rows are kept).
    """
    store = await SqliteBookingStore.open(db_path)
    await store.close()
    add_bench_slots(db_path, slots)


def add_bench_slots(db_path: Path, slots: int) -> None:
    """Insert the bench expert and ``slots`` hourly slots into a migrated database."""
    rows = []
    for index in range(slots):
        starts = _BENCH_FIRST_START + timedelta(hours=index)
        rows.append(
            (
                bench_slot_id(index),
                BENCH_EXPERT_ID,
                format_instant(starts),
                format_instant(starts + timedelta(minutes=50)),
                *BENCH_PRICE,
            )
        )
    with closing(sqlite3.connect(db_path, timeout=10)) as db, db:
        db.execute(
            "INSERT OR IGNORE INTO experts (expert_id, name, specialty, keywords) "
            "VALUES (?, ?, ?, ?)",
            (BENCH_EXPERT_ID, "Bench Expert", "BENCH", "benchmark load test"),
        )
        db.executemany(
            "INSERT OR IGNORE INTO slots (slot_id, expert_id, starts_at, ends_at, price_amount, "
            "price_currency) VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
