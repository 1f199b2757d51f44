r"""The sandbox's own ledger: payment states and the mailbox, in one JSON file.

File shape (``version`` 1)::

    {"version": 1,
     "payments": {"<bookingId>": {"status": "PAID", "paidAt": "<RFC 3339>", "changedAt": "..."}},
     "mailbox": [{"id": 1, "at": "<RFC 3339>", "kind": "payment.paid", "bookingId": "...",
                  "status": "PAID", "amount": "500.00", "currency": "CNY"}]}

A booking without an entry is ``PENDING``. A payment changes once, from ``PENDING`` to ``PAID``,
``FAILED`` or ``CLOSED``; each change appends one mailbox message (``kind`` is
``payment.<status in lower case>``). The whole shape is checked when the file is read, so a file
of another shape is refused then (:class:`LedgerError`), never met by a request: the JSON Schema
``ledger.schema.json`` beside this module (:data:`SCHEMA_RESOURCE`) describes it, and a file must
also hold no lone surrogate (a ``\uXXXX`` escape of half a character, which no schema keyword
refuses).

Every write replaces the file atomically (a temporary file, ``fsync``, ``os.replace``, then an
``fsync`` of the directory, so the rename survives a power loss), under a lock, so a reader never
sees half a ledger; a change is kept in memory only once all of that succeeded, so a failed
write changes nothing in memory. (Should only the directory's ``fsync`` fail, the file already
holds the change: the change is still reported as not recorded, and the next write replaces the
file from memory again.)

A ledger writes the file from its own memory, so it must be the file's only writer: the command
opens it ``exclusive`` (see :class:`Ledger`), and a second payment sandbox on the same file is
refused at start instead of silently undoing the first one's changes.

``turn`` orders a payment change against a payment answer (``app.py`` takes it): a change holds
it from reading the booking until the ledger has the change, and an answer waits for it. So a
server that commits a cancel and then asks (``cancellation.py``) hears a payment whose booking
was read as held before that commit, and a change that starts later reads it cancelled (409).
"""

from __future__ import annotations

import fcntl
import functools
import importlib.resources
import json
import os
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
from jsonschema.exceptions import ValidationError, best_match
from jsonschema.protocols import Validator

from expert_booking.domain.model import PaymentStatus
from expert_booking.edge.validation import compile_validator, json_pointer

PENDING: Final = PaymentStatus.PENDING.value
FINAL_STATUSES: Final = tuple(status.value for status in PaymentStatus if status != PENDING)
LEDGER_VERSION: Final = 1
LOCK_SUFFIX: Final = ".lock"
"""``<ledger>.lock`` beside the ledger: the file an exclusive ledger locks (never removed)."""
SCHEMA_RESOURCE: Final = "ledger.schema.json"
"""The JSON Schema (Draft 2020-12) of a version 1 ledger file, package data of this package."""
SHOWN_ID_CHARS: Final = 80
"""How much of a booking id from outside (a request's path, a ledger's key) the sandbox repeats,
in a ledger's refusal, the JSON not-found answer and the not-found page (:func:`shown_id`)."""


class LedgerError(RuntimeError):
    """The ledger file exists but is not a ledger (never overwritten then), or is in use."""


class PaymentAlreadyFinalError(ValueError):
    """The payment was already PAID, FAILED or CLOSED."""


@dataclass(frozen=True, slots=True)
class Payment:
    """One booking's payment state in the ledger."""

    status: str
    paid_at: str | None


def lock_path(path: Path) -> Path:
    """The lock file of the ledger ``path``: ``<path>.lock`` beside it."""
    return path.with_name(path.name + LOCK_SUFFIX)


