"""Shared pytest fixtures: the anyio backend and a migrated SQLite store on a temp file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from expert_booking.adapters.sqlite_store import SqliteBookingStore


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
