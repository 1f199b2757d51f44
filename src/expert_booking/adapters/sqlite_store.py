"""SQLite implementation of the ``BookingStore`` port (aiosqlite, WAL, two connections).

Design:

* The port (``ports.BookingStore`` / ``ports.Transaction``) is engine-neutral. A PostgreSQL
  adapter would implement the same ``Transaction`` with a pooled connection per transaction,
  ``SELECT ... FOR UPDATE`` on the booking it changes (or ``SERIALIZABLE`` isolation with a
  retry on serialization failures mapped to ``StorageBusyError``), and the same partial unique
  index ``one_active_booking_per_slot``; the services would not change.
* SQLite has one writer at a time, so this adapter keeps ONE write connection, owned by
  aiosqlite's worker thread. ``run(work)`` hands the whole transaction to that thread as one
  call: ``BEGIN IMMEDIATE`` (the write lock up front, so two processes never deadlock
  upgrading a read lock), ``work(transaction)``, then ``COMMIT``, or ``ROLLBACK`` if anything
  raised. The worker runs calls one after another, so transactions never interleave and no
  lock is needed in this process; other processes sharing the file wait up to
  ``busy_timeout`` and then get ``StorageBusyError``.
* One thread hop per transaction instead of one per statement: a hop costs 8-100 us
  (perf-floor section 4, NOTES.md), a hold transaction used five and a confirm twelve.
  aiosqlite has no public "run this function on the connection's thread", so ``_Worker``
  is the one place that uses its private ``Connection._execute`` and ``Connection._conn``
  (aiosqlite is pinned; ``tests/integration/test_sqlite_store.py`` checks that work runs on
  the worker thread).
* Each connection's worker thread runs with the ``SCHED_BATCH`` policy where the OS has it
  (Linux): queueing a call then no longer preempts the event loop to wake the worker, which
  needs the GIL the loop holds to start the call's Python part (SQLite itself runs without
  it). The worker runs when the loop waits for I/O, finishes the queued calls and hands the
  results back together. Over HTTP this took a ``get_booking`` from 5.8 to 0.4 context
  switches and ~15% less server CPU (NOTES.md, Storage).
* A second, read-only connection (``PRAGMA query_only``) serves the peeks (``peek_booking``,
  ``peek_free_slots``, ``peek_bookings``, ``peek_slots_near``): one autocommit statement
  each, so each sees the last committed state (WAL lets it read while a writer works),
  never waits for the write lock and never answers
  ``StorageBusyError`` because of one. Peeks do not release overdue holds; the services fall
  back to a write transaction (release, then read) when what they peeked depends on one.
* Statements are combined where the result stays readable: a search returns page and total
  in one statement (``COUNT(*) OVER ()``), a peeked search also the earliest hold expiry (a
  peek is one ``execute_fetchall``, one hop), and ``lookup_hold`` reads a hold's idempotency
  record, slot and earliest hold expiry at once.
* Cancellation safety: a transaction is one queued call, so it runs to its end (commit or
  rollback) even when the awaiting task is cancelled; aiosqlite runs queued calls in order.
* Free-text search uses ``ports.fold_text`` registered as the SQL function ``fold_text``:
  SQLite's ``lower()`` folds only ASCII, and German or other non-ASCII keywords must match
  regardless of case or normal form. Tokens are passed as one JSON array (``json_each``), so
  the SQL text is constant whatever the number of tokens. The search selects matching experts
  first, then their slots via ``slots_by_expert_start`` (``sqlite_sql``).
* Row and JSON mapping lives in ``sqlite_rows``, the composed SQL text in ``sqlite_sql``, the
  transaction (every statement of a write, its one-line statements inline) in
  ``sqlite_transaction``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from expert_booking.adapters.sqlite_migrations import (
    Migration,
    SchemaTooNewError,
    apply_migration,
    check_not_newer,
    pending_migrations,
    unapplied_migrations,
)
from expert_booking.adapters.sqlite_rows import (
    booking_from_json,
    booking_from_row,
    booking_to_json,
    optional_instant,
    slot_from_row,
)
from expert_booking.adapters.sqlite_sql import (
    GET_BOOKING,
    LIST_COUNT,
    PEEK_BOOKINGS,
    PEEK_PAGE,
    SEARCH_COUNT,
    SLOTS_NEAR,
    SQLITE_MAX_INTEGER,
    list_params,
    search_params,
    sql_fold_text,
)
from expert_booking.adapters.sqlite_transaction import (
    DEFAULT_BUSY_TIMEOUT_MS,
    SqliteTransaction,
    translate_error,
)
from expert_booking.domain.model import Booking, Money, format_instant
from expert_booking.ports import (
    BookingListQuery,
    BookingListResult,
    ListPosition,
    SlotNeighbours,
    SlotQuery,
    SlotSearchResult,
)

__all__ = ["SqliteBookingStore", "SqliteTransaction", "booking_from_json", "booking_to_json"]

logger = logging.getLogger("expert_booking.store")

T = TypeVar("T")


class SqliteBookingStore:
    """``BookingStore`` on one SQLite file; see the module docstring for the design."""

    def __init__(self, connection: aiosqlite.Connection) -> None:
        """Wrap an open connection; use :meth:`open`, which also configures and migrates."""
        self._conn = connection
        self._writer = _Worker(connection)
        self._reader: aiosqlite.Connection | None = None
        self._closing: asyncio.Task[None] | None = None

    @classmethod
    async def open(
        cls, path: Path | str, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS
    ) -> SqliteBookingStore:
        """Open (creating if missing) and migrate the database; seed it on first start.

        Durability trade-off: ``journal_mode=WAL`` with ``synchronous=NORMAL`` never corrupts
        the database, but a power loss or OS crash may lose the last few committed
        transactions (the WAL is fsynced at checkpoints, not at every commit). A process crash
        loses nothing. ``synchronous=FULL`` fsyncs every commit at roughly one fsync of
        latency per write transaction (perf-floor section 4).

        Raises:
            StorageBusyError: another process kept the database locked past the timeout.
            InternalError: the file cannot be opened or migrated (cause chained).
        """
        if busy_timeout_ms < 0:
            msg = "busy_timeout_ms must not be negative"
            raise ValueError(msg)
        try:
            # Prepare the file first, off the loop: when aiosqlite.connect fails, its worker
            # thread outlives the call and later reports to a loop that may be closed by then.
            await asyncio.to_thread(_prepare_file, str(path), busy_timeout_ms)
            conn = await aiosqlite.connect(
                str(path), isolation_level=None, timeout=busy_timeout_ms / 1000
            )
        except sqlite3.Error as exc:
            raise translate_error(exc) from exc
        store = cls(conn)
        ready = False
        try:
            conn.row_factory = sqlite3.Row
            await conn.create_function("fold_text", 1, sql_fold_text, deterministic=True)
            for pragma in (
                f"PRAGMA busy_timeout = {int(busy_timeout_ms)}",
                "PRAGMA synchronous = NORMAL",
                "PRAGMA foreign_keys = ON",
            ):
                await _call(conn.execute_fetchall(pragma))
            await store._writer.call(_migrate)
            await store._writer.call(_batch_scheduling)
            store._reader = await _call(_open_reader(str(path), busy_timeout_ms))
            ready = True
        finally:
            if not ready:  # whatever went wrong (cancellation included): no thread left behind
                await conn.close()
        return store

    async def close(self) -> None:
        """Close the connections after the queued transactions (idempotent, also concurrently)."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close_connections())
        await asyncio.shield(self._closing)

    async def _close_connections(self) -> None:
        await self._conn.close()
        if self._reader is not None:
            await self._reader.close()

    async def peek_booking(self, booking_id: str, *, owner: str) -> Booking | None:
        """The last committed state of ``owner``'s booking, without the write lock (one hop).

        Overdue holds are not released: a HELD booking may be past ``expires_at``.
        """
        rows = await self._read(GET_BOOKING, (booking_id, owner))
        return booking_from_row(rows[0]) if rows else None

    async def peek_free_slots(
        self, query: SlotQuery, now: datetime, offset: int, limit: int
    ) -> SlotSearchResult:
        """``search_free_slots`` and ``next_hold_expiry`` from one committed snapshot (one hop).

        Overdue holds are not released: when ``next_hold_expiry <= now`` their slots are
        missing from the page.
        """
        params = search_params(query, now, offset, limit)
        rows = await self._read(PEEK_PAGE, params)
        next_expiry = optional_instant(rows[0]["next_hold_expiry"])
        if rows[0]["slot_id"] is not None:
            slots = [slot_from_row(row) for row in rows]
            return SlotSearchResult(slots, int(rows[0]["total"]), next_expiry)
        total = 0
        if offset > 0:  # past the end: count separately (a later snapshot, as paging allows)
            total = int((await self._read(SEARCH_COUNT, params))[0]["total"])
        return SlotSearchResult([], total, next_expiry)

    async def peek_bookings(
        self, query: BookingListQuery, after: ListPosition | None, limit: int
    ) -> BookingListResult:
        """``list_bookings`` and ``next_hold_expiry`` from one committed snapshot (one hop).

        Overdue holds are not released: a listed HELD booking may be past ``expires_at``.
        """
        params = list_params(query, after, limit)
        rows = await self._read(PEEK_BOOKINGS, params)
        next_expiry = optional_instant(rows[0]["next_hold_expiry"])
        if rows[0]["booking_id"] is not None:
            bookings = [booking_from_row(row) for row in rows]
            return BookingListResult(bookings, int(rows[0]["total"]), next_expiry)
        total = 0
        if after is not None:  # past the end: count separately (a later snapshot)
            total = int((await self._read(LIST_COUNT, params))[0]["total"])
        return BookingListResult([], total, next_expiry)

    async def peek_slots_near(
        self, slot_id: str, now: datetime, limit: int, *, price: Money | None = None
    ) -> SlotNeighbours:
        """The slot and free slots near it (``ports.BookingStore``), one statement (one hop).

        Overdue holds are not released, but their slots count as free.
        """
        params = {
            "slot_id": slot_id,
            "now": format_instant(now),
            "limit": max(0, min(limit, SQLITE_MAX_INTEGER)),
            "price_amount": None if price is None else price.amount,
            "price_currency": None if price is None else price.currency,
        }
        rows = await self._read(SLOTS_NEAR, params)
        slot = next((slot_from_row(row) for row in rows if row["kind"] == 0), None)
        return SlotNeighbours(slot, [slot_from_row(row) for row in rows if row["kind"] != 0])

    async def _read(self, sql: str, params: Iterable[Any] | dict[str, Any]) -> list[sqlite3.Row]:
        """One statement on the read-only connection: autocommit, so its own snapshot."""
        if self._reader is None:
            msg = "the store is not open"
            raise RuntimeError(msg)
        return list(await _call(self._reader.execute_fetchall(sql, params)))

    async def run(self, work: Callable[[SqliteTransaction], T]) -> T:
        """Run ``work`` as one ``BEGIN IMMEDIATE`` transaction on the write connection.

        Commits when ``work`` returns, rolls back when it raises (and re-raises). The whole
        transaction is one call on the worker thread, so it completes even if the awaiting
        task is cancelled.

        Raises:
            StorageBusyError: another process held the write lock past ``busy_timeout``.
        """
        return await self._writer.call(lambda connection: _transact(connection, work))


