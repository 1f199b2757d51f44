"""The store contract: what every engine behind ``ports.BookingStore`` must do, engine-neutral.

Each test runs on every engine of ``conftest.ENGINES`` (SQLite and the in-memory fake today;
PostgreSQL once it exists) and talks to the store only through the port. What only one engine
can show (sqlite3 error causes, another process holding the file's lock, worker threads) stays
in that engine's own tests (``tests/integration/test_sqlite_store.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest

from expert_booking.domain.errors import BookingError, InternalError
from expert_booking.domain.model import (
    Booking,
    BookingStatus,
    Customer,
    Money,
    Payment,
    PaymentStatus,
    Slot,
    SlotChange,
)
from expert_booking.ports import (
    LOCAL_OWNER,
    BookingListQuery,
    BookingListResult,
    BookingStore,
    HoldLookup,
    IdempotencyRecord,
    ListPosition,
    SlotNeighbours,
    SlotQuery,
    SlotSearchResult,
    SlotStanding,
    Transaction,
)
from tests.fakes import (
    ALL,
    SEED_ORDER,
    SLOT_AI_001_STARTS_AT,
    T0,
    insert_bookings,
    make_booking,
    make_confirmed_booking,
    search_both_ways,
    transaction_held_open,
)
from tests.store_engines import overlapping

pytestmark = pytest.mark.anyio


# --- bookings ---------------------------------------------------------------------------------


async def test_a_booking_round_trips_through_the_store(store: BookingStore) -> None:
    booking = make_booking(
        customer=Customer(name="Zoë", email="Zoe@Example.COM", phone="+49 30 1234", note="Hi 你好")
    )
    await store.run(lambda tx: tx.insert_booking(booking))
    assert (
        await store.run(lambda tx: tx.get_booking(booking.booking_id, owner=LOCAL_OWNER)) == booking
    )
    assert await store.run(lambda tx: tx.get_booking("booking-nope", owner=LOCAL_OWNER)) is None
    assert await store.peek_booking(booking.booking_id, owner=LOCAL_OWNER) == booking


@pytest.mark.parametrize("status", list(BookingStatus))
async def test_every_domain_status_can_be_stored_and_read_back(
    store: BookingStore, status: BookingStatus
) -> None:
    booking = make_booking(status=status)
    await store.run(lambda tx: tx.insert_booking(booking))
    assert await store.peek_booking(booking.booking_id, owner=LOCAL_OWNER) == booking


async def test_a_second_active_booking_of_a_slot_is_refused_and_nothing_is_written(
    store: BookingStore,
) -> None:
    await store.run(lambda tx: tx.insert_booking(make_booking("booking-a")))
    with pytest.raises(BookingError) as excinfo:
        await store.run(lambda tx: tx.insert_booking(make_booking("booking-b")))
    assert excinfo.value.code == "SLOT_UNAVAILABLE"
    assert await store.peek_booking("booking-b", owner=LOCAL_OWNER) is None


async def test_inactive_bookings_do_not_block_a_new_hold_of_the_slot(store: BookingStore) -> None:
    bookings = (
        make_booking("booking-a", status=BookingStatus.EXPIRED),
        make_booking("booking-b", status=BookingStatus.PAYMENT_FAILED),
        make_booking("booking-c"),
    )
    await insert_bookings(store, *bookings)
    held = await store.run(lambda tx: tx.get_booking("booking-c", owner=LOCAL_OWNER))
    assert held is not None
    assert held.status is BookingStatus.HELD


async def test_reactivating_a_released_booking_of_a_taken_slot_is_refused(
    store: BookingStore,
) -> None:
    expired = make_booking("booking-a", status=BookingStatus.EXPIRED, version=2)
    await insert_bookings(store, expired, make_booking("booking-b"))
    reactivated = replace(expired, status=BookingStatus.HELD, version=3)
    with pytest.raises(BookingError) as excinfo:
        await store.run(lambda tx: tx.update_booking(reactivated, 2))
    assert excinfo.value.code == "SLOT_UNAVAILABLE"
    assert await store.peek_booking("booking-a", owner=LOCAL_OWNER) == expired


async def test_a_booking_of_an_unknown_slot_is_refused(store: BookingStore) -> None:
    orphan = make_booking(slot_id="slot-does-not-exist")
    with pytest.raises(BookingError) as excinfo:
        await store.run(lambda tx: tx.insert_booking(orphan))
    assert excinfo.value.code == "INTERNAL_ERROR"
    assert await store.peek_booking(orphan.booking_id, owner=LOCAL_OWNER) is None


async def test_an_update_with_a_stale_version_is_a_version_conflict(store: BookingStore) -> None:
    booking = make_booking()
    await store.run(lambda tx: tx.insert_booking(booking))
    with pytest.raises(BookingError) as excinfo:
        await store.run(lambda tx: tx.update_booking(replace(booking, version=3), 2))
    assert excinfo.value.code == "VERSION_CONFLICT"
    assert excinfo.value.details["current_version"] == 1
    assert (
        await store.run(lambda tx: tx.get_booking(booking.booking_id, owner=LOCAL_OWNER)) == booking
    )


async def test_an_update_with_the_current_version_replaces_the_booking(
    store: BookingStore,
) -> None:
    booking = make_booking()
    paid_at = T0 + timedelta(seconds=42, milliseconds=7)
    confirmed = replace(
        booking,
        status=BookingStatus.CONFIRMED,
        version=2,
        confirmed_at=T0 + timedelta(seconds=60),
        payment=Payment(booking.booking_id, PaymentStatus.PAID, booking.payment.price, paid_at),
    )

    def work(tx: Transaction) -> Booking | None:
        tx.insert_booking(booking)
        tx.update_booking(confirmed, expected_version=1)
        return tx.get_booking(booking.booking_id, owner=LOCAL_OWNER)

    assert await store.run(work) == confirmed


async def test_a_refund_due_is_kept_by_updates_records_and_lists(store: BookingStore) -> None:
    booking = make_booking()
    owed = replace(
        booking,
        status=BookingStatus.EXPIRED,
        version=2,
        payment=replace(booking.payment, status=PaymentStatus.PAID, paid_at=T0),
        refund_due=True,
    )
    record = IdempotencyRecord("booking.confirm_booking", "key-owed", "fp", owed, "X")

    def work(tx: Transaction) -> tuple[Booking | None, IdempotencyRecord | None]:
        tx.insert_booking(booking)
        tx.update_booking(owed, expected_version=1)
        tx.put_idempotency(record)
        return tx.get_booking(booking.booking_id, owner=LOCAL_OWNER), tx.get_idempotency(
            record.scope, record.key, owner=LOCAL_OWNER
        )

    assert booking.refund_due is False
    assert await store.run(work) == (owed, record)
    assert await store.peek_booking(booking.booking_id, owner=LOCAL_OWNER) == owed
    listed, _ = await store.run(lambda tx: tx.list_bookings(EVERY, None, 10))
    assert listed == [owed]
    assert (await store.peek_bookings(EVERY, None, 10)).bookings == [owed]


def _moved(booking: Booking, slot: Slot) -> Booking:
    change = SlotChange(
        booking.slot_id, booking.expert_id, booking.starts_at, booking.ends_at, T0 + timedelta(1)
    )
    return replace(
        booking,
        slot_id=slot.slot_id,
        expert_id=slot.expert_id,
        starts_at=slot.starts_at,
        ends_at=slot.ends_at,
        version=booking.version + 1,
        history=(*booking.history, change),
    )


async def test_a_slot_lookup_says_whether_an_active_booking_has_the_slot(
    store: BookingStore,
) -> None:
    await insert_bookings(
        store,
        make_booking("booking-a", slot_id="slot-ai-001"),
        make_booking("booking-b", slot_id="slot-law-001", status=BookingStatus.CANCELLED),
    )

    def work(tx: Transaction) -> list[SlotStanding | None]:
        return [tx.lookup_slot(slot) for slot in ("slot-ai-001", "slot-law-001", "slot-none")]

    held, released, missing = await store.run(work)
    assert held is not None
    assert released is not None
    assert (held.slot.slot_id, held.free, held.slot.price.amount) == (
        "slot-ai-001",
        False,
        "500.00",
    )
    assert (released.slot.expert_id, released.free) == ("exp-law-001", True)
    assert missing is None


async def test_moving_a_booking_secures_the_new_slot_and_frees_the_old_in_one_step(
    store: BookingStore,
) -> None:
    booking = make_confirmed_booking()
    await insert_bookings(store, booking, make_booking("booking-b", slot_id="slot-law-001"))

    def slots(tx: Transaction) -> list[Slot]:
        found = [tx.lookup_slot(slot) for slot in ("slot-ai-002", "slot-law-001")]
        return [standing.slot for standing in found if standing is not None]

    free, taken = await store.run(slots)
    with pytest.raises(BookingError) as excinfo:
        await store.run(lambda tx: tx.update_booking(_moved(booking, taken), booking.version))
    assert excinfo.value.code == "SLOT_UNAVAILABLE"
    assert await store.peek_booking(booking.booking_id, owner=LOCAL_OWNER) == booking
    moved = _moved(booking, free)
    twice = _moved(moved, taken)

    def move(tx: Transaction) -> tuple[Booking | None, bool, bool]:
        tx.update_booking(moved, booking.version)
        old, new = tx.lookup_slot(booking.slot_id), tx.lookup_slot(free.slot_id)
        assert old is not None
        assert new is not None
        return tx.get_booking(booking.booking_id, owner=LOCAL_OWNER), old.free, new.free

    assert await store.run(move) == (moved, True, False)
    assert await store.peek_booking(booking.booking_id, owner=LOCAL_OWNER) == moved
    with pytest.raises(BookingError):
        await store.run(lambda tx: tx.update_booking(twice, moved.version))
    restored = await store.run(lambda tx: tx.get_booking(booking.booking_id, owner=LOCAL_OWNER))
    assert restored is not None
    assert restored.history == moved.history


# --- free slots near a slot (help on conflict) ------------------------------------------


def _near_ids(found: SlotNeighbours) -> list[str]:
    return sorted(slot.slot_id for slot in found.candidates)


async def test_slots_near_a_slot_are_its_experts_nearest_hours_and_colleagues_at_its_start(
    wider_store: BookingStore,
) -> None:
    found = await wider_store.peek_slots_near("slot-ai-001", T0, 3)
    assert found.slot is not None
    assert (found.slot.slot_id, found.slot.specialty, found.slot.starts_at) == (
        "slot-ai-001",
        "AI",
        SLOT_AI_001_STARTS_AT,
    )
    # Three before (latest first: not b01, b02), three at or after (earliest first), and the
    # other AI experts at 02:00 (not slot-mz-002 at 03:00); never the slot itself.
    assert _near_ids(found) == sorted(
        [
            *("slot-ai-x01", "slot-ai-b04", "slot-ai-b03"),
            *("slot-ai-a01", "slot-ai-a02", "slot-ai-002"),
            *("slot-jb-001", "slot-mz-001"),
        ]
    )
    assert {slot.slot_id: slot for slot in found.candidates}["slot-mz-001"] == Slot(
        slot_id="slot-mz-001",
        expert_id="exp-ai-002",
        expert_name="Dr. Mei Zhou",
        specialty="AI",
        starts_at=SLOT_AI_001_STARTS_AT,
        ends_at=SLOT_AI_001_STARTS_AT + timedelta(hours=1),
        price=Money("500.00", "CNY"),
    )
    one = await wider_store.peek_slots_near("slot-ai-001", T0, 1)
    assert _near_ids(one) == ["slot-ai-a01", "slot-ai-x01", "slot-jb-001"]
    assert (await wider_store.peek_slots_near("slot-ai-001", T0, 0)).candidates == []


async def test_slots_near_a_slot_leave_out_taken_and_started_slots(
    wider_store: BookingStore,
) -> None:
    await insert_bookings(
        wider_store,
        make_booking("booking-a", slot_id="slot-ai-001"),
        make_booking("booking-b", slot_id="slot-ai-b04"),
        make_booking("booking-c", slot_id="slot-mz-001", status=BookingStatus.CONFIRMED),
        make_booking("booking-d", slot_id="slot-ai-a01", status=BookingStatus.EXPIRED),
        make_booking("booking-e", slot_id="slot-jb-001", status=BookingStatus.CANCELLED),
        # HELD from T0, overdue from T0 + 300 s (as booking-b's): not released by a peek,
        # yet from then on its slot counts as free.
        make_booking("booking-f", slot_id="slot-ai-a02"),
    )
    found = await wider_store.peek_slots_near("slot-ai-001", T0, 3)
    assert found.slot is not None  # a taken slot is still described
    assert found.slot.slot_id == "slot-ai-001"
    assert _near_ids(found) == sorted(
        [
            *("slot-ai-x01", "slot-ai-b03", "slot-ai-b02"),
            *("slot-ai-a01", "slot-ai-002"),
            "slot-jb-001",
        ]
    )
    overdue = await wider_store.peek_slots_near("slot-ai-001", T0 + timedelta(seconds=300), 3)
    assert _near_ids(overdue) == sorted(
        [
            *("slot-ai-x01", "slot-ai-b04", "slot-ai-b03"),
            *("slot-ai-a01", "slot-ai-a02", "slot-ai-002"),
            "slot-jb-001",
        ]
    )
    # Slots starting at or before now are gone (b01 at 22:00, b02 at 23:00 began).
    late = await wider_store.peek_slots_near("slot-ai-001", datetime(2030, 9, 1, 23, tzinfo=UTC), 5)
    assert _near_ids(late) == sorted(
        [
            *("slot-ai-x01", "slot-ai-b04", "slot-ai-b03"),
            *("slot-ai-a01", "slot-ai-a02", "slot-ai-002"),
            "slot-jb-001",
        ]
    )


async def test_slots_near_a_slot_at_a_price_are_counted_after_the_price(
    wider_store: BookingStore,
) -> None:
    cny = Money("500.00", "CNY")
    # x01 (900.00) is the expert's latest before 02:00: with the price it takes no place of
    # the one per kind, b04 does.
    one = await wider_store.peek_slots_near("slot-ai-001", T0, 1, price=cny)
    assert _near_ids(one) == ["slot-ai-a01", "slot-ai-b04", "slot-jb-001"]
    dearer = await wider_store.peek_slots_near("slot-ai-001", T0, 3, price=Money("900.00", "CNY"))
    assert _near_ids(dearer) == ["slot-ai-x01"]
    euros = await wider_store.peek_slots_near("slot-ai-001", T0, 3, price=Money("500.00", "EUR"))
    assert euros.slot is not None  # the slot itself is described at any price
    assert euros.candidates == []


async def test_slots_near_an_unknown_slot_are_none(store: BookingStore) -> None:
    assert await store.peek_slots_near("slot-none", T0, 3) == SlotNeighbours(None, [])


async def test_slots_near_a_slot_see_commits_only(store: BookingStore) -> None:
    async with transaction_held_open(
        store, lambda tx: tx.insert_booking(make_booking("booking-a", slot_id="slot-ai-002"))
    ):
        found = await store.peek_slots_near("slot-ai-001", T0, 3)
        assert _near_ids(found) == ["slot-ai-002"]
    assert _near_ids(await store.peek_slots_near("slot-ai-001", T0, 3)) == []


async def test_a_cancelled_booking_round_trips_and_frees_its_slot(store: BookingStore) -> None:
    booking = make_confirmed_booking()
    cancelled = replace(
        booking, status=BookingStatus.CANCELLED, version=3, cancelled_at=T0 + timedelta(hours=1)
    )
    await store.run(lambda tx: tx.insert_booking(booking))
    await store.run(lambda tx: tx.update_booking(cancelled, booking.version))
    assert await store.peek_booking(booking.booking_id, owner=LOCAL_OWNER) == cancelled
    record = IdempotencyRecord("booking.cancel_booking", "key-c", "fp", cancelled, None)
    await store.run(lambda tx: tx.put_idempotency(record))
    assert await store.run(
        lambda tx: tx.get_idempotency("booking.cancel_booking", "key-c", owner=LOCAL_OWNER)
    ) == (record)
    await store.run(lambda tx: tx.insert_booking(make_booking("booking-new")))


async def test_updating_a_missing_booking_is_not_found(store: BookingStore) -> None:
    with pytest.raises(BookingError) as excinfo:
        await store.run(lambda tx: tx.update_booking(make_booking(), expected_version=1))
    assert excinfo.value.code == "BOOKING_NOT_FOUND"


async def test_overdue_holds_are_released_from_their_expiry_instant_on(
    store: BookingStore,
) -> None:
    early = make_booking("booking-early", expires_at=T0 + timedelta(seconds=10))
    late = make_booking(
        "booking-late", slot_id="slot-ai-002", expires_at=T0 + timedelta(seconds=20)
    )
    confirmed = make_booking(
        "booking-done",
        slot_id="slot-law-001",
        status=BookingStatus.CONFIRMED,
        expires_at=T0,
    )

    def work(tx: Transaction) -> tuple[Booking | None, Booking | None]:
        for booking in (early, late, confirmed):
            tx.insert_booking(booking)
        assert tx.next_hold_expiry() == early.expires_at
        assert tx.release_overdue(early.expires_at - timedelta(milliseconds=1)) == 0
        assert tx.release_overdue(early.expires_at) == 1
        assert tx.next_hold_expiry() == late.expires_at
        assert tx.release_overdue(early.expires_at) == 0
        released = tx.get_booking(early.booking_id, owner=LOCAL_OWNER)
        untouched = tx.get_booking(confirmed.booking_id, owner=LOCAL_OWNER)
        assert tx.release_overdue(T0 + timedelta(days=1)) == 1
        assert tx.next_hold_expiry() is None
        return released, untouched

    released, untouched = await store.run(work)
    assert released == replace(early, status=BookingStatus.EXPIRED, version=2)
    assert untouched == confirmed


# --- idempotency records ------------------------------------------------------------------------


async def test_an_idempotency_record_restores_an_identical_booking(store: BookingStore) -> None:
    booking = make_confirmed_booking()
    record = IdempotencyRecord("booking.confirm_booking", "key-1", "fp", booking, None)
    refused = IdempotencyRecord("booking.confirm_booking", "key-2", "fp2", make_booking(), "X")

    def write(tx: Transaction) -> IdempotencyRecord | None:
        before = tx.get_idempotency("booking.confirm_booking", "key-1", owner=LOCAL_OWNER)
        tx.put_idempotency(record)
        tx.put_idempotency(refused)
        return before

    def read(tx: Transaction) -> list[IdempotencyRecord | None]:
        return [
            tx.get_idempotency("booking.confirm_booking", "key-1", owner=LOCAL_OWNER),
            tx.get_idempotency("booking.confirm_booking", "key-2", owner=LOCAL_OWNER),
            tx.get_idempotency("booking.hold_slot", "key-1", owner=LOCAL_OWNER),
        ]

    assert await store.run(write) is None
    assert await store.run(read) == [record, refused, None]


async def test_a_stored_outcome_is_replaced_only_where_one_is_stored(store: BookingStore) -> None:
    first = IdempotencyRecord("booking.cancel_booking", "key-1", "fp", make_booking(), None)
    grown = replace(first, booking=make_confirmed_booking())
    elsewhere = replace(grown, key="key-2")
    await store.run(lambda tx: tx.put_idempotency(first))
    await store.run(lambda tx: tx.replace_idempotency(grown))
    with pytest.raises(InternalError):
        await store.run(lambda tx: tx.replace_idempotency(elsewhere))

    def read(tx: Transaction) -> list[IdempotencyRecord | None]:
        return [
            tx.get_idempotency("booking.cancel_booking", key, owner=LOCAL_OWNER)
            for key in ("key-1", "key-2")
        ]

    assert await store.run(read) == [grown, None]


async def test_an_idempotency_key_is_written_once(store: BookingStore) -> None:
    first = IdempotencyRecord("booking.hold_slot", "key-1", "fp", make_booking(), None)
    again = replace(first, fingerprint="other")
    await store.run(lambda tx: tx.put_idempotency(first))
    with pytest.raises(BookingError):
        await store.run(lambda tx: tx.put_idempotency(again))
    assert (
        await store.run(
            lambda tx: tx.get_idempotency("booking.hold_slot", "key-1", owner=LOCAL_OWNER)
        )
        == first
    )


async def test_a_hold_lookup_reads_the_record_the_slot_and_the_next_expiry_at_once(
    store: BookingStore,
) -> None:
    booking = make_booking(slot_id="slot-law-001", expires_at=T0 + timedelta(seconds=30))
    record = IdempotencyRecord("booking.hold_slot", "key-1", "fp", booking, None)
    (seeded, *_), _ = await store.run(lambda tx: tx.search_free_slots(ALL, T0, 0, 1))

    def work(tx: Transaction) -> None:
        assert tx.lookup_hold(
            "booking.hold_slot", "key-1", "slot-nope", owner=LOCAL_OWNER
        ) == HoldLookup(None, None, None)
        tx.insert_booking(booking)
        tx.put_idempotency(record)
        found = tx.lookup_hold("booking.hold_slot", "key-1", "slot-ai-001", owner=LOCAL_OWNER)
        assert found == HoldLookup(record, seeded, booking.expires_at)
        other = tx.lookup_hold("booking.confirm_booking", "key-1", "slot-nope", owner=LOCAL_OWNER)
        assert other == HoldLookup(None, None, booking.expires_at)

    assert seeded.slot_id == "slot-ai-001"
    await store.run(work)


# --- transactions -------------------------------------------------------------------------------


# --- ownership ---------------------------------------------------------------------------------

ALICE = "https://issuer.example alice"
BOB = "https://issuer.example bob"


async def test_a_booking_is_found_only_with_its_owner_exactly_like_a_missing_one(
    store: BookingStore,
) -> None:
    booking = make_booking(owner=ALICE)
    await insert_bookings(store, booking)

    def read(tx: Transaction) -> list[Booking | None]:
        return [tx.get_booking(booking.booking_id, owner=o) for o in (ALICE, BOB, LOCAL_OWNER)]

    assert await store.run(read) == [booking, None, None]
    for owner, expected in ((ALICE, booking), (BOB, None), (LOCAL_OWNER, None)):
        assert await store.peek_booking(booking.booking_id, owner=owner) == expected
    assert await store.peek_booking("booking-nope", owner=ALICE) is None


async def test_an_update_reaches_only_a_booking_of_the_same_owner(store: BookingStore) -> None:
    booking = make_booking(owner=ALICE)
    await insert_bookings(store, booking)
    foreign = replace(booking, status=BookingStatus.CONFIRMED, version=2, owner=BOB)

    with pytest.raises(BookingError) as excinfo:
        await store.run(lambda tx: tx.update_booking(foreign, expected_version=1))

    assert excinfo.value.code == "BOOKING_NOT_FOUND"
    assert await store.peek_booking(booking.booking_id, owner=ALICE) == booking


async def test_two_owners_using_one_idempotency_key_never_collide(store: BookingStore) -> None:
    alices = make_booking("booking-a", owner=ALICE)
    bobs = make_booking("booking-b", slot_id="slot-ai-002", owner=BOB)
    await insert_bookings(store, alices, bobs)
    scope = "booking.hold_slot"

    def work(tx: Transaction) -> list[IdempotencyRecord | None]:
        tx.put_idempotency(IdempotencyRecord(scope, "key-1", "fp-a", alices, None))
        tx.put_idempotency(IdempotencyRecord(scope, "key-1", "fp-b", bobs, None))
        return [tx.get_idempotency(scope, "key-1", owner=o) for o in (ALICE, BOB, LOCAL_OWNER)]

    alice_record, bob_record, local_record = await store.run(work)
    assert alice_record is not None
    assert (alice_record.fingerprint, alice_record.booking) == ("fp-a", alices)
    assert bob_record is not None
    assert (bob_record.fingerprint, bob_record.booking) == ("fp-b", bobs)
    assert local_record is None
    seen = await store.run(lambda tx: tx.lookup_hold(scope, "key-1", "slot-nope", owner=BOB))
    assert seen.record == bob_record
    with pytest.raises(BookingError):  # still written once per owner
        await store.run(
            lambda tx: tx.put_idempotency(IdempotencyRecord(scope, "key-1", "fp-c", bobs, None))
        )


async def test_an_exception_inside_a_transaction_rolls_back_every_change(
    store: BookingStore,
) -> None:
    old = make_booking("booking-old", expires_at=T0)
    booking = make_booking(slot_id="slot-ai-002")
    await store.run(lambda tx: tx.insert_booking(old))

    def fail_midway(tx: Transaction) -> None:
        assert tx.release_overdue(T0) == 1
        tx.insert_booking(booking)
        tx.put_idempotency(IdempotencyRecord("scope", "key", "fp", booking, None))
        raise RuntimeError

    with pytest.raises(RuntimeError):
        await store.run(fail_midway)
    assert await store.peek_booking(old.booking_id, owner=LOCAL_OWNER) == old
    assert await store.peek_booking(booking.booking_id, owner=LOCAL_OWNER) is None
    assert await store.run(lambda tx: tx.get_idempotency("scope", "key", owner=LOCAL_OWNER)) is None


async def test_an_async_work_function_is_refused_and_rolled_back(store: BookingStore) -> None:
    async def work(tx: Transaction) -> None:
        tx.insert_booking(make_booking())

    with pytest.raises(TypeError, match="plain function"):
        await store.run(work)  # type: ignore[unused-coroutine]  # the mistake under test
    assert await store.peek_booking("booking-x", owner=LOCAL_OWNER) is None


async def test_a_transaction_object_is_unusable_after_its_work(store: BookingStore) -> None:
    tx = await store.run(lambda tx: tx)
    with pytest.raises(RuntimeError):
        tx.get_booking("booking-x", owner=LOCAL_OWNER)


async def test_a_cancelled_caller_leaves_its_transaction_whole_and_the_store_usable(
    store: BookingStore,
) -> None:
    def insert_two(tx: Transaction) -> None:
        tx.insert_booking(make_booking("booking-one"))
        tx.insert_booking(make_booking("booking-two", slot_id="slot-ai-002"))

    with anyio.fail_after(5):
        async with transaction_held_open(store):
            # Queued behind the open transaction, then its caller goes away.
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(store.run, insert_two)
                    await anyio.wait_all_tasks_blocked()
                    scope.cancel()
        assert scope.cancelled_caught
        # The transaction was queued before its caller left: it still ran, whole.
        found = await store.run(
            lambda tx: [
                tx.get_booking("booking-one", owner=LOCAL_OWNER),
                tx.get_booking("booking-two", owner=LOCAL_OWNER),
            ]
        )
        assert [booking is not None for booking in found] == [True, True]
        after = make_booking("booking-after", slot_id="slot-law-001")
        await store.run(lambda tx: tx.insert_booking(after))
    assert await store.peek_booking(after.booking_id, owner=LOCAL_OWNER) == after


# --- two stores on one database (two server processes) -----------------------------------------

Replicas = tuple[BookingStore, BookingStore]


async def test_what_one_store_commits_the_other_reads(replicas: Replicas) -> None:
    first, second = replicas
    booking = make_booking()
    await first.run(lambda tx: tx.insert_booking(booking))
    assert await second.peek_booking(booking.booking_id, owner=LOCAL_OWNER) == booking
    with pytest.raises(BookingError) as excinfo:
        await second.run(lambda tx: tx.insert_booking(make_booking("booking-other")))
    assert excinfo.value.code == "SLOT_UNAVAILABLE"


async def test_keyed_transactions_from_two_stores_run_one_after_another(
    replicas: Replicas,
) -> None:
    """A read of an idempotency key and the writes it decides are one step on every engine.

    The use cases read a key's record, then write the booking and the record (a hold, a
    confirm): an engine that let two such transactions both read "no record" would answer a
    retry racing its original with a refusal (``SLOT_UNAVAILABLE``, ``VERSION_CONFLICT``)
    instead of the replay. A shared engine must serialize them (a lock on the key, or a
    serialization failure re-running the work).
    """

    def hold_once(number: int) -> Callable[[Transaction], str]:
        def work(tx: Transaction) -> str:
            record = tx.get_idempotency("booking.hold_slot", "key-1", owner=LOCAL_OWNER)
            if record is not None:
                return record.booking.booking_id
            booking = make_booking(f"booking-{number}")
            tx.insert_booking(booking)
            tx.put_idempotency(IdempotencyRecord("booking.hold_slot", "key-1", "fp", booking, None))
            return booking.booking_id

        return work

    answers: list[str] = []
    stores = overlapping(*replicas)

    async def attempt(number: int) -> None:
        answers.append(await stores[number].run(hold_once(number)))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tasks:
            for number in range(2):
                tasks.start_soon(attempt, number)
    assert len(answers) == 2
    assert len(set(answers)) == 1


async def test_one_compare_and_set_of_a_version_wins_across_two_stores(replicas: Replicas) -> None:
    booking = make_booking()
    await replicas[0].run(lambda tx: tx.insert_booking(booking))
    outcomes: list[str] = []
    stores = overlapping(*replicas)

    async def confirm(number: int) -> None:
        confirmed = replace(booking, status=BookingStatus.CONFIRMED, version=2)
        try:
            await stores[number].run(lambda tx: tx.update_booking(confirmed, 1))
        except BookingError as exc:
            outcomes.append(f"{exc.code} at {exc.details['current_version']}")
        else:
            outcomes.append("won")

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tasks:
            for number in range(2):
                tasks.start_soon(confirm, number)
    assert sorted(outcomes) == ["VERSION_CONFLICT at 2", "won"]


# --- slot search --------------------------------------------------------------------------------


async def test_search_lists_free_future_slots_by_start_time_with_total(
    store: BookingStore,
) -> None:
    assert await search_both_ways(store) == (SEED_ORDER, 6)
    assert await search_both_ways(store, offset=2, limit=2) == (SEED_ORDER[2:4], 6)
    assert await search_both_ways(store, offset=6, limit=2) == ([], 6)
    assert await search_both_ways(store, offset=2**70, limit=2) == ([], 6)


async def test_search_leaves_out_held_and_confirmed_slots_but_not_released_ones(
    store: BookingStore,
) -> None:
    bookings = (
        make_booking("booking-a"),
        make_booking("booking-b", slot_id="slot-law-001", status=BookingStatus.CONFIRMED),
        make_booking("booking-c", slot_id="slot-fin-001", status=BookingStatus.EXPIRED),
    )
    await insert_bookings(store, *bookings)
    slots, total = await search_both_ways(store)
    assert slots == [s for s in SEED_ORDER if s not in {"slot-ai-001", "slot-law-001"}]
    assert total == 4


async def test_search_leaves_out_slots_that_have_started(store: BookingStore) -> None:
    starts = datetime(2030, 9, 2, 8, tzinfo=UTC)  # slot-law-001
    assert await search_both_ways(store, now=starts - timedelta(milliseconds=1)) == (
        SEED_ORDER[1:],
        5,
    )
    assert await search_both_ways(store, now=starts) == (SEED_ORDER[2:], 4)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("人工智能", ["slot-ai-001", "slot-ai-002"]),
        ("Steuer", ["slot-fin-001", "slot-fin-002"]),
        ("STEUER", ["slot-fin-001", "slot-fin-002"]),
        ("KÜNSTLICHE intelligenz", ["slot-ai-001", "slot-ai-002"]),
        ("  lin\tLLM  ", ["slot-ai-001", "slot-ai-002"]),
        ("anna gdpr", ["slot-law-001", "slot-law-002"]),
        ("lin steuer", []),
        ("nobody", []),
        ("%", []),
        ("_", []),
        ("\x00", SEED_ORDER),  # no token at all: every slot, as an empty text
        ("a\x00qqq", []),  # control characters separate tokens: "a" and "qqq"
        ("lin\x00LLM\x85", ["slot-ai-001", "slot-ai-002"]),
        ("\uff2c\uff2c\uff2d", ["slot-ai-001", "slot-ai-002"]),  # full-width LLM (Chinese IMEs)
        ("ku\u0308nstliche", ["slot-ai-001", "slot-ai-002"]),  # a decomposed ü
        ("LL\u200bM", ["slot-ai-001", "slot-ai-002"]),  # a zero-width space pasted in
    ],
)
async def test_search_text_requires_every_token_case_insensitively(
    store: BookingStore, text: str, expected: list[str]
) -> None:
    query = SlotQuery(text=text, specialty=None, starts_after=None, starts_before=None)
    assert await search_both_ways(store, query) == (expected, len(expected))


async def test_search_filters_by_specialty_and_start_window(store: BookingStore) -> None:
    law = SlotQuery(text="", specialty="law", starts_after=None, starts_before=None)
    assert await search_both_ways(store, law) == (["slot-law-001", "slot-law-002"], 2)
    window = SlotQuery(
        text="",
        specialty=None,
        starts_after=datetime(2030, 9, 3, 2, tzinfo=UTC),
        starts_before=datetime(2030, 9, 5, 6, tzinfo=UTC),
    )
    assert await search_both_ways(store, window) == (["slot-ai-002", "slot-law-002"], 2)
    partial = SlotQuery(text="", specialty="LA", starts_after=None, starts_before=None)
    assert await search_both_ways(store, partial) == ([], 0)


async def test_a_start_window_bound_between_two_milliseconds_keeps_its_exact_meaning(
    store: BookingStore,
) -> None:
    """Bounds finer than the stored milliseconds (RFC 3339 allows any digits) are exact."""
    starts = datetime(2030, 9, 2, 2, tzinfo=UTC)  # slot-ai-001, the first seeded slot
    tick = timedelta(microseconds=100)

    def window(after: datetime | None, before: datetime | None) -> SlotQuery:
        return SlotQuery(text="", specialty=None, starts_after=after, starts_before=before)

    assert await search_both_ways(store, window(starts + tick, None)) == (SEED_ORDER[1:], 5)
    assert await search_both_ways(store, window(starts - tick, None)) == (SEED_ORDER, 6)
    assert await search_both_ways(store, window(None, starts + tick)) == (SEED_ORDER[:1], 1)
    assert await search_both_ways(store, window(None, starts - tick)) == ([], 0)
    latest = datetime.max.replace(tzinfo=UTC)  # rounding up cannot pass the year 9999
    assert await search_both_ways(store, window(latest, None)) == ([], 0)
    assert await search_both_ways(store, window(None, latest)) == (SEED_ORDER, 6)


# --- lock-free reads ----------------------------------------------------------------------------


async def test_peeks_see_the_last_commit_and_never_an_open_transaction(
    store: BookingStore,
) -> None:
    booking = make_booking()
    with anyio.fail_after(5):
        async with transaction_held_open(store, lambda tx: tx.insert_booking(booking)):
            assert await store.peek_booking(booking.booking_id, owner=LOCAL_OWNER) is None
            page = await store.peek_free_slots(ALL, T0, 0, 20)
    assert [slot.slot_id for slot in page.slots] == SEED_ORDER
    assert page.next_hold_expiry is None
    assert await store.peek_booking(booking.booking_id, owner=LOCAL_OWNER) == booking
    assert await store.peek_free_slots(ALL, T0, 0, 20) == SlotSearchResult(
        page.slots[1:], 5, booking.expires_at
    )


async def test_a_peeked_page_reports_the_earliest_hold_expiry_even_when_empty(
    store: BookingStore,
) -> None:
    early = make_booking("booking-early", expires_at=T0 + timedelta(seconds=10))
    late = make_booking("booking-late", slot_id="slot-fin-001", expires_at=T0 + timedelta(60))
    done = make_booking("booking-done", slot_id="slot-law-001", status=BookingStatus.CONFIRMED)
    await insert_bookings(store, early, late, done)
    nobody = SlotQuery(text="nobody", specialty=None, starts_after=None, starts_before=None)
    assert await store.peek_free_slots(nobody, T0, 0, 20) == SlotSearchResult(
        [], 0, early.expires_at
    )
    past_the_end = await store.peek_free_slots(ALL, T0, 5, 20)
    assert past_the_end == SlotSearchResult([], 3, early.expires_at)
    assert (await store.peek_free_slots(ALL, T0, 0, 1)).total == 3


# --- booking lists ----------------------------------------------------------------------------

EVERY = BookingListQuery(owner=LOCAL_OWNER, statuses=frozenset(), idempotency_key=None)


async def _listed(
    store: BookingStore,
    query: BookingListQuery = EVERY,
    *,
    after: ListPosition | None = None,
    limit: int = 50,
) -> tuple[list[str], int]:
    """List in a write transaction, and check the lock-free peek answers the same."""

    def work(tx: Transaction) -> BookingListResult:
        bookings, total = tx.list_bookings(query, after, limit)
        return BookingListResult(bookings, total, tx.next_hold_expiry())

    found = await store.run(work)
    assert await store.peek_bookings(query, after, limit) == found
    return [booking.booking_id for booking in found.bookings], found.total


def _on_slots(*changes: dict[str, Any]) -> list[Booking]:
    """Bookings ``booking-0``, ``booking-1`` ... of the seed's slots in order, with changes."""
    return [
        make_booking(f"booking-{n}", slot_id=SEED_ORDER[n], **change)
        for n, change in enumerate(changes)
    ]


