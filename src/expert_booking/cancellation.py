"""Use case cancel: a HELD or CONFIRMED booking becomes CANCELLED.

A hold is reversible: unless the person has paid, it is cancelled at once, without approval.
Whether they paid is asked of the payment service first, read-only and between two
transactions (as confirm does), since a person may pay on the page while the agent cancels.
A paid hold or a confirmed booking is cancelled only with a fresh human approval of its
CANCEL intent (``domain.intents``); the server never moves money, the snapshot states that a
refund is owed. Idempotent like confirm: the outcome is stored under the key with the change.

A hold cancelled as unpaid is asked about once more right after the commit: a person who pressed
Pay between the first answer and the commit has paid for a cancelled booking. An exact PAID is
then recorded as a payment after release (PAID, ``refundDue``, the operator's WARNING), and the
booking as it then stands is the answer, stored under the key in place of the cancellation
(``replace_idempotency``), so a retry answers the same. Anything else heard (a PAID not exactly
this booking's gets a WARNING), a payment service that fails the look, or a store that fails to
record it (WARNING) leaves the cancellation as committed and answered; a retry of the key replays
it without asking again. A provider that, like the sandbox, takes no payment once the booking is
cancelled leaves no later window; one that takes payments for a released booking later is heard
only by reconciliation (NOTES).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from expert_booking.call_context import CallContext
from expert_booking.domain.errors import (
    BookingError,
    BookingNotFoundError,
    InternalError,
    InvalidStateError,
    PaymentUnavailableError,
    StorageBusyError,
)
from expert_booking.domain.intents import cancel_intent
from expert_booking.domain.lifecycle import CANCELLABLE, cancelled, changeable, is_paid
from expert_booking.domain.model import (
    Booking,
    BookingStatus,
    HumanApproval,
    PaymentAnswer,
    PaymentStatus,
    canonical_idempotency_key,
)
from expert_booking.domain.rules import (
    check_intent_approval,
    check_payment_matches,
    payment_refusal,
    record_paid_after_release,
)
from expert_booking.policy import BookingPolicy
from expert_booking.ports import Clock, IdempotencyRecord, PaymentQueryPort, Transaction
from expert_booking.replay import (
    IdempotencyScope,
    fingerprint,
    replay_outcome,
    unwrap,
    warn_paid_after_release,
)
from expert_booking.writes import Writes

logger = logging.getLogger("expert_booking.services")


@dataclass(frozen=True, slots=True)
class CancelBooking:
    """Cancel ``booking_id``; ``idempotency_key`` is kept in its canonical (lower-case) form."""

    booking_id: str
    expected_version: int
    idempotency_key: str
    human_approval: HumanApproval | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "idempotency_key", canonical_idempotency_key(self.idempotency_key))


@dataclass(frozen=True, slots=True)
class _PaymentNeeded:
    """Transaction 1 found an unpaid-looking hold: ask the payment service before cancelling."""


_ASK_PAYMENT = _PaymentNeeded()

_Outcome = Booking | BookingError | _PaymentNeeded


class Cancellation:
    """Runs a cancellation through the shared ``writes.Writes``."""

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

    async def cancel_booking(self, command: CancelBooking, context: CallContext) -> Booking:
        """Cancel a HELD or CONFIRMED booking (approval needed once the person paid).

        Raises:
            IdempotencyConflictError, BookingNotFoundError, InvalidStateError,
            VersionConflictError, HumanApproval*Error, ApprovalIntent*Error,
            PaymentUnavailableError, PaymentMismatchError.
        """
        digest = fingerprint(command)
        owner = context.principal.owner
        outcome = await self._transaction(command, owner, digest, asked=False, answer=None)
        if not isinstance(outcome, _PaymentNeeded):
            return unwrap(outcome)
        # Outside any transaction: a slow payment service never holds the store lock.
        answer = await self._payments.query_payment(command.booking_id, context.trace)
        settled = await self._transaction(command, owner, digest, asked=True, answer=answer)
        if isinstance(settled, _PaymentNeeded):  # only transaction 1 asks for the payment
            msg = "cancel asked for the payment twice"
            raise TypeError(msg)
        booking = unwrap(settled)
        if booking.status is BookingStatus.CANCELLED and booking.payment.status is (
            PaymentStatus.PENDING
        ):
            return await self._paid_meanwhile(booking, command, digest, context)
        return booking

    async def _paid_meanwhile(
        self, booking: Booking, command: CancelBooking, digest: str, context: CallContext
    ) -> Booking:
        """Ask once more whether the person paid the hold just cancelled; record it if so."""
        try:
            answer = await self._payments.query_payment(booking.booking_id, context.trace)
        except PaymentUnavailableError:  # why: the payment query's own line
            logger.warning(
                "cancelled hold %s: its payment could not be checked again after the cancel; "
                "a payment made meanwhile is not on record",
                booking.booking_id,
            )
            return booking
        if answer.status is not PaymentStatus.PAID:
            return booking
        try:  # no slot changes hands: the search cache stays (no ``after_write``)
            return await self._writes.run_write(self._record_owed(booking, command, digest, answer))
        except (StorageBusyError, InternalError) as exc:  # the cancellation stands as committed
            logger.warning(
                "cancelled hold %s: the payment service says PAID after the cancel, but it could "
                "not be recorded (%s); refund due",
                booking.booking_id,
                exc.code.value,
            )
            return booking

    def _record_owed(
        self, booking: Booking, command: CancelBooking, digest: str, answer: PaymentAnswer
    ) -> Callable[[Transaction], Booking]:
        """The booking as it stands once a PAID heard for it is on record, also under the key."""

        def work(tx: Transaction) -> Booking:
            current = tx.get_booking(booking.booking_id, owner=booking.owner)
            if current is None:
                return booking
            now = record_paid_after_release(current, answer, skew=self._policy.approval_skew)
            if now is not None:
                warn_paid_after_release(current)
                tx.update_booking(now, expected_version=current.version)
            elif current.payment.status is PaymentStatus.PENDING:
                logger.warning(
                    "cancelled hold %s: the payment service answers PAID, but not exactly this "
                    "booking's payment; not recorded",
                    current.booking_id,
                )
            now = now or current  # or another call recorded it first (a confirm in flight)
            if now != booking:
                tx.replace_idempotency(_record(command, digest, now, None))
            return now

        return work

    async def _transaction(
        self,
        command: CancelBooking,
        owner: str,
        digest: str,
        *,
        asked: bool,
        answer: PaymentAnswer | None,
    ) -> _Outcome:
        outcome, released, changed = await self._writes.run_write(
            self._work(command, owner, digest, asked=asked, answer=answer)
        )
        self._writes.after_write(released=released, changed=changed)
        return outcome

    def _work(
        self,
        command: CancelBooking,
        owner: str,
        digest: str,
        *,
        asked: bool,
        answer: PaymentAnswer | None,
    ) -> Callable[[Transaction], tuple[_Outcome, int, bool]]:
        key = command.idempotency_key

        def work(tx: Transaction) -> tuple[_Outcome, int, bool]:
            now = self._clock.now()
            released = tx.release_overdue(now)
            replayed = replay_outcome(
                tx.get_idempotency(IdempotencyScope.CANCEL, key, owner=owner), key, digest
            )
            if replayed is not None:
                return replayed, released, False
            outcome = self._cancel(tx, command, owner, digest, now, asked=asked, answer=answer)
            # A payment after expiry is recorded too, but changes no slot: the cache stays.
            return outcome, released, isinstance(outcome, Booking)

        return work

    def _cancel(
        self,
        tx: Transaction,
        command: CancelBooking,
        owner: str,
        digest: str,
        now: datetime,
        *,
        asked: bool,
        answer: PaymentAnswer | None,
    ) -> _Outcome:
        """Re-read and re-check the booking, then cancel it (refusals returned, not raised)."""
        booking = tx.get_booking(command.booking_id, owner=owner)
        if booking is None:
            return BookingNotFoundError(booking_id=command.booking_id)
        owed = None
        if answer is not None:
            owed = record_paid_after_release(booking, answer, skew=self._policy.approval_skew)
        if owed is not None:
            # The hold expired (or another cancel won) while its payment was queried, and the
            # person had paid: on record as confirm records it (refund due), reported as
            # PAID_AFTER_EXPIRY (INVALID_STATE for a cancelled one).
            warn_paid_after_release(booking)
            tx.update_booking(owed, expected_version=booking.version)
            late = payment_refusal(owed) or InvalidStateError(booking_id=booking.booking_id)
            # Committed with its record, as confirm commits it: a retry of the key answers the same.
            tx.put_idempotency(_record(command, digest, owed, late.code))
            return late
        refusal = changeable(booking, command.expected_version, CANCELLABLE, now=now)
        if refusal is not None:
            return refusal
        held = booking.status is BookingStatus.HELD
        if held and not asked:
            return _ASK_PAYMENT
        try:
            if held and answer is not None:
                check_payment_matches(booking, answer, skew=self._policy.approval_skew)
            if is_paid(booking, answer):
                check_intent_approval(
                    command.human_approval,
                    cancel_intent(booking),
                    issued_at=booking.last_changed_at,
                    now=now,
                    ttl=self._policy.approval_ttl,
                    skew=self._policy.approval_skew,
                    offer_intent=True,
                )
        except BookingError as exc:
            return exc
        done = cancelled(booking, now=now, answer=answer if held else None)
        tx.update_booking(done, expected_version=booking.version)
        tx.put_idempotency(_record(command, digest, done, None))
        return done


def _record(
    command: CancelBooking, digest: str, booking: Booking, error_code: str | None
) -> IdempotencyRecord:
    return IdempotencyRecord(
        scope=IdempotencyScope.CANCEL,
        key=command.idempotency_key,
        fingerprint=digest,
        booking=booking,
        error_code=error_code,
    )
