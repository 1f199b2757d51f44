"""The sandbox's own ledger: payment states and the mailbox, in one JSON file.

File shape (``version`` 1)::

    {"version": 1,
     "payments": {"<bookingId>": {"status": "PAID", "paidAt": "<RFC 3339>", "changedAt": "..."}},
     "mailbox": [{"id": 1, "at": "<RFC 3339>", "kind": "payment.paid", "bookingId": "...",
                  "status": "PAID", "amount": "500.00", "currency": "CNY"}]}

A booking without an entry is ``PENDING``. A payment changes once, from ``PENDING`` to ``PAID``,
``FAILED`` or ``CLOSED``; each change appends one mailbox message (``kind`` is
``payment.<status in lower case>``). Every write replaces the file atomically (a temporary file,
``fsync``, ``os.replace``), under a lock, so a reader never sees half a ledger; a change is
kept in memory only once it is on the disk, so a failed write changes nothing.

``turn`` orders a payment change against a payment answer (``app.py`` takes it): a change holds
it from reading the booking until the ledger has the change, and an answer waits for it. So a
server that commits a cancel and then asks (``cancellation.py``) hears a payment whose booking
was read as held before that commit, and a change that starts later reads it cancelled (409).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio

from expert_booking.domain.model import PaymentStatus

PENDING: Final = PaymentStatus.PENDING.value
FINAL_STATUSES: Final = tuple(status.value for status in PaymentStatus if status != PENDING)
LEDGER_VERSION: Final = 1


class LedgerError(RuntimeError):
    """The ledger file exists but is not a ledger (it is never overwritten then)."""


class PaymentAlreadyFinalError(ValueError):
    """The payment was already PAID, FAILED or CLOSED."""


@dataclass(frozen=True, slots=True)
class Payment:
    """One booking's payment state in the ledger."""

    status: str
    paid_at: str | None


class Ledger:
    """Payment states and mailbox messages kept in ``path``."""

    def __init__(self, path: Path) -> None:
        """Use ``path``; it is created at the first change, its directory now.

        Raises:
            LedgerError: ``path`` exists and is not a ledger file, or no file can be written in
                its directory (a payment could not be recorded).
        """
        self.path = path
        self.turn = anyio.Lock()
        """Held by a payment change from its booking read to its write; an answer waits."""
        self._lock = threading.Lock()
        self._data = self._load()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=path.parent):
                pass
        except OSError as exc:
            raise LedgerError(f"no ledger can be written beside {path}: {exc}") from exc

    def _load(self) -> dict[str, Any]:
        if not self.path.exists():
            return {"version": LEDGER_VERSION, "payments": {}, "mailbox": []}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LedgerError(f"{self.path} is not a readable ledger: {exc}") from exc
        if not isinstance(data, dict) or data.get("version") != LEDGER_VERSION:
            raise LedgerError(f"{self.path} is not a version {LEDGER_VERSION} ledger")
        return data

    def payment(self, booking_id: str) -> Payment:
        """The booking's payment (``PENDING`` until changed)."""
        with self._lock:
            entry = self._data["payments"].get(booking_id)
        if entry is None:
            return Payment(PENDING, None)
        return Payment(entry["status"], entry.get("paidAt"))

    def settle(
        self, booking_id: str, status: str, *, at: str, amount: str, currency: str
    ) -> Payment:
        """Move a PENDING payment to ``status`` at ``at`` and post a mailbox message.

        Raises:
            ValueError: ``status`` is not PAID, FAILED or CLOSED.
            PaymentAlreadyFinalError: the payment is no longer PENDING.
            OSError: the ledger could not be written; nothing changed.
        """
        if status not in FINAL_STATUSES:
            raise ValueError(f"unknown payment status {status!r}")
        with self._lock:
            payments = self._data["payments"]
            if booking_id in payments:
                raise PaymentAlreadyFinalError(payments[booking_id]["status"])
            paid_at = at if status == "PAID" else None
            mailbox = self._data["mailbox"]
            message = {
                "id": len(mailbox) + 1,
                "at": at,
                "kind": f"payment.{status.lower()}",
                "bookingId": booking_id,
                "status": status,
                "amount": amount,
                "currency": currency,
            }
            changed = {
                **self._data,
                "payments": {
                    **payments,
                    booking_id: {"status": status, "paidAt": paid_at, "changedAt": at},
                },
                "mailbox": [*mailbox, message],
            }
            # On the disk first: a change that could not be written was never made (the server
            # must not read PAID that a restart would forget).
            self._write(changed)
            self._data = changed
        return Payment(status, paid_at)

    def mailbox(self) -> list[dict[str, Any]]:
        """The mailbox messages, newest first (copies)."""
        with self._lock:
            return [dict(message) for message in reversed(self._data["mailbox"])]

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".ledger-")
        replaced = False
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(text)
                stream.flush()
                os.fsync(stream.fileno())
            Path(temporary).replace(self.path)
            replaced = True
        finally:
            if not replaced:  # a failed write leaves no temporary file behind
                Path(temporary).unlink(missing_ok=True)
