"""Database invariants of the booking store, checked read-only on a SQLite file.

Usage from a test::

    before = booking_versions(db_path)
    ...  # drive the server
    assert check_invariants(db_path, previous=before) == []

or from a shell: ``python -m harness.db_invariants PATH``.

The invariants (CONTRACT sections 3-4):

- at most one ``HELD``/``CONFIRMED`` booking per slot;
- versions only grow: every version is at least 1, a booking that left ``HELD`` has moved
  past version 1, and (given an earlier :func:`booking_versions` snapshot) no booking
  disappeared or went back to a lower version;
- every ``CONFIRMED`` booking has a ``PAID`` payment with ``paidAt`` and ``confirmedAt`` set,
  whose amount and currency equal the booking's recorded price and the slot's price;
- every booking refers to an existing slot.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path

__all__ = ("booking_versions", "check_invariants")

_ACTIVE = ("HELD", "CONFIRMED")


def _connect(db_path: Path | str) -> sqlite3.Connection:
    """Open ``db_path`` read-only (never creates, migrates or locks it for writing)."""
    uri = Path(db_path).resolve().as_uri() + "?mode=ro"
    connection = sqlite3.connect(uri, uri=True, timeout=10.0)
    connection.row_factory = sqlite3.Row
    return connection


def booking_versions(db_path: Path | str) -> dict[str, int]:
    """Snapshot ``booking_id -> version`` for a later ``check_invariants(previous=...)``."""
    with closing(_connect(db_path)) as db:
        rows = db.execute("SELECT booking_id, version FROM bookings").fetchall()
    return {str(row["booking_id"]): int(row["version"]) for row in rows}


def check_invariants(
    db_path: Path | str, *, previous: Mapping[str, int] | None = None
) -> list[str]:
    """Return one human-readable line per violated invariant (empty when all hold).

    Args:
        db_path: the server's SQLite file (opened read-only).
        previous: an earlier :func:`booking_versions` snapshot of the same file; when given,
            each of those bookings must still exist with a version at least as high.
    """
    with closing(_connect(db_path)) as db:
        return [
            *_one_active_booking_per_slot(db),
            *_versions_grow(db, previous),
            *_confirmed_bookings_are_paid(db),
            *_bookings_have_slots(db),
        ]


def _one_active_booking_per_slot(db: sqlite3.Connection) -> list[str]:
    active: dict[str, list[str]] = {}
    for row in db.execute(
        "SELECT slot_id, booking_id FROM bookings WHERE status IN (?, ?) "
        "ORDER BY slot_id, booking_id",
        _ACTIVE,
    ):
        active.setdefault(str(row["slot_id"]), []).append(str(row["booking_id"]))
    return [
        f"slot {slot}: {len(ids)} HELD/CONFIRMED bookings ({','.join(ids)})"
        for slot, ids in active.items()
        if len(ids) > 1
    ]


def _versions_grow(db: sqlite3.Connection, previous: Mapping[str, int] | None) -> list[str]:
    violations = [
        f"booking {row['booking_id']}: version {row['version']} < 1"
        for row in db.execute("SELECT booking_id, version FROM bookings WHERE version < 1")
    ]
    violations += [
        f"booking {row['booking_id']}: status {row['status']} at version {row['version']} "
        "(every change bumps the version, so only HELD may be at version 1)"
        for row in db.execute(
            "SELECT booking_id, status, version FROM bookings "
            "WHERE status <> 'HELD' AND version < 2"
        )
    ]
    if previous:
        now = {
            str(row["booking_id"]): int(row["version"])
            for row in db.execute("SELECT booking_id, version FROM bookings")
        }
        for booking_id, before in sorted(previous.items()):
            after = now.get(booking_id)
            if after is None:
                violations.append(f"booking {booking_id}: disappeared (was version {before})")
            elif after < before:
                violations.append(f"booking {booking_id}: version went from {before} to {after}")
    return violations


def _confirmed_bookings_are_paid(db: sqlite3.Connection) -> list[str]:
    rows = db.execute(
        "SELECT b.booking_id, b.payment_status, b.payment_amount, b.payment_currency, "
        "b.paid_at, b.confirmed_at, s.price_amount, s.price_currency "
        "FROM bookings AS b LEFT JOIN slots AS s ON s.slot_id = b.slot_id "
        "WHERE b.status = 'CONFIRMED'"
    ).fetchall()
    violations: list[str] = []
    for row in rows:
        problems: list[str] = []
        if row["payment_status"] != "PAID":
            problems.append(f"payment status {row['payment_status']}")
        if row["paid_at"] is None:
            problems.append("no paidAt")
        if row["confirmed_at"] is None:
            problems.append("no confirmedAt")
        if (row["payment_amount"], row["payment_currency"]) != (
            row["price_amount"],
            row["price_currency"],
        ):
            problems.append(
                f"paid {row['payment_amount']} {row['payment_currency']} but the slot costs "
                f"{row['price_amount']} {row['price_currency']}"
            )
        if problems:
            violations.append(f"CONFIRMED booking {row['booking_id']}: " + "; ".join(problems))
    return violations


def _bookings_have_slots(db: sqlite3.Connection) -> list[str]:
    rows = db.execute(
        "SELECT b.booking_id, b.slot_id FROM bookings AS b "
        "LEFT JOIN slots AS s ON s.slot_id = b.slot_id WHERE s.slot_id IS NULL"
    ).fetchall()
    return [f"booking {row['booking_id']}: unknown slot {row['slot_id']}" for row in rows]


def main(argv: list[str] | None = None) -> int:
    """Print the violations of the database at ``argv[0]``; exit 1 when there are any."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m harness.db_invariants DB_PATH", file=sys.stderr)
        return 2
    violations = check_invariants(args[0])
    for line in violations:
        print(line)
    print(f"{len(violations)} violation(s)", file=sys.stderr)
    return 1 if violations else 0


if __name__ == "__main__":
    raise SystemExit(main())
