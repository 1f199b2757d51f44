"""The store engines the tests run on: each is a factory of a fresh, seeded store in a folder.

A new engine (PostgreSQL) adds its factory to ``ENGINES`` and its ``REPLICAS`` entry; the store
contract suite and the service tests that run on every engine then run on it too. A factory may
be given a wider catalog (experts and slots beyond the seed's), written before the store is
used. A replica is a second store on the same database, as a second server process opens it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

from expert_booking.adapters.sqlite_store import SqliteBookingStore
from expert_booking.ports import BookingStore, Transaction
from tests.fakes import Catalog
from tests.memory_store import MemoryBookingStore

NO_EXTRA: Catalog = ((), ())
_SQLITE_FILE = "booking.db"
OVERLAP_SECONDS = 0.3
SUBMIT_DEADLINE = 10.0
T = TypeVar("T")


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


def overlapping(first: BookingStore, second: BookingStore) -> tuple[BookingStore, BookingStore]:
    """The two stores, their first transactions made to overlap where an engine allows it.

    Each store's first transaction, after its first statement, waits for the other store's
    first transaction to be handed to its store (a signal, ``SUBMIT_DEADLINE`` at most), then
    for it to run a statement too (a signal, ``OVERLAP_SECONDS`` at most). An engine that does
    not serialize transactions across stores then lets both read before either writes, every
    time (transactions of microseconds would otherwise almost never meet); on a serializing
    engine the other cannot run a statement until this one commits, so only the deadline ends
    that wait, once per test.
    """
    submitted = (threading.Event(), threading.Event())
    ran = (threading.Event(), threading.Event())
    return (
        _Overlapping(first, _Side(submitted[0], ran[0], submitted[1], ran[1])),
        _Overlapping(second, _Side(submitted[1], ran[1], submitted[0], ran[0])),
    )


@dataclass(frozen=True, slots=True)
class _Side:
    """One store's view of the two first transactions."""

    submitted: threading.Event
    ran: threading.Event
    other_submitted: threading.Event
    other_ran: threading.Event

    def after_first_statement(self) -> None:
        self.ran.set()
        self.other_submitted.wait(SUBMIT_DEADLINE)
        self.other_ran.wait(OVERLAP_SECONDS)


class _Overlapping:
    def __init__(self, store: BookingStore, side: _Side) -> None:
        self._store = store
        self._side = side

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def run(self, work: Callable[[Transaction], T]) -> T:
        side = self._side
        if side.submitted.is_set():
            return await self._store.run(work)
        side.submitted.set()
        return await self._store.run(lambda tx: work(cast("Transaction", _Pausing(tx, side))))


class _Pausing:
    """A transaction whose first statement is followed by ``_Side.after_first_statement``."""

    def __init__(self, tx: Transaction, side: _Side) -> None:
        self._tx = tx
        self._side = side

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._tx, name)
        if self._side.ran.is_set():
            return method

        def statement(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            self._side.after_first_statement()
            return result

        return statement
