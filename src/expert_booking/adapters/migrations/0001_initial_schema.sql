-- Version 1: experts, slots, bookings, idempotency records.
-- Instants are RFC 3339 UTC strings with milliseconds (domain.model.format_instant): fixed width,
-- so text order is time order. Money is kept as the exact two-decimal string.

CREATE TABLE experts (
    expert_id TEXT PRIMARY KEY NOT NULL,
    name      TEXT NOT NULL,
    specialty TEXT NOT NULL,
    keywords  TEXT NOT NULL DEFAULT ''
);

CREATE TABLE slots (
    slot_id        TEXT PRIMARY KEY NOT NULL,
    expert_id      TEXT NOT NULL REFERENCES experts(expert_id),
    starts_at      TEXT NOT NULL,
    ends_at        TEXT NOT NULL,
    price_amount   TEXT NOT NULL,
    price_currency TEXT NOT NULL,
    CHECK (ends_at > starts_at)
);

CREATE INDEX slots_by_start ON slots(starts_at, slot_id);

CREATE TABLE bookings (
    booking_id       TEXT PRIMARY KEY NOT NULL,
    slot_id          TEXT NOT NULL REFERENCES slots(slot_id),
    expert_id        TEXT NOT NULL,
    starts_at        TEXT NOT NULL,
    ends_at          TEXT NOT NULL,
    customer_json    TEXT NOT NULL,
    status           TEXT NOT NULL
        CHECK (status IN ('HELD', 'CONFIRMED', 'EXPIRED', 'PAYMENT_FAILED', 'PAYMENT_CLOSED')),
    version          INTEGER NOT NULL CHECK (version >= 1),
    held_at          TEXT NOT NULL,
    expires_at       TEXT NOT NULL,
    confirmed_at     TEXT,
    payment_page_url TEXT NOT NULL,
    payment_status   TEXT NOT NULL CHECK (payment_status IN ('PENDING', 'PAID', 'FAILED', 'CLOSED')),
    payment_amount   TEXT NOT NULL,
    payment_currency TEXT NOT NULL,
    paid_at          TEXT
);

-- The storage-level guarantee: at most one HELD/CONFIRMED booking per slot.
CREATE UNIQUE INDEX one_active_booking_per_slot ON bookings(slot_id)
    WHERE status IN ('HELD', 'CONFIRMED');

-- The overdue-hold release scan and next_hold_expiry: status = 'HELD' AND expires_at <= ?.
CREATE INDEX bookings_by_status_expiry ON bookings(status, expires_at);

CREATE TABLE idempotency (
    scope        TEXT NOT NULL,
    key          TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    booking_json TEXT NOT NULL,
    error_code   TEXT,
    -- Audit only (SQLite's clock, not the Clock port); no rule reads it.
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (scope, key)
);
