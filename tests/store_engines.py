"""The store engines the tests run on: each is a factory of a fresh, seeded store in a folder.

A new engine (PostgreSQL) adds its factory to ``ENGINES`` and its ``REPLICAS`` entry; the store
contract suite and the service tests that run on every engine then run on it too. A factory may
be given a wider catalog (experts and slots beyond the seed's), written before the store is
used. A replica is a second store on the same database, as a second server process opens it.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import astuple
from pathlib import Path
from typing import Protocol

from expert_booking.adapters.sqlite_store import SqliteBookingStore
from expert_booking.ports import BookingStore
from tests.fakes import Catalog
from tests.memory_store import MemoryBookingStore

NO_EXTRA: Catalog = ((), ())
_SQLITE_FILE = "booking.db"


class Engine(Protocol):
    def __call__(
        self, folder: Path, catalog: Catalog = NO_EXTRA
    ) -> contextlib.AbstractAsyncContextManager[BookingStore]: ...


class Replica(Protocol):
    def __call__(
        self, store: BookingStore, folder: Path, /
    ) -> contextlib.AbstractAsyncContextManager[BookingStore]: ...


@contextlib.asynccontextmanager
async def _sqlite_store(folder: Path, catalog: Catalog) -> AsyncIterator[BookingStore]:
    path = folder / _SQLITE_FILE
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
async def _memory_store(_folder: Path, catalog: Catalog) -> AsyncIterator[BookingStore]:
    experts, slots = catalog
    yield MemoryBookingStore(experts=experts, slots=slots)


def _sqlite(
    folder: Path, catalog: Catalog = NO_EXTRA
) -> contextlib.AbstractAsyncContextManager[BookingStore]:
    return _sqlite_store(folder, catalog)


def _memory(
    folder: Path, catalog: Catalog = NO_EXTRA
) -> contextlib.AbstractAsyncContextManager[BookingStore]:
    return _memory_store(folder, catalog)


@contextlib.asynccontextmanager
async def _sqlite_replica(_store: BookingStore, folder: Path) -> AsyncIterator[BookingStore]:
    store = await SqliteBookingStore.open(folder / _SQLITE_FILE)
    try:
        yield store
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def _memory_replica(store: BookingStore, _folder: Path) -> AsyncIterator[BookingStore]:
    assert isinstance(store, MemoryBookingStore)
    yield store.replica()


ENGINES: dict[str, Engine] = {
    "sqlite": _sqlite,
    "memory": _memory,
}
REPLICAS: dict[str, Replica] = {
    "sqlite": _sqlite_replica,
    "memory": _memory_replica,
}
