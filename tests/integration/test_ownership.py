"""Ownership through the use cases: a booking is its holder's, on every store engine.

Principals are built here as a verified token would make them (``Principal(issuer, subject)``);
the end-to-end test with a real authorization server drives the same rule over HTTP.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from expert_booking.call_context import LOCAL, Principal
from expert_booking.confirmation import ConfirmBooking
from expert_booking.domain.errors import BookingError
from expert_booking.domain.model import BookingStatus, Customer
from expert_booking.edge.envelope import failure
from expert_booking.edge.wire import render_booking
from expert_booking.ports import BookingStore
from expert_booking.services import (
    BookingPage,
    BookingService,
    GetBooking,
    HoldSlot,
    ListBookings,
)
from tests.fakes import CONTEXT, FakePayments, MutableClock, answer, approval
from tests.store_engines import ENGINES

pytestmark = pytest.mark.anyio

ISSUER = "https://issuer.example"
ALICE = replace(CONTEXT, principal=Principal(issuer=ISSUER, subject="alice"))
BOB = replace(CONTEXT, principal=Principal(issuer=ISSUER, subject="bob"))
# Another issuer's subject of the same name is another principal.
OTHER_ALICE = replace(CONTEXT, principal=Principal(issuer="https://other.example", subject="alice"))
META = {"traceId": "0" * 32}


@pytest.fixture(params=sorted(ENGINES))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BookingStore]:
    async with ENGINES[request.param](tmp_path) as opened:
        yield opened


def _hold_command(slot_id: str = "slot-ai-001", key: str | None = None) -> HoldSlot:
    customer = Customer(name="Ada Lovelace", email="ada@example.com", phone="+44 1")
    return HoldSlot(slot_id=slot_id, customer=customer, idempotency_key=key or str(uuid.uuid4()))


async def _refusal(call: Awaitable[Any]) -> BookingError:
    with anyio.fail_after(5), pytest.raises(BookingError) as excinfo:
        await call
    return excinfo.value


def _wire(error: BookingError) -> str:
    return json.dumps(failure(error, META, render_booking), sort_keys=True)


async def test_another_principal_reads_a_booking_exactly_as_an_unknown_id(
    service: BookingService,
) -> None:
    booking = await service.hold_slot(_hold_command(), ALICE)
    assert booking.owner == f"{ISSUER} alice"
    unknown_id = f"booking-{'0' * 32}"

    unknown = _wire(await _refusal(service.get_booking(GetBooking(unknown_id), BOB)))
    for intruder in (BOB, OTHER_ALICE, CONTEXT):
        foreign = await _refusal(service.get_booking(GetBooking(booking.booking_id), intruder))
        assert foreign.code == "BOOKING_NOT_FOUND"
        # Byte for byte the unknown id's answer, but for the id the caller itself sent.
        assert _wire(foreign) == unknown.replace(unknown_id, booking.booking_id)
    assert await service.get_booking(GetBooking(booking.booking_id), ALICE) == booking


async def test_another_principal_cannot_confirm_and_the_owner_still_can(
    service: BookingService, clock: MutableClock, payments: FakePayments
) -> None:
    booking = await service.hold_slot(_hold_command(), ALICE)
    clock.advance(30)
    payments.script(booking.booking_id, answer(booking, "PAID", paid_at=clock.now()))
    command = ConfirmBooking(
        booking_id=booking.booking_id,
        expected_version=1,
        idempotency_key=str(uuid.uuid4()),
        human_approval=approval(booking, clock.now()),
    )

    refused = await _refusal(service.confirm_booking(command, BOB))

    assert refused.code == "BOOKING_NOT_FOUND"
    assert refused.booking is None  # no snapshot of someone else's booking
    assert payments.calls == []  # refused before the payment service is asked
    confirmed = await service.confirm_booking(command, ALICE)
    assert confirmed.status is BookingStatus.CONFIRMED
    # Bob replaying Alice's key is his own first request: still not found, nothing leaks.
    again = await _refusal(service.confirm_booking(command, BOB))
    assert again.code == "BOOKING_NOT_FOUND"


async def test_a_list_shows_only_the_callers_bookings(service: BookingService) -> None:
    alices = await service.hold_slot(_hold_command("slot-ai-001", key="key-1"), ALICE)
    bobs = await service.hold_slot(_hold_command("slot-law-001", key="key-1"), BOB)
    every = ListBookings(limit=10)

    assert _ids(await service.list_bookings(every, ALICE)) == [alices.booking_id]
    assert _ids(await service.list_bookings(every, BOB)) == [bobs.booking_id]
    assert _ids(await service.list_bookings(every, OTHER_ALICE)) == []
    assert _ids(await service.list_bookings(every, CONTEXT)) == []
    by_key = ListBookings(limit=10, idempotency_key="key-1")
    assert _ids(await service.list_bookings(by_key, BOB)) == [bobs.booking_id]


async def test_one_idempotency_key_used_by_two_principals_makes_two_holds(
    service: BookingService,
) -> None:
    key = str(uuid.uuid4())
    alices = await service.hold_slot(_hold_command("slot-ai-001", key), ALICE)
    # The same key with other arguments: for Alice a conflict, for Bob a first request.
    conflict = await _refusal(service.hold_slot(_hold_command("slot-law-001", key), ALICE))
    assert conflict.code == "IDEMPOTENCY_CONFLICT"
    bobs = await service.hold_slot(_hold_command("slot-law-001", key), BOB)
    assert bobs.booking_id != alices.booking_id
    assert bobs.owner == f"{ISSUER} bob"
    # Each replay answers its own principal's booking.
    assert await service.hold_slot(_hold_command("slot-ai-001", key), ALICE) == alices
    assert await service.hold_slot(_hold_command("slot-law-001", key), BOB) == bobs
    # And the same key and arguments by a third principal is refused by the slot, not replayed.
    taken = await _refusal(service.hold_slot(_hold_command("slot-ai-001", key), OTHER_ALICE))
    assert taken.code == "SLOT_UNAVAILABLE"


async def test_the_local_principal_owns_what_it_held(service: BookingService) -> None:
    booking = await service.hold_slot(_hold_command(), CONTEXT)
    assert CONTEXT.principal == LOCAL
    assert booking.owner == "local"
    assert await service.get_booking(GetBooking(booking.booking_id), CONTEXT) == booking
    refused = await _refusal(service.get_booking(GetBooking(booking.booking_id), ALICE))
    assert refused.code == "BOOKING_NOT_FOUND"


def _ids(page: BookingPage) -> list[str]:
    return [booking.booking_id for booking in page.bookings]
