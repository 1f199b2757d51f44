"""The slot-search page cache (``slot_cache``): lifetime, bound, and the generation rule."""

from __future__ import annotations

from datetime import timedelta

from expert_booking.slot_cache import SlotSearchCache
from tests.fakes import T0

LATER = T0 + timedelta(seconds=5)


def test_a_page_is_served_until_its_deadline_and_not_at_it() -> None:
    cache: SlotSearchCache[str] = SlotSearchCache()
    cache.put("q", "page", LATER, cache.generation)
    assert cache.get("q", LATER - timedelta(microseconds=1)) == "page"
    assert cache.get("q", LATER) is None
    # Gone once expired, even for a clock read earlier again.
    assert cache.get("q", T0) is None


def test_the_cache_never_holds_more_than_its_bound() -> None:
    cache: SlotSearchCache[str] = SlotSearchCache(max_entries=2)
    cache.put("a", "page a", LATER, cache.generation)
    cache.put("b", "page b", LATER, cache.generation)
    assert (cache.get("a", T0), cache.get("b", T0)) == ("page a", "page b")
    cache.put("c", "page c", LATER, cache.generation)  # full: the older pages are dropped
    assert (cache.get("a", T0), cache.get("b", T0), cache.get("c", T0)) == (None, None, "page c")


def test_the_default_cache_holds_1024_pages() -> None:
    cache: SlotSearchCache[int] = SlotSearchCache()
    for n in range(1024):
        cache.put(n, n, LATER, cache.generation)
    assert all(cache.get(n, T0) == n for n in range(1024))
    cache.put(1024, 1024, LATER, cache.generation)
    assert (cache.get(0, T0), cache.get(1024, T0)) == (None, 1024)


def test_a_page_read_before_an_invalidation_is_not_stored_after_it() -> None:
    cache: SlotSearchCache[str] = SlotSearchCache()
    cache.put("q", "old page", LATER, cache.generation)
    read_at = cache.generation
    cache.invalidate()
    assert cache.get("q", T0) is None
    cache.put("q", "stale page", LATER, read_at)
    assert cache.get("q", T0) is None
    cache.put("q", "new page", LATER, cache.generation)
    assert cache.get("q", T0) == "new page"
    # Every invalidation starts a new generation, not only the first one.
    between = cache.generation
    cache.invalidate()
    cache.put("q", "page read between", LATER, between)
    assert cache.get("q", T0) is None


def test_news_of_a_stale_page_drops_the_pages_only_if_one_shows_it() -> None:
    cache: SlotSearchCache[str] = SlotSearchCache()
    cache.put("q", "lists slot-a", LATER, cache.generation)
    cache.invalidate_if_any(lambda page: "slot-b" in page)
    assert cache.get("q", T0) == "lists slot-a"
    cache.invalidate_if_any(lambda page: "slot-a" in page)
    assert cache.get("q", T0) is None


def test_a_page_read_before_news_of_a_stale_page_is_not_stored_after_it() -> None:
    """A search in flight may show what the news says is gone, whatever is cached now."""
    cache: SlotSearchCache[str] = SlotSearchCache()
    before_invalidation = cache.generation
    cache.invalidate()
    before_news = cache.generation
    cache.invalidate_if_any(lambda _page: False)  # nothing cached shows it
    cache.put("q", "page read before the news", LATER, before_news)
    cache.put("r", "page read before the invalidation", LATER, before_invalidation)
    assert (cache.get("q", T0), cache.get("r", T0)) == (None, None)
