"""Shared pytest fixtures: the anyio backend and a migrated SQLite store on a temp file.

The whole test run (and every server it spawns) uses a local time zone of UTC+05:30
(a POSIX TZ rule: no time zone database needed), so code that renders local time instead of
UTC cannot pass on a UTC host by accident.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from expert_booking.adapters.sqlite_store import SqliteBookingStore

TEST_TZ = "IST-05:30"
os.environ["TZ"] = TEST_TZ
time.tzset()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "booking.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[SqliteBookingStore]:
    opened = await SqliteBookingStore.open(db_path)
    try:
        yield opened
    finally:
        await opened.close()
