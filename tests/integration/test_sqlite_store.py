"""SqliteBookingStore on real SQLite files: schema, seed, constraints, transactions, locking."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from expert_booking.adapters.seed import SEED_EXPERTS, SEED_SLOTS
from expert_booking.adapters.sqlite_migrations import (
    SchemaTooNewError,
    apply_migration,
    load_migrations,
    pending_migrations,
    split_statements,
)
from expert_booking.adapters.sqlite_sql import search_params
from expert_booking.adapters.sqlite_store import (
    DatabaseFileError,
    SqliteBookingStore,
    _Worker,
    booking_from_json,
    booking_to_json,
    check_database_file,
)
from expert_booking.domain.errors import BookingError
from expert_booking.domain.model import (
    ACTIVE_STATUSES,
    BookingStatus,
    Customer,
    Money,
    Slot,
)
from expert_booking.ports import (
    LOCAL_OWNER,
    IdempotencyRecord,
    SlotQuery,
    Transaction,
    fold_text,
)
from tests.fakes import (
    ALL,
    SEED_ORDER,
    T0,
    insert_bookings,
    make_booking,
    make_confirmed_booking,
    search_both_ways,
)

pytestmark = pytest.mark.anyio


@contextlib.contextmanager
def _raw(db_path: Path) -> Iterator[sqlite3.Connection]:
    """A plain stdlib connection to inspect (or lock) the database behind the store's back."""
    connection = sqlite3.connect(db_path, isolation_level=None)
    try:
        yield connection
    finally:
        connection.close()


def _count(db_path: Path, sql: str, *params: object) -> int:
    with _raw(db_path) as connection:
        return int(connection.execute(sql, params).fetchone()[0])


def _slot(tx: Transaction, slot_id: str) -> Slot | None:
    """The stored slot (joined with its expert), as a hold reads it."""
    return tx.lookup_hold("booking.hold_slot", "no-key", slot_id, owner=LOCAL_OWNER).slot


async def test_a_new_database_is_created_migrated_and_seeded(store: SqliteBookingStore) -> None:
    slot, missing = await store.run(lambda tx: (_slot(tx, "slot-ai-001"), _slot(tx, "no")))
    assert slot is not None
    assert slot.expert_id == "exp-ai-001"
    assert slot.expert_name == "Dr. Lin Wei"
    assert slot.specialty == "AI"
    assert slot.starts_at == datetime(2030, 9, 2, 2, tzinfo=UTC)
    assert slot.ends_at == datetime(2030, 9, 2, 3, tzinfo=UTC)
    assert slot.price == Money("500.00", "CNY")
    assert missing is None


async def test_the_connection_uses_wal_normal_sync_and_foreign_keys(db_path: Path) -> None:
    store = await SqliteBookingStore.open(db_path, busy_timeout_ms=1234)
    try:
        pragmas = ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
        values = await store.run(
            lambda tx: [tx._fetch(f"PRAGMA {name}", ())[0][0] for name in pragmas]
        )
        assert values == ["wal", 1, 1, 1234]  # synchronous 1 is NORMAL
    finally:
        await store.close()


async def test_migrations_and_seed_apply_once_across_reopens(db_path: Path) -> None:
    for _ in range(3):
        store = await SqliteBookingStore.open(db_path)
        await store.close()
    versions = [migration.version for migration in load_migrations()]
    with _raw(db_path) as connection:
        applied = [row[0] for row in connection.execute("SELECT version FROM schema_migrations")]
    assert applied == versions
    assert _count(db_path, "SELECT COUNT(*) FROM experts") == len(SEED_EXPERTS)
    assert _count(db_path, "SELECT COUNT(*) FROM slots") == len(SEED_SLOTS)


