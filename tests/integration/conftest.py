"""Fixtures of the service tests: a movable clock, scripted payments and the service on ``store``.

``store`` is the root conftest's SQLite store unless a module defines its own (for example one
parametrized over ``tests.store_engines.ENGINES``).
"""

from __future__ import annotations

import pytest

from expert_booking.ports import BookingStore, Clock, PaymentQueryPort
from expert_booking.services import BookingService
from tests.fakes import POLICY, FakePayments, MutableClock


@pytest.fixture
def clock() -> MutableClock:
    return MutableClock()


@pytest.fixture
def payments() -> FakePayments:
    return FakePayments()


@pytest.fixture
def service(store: BookingStore, clock: Clock, payments: PaymentQueryPort) -> BookingService:
    """The service on ``store``, ``clock`` and ``payments`` (a module may override each)."""
    return BookingService(store=store, payments=payments, clock=clock, policy=POLICY)
