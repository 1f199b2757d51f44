"""The benchmark's verdict rules: PASS or FAIL by the median, ``~`` when the interval straddles."""

from __future__ import annotations

from typing import Any

from harness.bench_report import _checks, _compare_with_baseline, median_ci


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