async def test_bookings_are_listed_newest_first_then_by_booking_id_descending(
    store: BookingStore,
) -> None:
    later = T0 + timedelta(minutes=1)
    await insert_bookings(store, *_on_slots({}, {"held_at": later}, {}, {"held_at": later}))

    assert await _listed(store) == (["booking-3", "booking-1", "booking-2", "booking-0"], 4)


async def test_a_list_pages_after_a_position_with_the_total_of_every_page(
    store: BookingStore,
) -> None:
    await insert_bookings(
        store, *_on_slots(*({"held_at": T0 + timedelta(seconds=n)} for n in range(5)))
    )

    assert await _listed(store, limit=2) == (["booking-4", "booking-3"], 5)
    after_3 = ListPosition(T0 + timedelta(seconds=3), "booking-3")
    assert await _listed(store, after=after_3, limit=2) == (["booking-2", "booking-1"], 5)
    after_1 = ListPosition(T0 + timedelta(seconds=1), "booking-1")
    assert await _listed(store, after=after_1, limit=2) == (["booking-0"], 5)
    after_0 = ListPosition(T0, "booking-0")
    assert await _listed(store, after=after_0, limit=2) == ([], 5)
    # A position need not be a stored booking: the order decides, not the row.
    between = ListPosition(T0 + timedelta(seconds=2), "booking-2a")
    assert await _listed(store, after=between, limit=9) == (
        ["booking-2", "booking-1", "booking-0"],
        5,
    )


