"""Stateful property test: random holds, confirmations, cancellations, reschedules, clock moves,
reads and lists against a model.

The model is deliberately simple and independent of the service code: it predicts each call's
outcome from the contract (state machine, approval rules, idempotency) and compares it with
the real service on a real SQLite file. Holds expire lazily in the store (released by the next
call), so states are compared as *effective* states: a HELD booking whose ``expiresAt`` has
passed counts as EXPIRED with version + 1, on both sides.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import tempfile
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from expert_booking.adapters.seed import SEED_SLOTS
from expert_booking.adapters.sqlite_store import SqliteBookingStore
from expert_booking.cancellation import CancelBooking
from expert_booking.confirmation import ConfirmBooking
from expert_booking.domain.errors import BookingError, PaymentUnavailableError
from expert_booking.domain.intents import ActionIntent
from expert_booking.domain.model import (
    Booking,
    BookingStatus,
    Customer,
    HumanApproval,
    Intent,
    PaymentAnswer,
    PaymentStatus,
)
from expert_booking.edge.tool_registry import BY_NAME
from expert_booking.policy import BookingPolicy
from expert_booking.ports import LOCAL_OWNER
from expert_booking.rescheduling import RescheduleBooking
from expert_booking.services import (
    BookingService,
    GetBooking,
    HoldSlot,
    ListBookings,
)
from tests.fakes import CONTEXT, FakePayments, MutableClock, answer, approval
from tests.listed_errors import assert_listed

T = TypeVar("T")

HOLD_TTL = timedelta(seconds=300)
APPROVAL_TTL = timedelta(seconds=120)
SKEW = timedelta(seconds=5)
POLICY = BookingPolicy(
    hold_ttl=HOLD_TTL,
    approval_ttl=APPROVAL_TTL,
    approval_skew=SKEW,
    slot_cache_ttl=timedelta(seconds=5),
    payment_page_base_url="http://127.0.0.1:3100/pay",
)
SLOT_IDS = [slot.slot_id for slot in SEED_SLOTS]
PRICES = {slot.slot_id: (slot.price_amount, slot.price_currency) for slot in SEED_SLOTS}
STARTS = {slot.slot_id: slot.starts_at for slot in SEED_SLOTS}  # the exact strings an intent shows
EXPERTS = {slot.slot_id: slot.expert_id for slot in SEED_SLOTS}
ACTION_APPROVALS = ["fresh"] * 5 + ["none", "stale", "before_intent", "reject", "wrong_kind"]
CANCEL_ANSWERS = ["PENDING", "PENDING", "PAID", "FAILED", "CLOSED", "UNAVAILABLE"]
CUSTOMERS = [
    Customer(name="Ada Lovelace", email="Ada@Example.com"),
    Customer(name="Grace Hopper", email="grace@example.com", phone="+1 555 0100"),
    Customer(name="李雷", email="LiLei@Example.CN", note="请准时"),
]
# "fresh" is weighted up so that payment answers are reached often.
APPROVAL_KINDS = ["fresh"] * 6 + [
    "stale",
    "future",
    "before_intent",
    "reject",
    "none",
    "bad_hash",
    "other_version",
]
ANSWER_KINDS = ["PENDING", "PAID", "FAILED", "CLOSED", "MISMATCH", "UNAVAILABLE"]
FINAL_CODES = {
    BookingStatus.PAYMENT_FAILED: "PAYMENT_FAILED",
    BookingStatus.PAYMENT_CLOSED: "PAYMENT_CLOSED",
}


@dataclass
class ModelBooking:
    snapshot: Booking  # the hold's result: ids, price, expiry
    status: BookingStatus
    version: int
    slot_id: str = ""  # the slot now (a reschedule moves it)
    changed_at: datetime | None = None  # the last confirmation or move (None: the hold)
    paid: bool = False
    moves: int = 0

    def __post_init__(self) -> None:
        self.slot_id = self.slot_id or self.snapshot.slot_id

    def effective(self, now: datetime) -> tuple[BookingStatus, int]:
        if self.status is BookingStatus.HELD and now >= self.snapshot.expires_at:
            return BookingStatus.EXPIRED, self.version + 1
        return self.status, self.version


@dataclass
class HoldKey:
    command: HoldSlot
    booking: Booking


@dataclass
class ConfirmKey:
    command: ConfirmBooking
    recorded: Booking | str | None  # a committed outcome (booking or final error code)


@dataclass
class ActionKey:
    command: CancelBooking | RescheduleBooking
    recorded: Booking | None  # the committed outcome, if any


def _canonical_digest(intent: Intent | ActionIntent) -> str:
    doc: dict[str, object] = {
        "amount": intent.amount,
        "bookingId": intent.booking_id,
        "currency": intent.currency,
        "slotId": intent.slot_id,
        "startsAt": intent.starts_at,
        "version": intent.version,
    }
    if isinstance(intent, ActionIntent):
        doc["action"] = intent.action
        if intent.new_slot_id is not None:
            doc["newSlotId"] = intent.new_slot_id
            doc["newStartsAt"] = intent.new_starts_at
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _approval_refusal(
    given: HumanApproval | None, current: Intent | ActionIntent, now: datetime, issued_at: datetime
) -> str | None:
    """The contract's approval rules, written independently of ``domain.rules``."""
    if given is None:
        return "HUMAN_APPROVAL_REQUIRED"
    if given.decision != "APPROVE":
        return "HUMAN_APPROVAL_REJECTED"
    if (
        given.approved_at - now > SKEW
        or now - given.approved_at > APPROVAL_TTL + SKEW
        or issued_at - given.approved_at > SKEW  # approved before the intent existed
    ):
        return "HUMAN_APPROVAL_EXPIRED"
    if _canonical_digest(given.intent) != given.intent_hash:
        return "APPROVAL_INTENT_HASH_MISMATCH"
    if given.intent != current:
        return "APPROVAL_INTENT_MISMATCH"
    return None


class BookingMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.tmp = tempfile.TemporaryDirectory()
        self.db_path = Path(self.tmp.name) / "booking.db"
        self.clock = MutableClock()
        self.payments = FakePayments()
        self.store = self.run(SqliteBookingStore.open(self.db_path))
        self.service = BookingService(
            store=self.store, payments=self.payments, clock=self.clock, policy=POLICY
        )
        self.bookings: dict[str, ModelBooking] = {}
        self.hold_keys: dict[str, HoldKey] = {}
        self.confirm_keys: dict[str, ConfirmKey] = {}
        self.action_keys: dict[str, ActionKey] = {}
        self.seen_versions: dict[str, int] = {}
        self.ever_expired: set[str] = set()

    def run(self, awaitable: Awaitable[T]) -> T:
        async def awaited() -> T:
            return await awaitable

        return self.runner.run(awaited())

    def teardown(self) -> None:
        try:
            self.run(self.store.close())
        finally:
            self.runner.close()
            self.tmp.cleanup()

    def call(self, tool: str, command: object) -> Booking | str:
        """The logical tool's use case on ``command``: its booking, or the code of its refusal,
        which must be one the tool's schema lists."""
        self.refusal: BookingError | None = None
        try:
            booking: Booking = self.run(BY_NAME[tool].use_case(self.service)(command, CONTEXT))
        except BookingError as exc:
            self.refusal = exc
            assert_listed(tool, exc.code)
            return exc.code
        return booking

    def assert_alternatives_to(self, slot_id: str) -> None:
        """The refusal offers exactly what the model has free instead of ``slot_id``.

        In the seed each expert has two slots at one price and no colleague of its specialty:
        the one alternative is the expert's other slot, if free and not started.
        """
        assert self.refusal is not None
        offered = [slot.slot_id for slot in self.refusal.details["alternatives"]]
        now = self.clock.now()
        assert offered == [
            other
            for other in SLOT_IDS
            if other != slot_id
            and EXPERTS[other] == EXPERTS[slot_id]
            and not self.slot_is_taken(other)
            and datetime.fromisoformat(STARTS[other]) > now
        ]

    def slot_is_taken(self, slot_id: str) -> bool:
        now = self.clock.now()
        return any(
            model.slot_id == slot_id
            and model.effective(now)[0] in {BookingStatus.HELD, BookingStatus.CONFIRMED}
            for model in self.bookings.values()
        )

    # --- rules -----------------------------------------------------------------------------

    @rule(
        slot_id=st.sampled_from(SLOT_IDS),
        customer=st.sampled_from(CUSTOMERS),
        reuse=st.booleans(),
        same_arguments=st.booleans(),
        data=st.data(),
    )
    def hold(
        self,
        *,
        slot_id: str,
        customer: Customer,
        reuse: bool,
        same_arguments: bool,
        data: st.DataObject,
    ) -> None:
        key = str(uuid.uuid4())
        if reuse and self.hold_keys:
            key = data.draw(st.sampled_from(list(self.hold_keys)), label="reused hold key")
        previous = self.hold_keys.get(key)
        command = HoldSlot(slot_id=slot_id, customer=customer, idempotency_key=key)
        if previous is not None and same_arguments:
            command = previous.command
        slot_id = command.slot_id
        taken = self.slot_is_taken(slot_id)

        outcome = self.call("booking.hold_slot", command)
        event(f"hold -> {outcome if isinstance(outcome, str) else outcome.status.value}")

        if previous is not None:
            expected: Booking | str = (
                previous.booking if previous.command == command else "IDEMPOTENCY_CONFLICT"
            )
            assert outcome == expected
        elif taken:
            assert outcome == "SLOT_UNAVAILABLE"
            self.assert_alternatives_to(slot_id)
        else:
            assert isinstance(outcome, Booking), outcome
            assert (outcome.slot_id, outcome.customer) == (slot_id, command.customer)
            assert outcome.status is BookingStatus.HELD
            assert outcome.version == 1
            assert outcome.expires_at == self.clock.now() + HOLD_TTL
            assert outcome.booking_id not in self.bookings
            self.bookings[outcome.booking_id] = ModelBooking(outcome, BookingStatus.HELD, 1)
            self.hold_keys[key] = HoldKey(command, outcome)

    @precondition(lambda self: self.bookings)
    @rule(
        data=st.data(),
        approval_kind=st.sampled_from(APPROVAL_KINDS),
        answer_kind=st.sampled_from(ANSWER_KINDS),
        version_offset=st.sampled_from([0] * 8 + [-1, 1]),
        prefer_held=st.booleans(),
        reuse_key=st.booleans(),
        same_arguments=st.booleans(),
    )
    def confirm(
        self,
        *,
        data: st.DataObject,
        approval_kind: str,
        answer_kind: str,
        version_offset: int,
        reuse_key: bool,
        same_arguments: bool,
        prefer_held: bool,
    ) -> None:
        now = self.clock.now()
        # Insertion order, never sorted ids: ids are random, and Hypothesis replays the draws.
        held = [
            booking_id
            for booking_id, model in self.bookings.items()
            if model.effective(now)[0] is BookingStatus.HELD
        ]
        candidates = held if prefer_held and held else list(self.bookings)
        booking_id = data.draw(st.sampled_from(candidates), label="booking")
        model = self.bookings[booking_id]
        status, version = model.effective(now)
        current = replace(model.snapshot, version=version)

        key = str(uuid.uuid4())
        previous: ConfirmKey | None = None
        if reuse_key and self.confirm_keys:
            key = data.draw(st.sampled_from(list(self.confirm_keys)), label="reused key")
            previous = self.confirm_keys[key]
        if previous is not None and same_arguments:
            command = previous.command
        else:
            command = ConfirmBooking(
                booking_id=booking_id,
                expected_version=version + version_offset,
                idempotency_key=key,
                human_approval=self._approval(current, approval_kind, now),
            )
        target = self.bookings[command.booking_id]
        status, version = target.effective(now)
        self.payments.script(command.booking_id, self._answer(target.snapshot, answer_kind))
        calls_before = len(self.payments.calls)

        outcome = self.call("booking.confirm_booking", command)
        event(f"confirm -> {outcome if isinstance(outcome, str) else outcome.status.value}")

        queried = len(self.payments.calls) > calls_before
        if previous is not None and previous.recorded is not None:
            expected = previous.recorded if previous.command == command else "IDEMPOTENCY_CONFLICT"
            assert outcome == expected
            assert not queried
            return
        self.confirm_keys[command.idempotency_key] = ConfirmKey(command, None)
        current_intent = replace(target.snapshot, version=version).intent
        refusal = (
            "BOOKING_EXPIRED"
            if status is BookingStatus.EXPIRED
            else "VERSION_CONFLICT"
            if command.expected_version != version
            else "INVALID_STATE"
            if status is not BookingStatus.HELD
            else _approval_refusal(
                command.human_approval, current_intent, now, target.snapshot.held_at
            )
        )
        if refusal is not None:
            assert outcome == refusal
            assert not queried
            return
        assert queried
        assert self.payments.calls[-1].booking_id == command.booking_id
        self._apply_answer(target, command, answer_kind, outcome)

    @precondition(
        lambda self: any(
            model.effective(self.clock.now())[0] is BookingStatus.HELD
            for model in self.bookings.values()
        )
    )
    @rule(data=st.data())
    def approve_pay_and_confirm(self, data: st.DataObject) -> None:
        """The happy path of a person who approves and pays: so that cancel and reschedule
        meet CONFIRMED bookings often (random confirms reach it rarely)."""
        now = self.clock.now()
        held = [
            booking_id
            for booking_id, model in self.bookings.items()
            if model.effective(now)[0] is BookingStatus.HELD
        ]
        target = self.bookings[data.draw(st.sampled_from(held), label="held booking")]
        command = ConfirmBooking(
            booking_id=target.snapshot.booking_id,
            expected_version=target.version,
            idempotency_key=str(uuid.uuid4()),
            human_approval=self._approval(target.snapshot, "fresh", now),
        )
        self.payments.script(command.booking_id, self._answer(target.snapshot, "PAID"))
        outcome = self.call("booking.confirm_booking", command)
        event(f"confirm -> {outcome if isinstance(outcome, str) else outcome.status.value}")
        self._apply_answer(target, command, "PAID", outcome)

    @rule(seconds=st.integers(min_value=0, max_value=400))
    def advance_clock(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @precondition(lambda self: self.bookings)
    @rule(data=st.data())
    def get(self, data: st.DataObject) -> None:
        booking_id = data.draw(st.sampled_from(list(self.bookings)), label="booking")
        booking = self.run(self.service.get_booking(GetBooking(booking_id), CONTEXT))
        assert (booking.status, booking.version) == self.bookings[booking_id].effective(
            self.clock.now()
        )

    @precondition(lambda self: self.bookings)
    @rule(
        data=st.data(),
        approval_kind=st.sampled_from(ACTION_APPROVALS),
        answer_kind=st.sampled_from(CANCEL_ANSWERS),
        version_offset=st.sampled_from([0] * 8 + [1]),
        reuse_key=st.booleans(),
    )
    def cancel(
        self,
        *,
        data: st.DataObject,
        approval_kind: str,
        answer_kind: str,
        version_offset: int,
        reuse_key: bool,
    ) -> None:
        now = self.clock.now()
        previous = self._reused(data, reuse_key, CancelBooking)
        if previous is not None:
            command = previous.command
        else:
            booking_id = data.draw(st.sampled_from(list(self.bookings)), label="booking")
            status, version = self.bookings[booking_id].effective(now)
            intent = self._action_intent(booking_id, "CANCEL", None, version)
            command = CancelBooking(
                booking_id=booking_id,
                expected_version=version + version_offset,
                idempotency_key=str(uuid.uuid4()),
                human_approval=self._action_approval(booking_id, intent, approval_kind, now),
            )
        assert isinstance(command, CancelBooking)
        target = self.bookings[command.booking_id]
        status, version = target.effective(now)
        self.payments.script(command.booking_id, self._answer(target.snapshot, answer_kind))
        calls_before = len(self.payments.calls)

        outcome = self.call("booking.cancel_booking", command)
        event(f"cancel -> {outcome if isinstance(outcome, str) else outcome.status.value}")
        queried = len(self.payments.calls) > calls_before
        if self._replayed(previous, outcome, queried):
            return
        self.action_keys[command.idempotency_key] = ActionKey(command, None)
        if status not in {BookingStatus.HELD, BookingStatus.CONFIRMED}:
            assert (outcome, queried) == ("INVALID_STATE", False)
            return
        if command.expected_version != version:
            assert (outcome, queried) == ("VERSION_CONFLICT", False)
            return
        held = status is BookingStatus.HELD
        assert queried is held
        if held and answer_kind == "UNAVAILABLE":
            assert outcome == "PAYMENT_UNAVAILABLE"
            return
        paid = not held or answer_kind == "PAID"
        if paid:
            current = self._action_intent(command.booking_id, "CANCEL", None, version)
            refusal = _approval_refusal(
                command.human_approval, current, now, self._issued_at(target)
            )
            if refusal is not None:
                assert outcome == refusal
                return
        assert isinstance(outcome, Booking), outcome
        assert (outcome.status, outcome.version) == (BookingStatus.CANCELLED, version + 1)
        assert outcome.refund_due is paid
        target.status, target.version, target.paid = BookingStatus.CANCELLED, version + 1, paid
        self.action_keys[command.idempotency_key] = ActionKey(command, outcome)

    @precondition(lambda self: self.bookings)
    @rule(
        data=st.data(),
        new_slot_id=st.sampled_from(SLOT_IDS),
        approval_kind=st.sampled_from(ACTION_APPROVALS),
        prefer_confirmed=st.booleans(),
        same_price=st.booleans(),
        reuse_key=st.booleans(),
    )
    def reschedule(
        self,
        *,
        data: st.DataObject,
        new_slot_id: str,
        approval_kind: str,
        prefer_confirmed: bool,
        same_price: bool,
        reuse_key: bool,
    ) -> None:
        now = self.clock.now()
        previous = self._reused(data, reuse_key, RescheduleBooking)
        if previous is not None:
            command = previous.command
        else:
            confirmed = [
                booking_id
                for booking_id, model in self.bookings.items()
                if model.effective(now)[0] is BookingStatus.CONFIRMED
            ]
            candidates = confirmed if prefer_confirmed and confirmed else list(self.bookings)
            booking_id = data.draw(st.sampled_from(candidates), label="booking")
            _, version = self.bookings[booking_id].effective(now)
            here = self.bookings[booking_id].slot_id
            if same_price:  # the other slot at this price (each seed price has two slots)
                new_slot_id = next(
                    slot for slot in SLOT_IDS if slot != here and PRICES[slot] == PRICES[here]
                )
            intent = self._action_intent(booking_id, "RESCHEDULE", new_slot_id, version)
            command = RescheduleBooking(
                booking_id=booking_id,
                new_slot_id=new_slot_id,
                expected_version=version,
                idempotency_key=str(uuid.uuid4()),
                human_approval=self._action_approval(booking_id, intent, approval_kind, now),
            )
        assert isinstance(command, RescheduleBooking)
        target = self.bookings[command.booking_id]
        status, version = target.effective(now)
        calls_before = len(self.payments.calls)

        outcome = self.call("booking.reschedule_booking", command)
        event(f"reschedule -> {outcome if isinstance(outcome, str) else outcome.status.value}")
        assert len(self.payments.calls) == calls_before  # a reschedule never asks payment
        if self._replayed(previous, outcome, False):
            return
        self.action_keys[command.idempotency_key] = ActionKey(command, None)
        current = self._action_intent(
            command.booking_id, "RESCHEDULE", command.new_slot_id, version
        )
        refusal = (
            "INVALID_STATE"
            if status is not BookingStatus.CONFIRMED
            else "VERSION_CONFLICT"
            if command.expected_version != version
            else "SLOT_UNAVAILABLE"
            if command.new_slot_id == target.slot_id
            else "RESCHEDULE_PRICE_DIFFERS"
            if PRICES[command.new_slot_id] != PRICES[target.slot_id]
            else "SLOT_UNAVAILABLE"
            if self.slot_is_taken(command.new_slot_id)
            else _approval_refusal(command.human_approval, current, now, self._issued_at(target))
        )
        if refusal is not None:
            assert outcome == refusal
            if refusal == "SLOT_UNAVAILABLE":
                self.assert_alternatives_to(command.new_slot_id)
            return
        assert isinstance(outcome, Booking), outcome
        assert (outcome.slot_id, outcome.version) == (command.new_slot_id, version + 1)
        assert outcome.history[-1].slot_id == target.slot_id
        target.slot_id, target.version, target.changed_at = command.new_slot_id, version + 1, now
        target.moves += 1
        self.action_keys[command.idempotency_key] = ActionKey(command, outcome)

    @rule(
        statuses=st.frozensets(st.sampled_from(list(BookingStatus)), max_size=2),
        limit=st.integers(min_value=1, max_value=4),
        by_key=st.booleans(),
        data=st.data(),
    )
    def list_bookings(
        self, *, statuses: frozenset[BookingStatus], limit: int, by_key: bool, data: st.DataObject
    ) -> None:
        now = self.clock.now()
        keys = {**{k: v.booking.booking_id for k, v in self.hold_keys.items()}}
        keys |= {k: v.command.booking_id for k, v in self.confirm_keys.items() if v.recorded}
        keys |= {k: v.command.booking_id for k, v in self.action_keys.items() if v.recorded}
        key = data.draw(st.sampled_from(sorted(keys)), label="key") if by_key and keys else None
        expected = [
            booking_id
            for booking_id, model in sorted(
                self.bookings.items(),
                key=lambda item: (item[1].snapshot.held_at, item[0]),
                reverse=True,
            )
            if (not statuses or model.effective(now)[0] in statuses)
            and (key is None or keys[key] == booking_id)
        ]
        page = self.run(
            self.service.list_bookings(
                ListBookings(limit=limit, statuses=statuses, idempotency_key=key), CONTEXT
            )
        )
        assert [booking.booking_id for booking in page.bookings] == expected[:limit]
        assert page.total == len(expected)
        assert (page.next_cursor is None) == (len(expected) <= limit)
        for booking in page.bookings:
            model = self.bookings[booking.booking_id]
            assert (booking.status, booking.version) == model.effective(now)
            assert booking.slot_id == model.slot_id

    # --- model helpers ---------------------------------------------------------------------

    def _reused(
        self, data: st.DataObject, reuse: bool, kind: type[CancelBooking | RescheduleBooking]
    ) -> ActionKey | None:
        keys = [key for key, used in self.action_keys.items() if isinstance(used.command, kind)]
        if not reuse or not keys:
            return None
        return self.action_keys[data.draw(st.sampled_from(keys), label="reused action key")]

    @staticmethod
    def _replayed(previous: ActionKey | None, outcome: Booking | str, queried: bool) -> bool:
        """A key that committed before gets that outcome again, with nothing queried."""
        if previous is None or previous.recorded is None:
            return False
        assert (outcome, queried) == (previous.recorded, False)
        return True

    def _issued_at(self, model: ModelBooking) -> datetime:
        return model.changed_at or model.snapshot.held_at

    def _action_intent(
        self, booking_id: str, action: str, new_slot_id: str | None, version: int
    ) -> ActionIntent:
        model = self.bookings[booking_id]
        amount, currency = PRICES[model.slot_id]
        return ActionIntent(
            action=action,
            booking_id=booking_id,
            slot_id=model.slot_id,
            starts_at=STARTS[model.slot_id],
            amount=amount,
            currency=currency,
            version=version,
            new_slot_id=new_slot_id,
            new_starts_at=None if new_slot_id is None else STARTS[new_slot_id],
        )

    def _action_approval(
        self, booking_id: str, intent: ActionIntent, kind: str, now: datetime
    ) -> HumanApproval | None:
        if kind == "none":
            return None
        issued = self._issued_at(self.bookings[booking_id])
        approved: Intent | ActionIntent = intent
        if kind == "wrong_kind":
            other = "RESCHEDULE" if intent.action == "CANCEL" else "CANCEL"
            slot = "slot-ai-002" if other == "RESCHEDULE" else None
            approved = replace(
                intent,
                action=other,
                new_slot_id=slot,
                new_starts_at=None if slot is None else STARTS[slot],
            )
        at = {
            "fresh": max(now - timedelta(seconds=30), issued),
            "wrong_kind": now,
            "reject": now,
            "stale": now - APPROVAL_TTL - SKEW - timedelta(seconds=1),
            "before_intent": issued - SKEW - timedelta(seconds=1),
        }[kind]
        return HumanApproval(
            approval_id=str(uuid.uuid4()),
            decision="REJECT" if kind == "reject" else "APPROVE",
            approved_at=at,
            intent=approved,
            intent_hash=_canonical_digest(approved),
        )

    @staticmethod
    def _approval(current: Booking, kind: str, now: datetime) -> HumanApproval | None:
        if kind == "none":
            return None
        other_version = replace(current.intent, version=current.version + 1)
        return {
            "fresh": lambda: approval(current, max(now - timedelta(seconds=60), current.held_at)),
            "before_intent": lambda: approval(
                current, current.held_at - SKEW - timedelta(seconds=1)
            ),
            "stale": lambda: approval(current, now - APPROVAL_TTL - SKEW - timedelta(seconds=1)),
            "future": lambda: approval(current, now + SKEW + timedelta(seconds=1)),
            "reject": lambda: approval(current, now, decision="REJECT"),
            "bad_hash": lambda: approval(current, now, intent_hash="sha256:" + "ab" * 32),
            "other_version": lambda: approval(current, now, intent=other_version),
        }[kind]()

    def _answer(self, snapshot: Booking, kind: str) -> PaymentAnswer | BaseException:
        if kind == "UNAVAILABLE":
            return PaymentUnavailableError(reason="TIMEOUT")
        if kind == "MISMATCH":
            return answer(snapshot, "PAID", paid_at=self.clock.now(), amount="0.01")
        if kind == "PAID":
            return answer(snapshot, "PAID", paid_at=self.clock.now())
        return answer(snapshot, kind)

    def _apply_answer(
        self, target: ModelBooking, command: ConfirmBooking, kind: str, outcome: Booking | str
    ) -> None:
        simple = {"UNAVAILABLE": "PAYMENT_UNAVAILABLE", "MISMATCH": "PAYMENT_MISMATCH"}
        if kind in {"PENDING", "UNAVAILABLE", "MISMATCH"}:
            assert outcome == simple.get(kind, "PAYMENT_PENDING")
            return
        final = {
            "PAID": BookingStatus.CONFIRMED,
            "FAILED": BookingStatus.PAYMENT_FAILED,
            "CLOSED": BookingStatus.PAYMENT_CLOSED,
        }[kind]
        target.status, target.version = final, command.expected_version + 1
        if final is BookingStatus.CONFIRMED:
            target.changed_at, target.paid = self.clock.now(), True
        recorded: Booking | str
        if final is BookingStatus.CONFIRMED:
            assert isinstance(outcome, Booking), outcome
            assert (outcome.status, outcome.version) == (final, target.version)
            recorded = outcome
        else:
            assert outcome == FINAL_CODES[final]
            recorded = FINAL_CODES[final]
        self.confirm_keys[command.idempotency_key] = ConfirmKey(command, recorded)

    # --- invariants --------------------------------------------------------------------------

    def _stored(self) -> list[Booking]:
        async def read() -> list[Booking]:
            found = await self.store.run(
                lambda tx: [
                    tx.get_booking(booking_id, owner=LOCAL_OWNER) for booking_id in self.bookings
                ]
            )
            return [booking for booking in found if booking is not None]

        return self.run(read())

    @invariant()
    def at_most_one_active_booking_per_slot(self) -> None:
        connection = sqlite3.connect(self.db_path)
        try:
            rows = connection.execute(
                "SELECT slot_id, COUNT(*) FROM bookings "
                "WHERE status IN ('HELD', 'CONFIRMED') GROUP BY slot_id HAVING COUNT(*) > 1"
            ).fetchall()
            (total,) = connection.execute("SELECT COUNT(*) FROM bookings").fetchone()
        finally:
            connection.close()
        assert rows == []
        assert total == len(self.bookings)

    @invariant()
    def stored_bookings_match_the_model_and_the_contract(self) -> None:
        now = self.clock.now()
        stored = self._stored()
        assert len(stored) == len(self.bookings)
        for booking in stored:
            model = self.bookings[booking.booking_id]
            effective = ModelBooking(booking, booking.status, booking.version).effective(now)
            assert effective == model.effective(now)
            status, version = effective
            assert version >= self.seen_versions.get(booking.booking_id, 1)
            self.seen_versions[booking.booking_id] = version
            if status is BookingStatus.EXPIRED:
                self.ever_expired.add(booking.booking_id)
            assert booking.booking_id not in self.ever_expired or status is BookingStatus.EXPIRED
            assert (booking.confirmation_intent is not None) == (
                booking.status is BookingStatus.HELD
            )
            assert booking.slot_id == model.slot_id
            assert len(booking.history) == model.moves
            assert booking.refund_due is (booking.status is BookingStatus.CANCELLED and model.paid)
            assert (booking.cancelled_at is not None) is (booking.status is BookingStatus.CANCELLED)
            if booking.status is BookingStatus.CONFIRMED:
                assert booking.payment.status is PaymentStatus.PAID
                price = booking.payment.price
                assert (price.amount, price.currency) == PRICES[booking.slot_id]
                assert booking.payment.paid_at is not None
                assert booking.confirmed_at is not None
            else:
                assert (booking.payment.status is PaymentStatus.PAID) is booking.refund_due


def test_random_booking_histories_keep_the_invariants() -> None:
    run_state_machine_as_test(
        BookingMachine,
        settings=settings(
            max_examples=30,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
