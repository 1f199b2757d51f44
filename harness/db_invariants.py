"""Database invariants of the booking store, checked read-only on a SQLite file.

Usage from a test::

    before = booking_states(db_path)
    ...  # drive the server
    assert check_invariants(db_path, previous=before) == []

or from a shell: ``python -m harness.db_invariants PATH``.

The invariants (CONTRACT sections 3-4, the state machine of NOTES.md):

- at most one ``HELD``/``CONFIRMED`` booking per slot;
- versions only grow: every version is at least 1, a booking that left ``HELD`` has moved
  past version 1, and (given an earlier :func:`booking_states` snapshot) no booking
  disappeared or went back to a lower version;
- transitions (given a snapshot): a status changes only with the version, and only along the
  state machine: ``HELD`` to any other status, ``CONFIRMED`` to ``CONFIRMED`` (rescheduled) or
  ``CANCELLED``, ``EXPIRED`` and ``CANCELLED`` to themselves (a payment heard after the
  release: PAID, refund due); ``PAYMENT_FAILED`` and ``PAYMENT_CLOSED`` never change;
- every ``CONFIRMED`` booking has a ``PAID`` payment with ``paidAt`` and ``confirmedAt`` set,
  whose amount and currency equal the booking's recorded price and the slot's price;
- each status's fields agree with it: a ``HELD`` booking is unpaid, unconfirmed, uncancelled
  and owes no refund; ``PAYMENT_FAILED``/``PAYMENT_CLOSED`` carry that payment status;
  ``paidAt`` is set exactly when the payment is ``PAID``; ``cancelledAt`` exactly when
  ``CANCELLED``; a refund is due exactly for a paid booking that is ``CANCELLED`` or ``EXPIRED``;
- every stored instant is the canonical RFC 3339 UTC text, and they are in order:
  ``heldAt < expiresAt``, ``startsAt < endsAt``, ``heldAt`` no later than ``confirmedAt``
  and ``cancelledAt``, ``expiresAt <= startsAt`` until a booking is rescheduled, and
  ``confirmedAt``, each reschedule's ``changedAt`` and ``cancelledAt`` never going back, and
  each change (a reschedule, a cancellation) before the start of the slots it concerns;
- every booking refers to an existing slot.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import sys
from collections.abc import Mapping
from contextlib import closing
from datetime import datetime
from pathlib import Path

from expert_booking.domain.model import format_instant, parse_instant

__all__ = ("booking_states", "check_invariants")

_ACTIVE = ("HELD", "CONFIRMED")
# What a status may become through any number of changes (each one bumps the version).
_LATER = {
    "HELD": {"CONFIRMED", "EXPIRED", "PAYMENT_FAILED", "PAYMENT_CLOSED", "CANCELLED"},
    "CONFIRMED": {"CONFIRMED", "CANCELLED"},
    "EXPIRED": {"EXPIRED"},
    "PAYMENT_FAILED": set(),
    "PAYMENT_CLOSED": set(),
    "CANCELLED": {"CANCELLED"},
}
_INSTANTS = (
    "starts_at",
    "ends_at",
    "held_at",
    "expires_at",
    "confirmed_at",
    "paid_at",
    "cancelled_at",
)


def _connect(db_path: Path | str) -> sqlite3.Connection:
    """Open ``db_path`` read-only (never creates, migrates or locks it for writing)."""
    uri = Path(db_path).resolve().as_uri() + "?mode=ro"
    connection = sqlite3.connect(uri, uri=True, timeout=10.0)
    connection.row_factory = sqlite3.Row
    return connection


State = tuple[int, str]
"""A booking's ``(version, status)``."""


def booking_states(db_path: Path | str) -> dict[str, State]:
    """Snapshot ``booking_id -> (version, status)`` for ``check_invariants(previous=...)``."""
    with closing(_connect(db_path)) as db:
        return _states(db)


def _states(db: sqlite3.Connection) -> dict[str, State]:
    rows = db.execute("SELECT booking_id, version, status FROM bookings").fetchall()
    return {str(row["booking_id"]): (int(row["version"]), str(row["status"])) for row in rows}


