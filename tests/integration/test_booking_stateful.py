"""Stateful property test: random holds, confirmations, clock moves and reads against a model.

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
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

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
from expert_booking.policy import BookingPolicy
from expert_booking.services import (
    BookingService,
    ConfirmBooking,
    GetBooking,
    HoldSlot,
)
from tests.fakes import CONTEXT, FakePayments, MutableClock, answer, approval

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
    snapshot: Booking  # the hold's result: ids, slot, price, expiry
    status: BookingStatus
    version: int

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
    given: HumanApproval | None, current: Intent, now: datetime, issued_at: datetime
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
        self.seen_versions: dict[str, int] = {}
        self.ever_expired: set[str] = set()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coroutine)

    def teardown(self) -> None:
        try:
            self.run(self.store.close())
        finally:
            self.runner.close()
            self.tmp.cleanup()

    def call(self, coroutine: Coroutine[Any, Any, Booking]) -> Booking | str:
        try:
            return self.run(coroutine)
        except BookingError as exc:
            return exc.code

    def slot_is_taken(self, slot_id: str) -> bool:
        now = self.clock.now()
        return any(
            model.snapshot.slot_id == slot_id
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

        outcome = self.call(self.service.hold_slot(command, CONTEXT))
        event(f"hold -> {outcome if isinstance(outcome, str) else outcome.status.value}")

        if previous is not None:
            expected: Booking | str = (
                previous.booking if previous.command == command else "IDEMPOTENCY_CONFLICT"
            )
            assert outcome == expected
        elif taken:
            assert outcome == "SLOT_UNAVAILABLE"
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

        outcome = self.call(self.service.confirm_booking(command, CONTEXT))
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

    # --- model helpers ---------------------------------------------------------------------

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
                lambda tx: [tx.get_booking(booking_id) for booking_id in self.bookings]
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
            if booking.status is BookingStatus.CONFIRMED:
                assert booking.payment.status is PaymentStatus.PAID
                price = booking.payment.price
                assert (price.amount, price.currency) == PRICES[booking.slot_id]
                assert booking.payment.paid_at is not None
                assert booking.confirmed_at is not None
            else:
                assert booking.payment.status is not PaymentStatus.PAID


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
