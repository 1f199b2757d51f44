"""Versioned SQLite migrations: the packaged ``migrations/NNNN_name.sql`` files and the seed.

Each migration runs in its own write transaction (the store's ``_transact``), re-checks under
the write lock whether another process applied it meanwhile, and records itself in
``schema_migrations``. Migration 1 also writes the seed, so the seed is written exactly once.
The functions here run on the store's worker thread, on the write connection.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from importlib import resources

from expert_booking.adapters.seed import SEED_EXPERTS, SEED_SLOTS

__all__ = [
    "Migration",
    "SchemaTooNewError",
    "apply_migration",
    "check_not_newer",
    "load_migrations",
    "pending_migrations",
    "split_statements",
]

_SEED_VERSION = 1  # the seed is written in the transaction that creates the schema


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered schema step (``migrations/NNNN_name.sql``)."""

    version: int
    name: str
    statements: tuple[str, ...]


def load_migrations() -> tuple[Migration, ...]:
    """The packaged migrations in version order (versions must be 1, 2, 3, ...)."""
    folder = resources.files("expert_booking.adapters") / "migrations"
    migrations = []
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        if not entry.name.endswith(".sql"):
            continue
        prefix, _, name = entry.name.removesuffix(".sql").partition("_")
        statements = split_statements(entry.read_text(encoding="utf-8"))
        migrations.append(Migration(version=int(prefix), name=name, statements=statements))
    versions = [migration.version for migration in migrations]
    if versions != list(range(1, len(versions) + 1)):
        msg = f"migration versions must be 1..n without gaps, got {versions}"
        raise RuntimeError(msg)
    return tuple(migrations)


def split_statements(script: str) -> tuple[str, ...]:
    """Split a SQL script into complete statements (SQLite's own tokenizer decides)."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    leftover = [
        line for line in buffer.splitlines() if line.strip() and not line.strip().startswith("--")
    ]
    if leftover:
        msg = "migration script ends with an incomplete statement"
        raise ValueError(msg)
    return tuple(statements)


class SchemaTooNewError(Exception):
    """The database records a migration this release does not know: a newer release wrote it."""


def check_not_newer(connection: sqlite3.Connection) -> None:
    """Refuse a database a newer release migrated: this code would misread its tables.

    Raises:
        SchemaTooNewError: ``schema_migrations`` names a version beyond the packaged ones.
    """
    exists = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if exists is None:
        return
    newest = connection.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0]
    known = max(migration.version for migration in load_migrations())
    if isinstance(newest, int) and newest > known:
        msg = (
            f"its schema is at version {newest}, this release knows versions up to {known}: "
            "a newer expert-booking-mcp wrote it; run that release (or a newer one) on it"
        )
        raise SchemaTooNewError(msg)


def pending_migrations(connection: sqlite3.Connection) -> list[Migration]:
    """The packaged migrations not recorded in ``schema_migrations`` yet (creating the table).

    Raises:
        SchemaTooNewError: a newer release migrated the database.
    """
    connection.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        "version INTEGER PRIMARY KEY NOT NULL, applied_at TEXT NOT NULL)"
    )
    check_not_newer(connection)
    return unapplied_migrations(connection)


def unapplied_migrations(connection: sqlite3.Connection) -> list[Migration]:
    """The packaged migrations ``schema_migrations`` does not record; reads only (no table: all)."""
    exists = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    query = "SELECT version FROM schema_migrations"
    applied = {row[0] for row in connection.execute(query)} if exists else set()
    return [migration for migration in load_migrations() if migration.version not in applied]


def apply_migration(connection: sqlite3.Connection, migration: Migration) -> bool:
    """Apply one migration inside a transaction; ``False`` if another process just did."""
    done = connection.execute(
        "SELECT 1 FROM schema_migrations WHERE version = ?", (migration.version,)
    ).fetchall()
    if done:
        return False
    for statement in migration.statements:
        connection.execute(statement)
    if migration.version == _SEED_VERSION:
        _insert_seed(connection)
    connection.execute(
        "INSERT INTO schema_migrations (version, applied_at) "
        "VALUES (?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
        (migration.version,),
    )
    return True


def _insert_seed(connection: sqlite3.Connection) -> None:
    connection.executemany(
        "INSERT INTO experts (expert_id, name, specialty, keywords) VALUES (?, ?, ?, ?)",
        [(e.expert_id, e.name, e.specialty, e.keywords) for e in SEED_EXPERTS],
    )
    connection.executemany(
        "INSERT INTO slots (slot_id, expert_id, starts_at, ends_at, price_amount, "
        "price_currency) VALUES (?, ?, ?, ?, ?, ?)",
        [
            (s.slot_id, s.expert_id, s.starts_at, s.ends_at, s.price_amount, s.price_currency)
            for s in SEED_SLOTS
        ],
    )
