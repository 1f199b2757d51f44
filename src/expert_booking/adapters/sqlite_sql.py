"""The store's SQL text (constant: every value is bound) and the parameters of its queries."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from expert_booking.adapters.sqlite_rows import BOOKING_COLUMN_NAMES, BOOKING_COLUMNS, SLOT_COLUMNS
from expert_booking.domain.model import ACTIVE_STATUSES, format_instant
from expert_booking.ports import BookingListQuery, ListPosition, SlotQuery, fold_text

SQLITE_MAX_INTEGER = 2**63 - 1

# The statuses that occupy a slot, as an SQL list (the partial unique index of migration 1 names
# the same set; tests/integration/test_sqlite_store.py ties the two).
ACTIVE_STATUS_LIST = ", ".join(f"'{status.value}'" for status in sorted(ACTIVE_STATUSES))

# Experts first: the text and specialty filters run per expert row and token (fold_text is a Python
# call), then index slots_by_expert_start (migration 2) reaches each matching expert's slots.
_FREE_SLOTS = f"""
FROM slots AS s JOIN experts AS e ON e.expert_id = s.expert_id
WHERE s.expert_id IN (
      SELECT x.expert_id FROM experts AS x
      WHERE (:specialty IS NULL OR fold_text(x.specialty) = :specialty)
        AND NOT EXISTS (
            SELECT 1 FROM json_each(:tokens) AS t
            WHERE instr(fold_text(x.name || ' ' || x.specialty || ' ' || x.keywords), t.value) = 0))
  AND s.starts_at > :now
  AND (:starts_after IS NULL OR s.starts_at >= :starts_after)
  AND (:starts_before IS NULL OR s.starts_at < :starts_before)
  AND NOT EXISTS (
      SELECT 1 FROM bookings AS b
      WHERE b.slot_id = s.slot_id AND b.status IN ({ACTIVE_STATUS_LIST}))
"""  # noqa: S608 - constant SQL fragments only, values are bound

SEARCH_PAGE = f"""
SELECT {SLOT_COLUMNS}, COUNT(*) OVER () AS total
{_FREE_SLOTS}
ORDER BY s.starts_at, s.slot_id
LIMIT :limit OFFSET :offset
"""

SEARCH_COUNT = f"SELECT COUNT(*) AS total {_FREE_SLOTS}"

NEXT_HOLD_EXPIRY = "SELECT MIN(expires_at) AS next_hold_expiry FROM bookings WHERE status = 'HELD'"

# The page, its total and the earliest hold expiry from ONE snapshot; always at least one row.
PEEK_PAGE = f"""
SELECT held.next_hold_expiry, page.*
FROM ({NEXT_HOLD_EXPIRY}) AS held
LEFT JOIN ({SEARCH_PAGE}) AS page ON 1
ORDER BY page.starts_at, page.slot_id
"""  # noqa: S608 - constant SQL fragments only, values are bound

# Everything a hold reads, in one statement (one row): the idempotency record, the slot, and
# whether a release is due. A release changes neither the record nor the slot row.
HOLD_LOOKUP = f"""
SELECT i.fingerprint, i.booking_json, i.error_code,
       ({NEXT_HOLD_EXPIRY}) AS next_hold_expiry, {SLOT_COLUMNS}
FROM (SELECT 1) AS one
LEFT JOIN idempotency AS i ON i.owner = :owner AND i.scope = :scope AND i.key = :key
LEFT JOIN slots AS s ON s.slot_id = :slot_id
LEFT JOIN experts AS e ON e.expert_id = s.expert_id
"""  # noqa: S608 - constant SQL fragments only, values are bound

# One owner's bookings (index bookings_by_owner_held, migration 7). An idempotency key of any
# scope finds the booking that owner's record keeps (index idempotency_by_owner_key).
_LISTED_BOOKINGS = """
FROM bookings AS b
WHERE b.owner = :owner
  AND (:statuses IS NULL OR b.status IN (SELECT value FROM json_each(:statuses)))
  AND (:key IS NULL OR b.booking_id IN (
      SELECT json_extract(i.booking_json, '$.booking_id') FROM idempotency AS i
      WHERE i.owner = :owner AND i.key = :key))