async def test_stores_opened_at_once_on_one_new_file_all_open_and_seed_it_once(
    tmp_path: Path,
) -> None:
    """Two servers started together on a new file: SQLite refuses one WAL switch at once.

    Before the switch was retried, about one round in seven lost a store to STORAGE_BUSY.
    """
    for round_number in range(20):
        path = tmp_path / f"new-{round_number}.db"
        stores = await asyncio.gather(*(SqliteBookingStore.open(path) for _ in range(3)))
        for store in stores:
            await store.close()
        assert _count(path, "SELECT COUNT(*) FROM slots") == len(SEED_SLOTS)
        with _raw(path) as connection:
            assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_a_database_a_newer_release_migrated_is_refused_not_used(db_path: Path) -> None:
    store = await SqliteBookingStore.open(db_path)
    await store.close()
    with _raw(db_path) as connection:
        connection.execute("INSERT INTO schema_migrations VALUES (999, '2031-01-01T00:00:00Z')")
    with pytest.raises(SchemaTooNewError, match="version 999"):
        await SqliteBookingStore.open(db_path)
    with pytest.raises(DatabaseFileError, match="a newer expert-booking-mcp wrote it"):
        check_database_file(db_path)


async def test_the_seed_is_not_rewritten_after_the_first_start(db_path: Path) -> None:
    store = await SqliteBookingStore.open(db_path)
    await store.close()
    with _raw(db_path) as connection:
        connection.execute("DELETE FROM slots WHERE slot_id = 'slot-fin-002'")
    store = await SqliteBookingStore.open(db_path)
    await store.close()
    assert _count(db_path, "SELECT COUNT(*) FROM slots") == len(SEED_SLOTS) - 1


def test_migration_scripts_split_into_complete_statements() -> None:
    script = "-- a comment; with a semicolon\nCREATE TABLE a (x TEXT DEFAULT ';');\n\nSELECT 1;\n"
    assert split_statements(script) == (
        "-- a comment; with a semicolon\nCREATE TABLE a (x TEXT DEFAULT ';');",
        "SELECT 1;",
    )
    assert split_statements("SELECT 1;\n-- trailing comment\n") == ("SELECT 1;",)
    with pytest.raises(ValueError, match="incomplete"):
        split_statements("SELECT 1;\nCREATE TABLE b (x")


async def test_the_customer_is_stored_exactly_without_absent_optional_keys(
    store: SqliteBookingStore, db_path: Path
) -> None:
    booking = make_booking(customer=Customer(name=" Ada ", email="ADA@Example.com", note=""))
    await store.run(lambda tx: tx.insert_booking(booking))
    with _raw(db_path) as connection:
        (stored,) = connection.execute("SELECT customer_json FROM bookings").fetchone()
    assert json.loads(stored) == {"name": " Ada ", "email": "ADA@Example.com", "note": ""}


async def test_the_partial_unique_index_refuses_a_second_active_booking_of_a_slot(
    store: SqliteBookingStore, db_path: Path
) -> None:
    await store.run(lambda tx: tx.insert_booking(make_booking("booking-a")))
    with pytest.raises(BookingError) as excinfo:
        await store.run(lambda tx: tx.insert_booking(make_booking("booking-b")))
    assert excinfo.value.code == "SLOT_UNAVAILABLE"
    assert isinstance(excinfo.value.__cause__, sqlite3.IntegrityError)
    assert _count(db_path, "SELECT COUNT(*) FROM bookings") == 1


async def test_an_exception_inside_a_transaction_rolls_back_every_change(
    store: SqliteBookingStore, db_path: Path
) -> None:
    booking = make_booking()
    await store.run(lambda tx: tx.insert_booking(make_booking("booking-old", expires_at=T0)))

    def fail_midway(tx: Transaction) -> None:
        assert tx.release_overdue(T0) == 1
        tx.insert_booking(booking)
        tx.put_idempotency(IdempotencyRecord("scope", "key", "fp", booking, None))
        raise RuntimeError

    with pytest.raises(RuntimeError):
        await store.run(fail_midway)
    assert _count(db_path, "SELECT COUNT(*) FROM bookings") == 1
    assert _count(db_path, "SELECT COUNT(*) FROM bookings WHERE status = 'HELD'") == 1
    assert _count(db_path, "SELECT COUNT(*) FROM idempotency") == 0
    assert await store.run(lambda tx: tx.get_booking(booking.booking_id, owner=LOCAL_OWNER)) is None


