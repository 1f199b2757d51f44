"""``BookingService.list_bookings`` on the in-memory fake of the store: the list's rules.

Newest first (held, then booking id), filtered by status and by the idempotency key of a hold or
of a confirmation, paged by a cursor bound to the filters and to the caller, overdue holds shown
as EXPIRED. The query itself is held to the same answers on every engine by the store contract
suite (``tests/store_contract``); the wire by ``tests/e2e/test_list_bookings_http.py``.
"""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from expert_booking.call_context import CallContext, Principal
from expert_booking.cancellation import CancelBooking
from expert_booking.confirmation import ConfirmBooking
from expert_booking.domain.errors import InvalidCursorError
from expert_booking.domain.model import Booking, BookingStatus, Customer
from expert_booking.services import (
    BookingPage,
    BookingService,
    HoldSlot,
    ListBookings,
)
from tests.fakes import CONTEXT, POLICY, SEED_ORDER, FakePayments, MutableClock, answer, approval
from tests.memory_store import MemoryBookingStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def service(clock: MutableClock, payments: FakePayments) -> BookingService:
    return BookingService(store=MemoryBookingStore(), payments=payments, clock=clock, policy=POLICY)


async def _hold(service: BookingService, slot_id: str, key: str | None = None) -> Booking:
    command = HoldSlot(
        slot_id=slot_id,
        customer=Customer(name="Ada", email="ada@example.com"),
        idempotency_key=key or str(uuid.uuid4()),
    )
    return await service.hold_slot(command, CONTEXT)


async def _holds(service: BookingService, clock: MutableClock, count: int) -> list[Booking]:
    """``count`` holds of the seed's slots, one second apart (oldest first)."""
    held = []
    for slot_id in SEED_ORDER[:count]:
        held.append(await _hold(service, slot_id))
        clock.advance(1)
    return held


async def _list(
    service: BookingService,
    context: CallContext = CONTEXT,
    *,
    limit: int = 50,
    statuses: frozenset[BookingStatus] = frozenset(),
    idempotency_key: str | None = None,
    cursor: str | None = None,
) -> BookingPage:
    command = ListBookings(
        limit=limit, statuses=statuses, idempotency_key=idempotency_key, cursor=cursor
    )
    return await service.list_bookings(command, context)


def _ids(page: BookingPage) -> list[str]:
    return [booking.booking_id for booking in page.bookings]


async def test_bookings_are_listed_newest_first(
    service: BookingService, clock: MutableClock
) -> None:
    held = await _holds(service, clock, 3)

    page = await _list(service)

    assert _ids(page) == [b.booking_id for b in reversed(held)]
    assert page.total == 3
    assert page.next_cursor is None


async def test_bookings_held_at_the_same_instant_are_ordered_by_booking_id(
    service: BookingService,
) -> None:
    held = [await _hold(service, slot_id) for slot_id in SEED_ORDER[:4]]  # the clock stands still

    page = await _list(service)

    assert _ids(page) == sorted((b.booking_id for b in held), reverse=True)


