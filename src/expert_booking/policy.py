"""The booking rules' lifetimes and URLs, from the settings (CONTRACT section 1)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True, slots=True)
class BookingPolicy:
    """Lifetimes and URLs from the settings (CONTRACT section 1)."""

    hold_ttl: timedelta
    approval_ttl: timedelta
    approval_skew: timedelta
    slot_cache_ttl: timedelta
    payment_page_base_url: str
