"""How the use cases run a write transaction and keep the slot-search cache true after it.

One instance per service, shared by every write use case (hold, confirm, cancel, reschedule) and
the reads that fall back to a releasing transaction; the service's searches read and fill the
same cache.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from expert_booking.domain.errors import BookingError
from expert_booking.domain.model import Slot
from expert_booking.ports import BookingStore, Transaction

# The services' logger: operators filter on it, and the line is the use case's.
logger = logging.getLogger("expert_booking.services")

T = TypeVar("T")


class SlotListing(Protocol):
    """A cached search page: what ``slot_was_taken`` looks into."""

    @property
    def slots(self) -> Sequence[Slot]: ...


class SlotPages(Protocol):
    """What ``Writes`` does to the slot-search cache (``slot_cache.SlotSearchCache``)."""

    def invalidate(self) -> None: ...

    def invalidate_if_any(self, stale: Callable[[SlotListing], bool]) -> None: ...


class Writes:
    """``BookingStore.run`` for writes, and the slot-search cache dropped when they change it."""

    def __init__(self, store: BookingStore, cache: SlotPages) -> None:
        self._store = store
        self._cache = cache

    async def run_write(self, work: Callable[[Transaction], T]) -> T:
        """``store.run(work)``; a caller that goes away still gets the cache dropped after it.

        A started transaction runs to its end even when its caller is cancelled, and may
        commit a change then. So the store call is shielded from the caller's cancellation,
        and the cache is dropped once it has finished: dropping it at the cancellation would
        let a search between then and the commit cache the old state again.
        """
        pending = asyncio.ensure_future(self._store.run(work))
        try:
            return await asyncio.shield(pending)
        except asyncio.CancelledError:
            pending.add_done_callback(self._drop_cache_after)
            raise

    def _drop_cache_after(self, finished: asyncio.Future[Any]) -> None:
        self._cache.invalidate()
        error = None if finished.cancelled() else finished.exception()
        if error is not None and not isinstance(error, BookingError):
            # Nobody awaits this outcome any more: an unexpected failure is logged here.
            logger.error("transaction of a cancelled request failed", exc_info=error)

    def after_write(self, *, released: int, changed: bool) -> None:
        """Drop the slot-search cache when a transaction released or changed a booking."""
        if released or changed:
            self._cache.invalidate()

    def slot_was_taken(self, slot_id: str) -> None:
        """Drop the slot-search cache if a cached page lists ``slot_id``, which a write found taken.

        Another process took it (this one's writes drop the cache themselves); without this
        the same search would go on listing it until the cache's lifetime ran out.
        """
        self._cache.invalidate_if_any(
            lambda page: any(slot.slot_id == slot_id for slot in page.slots)
        )