async def test_the_status_filter_keeps_only_the_named_statuses(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    first, second, third = await _holds(service, clock, 3)
    payments.script(second.booking_id, answer(second, "PAID", paid_at=clock.now()))
    confirmed = await service.confirm_booking(
        ConfirmBooking(
            booking_id=second.booking_id,
            expected_version=second.version,
            idempotency_key=str(uuid.uuid4()),
            human_approval=approval(second, clock.now()),
        ),
        CONTEXT,
    )
    assert confirmed.status is BookingStatus.CONFIRMED

    held = await _list(service, statuses=frozenset({BookingStatus.HELD}))
    either = await _list(service, statuses=frozenset({BookingStatus.HELD, BookingStatus.CONFIRMED}))
    expired = await _list(service, statuses=frozenset({BookingStatus.EXPIRED}))

    assert _ids(held) == [third.booking_id, first.booking_id]
    assert _ids(either) == [third.booking_id, second.booking_id, first.booking_id]
    assert (_ids(expired), expired.total) == ([], 0)


async def test_an_overdue_hold_is_listed_as_expired_not_held(
    service: BookingService, clock: MutableClock
) -> None:
    (booking,) = await _holds(service, clock, 1)
    clock.advance(POLICY.hold_ttl.total_seconds())

    held = await _list(service, statuses=frozenset({BookingStatus.HELD}))
    expired = await _list(service, statuses=frozenset({BookingStatus.EXPIRED}))

    assert (_ids(held), held.total) == ([], 0)  # the list that released it counts too
    assert (_ids(expired), expired.total) == ([booking.booking_id], 1)
    assert expired.bookings[0].version == booking.version + 1


async def test_the_key_of_a_hold_finds_its_booking(
    service: BookingService, clock: MutableClock
) -> None:
    key = str(uuid.uuid4())
    await _holds(service, clock, 2)
    mine = await _hold(service, "slot-fin-001", key=key)

    page = await _list(service, idempotency_key=key)

    assert _ids(page) == [mine.booking_id]
    assert page.bookings[0].status is BookingStatus.HELD


async def test_the_key_of_a_confirmation_finds_the_booking_as_it_is_now(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    booking = await _hold(service, "slot-ai-001")
    await _hold(service, "slot-ai-002")
    key = str(uuid.uuid4())
    payments.script(booking.booking_id, answer(booking, "PAID", paid_at=clock.now()))
    await service.confirm_booking(
        ConfirmBooking(
            booking_id=booking.booking_id,
            expected_version=booking.version,
            idempotency_key=key,
            human_approval=approval(booking, clock.now()),
        ),
        CONTEXT,
    )

    page = await _list(service, idempotency_key=key)

    assert _ids(page) == [booking.booking_id]
    assert page.bookings[0].status is BookingStatus.CONFIRMED


async def test_a_key_that_committed_nothing_lists_nothing(
    service: BookingService, clock: MutableClock
) -> None:
    await _holds(service, clock, 2)

    page = await _list(service, idempotency_key=str(uuid.uuid4()))

    assert (_ids(page), page.total, page.next_cursor) == ([], 0, None)


async def test_the_cursor_pages_through_every_booking_once(
    service: BookingService, clock: MutableClock
) -> None:
    held = await _holds(service, clock, 5)

    first = await _list(service, limit=2)
    second = await _list(service, limit=2, cursor=first.next_cursor)
    third = await _list(service, limit=2, cursor=second.next_cursor)

    assert _ids(first) + _ids(second) + _ids(third) == [b.booking_id for b in reversed(held)]
    assert (first.total, third.next_cursor) == (5, None)


@pytest.mark.parametrize("change", ["a listed booking leaves the filter", "a new booking"])
async def test_pages_are_by_position_so_a_change_between_them_moves_no_other_booking(
    service: BookingService, clock: MutableClock, payments: FakePayments, change: str
) -> None:
    """By offset, a cancel between the pages skipped booking 1, a new hold repeated booking 2."""
    held = await _holds(service, clock, 4)
    only_held = frozenset({BookingStatus.HELD})
    first = await _list(service, limit=2, statuses=only_held)
    assert _ids(first) == [held[3].booking_id, held[2].booking_id]

    if change == "a new booking":
        await _hold(service, SEED_ORDER[4])  # newest: it goes on top, before page one
        total = 5
    else:
        newest = held[3]
        payments.script(newest.booking_id, answer(newest, "PENDING"))
        cancel = CancelBooking(newest.booking_id, newest.version, str(uuid.uuid4()), None)
        await service.cancel_booking(cancel, CONTEXT)
        total = 3
    second = await _list(service, limit=2, statuses=only_held, cursor=first.next_cursor)

    assert _ids(second) == [held[1].booking_id, held[0].booking_id]
    assert (second.total, second.next_cursor) == (total, None)


async def test_a_later_page_read_again_after_a_release_is_still_that_page(
    service: BookingService, clock: MutableClock
) -> None:
    """The peek sees an overdue hold, so the page is read again in a write transaction."""
    held = await _holds(service, clock, 3)
    first = await _list(service, limit=1)
    clock.advance(POLICY.hold_ttl.total_seconds())  # every hold is overdue now

    second = await _list(service, limit=1, cursor=first.next_cursor)

    assert _ids(second) == [held[1].booking_id]
    assert second.bookings[0].status is BookingStatus.EXPIRED


@pytest.mark.parametrize(
    "forged",
    [
        {"a": ["not a time", "booking-1"]},
        {"a": ["2030-09-01T00:00:00.000Z"]},
        {"a": ["2030-09-01T00:00:00.000Z", 7]},
        {"a": ["2030-09-01T00:00:00.000Z", "\ud800"]},
        {"o": 2},
    ],
)
async def test_a_forged_list_cursor_is_refused(
    service: BookingService, clock: MutableClock, forged: dict[str, object]
) -> None:
    await _holds(service, clock, 2)
    real = (await _list(service, limit=1)).next_cursor
    assert real is not None
    binding = json.loads(base64.urlsafe_b64decode(real + "=" * (-len(real) % 4)))["q"]
    text = json.dumps({**forged, "q": binding})  # a lone surrogate goes as its JSON escape
    token = base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    with pytest.raises(InvalidCursorError):
        await _list(service, limit=1, cursor=token)


async def test_a_cursor_used_with_other_filters_is_refused(
    service: BookingService, clock: MutableClock
) -> None:
    await _holds(service, clock, 3)
    cursor = (await _list(service, limit=1)).next_cursor
    held = frozenset({BookingStatus.HELD})

    with pytest.raises(InvalidCursorError):
        await _list(service, limit=1, cursor=cursor, statuses=held)
    with pytest.raises(InvalidCursorError):
        await _list(service, limit=1, cursor=cursor, idempotency_key=str(uuid.uuid4()))
    assert (await _list(service, limit=1, cursor=cursor)).total == 3


async def test_the_order_of_the_statuses_does_not_change_the_cursor_binding(
    service: BookingService, clock: MutableClock
) -> None:
    await _holds(service, clock, 3)
    both = frozenset({BookingStatus.HELD, BookingStatus.EXPIRED})
    first = await _list(service, limit=1, statuses=both)

    reordered = frozenset(sorted(both, reverse=True))
    second = await _list(service, limit=1, statuses=reordered, cursor=first.next_cursor)

    assert second.total == 3


async def test_a_cursor_is_bound_to_the_caller_and_another_caller_sees_no_bookings(
    service: BookingService, clock: MutableClock
) -> None:
    await _holds(service, clock, 2)
    other = CallContext(
        principal=Principal(issuer="https://issuer.example", subject="local"),
        trace=CONTEXT.trace,
        client_sent_at=CONTEXT.client_sent_at,
        server_received_at=CONTEXT.server_received_at,
    )
    first = await _list(service, limit=1)

    assert (await _list(service, other)).total == 0
    with pytest.raises(InvalidCursorError):
        await _list(service, other, limit=1, cursor=first.next_cursor)