async def test_a_transaction_runs_on_the_store_worker_not_on_the_event_loop(
    store: SqliteBookingStore,
) -> None:
    loop_thread = threading.get_ident()
    assert await store.run(lambda _tx: threading.get_ident()) != loop_thread


async def test_both_store_worker_threads_run_with_batch_scheduling(
    store: SqliteBookingStore,
) -> None:
    """No wake-up preemption of the event loop by the store's threads (Linux; NOTES.md, Storage)."""
    native_ids = [thread.native_id for thread in threading.enumerate()]
    batch = {tid for tid in native_ids if tid is not None and _policy(tid) == os.SCHED_BATCH}
    writer = await store.run(lambda _tx: threading.get_native_id())
    assert store._reader is not None
    reader = await _Worker(store._reader).call(lambda _conn: threading.get_native_id())
    assert {writer, reader} <= batch
    assert writer != reader
    assert os.sched_getscheduler(0) != os.SCHED_BATCH  # the event loop's thread keeps its policy


def _policy(native_id: int) -> int | None:
    try:
        return os.sched_getscheduler(native_id)
    except ProcessLookupError:  # a thread of a store closed meanwhile
        return None


async def test_an_async_work_function_is_refused_and_rolled_back(
    store: SqliteBookingStore, db_path: Path
) -> None:
    async def work(tx: Transaction) -> None:
        tx.insert_booking(make_booking())

    with pytest.raises(TypeError, match="plain function"):
        await store.run(work)  # type: ignore[unused-coroutine]  # the mistake under test
    assert _count(db_path, "SELECT COUNT(*) FROM bookings") == 0
    assert await store.run(lambda tx: _slot(tx, "slot-ai-001")) is not None


async def test_concurrent_closes_both_return(db_path: Path) -> None:
    store = await SqliteBookingStore.open(db_path)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(store.close)
            tasks.start_soon(store.close)
        await store.close()


async def test_another_process_holding_the_write_lock_makes_the_store_busy(
    db_path: Path,
) -> None:
    store = await SqliteBookingStore.open(db_path, busy_timeout_ms=50)
    try:
        with _raw(db_path) as competitor:
            competitor.execute("BEGIN IMMEDIATE")
            with anyio.fail_after(5), pytest.raises(BookingError) as excinfo:
                await store.run(lambda _tx: pytest.fail("the transaction must not start"))
            competitor.execute("ROLLBACK")
        assert excinfo.value.code == "STORAGE_BUSY"
        assert excinfo.value.retryable is True
        assert isinstance(excinfo.value.__cause__, sqlite3.OperationalError)
        with anyio.fail_after(5):
            assert await store.run(lambda tx: _slot(tx, "slot-ai-001")) is not None
    finally:
        await store.close()


async def test_no_sqlite_exception_type_escapes_the_store(store: SqliteBookingStore) -> None:
    orphan = make_booking(slot_id="slot-does-not-exist")
    with pytest.raises(BookingError) as excinfo:
        await store.run(lambda tx: tx.insert_booking(orphan))
    assert excinfo.value.code == "INTERNAL_ERROR"
    assert isinstance(excinfo.value.__cause__, sqlite3.IntegrityError)


def test_the_stored_json_of_a_record_restores_an_identical_booking() -> None:
    """The port-level behaviour is in the store contract; this is SQLite's JSON form."""
    for booking in (make_confirmed_booking(), make_booking()):
        assert booking_from_json(booking_to_json(booking)) == booking