class _Worker:
    """Runs functions of a connection on its aiosqlite worker thread, one at a time.

    The only use of aiosqlite's private API (``_execute`` queues a call, ``_conn`` is the
    ``sqlite3.Connection``); see the module docstring.
    """

    def __init__(self, connection: aiosqlite.Connection) -> None:
        self._connection = connection

    async def call(self, function: Callable[[sqlite3.Connection], T]) -> T:
        connection = self._connection

        def on_worker() -> T:
            return function(connection._conn)  # noqa: SLF001

        result: T = await _call(connection._execute(on_worker))  # type: ignore[no-untyped-call]  # noqa: SLF001
        return result


def _transact(connection: sqlite3.Connection, work: Callable[[SqliteTransaction], T]) -> T:
    """``BEGIN IMMEDIATE``, ``work``, ``COMMIT``; ``ROLLBACK`` if anything raised. Worker only."""
    if connection.in_transaction:  # an earlier ROLLBACK failed: never build on its leftovers
        _rollback(connection)
    connection.execute("BEGIN IMMEDIATE")
    tx = SqliteTransaction(connection)
    committed = False
    try:
        result = work(tx)
        if inspect.isawaitable(result):  # an ``async def`` work did nothing: refuse, roll back
            _discard(result)
            msg = "transaction work must be a plain function, not a coroutine function"
            raise TypeError(msg)
        connection.execute("COMMIT")
        committed = True
    finally:
        tx.finished = True
        if not committed:  # work or COMMIT raised: the exception propagates after this
            _rollback(connection)
    return result