async def test_at_one_held_time_the_booking_id_orders_the_pages(store: BookingStore) -> None:
    # Held within one millisecond, the precision instants are stored at: one held time.
    within = ({"held_at": T0 + timedelta(microseconds=300 * n)} for n in (2, 1, 0))
    await insert_bookings(store, *_on_slots(*within))

    assert await _listed(store, after=ListPosition(T0, "booking-2"), limit=1) == (
        ["booking-1"],
        3,
    )
    assert await _listed(store, after=ListPosition(T0, "booking-1"), limit=5) == (
        ["booking-0"],
        3,
    )


async def test_a_list_keeps_only_the_named_statuses(store: BookingStore) -> None:
    await insert_bookings(
        store,
        *_on_slots(
            {},
            {"status": BookingStatus.CONFIRMED},
            {"status": BookingStatus.EXPIRED},
            {"status": BookingStatus.PAYMENT_FAILED},
        ),
    )
    some = frozenset({BookingStatus.HELD, BookingStatus.EXPIRED})

    assert await _listed(store, replace(EVERY, statuses=some)) == (["booking-2", "booking-0"], 2)
    failed = replace(EVERY, statuses=frozenset({BookingStatus.PAYMENT_FAILED}))
    assert await _listed(store, failed) == (["booking-3"], 1)


