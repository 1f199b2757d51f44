"""The in-process quota counter at its boundaries, with an injected monotonic clock."""

from __future__ import annotations

import pytest

from expert_booking.access.ports import QuotaDecision, QuotaLimit, QuotaLimits
from expert_booking.adapters.quota_memory import InProcessQuotaCounter


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def counter(caller: int = 30, total: int = 300) -> tuple[InProcessQuotaCounter, FakeClock]:
    clock = FakeClock()
    return InProcessQuotaCounter(QuotaLimits(caller, total), clock=clock), clock


def test_the_30th_call_of_a_caller_is_admitted_and_the_31st_refused() -> None:
    quota, _ = counter()
    decisions = [quota.admit_now("alice") for _ in range(30)]
    assert all(decision.admitted for decision in decisions)
    assert [decision.remaining for decision in decisions] == list(range(29, -1, -1))
    refused = quota.admit_now("alice")
    assert refused == QuotaDecision(
        remaining=0, refused_by=QuotaLimit.CALLER, retry_after_seconds=60
    )


def test_other_callers_are_not_affected_by_one_callers_limit() -> None:
    quota, _ = counter()
    for _ in range(30):
        quota.admit_now("alice")
    assert not quota.admit_now("alice").admitted
    assert quota.admit_now("bob") == QuotaDecision(remaining=29)


def test_the_300th_call_overall_is_admitted_and_the_301st_refused_for_everyone() -> None:
    quota, _ = counter()
    for index in range(300):
        assert quota.admit_now(f"caller-{index % 20}").admitted, index
    refused = quota.admit_now("newcomer")
    assert refused.refused_by is QuotaLimit.GLOBAL
    assert refused.retry_after_seconds == 60
    assert not quota.admit_now("caller-0").admitted


def test_an_admission_stops_counting_exactly_60_seconds_later() -> None:
    quota, clock = counter()
    quota.admit_now("alice")
    clock.now += 10
    for _ in range(29):
        quota.admit_now("alice")
    clock.now += 49.5
    refused = quota.admit_now("alice")
    assert not refused.admitted
    assert refused.retry_after_seconds == 1
    clock.now += 0.5  # exactly 60 s after the first call: it alone stops counting
    assert quota.admit_now("alice") == QuotaDecision(remaining=0)
    assert not quota.admit_now("alice").admitted


def test_no_60_second_span_admits_more_than_the_limit_across_a_minute_edge() -> None:
    """A fixed window would admit 30 just before its edge and 30 more just after."""
    quota, clock = counter()
    clock.now = 1059.0  # one second before a fixed window would roll over
    assert all(quota.admit_now("alice").admitted for _ in range(30))
    clock.now = 1060.5
    assert not quota.admit_now("alice").admitted
    clock.now = 1118.999
    assert not quota.admit_now("alice").admitted
    clock.now = 1119.0
    assert quota.admit_now("alice").admitted


def test_retry_after_counts_to_when_the_oldest_counted_call_leaves_the_window() -> None:
    quota, clock = counter(caller=3)
    quota.admit_now("alice")
    clock.now += 10
    quota.admit_now("alice")
    quota.admit_now("alice")
    clock.now += 5.2
    assert quota.admit_now("alice").retry_after_seconds == 45  # 60 - 15.2, rounded up


def test_refused_calls_count_nothing() -> None:
    quota, clock = counter(caller=2)
    quota.admit_now("alice")
    quota.admit_now("alice")
    for _ in range(100):
        assert not quota.admit_now("alice").admitted
    clock.now += 60
    assert quota.admit_now("alice").admitted


def test_remaining_is_the_smaller_of_the_callers_and_the_global_allowance() -> None:
    quota, _ = counter(caller=30, total=5)
    for _ in range(3):
        quota.admit_now("bob")
    assert quota.admit_now("alice") == QuotaDecision(remaining=1)


def test_when_both_limits_are_exhausted_the_caller_limit_is_named_with_the_longer_wait() -> None:
    quota, clock = counter(caller=2, total=3)
    quota.admit_now("bob")
    clock.now += 20
    quota.admit_now("alice")
    quota.admit_now("alice")
    refused = quota.admit_now("alice")
    assert refused.refused_by is QuotaLimit.CALLER
    assert refused.retry_after_seconds == 60  # alice's own oldest call: 60 s; global's: 40 s


def test_idle_callers_are_forgotten_so_memory_stays_bounded_by_the_global_limit() -> None:
    quota, clock = counter(caller=1, total=10)
    for index in range(10):
        quota.admit_now(f"c{index}")
    clock.now += 61
    for index in range(10, 15):
        quota.admit_now(f"c{index}")
    assert len(quota._callers) <= 10
    for index in range(15, 30):
        clock.now += 7
        quota.admit_now(f"c{index}")
    assert len(quota._callers) <= 10


@pytest.mark.anyio
async def test_the_port_method_gives_the_same_decisions() -> None:
    quota, _ = counter(caller=1)
    assert (await quota.admit("alice")).admitted
    assert (await quota.admit("alice")).refused_by is QuotaLimit.CALLER
