-- Version 8: CANCELLED joins the statuses (booking.cancel_booking), and a booking keeps the slots
-- a reschedule moved it away from (history_json: a JSON array, oldest first) and when it was
-- cancelled. SQLite cannot alter a CHECK constraint, so the bookings table is rebuilt: created
-- anew, copied, the old one dropped (its indexes with it), renamed, and its indexes re-created.
-- A CANCELLED booking releases its slot: the partial unique index still covers HELD and
-- CONFIRMED only.

CREATE TABLE bookings_rebuilt (
    booking_id       TEXT PRIMARY KEY NOT NULL,
    slot_id          TEXT NOT NULL REFERENCES slots(slot_id),
    expert_id        TEXT NOT NULL,
    starts_at        TEXT NOT NULL,
    ends_at          TEXT NOT NULL,
    customer_json    TEXT NOT NULL,
    status           TEXT NOT NULL
        CHECK (status IN ('HELD', 'CONFIRMED', 'EXPIRED', 'PAYMENT_FAILED', 'PAYMENT_CLOSED',
                          'CANCELLED')),
    version          INTEGER NOT NULL CHECK (version >= 1),
    held_at          TEXT NOT NULL,
    expires_at       TEXT NOT NULL,
    confirmed_at     TEXT,
    payment_page_url TEXT NOT NULL,
    payment_status   TEXT NOT NULL CHECK (payment_status IN ('PENDING', 'PAID', 'FAILED', 'CLOSED')),
    payment_amount   TEXT NOT NULL,
    payment_currency TEXT NOT NULL,
    paid_at          TEXT,
    refund_due       INTEGER NOT NULL DEFAULT 0 CHECK (refund_due IN (0, 1)),
    history_json     TEXT NOT NULL DEFAULT '[]' CHECK (json_type(history_json) = 'array'),
    cancelled_at     TEXT,
    owner            TEXT NOT NULL DEFAULT 'local'
);

INSERT INTO bookings_rebuilt (
    booking_id, slot_id, expert_id, starts_at, ends_at, customer_json, status, version, held_at,
    expires_at, confirmed_at, payment_page_url, payment_status, payment_amount, payment_currency,
    paid_at, refund_due, owner)
SELECT booking_id, slot_id, expert_id, starts_at, ends_at, customer_json, status, version, held_at,
    expires_at, confirmed_at, payment_page_url, payment_status, payment_amount, payment_currency,
    paid_at, refund_due, owner
FROM bookings;

DROP TABLE bookings;

ALTER TABLE bookings_rebuilt RENAME TO bookings;

-- Migration 1's indexes, then migration 7's, exactly as they were.
CREATE UNIQUE INDEX one_active_booking_per_slot ON bookings(slot_id)
    WHERE status IN ('HELD', 'CONFIRMED');

CREATE INDEX bookings_by_status_expiry ON bookings(status, expires_at);

CREATE INDEX bookings_by_owner_held ON bookings(owner, held_at DESC, booking_id DESC);

-- Idempotency records keep a booking as the table's columns in JSON (migration 3): the new
-- columns join the records written before, with the values the copy above gave the rows.
UPDATE idempotency SET booking_json = json_set(booking_json, '$.history_json', '[]',
                                               '$.cancelled_at', NULL)
WHERE json_type(booking_json, '$.history_json') IS NULL;
