-- Version 3: an idempotency record keeps its booking as the bookings table's columns in JSON
-- (sqlite_rows.booking_to_json), the one mapping of a booking each way. Records written by
-- versions 1-2 kept a camelCase snapshot; they are rewritten in place. The payment query id
-- is the booking id (immutable), so the old snapshot's queryId is not kept apart.

UPDATE idempotency SET booking_json = json_object(
    'booking_id', json_extract(booking_json, '$.bookingId'),
    'slot_id', json_extract(booking_json, '$.slotId'),
    'expert_id', json_extract(booking_json, '$.expertId'),
    'starts_at', json_extract(booking_json, '$.startsAt'),
    'ends_at', json_extract(booking_json, '$.endsAt'),
    'customer_json', '' || json_extract(booking_json, '$.customer'),
    'status', json_extract(booking_json, '$.status'),
    'version', json_extract(booking_json, '$.version'),
    'held_at', json_extract(booking_json, '$.heldAt'),
    'expires_at', json_extract(booking_json, '$.expiresAt'),
    'confirmed_at', json_extract(booking_json, '$.confirmedAt'),
    'payment_page_url', json_extract(booking_json, '$.paymentPageUrl'),
    'payment_status', json_extract(booking_json, '$.payment.status'),
    'payment_amount', json_extract(booking_json, '$.payment.amount'),
    'payment_currency', json_extract(booking_json, '$.payment.currency'),
    'paid_at', json_extract(booking_json, '$.payment.paidAt')
)
WHERE json_extract(booking_json, '$.bookingId') IS NOT NULL;
