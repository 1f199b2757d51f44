-- Version 7: every booking and idempotency record belongs to one principal (issue 14).
-- `owner` is the principal's key (call_context.Principal.owner): 'local' for AUTH_MODE=none,
-- else '<issuer> <subject>' (an issuer URL holds no space, so the first space separates them).
-- Rows written before this version were the local principal's. The owner is part of the
-- idempotency key, so two principals using one key never collide; SQLite cannot change a
-- primary key, so the table is rebuilt. Stored booking snapshots gain the owner too.

ALTER TABLE bookings ADD COLUMN owner TEXT NOT NULL DEFAULT 'local';

-- The list: one owner's bookings newest first (replaces migration 5's bookings_by_held).
DROP INDEX IF EXISTS bookings_by_held;
CREATE INDEX bookings_by_owner_held ON bookings(owner, held_at DESC, booking_id DESC);

CREATE TABLE idempotency_by_owner (
    owner        TEXT NOT NULL,
    scope        TEXT NOT NULL,
    key          TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    booking_json TEXT NOT NULL,
    error_code   TEXT,
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (owner, scope, key)
);

INSERT INTO idempotency_by_owner
    (owner, scope, key, fingerprint, booking_json, error_code, created_at)
SELECT 'local', scope, key, fingerprint, json_set(booking_json, '$.owner', 'local'),
       error_code, created_at
FROM idempotency;

DROP TABLE idempotency;
ALTER TABLE idempotency_by_owner RENAME TO idempotency;

-- A list filtered by idempotency key: that owner's records of the key, any scope.
CREATE INDEX idempotency_by_owner_key ON idempotency(owner, key);