class Ledger:
    """Payment states and mailbox messages kept in ``path``.

    A ledger writes the whole file from its own memory, so it must be the file's only writer.
    ``exclusive=True`` (what ``payment-sandbox`` uses) makes it so: before the file is read it
    takes an exclusive ``flock`` on :func:`lock_path`, held as long as this object lives (for
    the command, the process): every other exclusive ledger on the same file is refused, in
    another process and in this one alike (a ``flock`` belongs to an open file, not to a
    process). A ledger opened without it (in-process tests) takes no lock and is not held off:
    it must be the only ledger of its file.
    """

    def __init__(self, path: Path, *, exclusive: bool = False) -> None:
        """Use ``path``; it is created at the first change, its directory now.

        Raises:
            LedgerError: ``path`` exists and is not a ledger file, no file can be written in its
                directory (a payment could not be recorded), or (``exclusive``) another
                exclusive ledger holds the file or its lock file cannot be locked. A ledger
                refused here holds no lock.
        """
        self.path = path
        self.turn = anyio.Lock()
        """Held by a payment change from its booking read to its write; an answer waits."""
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=path.parent):
                pass
        except OSError as exc:
            raise LedgerError(f"no ledger can be written beside {path}: {exc}") from exc
        # Locked before the file is read: what this ledger holds in memory is the file as the
        # previous holder left it, never a copy another sandbox still changes.
        self._held = weakref.finalize(self, os.close, _lock(path)) if exclusive else None
        try:
            self._data = self._load()
        except LedgerError:
            if self._held is not None:
                self._held()
            raise

    def _load(self) -> dict[str, Any]:
        if not self.path.exists():
            return {"version": LEDGER_VERSION, "payments": {}, "mailbox": []}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LedgerError(f"{self.path} is not a readable ledger: {exc}") from exc
        if not isinstance(data, dict) or data.get("version") != LEDGER_VERSION:
            raise LedgerError(f"{self.path} is not a version {LEDGER_VERSION} ledger")
        problem = _shape_problem(data)
        if problem is not None:
            raise LedgerError(f"{self.path} is not a version {LEDGER_VERSION} ledger: {problem}")
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
            OSError: the ledger could not be written; nothing changed in memory.
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
            _fsync_directory(self.path.parent)  # the rename itself, against a power loss
        finally:
            if not replaced:  # a failed write leaves no temporary file behind
                Path(temporary).unlink(missing_ok=True)


def _lock(path: Path) -> int:
    """An open descriptor of ``path``'s lock file holding its exclusive ``flock``.

    Raises:
        LedgerError: another exclusive ledger holds it, or it cannot be opened or locked.
    """
    locked = lock_path(path)
    try:
        descriptor = os.open(locked, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise LedgerError(f"cannot open the ledger's lock file {locked}: {exc}") from exc
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        msg = f"another payment sandbox uses the ledger {path} (it holds the lock on {locked})"
        raise LedgerError(msg) from None
    except OSError as exc:  # a file system without locks, for one
        os.close(descriptor)
        raise LedgerError(f"cannot lock the ledger's lock file {locked}: {exc}") from exc
    return descriptor


def _fsync_directory(directory: Path) -> None:
    """Make the entries of ``directory`` (a rename into it) durable."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def shown_id(booking_id: str) -> str:
    """``booking_id`` cut to :data:`SHOWN_ID_CHARS` characters, then ``…``."""
    cut = booking_id[:SHOWN_ID_CHARS]
    return cut if cut == booking_id else f"{cut}…"


def schema() -> dict[str, Any]:
    """The JSON Schema of a version 1 ledger file (:data:`SCHEMA_RESOURCE`), parsed."""
    resource = importlib.resources.files("expert_booking.sandbox") / SCHEMA_RESOURCE
    document: dict[str, Any] = json.loads(resource.read_text(encoding="utf-8"))
    return document


@functools.cache
def _validator() -> Validator:
    """The compiled schema: once per process, at the first ledger read (the sandbox's start)."""
    return compile_validator(schema())


def _shape_problem(data: dict[str, Any]) -> str | None:
    """What in a version 1 ledger's ``data`` is not of the documented shape, or ``None``.

    The schema's most relevant violation (``best_match``), said by where it is: a payment by
    its booking id (:func:`shown_id`), a mailbox message by its position, anything
    else by its JSON pointer and the schema keyword it fails. Never a value from the file.
    """
    error = best_match(_validator().iter_errors(data))
    if error is not None:
        return _where(error)
    try:  # a JSON escape of half a surrogate pair: no page or write could encode it
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return "it holds a lone surrogate (a \\uXXXX escape of half a character)"
    return None


def _where(error: ValidationError) -> str:
    path = list(error.absolute_path)
    if len(path) > 1 and path[0] == "payments":
        shown = shown_id(str(path[1]))
        return f"the payment of {shown!r} is not a final status with its paidAt and changedAt"
    if len(path) > 1 and path[0] == "mailbox" and isinstance(path[1], int):
        return f"mailbox message {path[1] + 1} is not a message of the documented shape"
    if error.validator == "required" and isinstance(error.instance, dict):
        required = error.validator_value if isinstance(error.validator_value, list) else []
        missing = [name for name in required if name not in error.instance]
        return f"{json_pointer([*path, *missing[:1]])} is missing"
    keyword = json.dumps({str(error.validator): error.validator_value})
    return f"{json_pointer(path) or 'the top level'} does not meet {keyword} of {SCHEMA_RESOURCE}"