async def test_a_database_that_cannot_be_opened_is_an_internal_error(tmp_path: Path) -> None:
    with pytest.raises(BookingError) as excinfo:
        await SqliteBookingStore.open(tmp_path / "missing-dir" / "booking.db")
    assert excinfo.value.code == "INTERNAL_ERROR"
    assert isinstance(excinfo.value.__cause__, sqlite3.Error)


async def test_closing_twice_is_harmless(db_path: Path) -> None:
    store = await SqliteBookingStore.open(db_path)
    await store.close()
    await store.close()


# --- lock-free reads (the read-only connection) ---------------------------------------------


async def test_peeks_answer_while_another_process_holds_the_write_lock(db_path: Path) -> None:
    store = await SqliteBookingStore.open(db_path, busy_timeout_ms=50)
    try:
        with _raw(db_path) as competitor:
            competitor.execute("BEGIN IMMEDIATE")
            competitor.execute("DELETE FROM slots WHERE slot_id = 'slot-fin-002'")
            with anyio.fail_after(5):
                page = await store.peek_free_slots(ALL, T0, 0, 20)
                assert await store.peek_booking("booking-x", owner=LOCAL_OWNER) is None
            competitor.execute("ROLLBACK")
        assert page.total == len(SEED_ORDER)
    finally:
        await store.close()


async def test_the_read_connection_refuses_to_write(
    store: SqliteBookingStore, db_path: Path
) -> None:
    assert (await store._read("PRAGMA query_only", ()))[0][0] == 1
    with pytest.raises(BookingError) as excinfo:
        await store._read("DELETE FROM slots", ())
    assert excinfo.value.code == "INTERNAL_ERROR"
    assert _count(db_path, "SELECT COUNT(*) FROM slots") == len(SEED_SLOTS)


# --- the experts-first search answers exactly as the per-slot scan did -------------------------

_PER_SLOT_SCAN = """
SELECT s.slot_id, COUNT(*) OVER () AS total
FROM slots AS s JOIN experts AS e ON e.expert_id = s.expert_id
WHERE s.starts_at > :now
  AND (:starts_after IS NULL OR s.starts_at >= :starts_after)
  AND (:starts_before IS NULL OR s.starts_at < :starts_before)
  AND (:specialty IS NULL OR fold_text(e.specialty) = :specialty)
  AND NOT EXISTS (
      SELECT 1 FROM json_each(:tokens) AS t
      WHERE instr(fold_text(e.name || ' ' || e.specialty || ' ' || e.keywords), t.value) = 0)
  AND NOT EXISTS (
      SELECT 1 FROM bookings AS b
      WHERE b.slot_id = s.slot_id AND b.status IN ('HELD', 'CONFIRMED'))
ORDER BY s.starts_at, s.slot_id
LIMIT :limit OFFSET :offset
"""

_EXTRA_EXPERTS = [
    ("exp-x-1", "Jürgen Groß", "Tax", "Steuer STRASSE straße"),
    ("exp-x-2", "李四", "AI", "机器学习 LLM"),
    ("exp-x-3", "Anna Lee", "Law", "GDPR contracts"),
    ("exp-x-4", "Ola Nordmann", "law", ""),
]


