"""``ports.Transaction`` on the store's write connection, and sqlite3 errors in domain terms."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from expert_booking.adapters.sqlite_rows import (
    booking_from_json,
    booking_from_row,
    booking_params,
    booking_to_json,
    optional_instant,
    slot_from_row,
)
from expert_booking.adapters.sqlite_sql import (
    GET_BOOKING,
    HOLD_LOOKUP,
    INSERT_BOOKING,
    LIST_BOOKINGS,
    LIST_COUNT,
    LOOKUP_SLOT,
    NEXT_HOLD_EXPIRY,
    SEARCH_COUNT,
    SEARCH_PAGE,
    UPDATE_BOOKING,
    list_params,
    search_params,
)
from expert_booking.domain.errors import (
    BookingError,
    BookingNotFoundError,
    InternalError,
    SlotUnavailableError,
    StorageBusyError,
    VersionConflictError,
)
from expert_booking.domain.model import Booking, Slot, format_instant
from expert_booking.ports import (
    BookingListQuery,
    HoldLookup,
    IdempotencyRecord,
    ListPosition,
    SlotQuery,
    SlotStanding,
)

logger = logging.getLogger("expert_booking.store")


class SqliteTransaction:
    """``ports.Transaction`` on the write connection; valid only while its ``work`` runs."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.finished = False

    def release_overdue(self, now: datetime) -> int:
        """Mark HELD bookings with ``expires_at <= now`` EXPIRED (version + 1); return count."""
        return self._write(
            "UPDATE bookings SET status = 'EXPIRED', version = version + 1 "
            "WHERE status = 'HELD' AND expires_at <= ?",
            (format_instant(now),),
        )

    def next_hold_expiry(self) -> datetime | None:
        """The earliest ``expires_at`` of a HELD booking, if any."""
        rows = self._fetch(NEXT_HOLD_EXPIRY, ())
        return optional_instant(rows[0][0])

    def search_free_slots(
        self, query: SlotQuery, now: datetime, offset: int, limit: int
    ) -> tuple[list[Slot], int]:
        """Free slots (no active booking, starting after ``now``) by start time; page and total.

        Text tokens (split on whitespace) must all occur, case-folded, in the expert's name,
        specialty or keywords; the specialty filter is an exact, case-folded match.
        """
        params = search_params(query, now, offset, limit)
        rows = self._fetch(SEARCH_PAGE, params)
        if rows:
            return [slot_from_row(row) for row in rows], int(rows[0]["total"])
        if offset == 0:
            return [], 0
        counted = self._fetch(SEARCH_COUNT, params)
        return [], int(counted[0]["total"])

    def lookup_hold(self, scope: str, key: str, slot_id: str, *, owner: str) -> HoldLookup:
        """``owner``'s idempotency record, the slot and the earliest hold expiry, at once."""
        params = {"owner": owner, "scope": scope, "key": key, "slot_id": slot_id}
        row = self._fetch(HOLD_LOOKUP, params)[0]
        record = None
        if row["fingerprint"] is not None:
            record = _record(scope, key, row)
        slot = slot_from_row(row) if row["slot_id"] is not None else None
        return HoldLookup(record, slot, optional_instant(row["next_hold_expiry"]))

    def lookup_slot(self, slot_id: str) -> SlotStanding | None:
        """The slot and whether no HELD or CONFIRMED booking has it, or ``None``."""
        rows = self._fetch(LOOKUP_SLOT, (slot_id,))
        return SlotStanding(slot_from_row(rows[0]), bool(rows[0]["free"])) if rows else None

    def list_bookings(
        self, query: BookingListQuery, after: ListPosition | None, limit: int
    ) -> tuple[list[Booking], int]:
        """The query's bookings after ``after``, newest first; the total over all pages."""
        params = list_params(query, after, limit)
        rows = self._fetch(LIST_BOOKINGS, params)
        if rows:
            return [booking_from_row(row) for row in rows], int(rows[0]["total"])
        if after is None:
            return [], 0
        return [], int(self._fetch(LIST_COUNT, params)[0]["total"])

    def get_booking(self, booking_id: str, *, owner: str) -> Booking | None:
        """The stored booking of ``owner``, or ``None`` (also when another owner has it)."""
        rows = self._fetch(GET_BOOKING, (booking_id, owner))
        return booking_from_row(rows[0]) if rows else None

    def insert_booking(self, booking: Booking) -> None:
        """Insert a new booking.

        Raises:
            SlotUnavailableError: the slot already has an active booking.
        """
        self._write(INSERT_BOOKING, booking_params(booking), slot_id=booking.slot_id)

    def update_booking(self, booking: Booking, expected_version: int) -> None:
        """Replace the stored booking if its stored version is ``expected_version``.

        Raises:
            VersionConflictError: the stored version differs.
            BookingNotFoundError: no booking of ``booking.owner`` has this id.
            SlotUnavailableError: the change would make a second active booking of the slot.
        """
        # booking_params: booking_id first, owner last; the SET list is everything between.
        changed = self._write(
            UPDATE_BOOKING,
            (*booking_params(booking)[1:-1], booking.booking_id, booking.owner, expected_version),
            slot_id=booking.slot_id,
        )
        if changed:
            return
        rows = self._fetch(
            "SELECT version FROM bookings WHERE booking_id = ? AND owner = ?",
            (booking.booking_id, booking.owner),
        )
        if not rows:
            raise BookingNotFoundError(booking_id=booking.booking_id)
        raise VersionConflictError(
            booking_id=booking.booking_id,
            expected_version=expected_version,
            current_version=rows[0]["version"],
        )

    def get_idempotency(self, scope: str, key: str, *, owner: str) -> IdempotencyRecord | None:
        """The committed outcome ``owner`` stored for ``(scope, key)``, or ``None``."""
        rows = self._fetch(
            "SELECT fingerprint, booking_json, error_code FROM idempotency "
            "WHERE owner = ? AND scope = ? AND key = ?",
            (owner, scope, key),
        )
        return _record(scope, key, rows[0]) if rows else None

    def put_idempotency(self, record: IdempotencyRecord) -> None:
        """Store the outcome of an idempotent request (a key is written once per owner)."""
        self._write(
            "INSERT INTO idempotency (owner, scope, key, fingerprint, booking_json, error_code) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                record.booking.owner,
                record.scope,
                record.key,
                record.fingerprint,
                booking_to_json(record.booking),
                record.error_code,
            ),
        )

    def replace_idempotency(self, record: IdempotencyRecord) -> None:
        """Replace the outcome stored under the record's key (one row, or ``InternalError``)."""
        changed = self._write(
            "UPDATE idempotency SET fingerprint = ?, booking_json = ?, error_code = ? "
            "WHERE owner = ? AND scope = ? AND key = ?",
            (
                record.fingerprint,
                booking_to_json(record.booking),
                record.error_code,
                record.booking.owner,
                record.scope,
                record.key,
            ),
        )
        if changed != 1:
            logger.error("no idempotency record to replace under %s", record.scope)
            raise InternalError

    def _check_open(self) -> None:
        if self.finished:
            msg = "the transaction has already ended"
            raise RuntimeError(msg)

    def _fetch(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> list[sqlite3.Row]:
        self._check_open()
        try:
            return self.connection.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise translate_error(exc) from exc

    def _write(self, sql: str, params: Sequence[Any], *, slot_id: str | None = None) -> int:
        """Run one change; with ``slot_id``, a second active booking is ``SlotUnavailableError``."""
        self._check_open()
        try:
            return self.connection.execute(sql, params).rowcount
        except sqlite3.IntegrityError as exc:
            if slot_id is not None and "bookings.slot_id" in str(exc):
                raise SlotUnavailableError(slot_id=slot_id) from exc
            raise translate_error(exc) from exc
        except sqlite3.Error as exc:
            raise translate_error(exc) from exc


def _record(scope: str, key: str, row: sqlite3.Row) -> IdempotencyRecord:
    return IdempotencyRecord(
        scope=scope,
        key=key,
        fingerprint=row["fingerprint"],
        booking=booking_from_json(row["booking_json"]),
        error_code=row["error_code"],
    )


DEFAULT_BUSY_TIMEOUT_MS: Final = 5000
"""How long a statement waits for another connection's lock before it is ``StorageBusyError``
(``BOOKING_DB_BUSY_TIMEOUT_MS``'s default)."""


def translate_error(exc: sqlite3.Error) -> BookingError:
    """Map a sqlite3 error to the domain: lock contention is retryable, the rest internal."""
    code = getattr(exc, "sqlite_errorcode", None)
    busy = code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    if isinstance(exc, sqlite3.OperationalError) and (
        busy or "database is locked" in str(exc) or "database is busy" in str(exc)
    ):
        return StorageBusyError()
    logger.error("sqlite error %s", getattr(exc, "sqlite_errorname", type(exc).__name__))
    return InternalError()