async def test_the_key_of_a_record_of_any_scope_finds_its_booking_as_it_is_now(
    store: BookingStore,
) -> None:
    held, other = _on_slots({}, {})
    confirmed = replace(held, status=BookingStatus.CONFIRMED, version=2)

    def write(tx: Transaction) -> None:
        tx.insert_booking(held)
        tx.insert_booking(other)
        tx.put_idempotency(IdempotencyRecord("booking.hold_slot", "key-h", "fp", held, None))
        tx.put_idempotency(IdempotencyRecord("booking.hold_slot", "key-o", "fp", other, None))
        tx.update_booking(confirmed, expected_version=1)
        tx.put_idempotency(
            IdempotencyRecord("booking.confirm_booking", "key-c", "fp", confirmed, None)
        )

    await store.run(write)

    for key in ("key-h", "key-c"):
        query = replace(EVERY, idempotency_key=key)
        assert await _listed(store, query) == (["booking-0"], 1)
        (listed,) = (await store.peek_bookings(query, None, 5)).bookings
        assert listed == confirmed  # the booking now, not the record's copy
    assert await _listed(store, replace(EVERY, idempotency_key="key-none")) == ([], 0)
    both = replace(EVERY, idempotency_key="key-h", statuses=frozenset({BookingStatus.HELD}))
    assert await _listed(store, both) == ([], 0)


