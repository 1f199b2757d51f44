-- Version 5: booking.list_bookings lists newest first (held_at, booking_id descending) and finds
-- the booking of an idempotency key of any scope (a hold's or a confirmation's).

CREATE INDEX IF NOT EXISTS bookings_by_held ON bookings(held_at DESC, booking_id DESC);
CREATE INDEX IF NOT EXISTS idempotency_by_key ON idempotency(key);
