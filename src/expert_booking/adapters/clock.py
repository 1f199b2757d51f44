"""The production clock: the only reader of the wall clock."""

from __future__ import annotations

from datetime import UTC, datetime


class SystemClock:
    """Aware UTC ``now()``, truncated to whole milliseconds.

    Instants are stored and sent as RFC 3339 with milliseconds, so a clock with the same
    precision makes every stored instant round-trip exactly (a booking read back equals the
    one that was written, and ``expires_at <= now`` means the same in SQL and in Python).
    """

    def now(self) -> datetime:
        """Return the current instant (aware UTC, millisecond precision)."""
        current = datetime.now(UTC)
        return current.replace(microsecond=current.microsecond - current.microsecond % 1000)
