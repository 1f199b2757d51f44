-- Version 2: slot search goes experts first (text and specialty filters run once per expert),
-- then reaches each matching expert's future slots through this index in start order.
-- The free-slot test (NOT EXISTS an active booking) is served by one_active_booking_per_slot.

CREATE INDEX IF NOT EXISTS slots_by_expert_start ON slots(expert_id, starts_at, slot_id);