"""

_BOOKING_COLUMNS_OF_B = ", ".join(f"b.{name}" for name in BOOKING_COLUMN_NAMES)

# A page after a position (keyset paging: instants are canonical text, so text order is time
# order), with the total of every page: the count of the whole list, not of what follows.
LIST_BOOKINGS = f"""
SELECT {_BOOKING_COLUMNS_OF_B}, (SELECT COUNT(*) {_LISTED_BOOKINGS}) AS total
{_LISTED_BOOKINGS}
  AND (:after_held_at IS NULL OR b.held_at < :after_held_at
       OR (b.held_at = :after_held_at AND b.booking_id < :after_booking_id))
ORDER BY b.held_at DESC, b.booking_id DESC
LIMIT :limit
"""

LIST_COUNT = f"SELECT COUNT(*) AS total {_LISTED_BOOKINGS}"

# The page, its total and the earliest hold expiry from ONE snapshot; always at least one row.
PEEK_BOOKINGS = f"""
SELECT held.next_hold_expiry, page.*
FROM ({NEXT_HOLD_EXPIRY}) AS held
LEFT JOIN ({LIST_BOOKINGS}) AS page ON 1
ORDER BY page.held_at DESC, page.booking_id DESC
"""  # noqa: S608 - constant SQL fragments only, values are bound

# Ownership: a booking is found only with its owner (ports.Transaction); another owner's
# booking reads exactly as a missing one.
GET_BOOKING = f"SELECT {BOOKING_COLUMNS} FROM bookings WHERE booking_id = ? AND owner = ?"  # noqa: S608

INSERT_BOOKING = (
    f"INSERT INTO bookings ({BOOKING_COLUMNS}) "  # noqa: S608 - constant SQL
    f"VALUES ({', '.join('?' for _ in BOOKING_COLUMN_NAMES)})"
)

# The owner is never changed; it selects the row with the id (the last bound values).
UPDATE_BOOKING = """
UPDATE bookings SET
    slot_id = ?, expert_id = ?, starts_at = ?, ends_at = ?, customer_json = ?, status = ?,
    version = ?, held_at = ?, expires_at = ?, confirmed_at = ?, payment_page_url = ?,
    payment_status = ?, payment_amount = ?, payment_currency = ?, paid_at = ?, refund_due = ?,
    history_json = ?, cancelled_at = ?
WHERE booking_id = ? AND owner = ? AND version = ?
"""

# A slot (joined with its expert) and whether no active booking has it: one row, or none.
LOOKUP_SLOT = f"""
SELECT {SLOT_COLUMNS},
       NOT EXISTS (SELECT 1 FROM bookings AS b
                   WHERE b.slot_id = s.slot_id AND b.status IN ({ACTIVE_STATUS_LIST})) AS free
FROM slots AS s JOIN experts AS e ON e.expert_id = s.expert_id
WHERE s.slot_id = ?
"""  # noqa: S608 - constant SQL fragments only, values are bound

# Free slots near a slot (ports.BookingStore.peek_slots_near): the slot itself (kind 0), then
# at most :limit of each candidate kind, each branch walking one index: the same expert's
# slots before it (1) and at or after it (2) on slots_by_expert_start, other experts' of the
# same specialty at the same start (3) on slots_by_start. One statement, one snapshot. An
# overdue hold does not take its slot (the next transaction releases it). With a price
# (:price_amount not NULL) only slots at it count, before each kind's LIMIT.
_NEAR_FREE = f"""
FROM slots AS s JOIN experts AS e ON e.expert_id = s.expert_id, target AS t
WHERE s.slot_id <> t.slot_id AND s.starts_at > :now
  AND (:price_amount IS NULL
       OR (s.price_amount = :price_amount AND s.price_currency = :price_currency))
  AND NOT EXISTS (
      SELECT 1 FROM bookings AS b
      WHERE b.slot_id = s.slot_id AND b.status IN ({ACTIVE_STATUS_LIST})
        AND NOT (b.status = 'HELD' AND b.expires_at <= :now))
