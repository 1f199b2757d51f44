"""A request cancelled while its transaction waits: the transaction runs to its end, and only an
unexpected failure of it is logged (nobody awaits its outcome any more)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import pytest

from expert_booking.adapters.sqlite_store import SqliteBookingStore
from expert_booking.domain.errors import StorageBusyError
from expert_booking.domain.model import Customer
from expert_booking.ports import Transaction
from expert_booking.services import BookingService, HoldSlot
from tests.fakes import CONTEXT, POLICY, FakePayments, MutableClock

pytestmark = pytest.mark.anyio

T = TypeVar("T")


class _GatedStore:
    """The real store, except that its next transaction waits for ``gate`` and then ends
    with ``outcome`` (raised) instead of running, or runs as usual when ``outcome`` is None."""

    def __init__(self, inner: SqliteBookingStore, outcome: BaseException | None) -> None:
        self.inner = inner
        self.outcome = outcome
        self.gate = anyio.Event()
        self.task: asyncio.Task[Any] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def run(self, work: Callable[[Transaction], T]) -> T:
        self.task = asyncio.current_task()
        await self.gate.wait()
        if self.outcome is not None:
            raise self.outcome
        return await self.inner.run(work)


async def _errors_after_a_cancelled_hold(
    store: _GatedStore, caplog: pytest.LogCaptureFixture
) -> list[logging.LogRecord]:
    """Cancel a hold while its transaction waits, let the transaction end: what was logged."""
    service = BookingService(
        store=store, payments=FakePayments(), clock=MutableClock(), policy=POLICY
    )
    hold = HoldSlot("slot-ai-001", Customer("Ada", "ada@example.com"), str(uuid.uuid4()))
    with anyio.fail_after(5), caplog.at_level(logging.DEBUG):
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(service.hold_slot, hold, CONTEXT)
                await anyio.wait_all_tasks_blocked()
                scope.cancel()
        assert scope.cancelled_caught
        assert store.task is not None
        store.gate.set()
        # A task's done-callbacks run in the order they were added: the service added its own
        # at the cancellation, before asyncio.wait adds the one that wakes us, so it has run.
        await asyncio.wait([store.task])
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_cancelled_request_whose_transaction_fails_unexpectedly_is_logged(
    store: SqliteBookingStore, caplog: pytest.LogCaptureFixture
) -> None:
    failure = RuntimeError("disk went away")
    errors = await _errors_after_a_cancelled_hold(_GatedStore(store, failure), caplog)
    assert [(r.name, r.getMessage(), r.exc_info and r.exc_info[1]) for r in errors] == [
        ("expert_booking.services", "transaction of a cancelled request failed", failure)
    ]


@pytest.mark.parametrize(
    "outcome",
    [None, StorageBusyError(), asyncio.CancelledError()],
    ids=["committed", "refused", "cancelled"],
)
async def test_a_cancelled_request_logs_nothing_unless_its_transaction_failed(
    store: SqliteBookingStore, caplog: pytest.LogCaptureFixture, outcome: BaseException | None
) -> None:
    assert await _errors_after_a_cancelled_hold(_GatedStore(store, outcome), caplog) == []
