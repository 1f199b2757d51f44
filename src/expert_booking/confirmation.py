"""Use case confirm: a HELD booking becomes CONFIRMED once approved and paid.

Two transactions around one payment query, which never holds the store lock. Transaction 1
releases overdue holds, replays a repeated key, and checks the booking (held, at the expected
version, with a fresh human approval of its CONFIRM intent) before anything is asked. Transaction
2 reads the booking again, judges the approval again at its own time (the query may have been
slow), applies the payment answer (``domain.rules``) and stores the outcome under the key with
the change. A booking that expired or was cancelled while the payment was queried and is now
exactly paid is recorded as a payment after release (a refund due), not confirmed.

Refusals are returned from the transactions, not raised, so their overdue release commits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from expert_booking.call_context import CallContext
from expert_booking.domain.errors import (
    BookingError,
    BookingExpiredError,
    BookingNotFoundError,
    InvalidStateError,
    VersionConflictError,
)
from expert_booking.domain.model import (
    Booking,
    BookingStatus,
    HumanApproval,
    PaymentAnswer,
    canonical_idempotency_key,
)
from expert_booking.domain.rules import (
    apply_payment,
    check_approval,
    payment_refusal,
    record_paid_after_release,
)
from expert_booking.policy import BookingPolicy
from expert_booking.ports import Clock, IdempotencyRecord, PaymentQueryPort, Transaction
from expert_booking.replay import (
    IdempotencyScope,
    replay_outcome,
    unwrap,
    warn_paid_after_release,
)
from expert_booking.replay import fingerprint as fingerprint_of
from expert_booking.writes import Writes

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class ConfirmBooking:
    """Confirm ``booking_id``; ``idempotency_key`` is kept in its canonical (lower-case) form."""

    booking_id: str
    expected_version: int
    idempotency_key: str
    human_approval: HumanApproval | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "idempotency_key", canonical_idempotency_key(self.idempotency_key))


class Confirmation:
    """Runs a confirmation through the shared ``writes.Writes``."""

    def __init__(
        self,
        *,
        writes: Writes,
        payments: PaymentQueryPort,
        clock: Clock,
        policy: BookingPolicy,
    ) -> None:
        self._writes = writes
        self._payments = payments
        self._clock = clock
        self._policy = policy

    async def confirm_booking(self, command: ConfirmBooking, context: CallContext) -> Booking:
        """Confirm a held booking after human approval and a matching PAID payment.

        Raises:
            IdempotencyConflictError, BookingNotFoundError, BookingExpiredError,
            VersionConflictError, InvalidStateError, HumanApproval*Error,
            ApprovalIntent*Error, PaymentPendingError, PaymentUnavailableError,
            PaymentMismatchError, PaymentFailedError, PaymentClosedError.
        """
        fingerprint = fingerprint_of(command)
        owner = context.principal.owner
        outcome, released = await self._writes.run_write(
            self._confirm_step(command, owner, fingerprint, self._precheck_confirm)
        )
        self._writes.after_write(released=released, changed=False)
        if outcome is not None:
            return unwrap(outcome)

        # Outside any transaction: a slow payment service never holds the store lock.
        answer = await self._payments.query_payment(command.booking_id, context.trace)

        def settle(
            tx: Transaction, command: ConfirmBooking, owner: str, now: datetime
        ) -> Booking | BookingError:
            return self._settle(tx, command, fingerprint, answer, now, owner=owner)

        settled, released = await self._writes.run_write(
            self._confirm_step(command, owner, fingerprint, settle)
        )
        self._writes.after_write(released=released, changed=isinstance(settled, Booking))
        if isinstance(settled, Booking):
            # FAILED/CLOSED (the slot released) and a payment after expiry (a refund due)
            # were committed above and are reported as errors, exactly as a replay of this
            # idempotency key reports them.
            settled = payment_refusal(settled) or settled
        return unwrap(settled)

    def _settle(
        self,
        tx: Transaction,
        command: ConfirmBooking,
        fingerprint: str,
        answer: PaymentAnswer,
        now: datetime,
        *,
        owner: str,
    ) -> Booking | BookingError:
        """Transaction 2 of confirm: re-read, re-check, apply the payment answer, record it.

        Refusals are returned, not raised, so the overdue release of this transaction commits.
        """
        current = tx.get_booking(command.booking_id, owner=owner)
        if current is None:
            return BookingNotFoundError(booking_id=command.booking_id)
        # The hold expired or was cancelled while the payment was queried (transaction 1 saw
        # it HELD at the expected version with a valid approval) and the answer is an exact
        # PAID: money moved for a released slot. Recorded whatever the approval's age now: it
        # is a fact about the payment, not a confirmation.
        owed = record_paid_after_release(current, answer, skew=self._policy.approval_skew)
        if owed is not None:
            warn_paid_after_release(current)
            if owed.status is BookingStatus.CANCELLED:
                # Told as before (the cancel moved the version); get and list show the refund.
                tx.update_booking(owed, expected_version=current.version)
                return VersionConflictError(
                    booking_id=owed.booking_id,
                    expected_version=command.expected_version,
                    current_version=owed.version,
                )
            settled = owed
        else:
            refusal = _confirmable(current, command.expected_version) or self._approval_refusal(
                command, current, now
            )
            if refusal is not None:
                return refusal
            try:
                settled = apply_payment(current, answer, now=now, skew=self._policy.approval_skew)
            except BookingError as exc:  # PENDING or a mismatch: nothing changes
                return exc
        tx.update_booking(settled, expected_version=current.version)
        outcome_refusal = payment_refusal(settled)
        tx.put_idempotency(
            IdempotencyRecord(
                scope=IdempotencyScope.CONFIRM,
                key=command.idempotency_key,
                fingerprint=fingerprint,
                booking=settled,
                error_code=outcome_refusal.code if outcome_refusal else None,
            )
        )
        return settled

    def _approval_refusal(
        self, command: ConfirmBooking, booking: Booking, now: datetime
    ) -> BookingError | None:
        """The approval checks, judged at ``now`` (again after a slow payment query)."""
        try:
            check_approval(
                command.human_approval,
                booking,
                now=now,
                ttl=self._policy.approval_ttl,
                skew=self._policy.approval_skew,
            )
        except BookingError as exc:
            return exc
        return None

    def _confirm_step(
        self,
        command: ConfirmBooking,
        owner: str,
        fingerprint: str,
        step: Callable[[Transaction, ConfirmBooking, str, datetime], R],
    ) -> Callable[[Transaction], tuple[R | Booking | BookingError, int]]:
        """A confirm transaction: release overdue holds, replay a repeated key, else ``step``."""
        key = command.idempotency_key

        def work(tx: Transaction) -> tuple[R | Booking | BookingError, int]:
            now = self._clock.now()
            released = tx.release_overdue(now)
            record = tx.get_idempotency(IdempotencyScope.CONFIRM, key, owner=owner)
            replayed = replay_outcome(record, key, fingerprint)
            if replayed is not None:
                return replayed, released
            return step(tx, command, owner, now), released

        return work

    def _precheck_confirm(
        self, tx: Transaction, command: ConfirmBooking, owner: str, now: datetime
    ) -> BookingError | None:
        booking = tx.get_booking(command.booking_id, owner=owner)
        if booking is None:
            return BookingNotFoundError(booking_id=command.booking_id)
        return _confirmable(booking, command.expected_version) or self._approval_refusal(
            command, booking, now
        )


def _confirmable(booking: Booking, expected_version: int) -> BookingError | None:
    if booking.status is BookingStatus.EXPIRED:
        # Once a payment after expiry is on record, every confirm of the booking says so.
        return payment_refusal(booking) or BookingExpiredError(
            booking_id=booking.booking_id, booking=booking
        )
    if booking.version != expected_version:
        return VersionConflictError(
            booking_id=booking.booking_id,
            expected_version=expected_version,
            current_version=booking.version,
        )
    if booking.status is not BookingStatus.HELD:
        return InvalidStateError(
            booking_id=booking.booking_id, status=booking.status.value, booking=booking
        )
    return None
