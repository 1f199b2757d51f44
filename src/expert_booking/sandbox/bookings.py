"""The sandbox's read-only view of a booking, from the server's SQLite file.

``paymentPageUrl`` carries only the booking id (seed 000), so the sandbox learns the booking the
way a merchant's checkout knows its orders: it reads it from the database ``serve`` writes,
opened with ``mode=ro`` (SQLite refuses every write on such a connection). A missing file or an
unknown id is simply "no such booking": the sandbox may start before the server.
"""

from __future__ import annotations

import logging
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final

from expert_booking.domain.model import BookingStatus, hold_is_over, parse_instant

logger = logging.getLogger("expert_booking.sandbox")

HELD: Final = BookingStatus.HELD.value

_BOOKING_SQL: Final = """
SELECT b.booking_id, b.status, b.starts_at, b.ends_at, b.expires_at,
       b.payment_amount, b.payment_currency, e.name, e.specialty
FROM bookings AS b JOIN experts AS e ON e.expert_id = b.expert_id
WHERE b.booking_id = ?
"""


@dataclass(frozen=True, slots=True)
class BookingView:
    """What the payment page and the payment answer need of one booking."""

    booking_id: str
    status: str
    starts_at: str
    ends_at: str
    expires_at: str
    amount: str
    currency: str
    expert_name: str
    specialty: str

    def open_for_payment(self, now: datetime) -> bool:
        """Whether the person may still pay (or fail or close) this booking's payment.

        Only while the booking is held and its hold has not run out, as a checkout session
        ends with the order it is for: money paid for a released, cancelled or final booking
        would confirm nothing.
        """
        return self.status == HELD and not hold_is_over(parse_instant(self.expires_at), now)


class BookingReader:
    """Reads bookings from the server's SQLite file, never writing to it."""

    def __init__(self, db_path: Path) -> None:
        """Read from ``db_path`` (the file ``serve --db`` uses); it need not exist yet."""
        self.db_path = db_path

    def unreadable(self) -> str | None:
        """Why the file is there but cannot be read as SQLite (the error), else ``None``.

        ``None`` too when it does not exist (yet). Opened ``mode=ro`` as :meth:`find` opens it:
        nothing is created, migrated or written.
        """
        if not self.db_path.exists():
            return None
        try:
            with closing(sqlite3.connect(self._uri(), uri=True, timeout=5.0)) as connection:
                connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            return str(exc)
        return None

    def find(self, booking_id: str) -> BookingView | None:
        """The booking, or ``None`` when the file or the booking does not exist."""
        if not self.db_path.is_file():
            return None
        connection = sqlite3.connect(self._uri(), uri=True, timeout=5.0)
        try:
            row = connection.execute(_BOOKING_SQL, (booking_id,)).fetchone()
        except sqlite3.DatabaseError as exc:  # OperationalError too
            # Not migrated yet is an empty database. Anything else (not SQLite, damaged, a
            # schema this reader no longer matches, locked past the timeout): said on each read.
            if "no such table" not in str(exc):
                logger.warning("cannot read bookings from %s: %s", self.db_path, exc)
            return None
        finally:
            connection.close()
        return None if row is None else BookingView(*row)

    def _uri(self) -> str:
        return f"{self.db_path.resolve().as_uri()}?mode=ro"