async def test_each_owner_lists_only_its_own_bookings_and_keys(store: BookingStore) -> None:
    mine, theirs = _on_slots({}, {"owner": ALICE})
    await insert_bookings(store, mine, theirs)

    def write(tx: Transaction) -> None:
        for booking in (mine, theirs):
            tx.put_idempotency(IdempotencyRecord("booking.hold_slot", "key-1", "fp", booking, None))

    await store.run(write)

    assert await _listed(store) == ([mine.booking_id], 1)
    assert await _listed(store, replace(EVERY, owner=ALICE)) == ([theirs.booking_id], 1)
    assert await _listed(store, replace(EVERY, owner=BOB)) == ([], 0)
    by_key = replace(EVERY, idempotency_key="key-1")
    assert await _listed(store, by_key) == ([mine.booking_id], 1)
    assert await _listed(store, replace(by_key, owner=ALICE)) == ([theirs.booking_id], 1)
    assert await _listed(store, replace(by_key, owner=BOB)) == ([], 0)


async def test_a_list_peek_reports_the_earliest_hold_expiry_without_releasing(
    store: BookingStore,
) -> None:
    soon = T0 + timedelta(seconds=30)
    await insert_bookings(
        store, *_on_slots({"expires_at": soon}, {"status": BookingStatus.CONFIRMED})
    )

    peeked = await store.peek_bookings(EVERY, None, 5)

    assert peeked.next_hold_expiry == soon
    assert [b.status for b in peeked.bookings] == [BookingStatus.CONFIRMED, BookingStatus.HELD]