def _discard(awaitable: object) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()  # no "never awaited" warning for a coroutine that is refused


def _rollback(connection: sqlite3.Connection) -> None:
    try:
        connection.rollback()  # a no-op outside a transaction
    except sqlite3.Error as exc:
        logger.warning("rollback failed: %s", exc.sqlite_errorname)


def _migrate(connection: sqlite3.Connection) -> None:
    """Apply the packaged migrations not applied yet, each in its own transaction. Worker only."""
    for migration in pending_migrations(connection):

        def step(tx: SqliteTransaction, migration: Migration = migration) -> bool:
            return apply_migration(tx.connection, migration)

        if _transact(connection, step):
            logger.info("applied migration %04d_%s", migration.version, migration.name)


async def _call(awaitable: Any) -> Any:
    try:
        return await awaitable
    except sqlite3.Error as exc:
        raise translate_error(exc) from exc


async def _open_reader(path: str, busy_timeout_ms: int) -> aiosqlite.Connection:
    """The read-only connection: WAL lets it read the last commit while a writer works."""
    reader = await aiosqlite.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000)
    ready = False
    try:
        reader.row_factory = sqlite3.Row
        await reader.create_function("fold_text", 1, sql_fold_text, deterministic=True)
        await reader.execute_fetchall(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        await reader.execute_fetchall("PRAGMA query_only = ON")
        await _Worker(reader).call(_batch_scheduling)
        ready = True
    finally:
        if not ready:
            await reader.close()
    return reader


def _batch_scheduling(_connection: sqlite3.Connection) -> None:
    """Give the calling worker thread ``SCHED_BATCH``: no wake-up preemption of the loop.

    Linux applies the policy to the calling thread only. Where the policy does not exist or
    is refused (another OS, a seccomp profile), the thread keeps the default: slower, not wrong.
    """
    policy = getattr(os, "SCHED_BATCH", None)
    if policy is None:
        return
    with contextlib.suppress(OSError):
        os.sched_setscheduler(0, policy, os.sched_param(0))


class DatabaseFileError(Exception):
    """The file cannot be this server's database (the message says why, without the path)."""


def check_database_file(
    path: Path | str, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS
) -> str | None:
    """Prepare the file as ``open`` does, synchronously, and check a newer release did not write it.

    For a command that must refuse to start with one clear line before it serves: the store
    itself opens on the serving event loop, where a failure is a startup traceback.

    Returns:
        A warning for the operator when the file is usable but another process held its write
        lock past the busy timeout (the server starts; its writes wait or answer STORAGE_BUSY
        until the lock is released), else ``None``.

    Raises:
        DatabaseFileError: it cannot be opened or created, is not SQLite, is read-only, a
            newer release migrated it, or migrations are pending while another process holds
            the write lock they need.
    """
    try:
        with contextlib.closing(_connect(str(path), busy_timeout_ms)) as db:
            _switch_to_wal(db, busy_timeout_ms)
            check_not_newer(db)
            if _probe_write(db):
                return None
            pending = unapplied_migrations(db)
    except sqlite3.Error as exc:
        name = getattr(exc, "sqlite_errorname", type(exc).__name__)
        raise DatabaseFileError(f"{name}: {exc}{_hint(Path(path), name, busy_timeout_ms)}") from exc
    except SchemaTooNewError as exc:
        raise DatabaseFileError(str(exc)) from exc
    held = (
        f"another process held the database's write lock for longer than the busy timeout "
        f"({busy_timeout_ms} ms)"
    )
    if pending:
        msg = f"{held}, and {len(pending)} migration(s) of this release must write: retry"
        raise DatabaseFileError(msg)
    return f"{held} at start: writes wait or answer STORAGE_BUSY until it is released"


def _hint(path: Path, error_name: str, busy_timeout_ms: int) -> str:
    """What an operator can do about a file SQLite refused (empty when the error says it all).

    SQLite names one cause (``unable to open database file``) for a missing directory, a
    directory in the file's place and a file or directory it may not write.
    """
    if error_name.startswith("SQLITE_BUSY"):
        return (
            f": another process held the database's lock for longer than the busy timeout "
            f"({busy_timeout_ms} ms); retry, or raise BOOKING_DB_BUSY_TIMEOUT_MS"
        )
    if not error_name.startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY")):
        return ""
    folder = path.parent
    if path.is_dir():
        return ": that path is a directory; give a file path (created on first start)"
    if not folder.is_dir():
        return f": its directory {folder} does not exist; create it or give another path"
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return (
            f": the server must write the file and its directory {folder} (write-ahead log "
            "beside it); give a writable path"
        )
    return ""


def _probe_write(db: sqlite3.Connection) -> bool:
    """A write that is rolled back (a read-only file already in WAL passed the switch).

    ``False`` when another process holds the write lock past the busy timeout: no fault of the
    file, which the caller judges by what would have to be written.
    """
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY:
            return False
        raise
    try:
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        db.execute(f"PRAGMA user_version = {version}")
    finally:
        db.execute("ROLLBACK")
    return True


def _prepare_file(path: str, busy_timeout_ms: int) -> None:
    """Create the file if it is missing and switch it to WAL (a setting the file keeps)."""
    with contextlib.closing(_connect(path, busy_timeout_ms)) as connection:
        _switch_to_wal(connection, busy_timeout_ms)


def _connect(path: str, busy_timeout_ms: int) -> sqlite3.Connection:
    return sqlite3.connect(path, timeout=busy_timeout_ms / 1000, isolation_level=None)


def _switch_to_wal(connection: sqlite3.Connection, busy_timeout_ms: int) -> None:
    """``PRAGMA journal_mode = WAL``, also when another process switches the file at once.

    Processes opening one new file at once each switch it, and SQLite answers one of them
    "database is locked" at once, without its busy handler: each holds the shared lock the
    other's exclusive one needs. The refused one then waits for the other's switch to end by
    taking the write lock (``BEGIN IMMEDIATE``, which does wait, at most the busy timeout) and
    switches again, now a no-op; any other error, or the busy timeout, raises.
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL").fetchall()
        except sqlite3.OperationalError as exc:
            busy = exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
            if not busy or time.monotonic() > deadline:
                raise
        else:
            return
        connection.execute("BEGIN IMMEDIATE")  # returns once the other switch committed
        connection.execute("ROLLBACK")
