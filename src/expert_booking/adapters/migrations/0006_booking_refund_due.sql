-- Version 6: a booking records that a refund is owed outside the server (refundDue: paid after
-- the hold expired, PAID_AFTER_EXPIRY). Idempotency records keep a booking as its columns in
-- JSON (version 3), so the ones written before gain the column too.

ALTER TABLE bookings ADD COLUMN refund_due INTEGER NOT NULL DEFAULT 0 CHECK (refund_due IN (0, 1));

UPDATE idempotency SET booking_json = json_set(booking_json, '$.refund_due', 0)
WHERE json_extract(booking_json, '$.refund_due') IS NULL;
