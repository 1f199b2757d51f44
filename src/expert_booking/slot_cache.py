"""Short-lived cache of slot-search pages, dropped on every booking write or expiry release."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Entry(Generic[T]):
    value: T
    valid_until: datetime


class SlotSearchCache(Generic[T]):
    """Per-process cache; entries never outlive the next hold expiry, so no release is missed.

    ``generation`` grows on every invalidation; a page computed before an invalidation is not
    stored afterwards (a search racing a hold cannot put a stale page back).
    """

    def __init__(self, max_entries: int = 1024) -> None:
        self._entries: dict[Hashable, _Entry[T]] = {}
        self._max_entries = max_entries
        self.generation = 0

    def get(self, key: Hashable, now: datetime) -> T | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if now >= entry.valid_until:
            del self._entries[key]
            return None
        return entry.value

    def put(self, key: Hashable, value: T, valid_until: datetime, generation: int) -> None:
        if generation != self.generation:
            return
        if len(self._entries) >= self._max_entries:
            self._entries.clear()
        self._entries[key] = _Entry(value, valid_until)

    def invalidate(self) -> None:
        self._entries.clear()
        self.generation += 1

    def invalidate_if_any(self, stale: Callable[[T], bool]) -> None:
        """Drop the entries when one is ``stale`` (it shows what is no longer so).

        ``generation`` grows either way: a value computed before the news (a search in flight,
        which may still show the same thing) is not stored afterwards.
        """
        if any(stale(entry.value) for entry in self._entries.values()):
            self._entries.clear()
        self.generation += 1
