"""Use case reschedule: a CONFIRMED booking moves to another free slot.

In place: the booking keeps its id, so its payment query id (seed 000: immutable), and its
payment; only its slot changes, at the same price and currency (charging a difference is out of
scope: RESCHEDULE_PRICE_DIFFERS). One transaction: the update that moves the booking is
checked by the store's uniqueness guarantee on the new slot as it leaves the old one, so the
new slot is secured before the old one is free, or nothing changes (SLOT_UNAVAILABLE). The
person approves the RESCHEDULE intent (``domain.intents``), which names the new slot and start.
A taken or started target's SLOT_UNAVAILABLE offers free slots at the booking's price instead
(the refusal's ``alternatives`` detail, read after it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from expert_booking.call_context import CallContext
from expert_booking.domain.errors import (
    BookingError,
    BookingNotFoundError,
    SlotNotFoundError,
    SlotUnavailableError,
)
from expert_booking.domain.intents import reschedule_intent
from expert_booking.domain.lifecycle import changeable, reschedule_refusal, rescheduled
from expert_booking.domain.model import (
    Booking,
    BookingStatus,
    HumanApproval,
    Money,
    Slot,
    canonical_idempotency_key,
)
from expert_booking.domain.rules import check_intent_approval
from expert_booking.policy import BookingPolicy
from expert_booking.ports import Clock, IdempotencyRecord, Transaction
from expert_booking.replay import (
    IdempotencyScope,
    fingerprint,
    replay_outcome,
    unwrap,
)
from expert_booking.writes import Writes

_RESCHEDULABLE = frozenset({BookingStatus.CONFIRMED})


class Alternatives(Protocol):
    """``BookingService.alternatives_to``: free slots to offer instead of a taken one."""

    async def __call__(self, slot_id: str, *, price: Money | None = ...) -> tuple[Slot, ...]: ...


@dataclass(frozen=True, slots=True)
class RescheduleBooking:
    """Move ``booking_id`` to ``new_slot_id``; the key is kept in canonical (lower-case) form."""

    booking_id: str
    new_slot_id: str
    expected_version: int
    idempotency_key: str
    human_approval: HumanApproval | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "idempotency_key", canonical_idempotency_key(self.idempotency_key))


class Rescheduling:
    """Runs a reschedule through the shared ``writes.Writes``."""

    def __init__(
        self,
        *,
        writes: Writes,
        clock: Clock,
        policy: BookingPolicy,
        alternatives: Alternatives,
    ) -> None:
        self._writes = writes
        self._clock = clock
        self._policy = policy
        self._alternatives = alternatives

    async def reschedule_booking(self, command: RescheduleBooking, context: CallContext) -> Booking:
        """Move a CONFIRMED booking to a free slot of the same price, after human approval.

        Raises:
            IdempotencyConflictError, BookingNotFoundError, InvalidStateError,
            VersionConflictError, SlotNotFoundError, SlotUnavailableError,
            ReschedulePriceDiffersError, HumanApproval*Error, ApprovalIntent*Error.
        """
        digest = fingerprint(command)
        key = command.idempotency_key
        owner = context.principal.owner

        # The booking's price as the transaction read it: SLOT_UNAVAILABLE comes only after
        # the booking is found, and its alternatives must be at that price (a started target
        # is refused before its price is compared, so the target's price may differ).
        priced: list[Money] = []

        def work(tx: Transaction) -> tuple[Booking | BookingError, int, bool]:
            now = self._clock.now()
            released = tx.release_overdue(now)
            replayed = replay_outcome(
                tx.get_idempotency(IdempotencyScope.RESCHEDULE, key, owner=owner), key, digest
            )
            if replayed is not None:
                return replayed, released, False
            booking = tx.get_booking(command.booking_id, owner=owner)
            if booking is None:
                return BookingNotFoundError(booking_id=command.booking_id), released, False
            priced.append(booking.payment.price)
            outcome = self._move(tx, command, booking, digest, now)
            return outcome, released, isinstance(outcome, Booking)

        try:
            outcome, released, changed = await self._writes.run_write(work)
            self._writes.after_write(released=released, changed=changed)
            return unwrap(outcome)
        except SlotUnavailableError as refusal:
            self._writes.slot_was_taken(command.new_slot_id)
            refusal.details["alternatives"] = await self._alternatives(
                command.new_slot_id, price=priced[-1]
            )
            raise

    def _move(
        self,
        tx: Transaction,
        command: RescheduleBooking,
        booking: Booking,
        digest: str,
        now: datetime,
    ) -> Booking | BookingError:
        """Check, then move; refusals are returned so the transaction's release commits."""
        refusal = changeable(booking, command.expected_version, _RESCHEDULABLE, now=now)
        if refusal is not None:
            return refusal
        standing = tx.lookup_slot(command.new_slot_id)
        target = None if standing is None else standing.slot
        refusal = reschedule_refusal(
            booking,
            command.new_slot_id,
            target,
            free=standing is not None and standing.free,
            now=now,
        )
        if refusal is not None or target is None:
            return refusal or SlotNotFoundError(slot_id=command.new_slot_id)
        try:
            check_intent_approval(
                command.human_approval,
                reschedule_intent(booking, target),
                issued_at=booking.last_changed_at,
                now=now,
                ttl=self._policy.approval_ttl,
                skew=self._policy.approval_skew,
                offer_intent=True,
            )
        except BookingError as exc:
            return exc
        moved = rescheduled(booking, target, now=now)
        # Raises SlotUnavailableError (rolling back) if the slot was taken after all: the
        # store's guarantee, not the read above, is what secures it.
        tx.update_booking(moved, expected_version=booking.version)
        tx.put_idempotency(
            IdempotencyRecord(
                scope=IdempotencyScope.RESCHEDULE,
                key=command.idempotency_key,
                fingerprint=digest,
                booking=moved,
                error_code=None,
            )
        )
        return moved
