"""The benchmark's verdict rules: PASS or FAIL by the median, ``~`` when the interval straddles."""

from __future__ import annotations

import random
from typing import Any

from harness.bench import CONFIGS, Config, groups
from harness.bench_report import (
    MIN_QUIET_ROUNDS,
    Row,
    _checks,
    _compare_with_baseline,
    median_ci,
    summarize,
)
from harness.loadgen import LoadResult, envelope_ok


def _read_entry(
    p50: float, p50_ci: tuple[float, float], rps: float, rps_ci: tuple[float, float]
) -> dict[str, Any]:
    return {
        "kind": "read",
        "p50_ratio_c1": p50,
        "p50_ratio_c1_ci": p50_ci,
        "rps_ratio_c16": rps,
        "rps_ratio_c16_ci": rps_ci,
    }


def test_a_read_tool_is_judged_by_its_median_and_marked_unsure_when_the_interval_straddles() -> (
    None
):
    p50, rps = _checks(_read_entry(1.4, (1.3, 1.6), 0.55, (0.50, 0.58)))

    assert (p50["metric"], p50["pass"], p50["sure"]) == ("c=1 p50", True, False)
    assert (rps["metric"], rps["pass"], rps["sure"]) == ("c=16 r/s", False, True)


def test_a_verdict_whose_interval_is_on_one_side_is_sure() -> None:
    p50, rps = _checks(_read_entry(1.2, (1.1, 1.3), 0.7, (0.65, 0.8)))

    assert (p50["pass"], p50["sure"], rps["pass"], rps["sure"]) == (True, True, True, True)


def test_configurations_without_a_target_have_no_checks() -> None:
    assert _checks({"kind": "confirm"}) == []


def test_the_median_interval_of_nine_rounds_is_the_second_and_eighth_value() -> None:
    assert median_ci([float(v) for v in range(1, 10)]) == (2.0, 8.0)


def test_a_configuration_is_compared_with_its_baseline_twin_round_by_round() -> None:
    ours: dict[str, Any] = {
        "name": "call get_booking",
        "p50_ratio_c1_rounds": [1.2, 1.5, 1.8],
        "rps_ratio_c16_rounds": [0.6, 0.6, 0.9],
    }
    twin: dict[str, Any] = {
        "name": "call get_booking @baseline",
        "p50_ratio_c1_rounds": [1.5, 1.5, 1.5],
        "rps_ratio_c16_rounds": [0.5, 0.6, 0.6],
    }

    _compare_with_baseline([ours, twin])

    assert ours["vs_baseline"]["p50_c1"] == 1.0
    assert ours["vs_baseline"]["rps_c16"] == 1.2
    assert "vs_baseline" not in twin


def _run(concurrency: int, p50_ms: float, req_per_s: float, foreign: float = 0.0) -> LoadResult:
    """A measured window: 100 requests of ``p50_ms`` each over the time ``req_per_s`` gives."""
    elapsed = 100 / req_per_s
    return LoadResult(
        label="",
        concurrency=concurrency,
        latencies_s=[p50_ms / 1000] * 100,
        elapsed_s=elapsed,
        client_cpu_s=0.0,
        system_busy_s=foreign * elapsed,
    )


def _row(config: Config, rounds: list[tuple[float, float, float]]) -> Row:
    """``config`` measured once per round: (p50 ms at c=1, req/s at c=16, foreign cores)."""
    row = Row(config)
    for p50, rps, foreign in rounds:
        row.runs[1].append(_run(1, p50, 1000 / p50, foreign))
        row.runs[16].append(_run(16, p50, rps, foreign))
    return row


FLOOR = Config("floor noop tools/call", "floor", "floor", envelope_ok)
ANONYMOUS = Config("call get_booking", "real", "read", envelope_ok)
AUTHENTICATED = Config(
    "call get_booking (oauth+quota)", "real+oauth", "auth", envelope_ok, anonymous=ANONYMOUS.name
)


def _summary(
    anonymous: list[tuple[float, float, float]], authenticated: list[tuple[float, float, float]]
) -> dict[str, Any]:
    floor = [(0.5, 4000.0, 0.0)] * len(anonymous)
    rows = [_row(FLOOR, floor), _row(ANONYMOUS, anonymous), _row(AUTHENTICATED, authenticated)]
    table = summarize({row.config.name: row for row in rows})
    return {entry["name"]: entry for entry in table}[AUTHENTICATED.name]


def test_an_authenticated_read_is_judged_against_its_anonymous_twin_of_the_same_round() -> None:
    # The anonymous read slows down in round 2; the authenticated one tracks it: per round, the
    # authenticated read costs 1.1x the p50 and gives 0.8x the throughput.
    anonymous = [(1.0, 2000.0, 0.0), (2.0, 1000.0, 0.0), (1.0, 2000.0, 0.0)]
    authenticated = [(1.1, 1600.0, 0.0), (2.2, 800.0, 0.0), (1.1, 1600.0, 0.0)]

    entry = _summary(anonymous, authenticated)

    assert entry["anonymous"] == ANONYMOUS.name
    assert entry["anon_p50_ratio_c1_rounds"] == [1.1, 1.1, 1.1]
    assert entry["anon_rps_ratio_c16_rounds"] == [0.8, 0.8, 0.8]
    p50, rps = entry["checks"]
    assert (p50["metric"], p50["target"], p50["pass"]) == ("c=1 p50 auth/anon", "<= 1.15", True)
    assert (rps["metric"], rps["target"], rps["pass"]) == ("c=16 r/s auth/anon", ">= 0.85", False)
    assert entry["pass"] is False


def test_a_round_in_which_the_anonymous_twin_was_disturbed_is_not_quiet() -> None:
    rounds = MIN_QUIET_ROUNDS + 1
    anonymous = [(1.0, 2000.0, 0.0)] * rounds
    anonymous[0] = (1.0, 2000.0, 0.9)  # another tenant busy while the twin ran
    authenticated = [(1.05, 1900.0, 0.0)] * rounds

    entry = _summary(anonymous, authenticated)

    assert entry["quiet_rounds"] == list(range(1, rounds))
    assert entry["verdict_rounds"] == "quiet"
    assert entry["pass"] is True


def test_each_authenticated_configuration_is_measured_beside_its_anonymous_twin() -> None:
    order = list(CONFIGS)
    random.Random(7).shuffle(order)

    grouped = groups(order, random.Random(7))

    assert sorted(config.name for group in grouped for config in group) == sorted(
        config.name for config in CONFIGS
    )
    pairs = [group for group in grouped if len(group) == 2]
    authenticated = [config for config in CONFIGS if config.kind == "auth"]
    assert len(pairs) == len(authenticated) > 0
    for pair in pairs:
        (auth,) = [config for config in pair if config.kind == "auth"]
        assert {config.name for config in pair} == {auth.name, auth.anonymous}
    singles = [group[0].name for group in grouped if len(group) == 1]
    assert singles == [c.name for c in order if c.name in singles]  # the rest keep the order