"""  # noqa: S608 - constant SQL fragments only, values are bound

SLOTS_NEAR = f"""
WITH target AS (
    SELECT s.slot_id, s.expert_id, s.starts_at, e.specialty
    FROM slots AS s JOIN experts AS e ON e.expert_id = s.expert_id
    WHERE s.slot_id = :slot_id)
SELECT 0 AS kind, {SLOT_COLUMNS}
FROM slots AS s JOIN experts AS e ON e.expert_id = s.expert_id WHERE s.slot_id = :slot_id
UNION ALL
SELECT * FROM (SELECT 1 AS kind, {SLOT_COLUMNS} {_NEAR_FREE}
    AND s.expert_id = t.expert_id AND s.starts_at < t.starts_at
    ORDER BY s.starts_at DESC, s.slot_id DESC LIMIT :limit)
UNION ALL
SELECT * FROM (SELECT 2 AS kind, {SLOT_COLUMNS} {_NEAR_FREE}
    AND s.expert_id = t.expert_id AND s.starts_at >= t.starts_at
    ORDER BY s.starts_at, s.slot_id LIMIT :limit)
UNION ALL
SELECT * FROM (SELECT 3 AS kind, {SLOT_COLUMNS} {_NEAR_FREE}
    AND s.expert_id <> t.expert_id AND s.starts_at = t.starts_at AND e.specialty = t.specialty
    ORDER BY s.slot_id LIMIT :limit)
"""  # noqa: S608 - constant SQL fragments only, values are bound

_TOKENS_ENCODER = json.JSONEncoder(ensure_ascii=False)


def search_params(query: SlotQuery, now: datetime, offset: int, limit: int) -> dict[str, Any]:
    """The named parameters of ``SEARCH_PAGE``, ``SEARCH_COUNT`` and ``PEEK_PAGE``.

    Text and specialty are folded as the ``fold_text`` SQL function folds the columns;
    the text's tokens go in as one JSON array (``json_each``), so the SQL stays constant.
    """
    starts_after, starts_before = query.window()
    return {
        "now": format_instant(now),
        "starts_after": starts_after,
        "starts_before": starts_before,
        "specialty": None if query.specialty is None else fold_text(query.specialty),
        "tokens": _TOKENS_ENCODER.encode(query.tokens()),
        "limit": max(0, min(limit, SQLITE_MAX_INTEGER)),
        "offset": max(0, min(offset, SQLITE_MAX_INTEGER)),
    }


def list_params(query: BookingListQuery, after: ListPosition | None, limit: int) -> dict[str, Any]:
    """The named parameters of ``LIST_BOOKINGS``, ``LIST_COUNT`` and ``PEEK_BOOKINGS``."""
    statuses = sorted(status.value for status in query.statuses)
    return {
        "owner": query.owner,
        "statuses": _TOKENS_ENCODER.encode(statuses) if statuses else None,
        "key": query.idempotency_key,
        "limit": max(0, min(limit, SQLITE_MAX_INTEGER)),
        "after_held_at": None if after is None else format_instant(after.held_at),
        "after_booking_id": None if after is None else after.booking_id,
    }


def sql_fold_text(value: object) -> object:
    """The SQL function ``fold_text`` (each connection registers it): ``ports.fold_text``.

    SQLite's ``lower()`` folds only ASCII; German and other non-ASCII keywords must match
    whatever their case or normal form. Non-text values pass unchanged.
    """
    return fold_text(value) if isinstance(value, str) else value