@pytest.mark.parametrize(
    "case",
    [
        ("", None, None, 0, 50),
        ("", None, None, 7, 5),
        ("anna", None, None, 0, 50),
        ("STRASSE", None, None, 0, 50),
        ("straße gross", None, None, 0, 50),
        ("llm", "ai", None, 3, 4),
        ("", "law", (5, 20), 0, 50),
        ("gdpr", None, (0, 40), 2, 3),
        ("nobody", None, None, 0, 50),
        ("", None, None, 400, 5),
    ],
)
async def test_the_experts_first_search_matches_the_per_slot_scan(
    store: SqliteBookingStore,
    db_path: Path,
    case: tuple[str, str | None, tuple[int, int] | None, int, int],
) -> None:
    text, specialty, window, offset, limit = case
    with _raw(db_path) as connection:
        connection.executemany("INSERT INTO experts VALUES (?, ?, ?, ?)", _EXTRA_EXPERTS)
        for n in range(60):
            expert_id = _EXTRA_EXPERTS[n % 4][0]
            # Equal start times across experts exercise the slot_id tie-break.
            starts = T0 + timedelta(hours=n // 3)
            connection.execute(
                "INSERT INTO slots VALUES (?, ?, ?, ?, '100.00', 'EUR')",
                (f"slot-x-{n:03}", expert_id, _iso(starts), _iso(starts + timedelta(hours=1))),
            )
    bookings = (
        make_booking("booking-h", slot_id="slot-x-004"),
        make_booking("booking-e", slot_id="slot-x-008", status=BookingStatus.EXPIRED),
    )
    await insert_bookings(store, *bookings)
    now = T0 + timedelta(hours=1)
    query = SlotQuery(
        text=text,
        specialty=specialty,
        starts_after=None if window is None else T0 + timedelta(hours=window[0]),
        starts_before=None if window is None else T0 + timedelta(hours=window[1]),
    )
    with _raw(db_path) as connection:
        connection.create_function("fold_text", 1, fold_text)
        rows = connection.execute(
            _PER_SLOT_SCAN, search_params(query, now, offset, limit)
        ).fetchall()
    expected_total = rows[0][1] if rows else None
    slots, total = await search_both_ways(store, query, now=now, offset=offset, limit=limit)
    assert slots == [row[0] for row in rows]
    if expected_total is not None:
        assert total == expected_total
    assert rows or offset > 0 or total == 0


def _iso(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.000Z")


async def test_migration_2_indexes_slots_by_expert_and_start(db_path: Path) -> None:
    store = await SqliteBookingStore.open(db_path)
    await store.close()
    with _raw(db_path) as connection:
        columns = [row[2] for row in connection.execute("PRAGMA index_info(slots_by_expert_start)")]
    assert columns == ["expert_id", "starts_at", "slot_id"]


async def test_the_one_active_booking_index_covers_exactly_the_active_statuses(
    store: SqliteBookingStore, db_path: Path
) -> None:
    with _raw(db_path) as connection:
        (definition,) = connection.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'one_active_booking_per_slot'"
        ).fetchone()
    where = definition.partition("WHERE")[2]
    assert set(re.findall(r"'([A-Z_]+)'", where)) == {status.value for status in ACTIVE_STATUSES}


# An idempotency record as versions 1-2 of the schema stored it (a camelCase snapshot).
_VERSION_2_RECORD = json.dumps(
    {
        "bookingId": "booking-x",
        "slotId": "slot-ai-001",
        "expertId": "exp-ai-001",
        "startsAt": "2030-09-02T02:00:00.000Z",
        "endsAt": "2030-09-02T03:00:00.000Z",
        "customer": {"name": "李雷", "email": "li@Example.cn", "phone": "+86 10"},
        "status": "CONFIRMED",
        "version": 2,
        "heldAt": "2030-09-01T00:00:00.000Z",
        "expiresAt": "2030-09-01T00:05:00.000Z",
        "confirmedAt": "2030-09-01T00:01:01.000Z",
        "paymentPageUrl": "http://127.0.0.1:3100/pay/booking-x",
        "payment": {
            "queryId": "booking-x",
            "status": "PAID",
            "amount": "500.00",
            "currency": "CNY",
            "paidAt": "2030-09-01T00:00:59.000Z",
        },
    },
    ensure_ascii=False,
    separators=(",", ":"),
)


def _database_at(db_path: Path, version: int) -> None:
    """A database as the server left it at schema ``version`` (migrations 1..version)."""
    with _raw(db_path) as connection:
        pending = pending_migrations(connection)
        for migration in pending[:version]:
            connection.execute("BEGIN IMMEDIATE")
            apply_migration(connection, migration)
            connection.execute("COMMIT")


async def test_migration_3_rewrites_version_2_idempotency_records_to_the_column_form(
    db_path: Path,
) -> None:
    _database_at(db_path, 2)
    held = make_booking("booking-held")
    # Version 2 kept no owner: the column form of migration 3 has none either.
    held_columns = json.loads(booking_to_json(held))
    del held_columns["owner"]
    with _raw(db_path) as connection:
        connection.execute(
            "INSERT INTO idempotency (scope, key, fingerprint, booking_json, error_code) "
            "VALUES ('booking.confirm_booking', 'old', 'fp', ?, NULL), "
            "('booking.hold_slot', 'new', 'fp', ?, NULL)",
            (_VERSION_2_RECORD, json.dumps(held_columns)),
        )
    store = await SqliteBookingStore.open(db_path)
    try:
        old, new = await store.run(
            lambda tx: (
                tx.get_idempotency("booking.confirm_booking", "old", owner=LOCAL_OWNER),
                tx.get_idempotency("booking.hold_slot", "new", owner=LOCAL_OWNER),
            )
        )
    finally:
        await store.close()
    expected = make_confirmed_booking()
    assert old is not None
    assert old.booking == expected
    assert new is not None
    assert new.booking == held


def _rewind_migration_6(connection: sqlite3.Connection) -> None:
    """Back to the schema before migration 6 (no refund_due); the next open applies it again."""
    connection.execute("ALTER TABLE bookings DROP COLUMN refund_due")
    connection.execute(
        "UPDATE idempotency SET booking_json = json_remove(booking_json, '$.refund_due')"
    )
    connection.execute("DELETE FROM schema_migrations WHERE version = 6")


async def test_migration_6_adds_a_false_refund_due_to_bookings_and_records(
    db_path: Path,
) -> None:
    held = make_booking("booking-held")

    def write(tx: Transaction) -> None:
        tx.insert_booking(held)
        tx.put_idempotency(IdempotencyRecord("booking.hold_slot", "k", "fp", held, None))

    store = await SqliteBookingStore.open(db_path)
    try:
        await store.run(write)
    finally:
        await store.close()
    with _raw(db_path) as connection:
        _rewind_migration_6(connection)
        (text,) = connection.execute("SELECT booking_json FROM idempotency").fetchone()
        assert "refund_due" not in json.loads(text)
    store = await SqliteBookingStore.open(db_path)
    try:
        booking, record = await store.run(
            lambda tx: (
                tx.get_booking("booking-held", owner=LOCAL_OWNER),
                tx.get_idempotency("booking.hold_slot", "k", owner=LOCAL_OWNER),
            )
        )
    finally:
        await store.close()
    assert booking == held
    assert record is not None
    assert record.booking == held
    assert held.refund_due is False


async def test_migration_7_gives_every_earlier_booking_and_record_to_the_local_principal(
    db_path: Path,
) -> None:
    _database_at(db_path, 6)
    held = make_booking("booking-held")
    columns = json.loads(booking_to_json(held))
    for later in ("owner", "history_json", "cancelled_at"):  # columns of migrations 7 and 8
        del columns[later]
    with _raw(db_path) as connection:
        connection.execute(
            f"INSERT INTO bookings ({', '.join(columns)}) "  # noqa: S608 - test's own columns
            f"VALUES ({', '.join('?' for _ in columns)})",
            tuple(columns.values()),
        )
        connection.execute(
            "INSERT INTO idempotency (scope, key, fingerprint, booking_json, error_code) "
            "VALUES ('booking.hold_slot', 'key-1', 'fp', ?, NULL)",
            (json.dumps(columns),),
        )
    store = await SqliteBookingStore.open(db_path)
    try:
        found = await store.peek_booking("booking-held", owner=LOCAL_OWNER)
        other = await store.peek_booking("booking-held", owner="https://issuer.example sub-1")
        record = await store.run(
            lambda tx: tx.get_idempotency("booking.hold_slot", "key-1", owner=LOCAL_OWNER)
        )
    finally:
        await store.close()
    assert found == held
    assert other is None
    assert record is not None
    assert record.booking == held