def check_invariants(
    db_path: Path | str, *, previous: Mapping[str, State] | None = None
) -> list[str]:
    """Return one human-readable line per violated invariant (empty when all hold).

    Args:
        db_path: the server's SQLite file (opened read-only).
        previous: an earlier :func:`booking_states` snapshot of the same file; when given,
            each of those bookings must still exist, with a version at least as high and a
            status the state machine allows since.
    """
    with closing(_connect(db_path)) as db:
        return [
            *_one_active_booking_per_slot(db),
            *_versions_grow(db, previous),
            *_confirmed_bookings_are_paid(db),
            *_fields_agree_with_status(db),
            *_instants_are_canonical_and_ordered(db),
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


def _versions_grow(db: sqlite3.Connection, previous: Mapping[str, State] | None) -> list[str]:
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
        now = _states(db)
        for booking_id, before in sorted(previous.items()):
            after = now.get(booking_id)
            if after is None:
                violations.append(f"booking {booking_id}: disappeared (was version {before[0]})")
            else:
                violations += _transition(booking_id, before, after)
    return violations


def _transition(booking_id: str, before: State, after: State) -> list[str]:
    (old_version, old_status), (new_version, new_status) = before, after
    if new_version < old_version:
        return [f"booking {booking_id}: version went from {old_version} to {new_version}"]
    if new_version == old_version and new_status != old_status:
        return [
            (
                f"booking {booking_id}: {old_status} became {new_status} at the same version "
                f"{new_version}"
            )
        ]
    if new_version > old_version and new_status not in _LATER[old_status]:
        return [
            (
                f"booking {booking_id}: {old_status} (version {old_version}) became {new_status} "
                f"(version {new_version}), which the state machine does not allow"
            )
        ]
    return []


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


def _fields_agree_with_status(db: sqlite3.Connection) -> list[str]:
    rules = (
        (
            "paid, confirmed, cancelled or owed a refund while HELD",
            (
                "status = 'HELD' AND (payment_status <> 'PENDING' OR confirmed_at IS NOT NULL "
                "OR cancelled_at IS NOT NULL OR refund_due <> 0)"
            ),
        ),
        ("payment not FAILED", "status = 'PAYMENT_FAILED' AND payment_status <> 'FAILED'"),
        ("payment not CLOSED", "status = 'PAYMENT_CLOSED' AND payment_status <> 'CLOSED'"),
        ("paidAt without a PAID payment", "paid_at IS NOT NULL AND payment_status <> 'PAID'"),
        ("PAID without paidAt", "paid_at IS NULL AND payment_status = 'PAID'"),
        ("cancelledAt while not CANCELLED", "cancelled_at IS NOT NULL AND status <> 'CANCELLED'"),
        ("CANCELLED without cancelledAt", "cancelled_at IS NULL AND status = 'CANCELLED'"),
        (
            "confirmedAt but never confirmed",
            "confirmed_at IS NOT NULL AND status NOT IN ('CONFIRMED', 'CANCELLED')",
        ),
        (
            "owed a refund but not paid or still active",
            "refund_due <> 0 AND (payment_status <> 'PAID' OR status IN ('HELD', 'CONFIRMED'))",
        ),
        (
            "paid and released but owed no refund",
            "refund_due = 0 AND payment_status = 'PAID' AND status IN ('CANCELLED', 'EXPIRED')",
        ),
    )
    violations: list[str] = []
    for problem, condition in rules:
        rows = db.execute(
            f"SELECT booking_id, status FROM bookings WHERE {condition} ORDER BY booking_id"  # noqa: S608
        )
        violations += [f"{row['status']} booking {row['booking_id']}: {problem}" for row in rows]
    return violations


def _instants_are_canonical_and_ordered(db: sqlite3.Connection) -> list[str]:
    violations: list[str] = []
    for row in db.execute(
        f"SELECT booking_id, history_json, {', '.join(_INSTANTS)} FROM bookings "  # noqa: S608
        "ORDER BY booking_id"
    ):
        problems: list[str] = []
        instants = {}
        for column in _INSTANTS:
            text = row[column]
            if text is None:
                continue
            try:
                instants[column] = parse_instant(text)
            except ValueError:
                problems.append(f"{column} {text!r} is not an RFC 3339 instant")
                continue
            if format_instant(instants[column]) != text:
                problems.append(f"{column} {text!r} is not canonical UTC text")
        order = [("held_at", "expires_at", True), ("starts_at", "ends_at", True)]
        order += [("held_at", "confirmed_at", False), ("held_at", "cancelled_at", False)]
        order += [("confirmed_at", "cancelled_at", False), ("cancelled_at", "starts_at", True)]
        if row["history_json"] == "[]":
            order.append(("expires_at", "starts_at", False))
        for early, late, strict in order:
            if early in instants and late in instants:
                before, after = instants[early], instants[late]
                if after < before or (strict and after == before):
                    problems.append(f"{early} {row[early]} is not before {late} {row[late]}")
        problems += _changes_in_order(row, instants)
        if problems:
            violations.append(f"booking {row['booking_id']}: " + "; ".join(problems))
    return violations


def _changes_in_order(row: sqlite3.Row, instants: Mapping[str, datetime]) -> list[str]:
    """Reschedules (``history``) come after the confirmation, in order, before a cancellation,
    each before the start of the slot it left and of the slot it moved to."""
    try:
        entries = json.loads(row["history_json"])
        changes = [parse_instant(entry["changed_at"]) for entry in entries]
        left = [parse_instant(entry["starts_at"]) for entry in entries]
    except (ValueError, TypeError, KeyError) as exc:
        return [f"history is not a list of changes with changed_at and starts_at ({exc})"]
    steps = [("confirmed_at", instants.get("confirmed_at"))]
    steps += [(f"history[{index}].changed_at", at) for index, at in enumerate(changes)]
    steps += [("cancelled_at", instants.get("cancelled_at"))] if changes else []
    known = [(name, at) for name, at in steps if at is not None]
    problems = [
        f"{early} {format_instant(before)} is after {late} {format_instant(after)}"
        for (early, before), (late, after) in itertools.pairwise(known)
        if after < before
    ]
    starts = [*left, instants.get("starts_at")]  # the slot moved to: the next one left, or now
    for index, changed in enumerate(changes):
        begun = [start for start in starts[index : index + 2] if start is not None]
        if any(start <= changed for start in begun):
            problems.append(
                f"history[{index}].changed_at {format_instant(changed)} is not before the start "
                "of the slot it left or moved to"
            )
    return problems


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
