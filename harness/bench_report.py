"""The benchmark's summary and printed table: medians over rounds, ratios to the floor, verdicts.

Targets: every read tool (a hold replay included) p50 at concurrency 1 at most 1.5x the bare-SDK
floor's no-op ``tools/call`` and throughput at concurrency 16 at least 0.6x; a real hold at
least 0.4x; cold start at most 2 s. An authenticated, quota-counted read (kind ``auth``) is
judged against its anonymous configuration (``Config.anonymous``) of the same round instead
(issue 14 item 7): p50 at concurrency 1 at most 1.15x, throughput at concurrency 16 at least
0.85x.

A ratio is taken per round (each configuration against the floor of the same round); each
target's verdict is PASS or FAIL by the median over the rounds, printed with the median's
distribution-free 95% confidence interval (order statistics of the binomial, ``median_ci``) and
marked ``~`` when that interval straddles the line, i.e. when more rounds, or a quieter
machine, could turn it. With at least ``MIN_QUIET_ROUNDS`` quiet rounds the verdict reads only
those.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.bench import Config
    from harness.loadgen import LoadResult

READ_P50_MAX_RATIO = 1.5
READ_RPS_MIN_RATIO = 0.6
HOLD_RPS_MIN_RATIO = 0.4
COLD_START_MAX_S = 2.0
AUTH_P50_MAX_RATIO = 1.15
AUTH_RPS_MIN_RATIO = 0.85
QUIET_FOREIGN_CORES = 0.25  # a round counts as quiet when other tenants used less than this
MIN_QUIET_ROUNDS = 5
CONFIDENCE = 0.95


@dataclass
class Row:
    config: Config
    runs: dict[int, list[LoadResult]] = field(default_factory=lambda: {1: [], 16: []})


def _median(values: list[float | None]) -> float | None:
    clean = [value for value in values if value is not None]
    return statistics.median(clean) if clean else None


def _ratios(row: Row, base: Row) -> tuple[list[float], list[float]]:
    """Per round: ``row``'s p50 at c=1 over ``base``'s, and its req/s at c=16 over ``base``'s."""
    p50 = [
        run.percentile_ms(50) / other.percentile_ms(50)
        for run, other in zip(row.runs[1], base.runs[1], strict=True)
    ]
    rps = [
        run.throughput / other.throughput
        for run, other in zip(row.runs[16], base.runs[16], strict=True)
    ]
    return p50, rps


def _quiet_rounds(rows: list[Row]) -> list[int]:
    """The rounds in which other tenants stayed under ``QUIET_FOREIGN_CORES`` in all of ``rows``."""
    return [
        index
        for index in range(len(rows[0].runs[16]))
        if all(
            (row.runs[concurrency][index].foreign_cpu or 0.0) <= QUIET_FOREIGN_CORES
            for row in rows
            for concurrency in (1, 16)
        )
    ]


def summarize(rows: dict[str, Row]) -> list[dict[str, Any]]:
    floor_row = rows["floor noop tools/call"]
    floor = floor_row.runs
    table = []
    for row in rows.values():
        entry: dict[str, Any] = {"name": row.config.name, "server": row.config.server}
        entry["kind"] = row.config.kind
        for concurrency, runs in row.runs.items():
            entry[f"c{concurrency}"] = {
                "p50_ms": _median([run.percentile_ms(50) for run in runs]),
                "p99_ms": _median([run.percentile_ms(99) for run in runs]),
                "req_per_s": _median([run.throughput for run in runs]),
                "server_cpu_us_per_req": _median([run.server_cpu_us_per_request for run in runs]),
                "loadgen_cpu_share": _median([run.client_cpu_share for run in runs]),
                "foreign_cpu_cores": _median([run.foreign_cpu for run in runs]),
                "requests": sum(run.count for run in runs),
                "failures": _merge([run.failures for run in runs]),
                "runs": [run.summary() for run in runs],
            }
        p50_ratios, rps_ratios = _ratios(row, floor_row)
        entry["p50_ratio_c1_rounds"] = [round(r, 3) for r in p50_ratios]
        entry["rps_ratio_c16_rounds"] = [round(r, 3) for r in rps_ratios]
        entry["cpu_ratio_c16"] = _median(
            [
                run.server_cpu_us_per_request / base.server_cpu_us_per_request
                for run, base in zip(row.runs[16], floor[16], strict=True)
                if run.server_cpu_us_per_request and base.server_cpu_us_per_request
            ]
        )
        anonymous = rows.get(row.config.anonymous or "")
        quiet = _quiet_rounds([row, floor_row] + ([anonymous] if anonymous else []))
        entry["quiet_rounds"] = quiet
        used = quiet if len(quiet) >= MIN_QUIET_ROUNDS else list(range(len(p50_ratios)))
        entry["verdict_rounds"] = "quiet" if used is quiet else "all"
        entry["p50_ratio_c1"] = _median([p50_ratios[i] for i in used])
        entry["rps_ratio_c16"] = _median([rps_ratios[i] for i in used])
        entry["p50_ratio_c1_ci"] = median_ci([p50_ratios[i] for i in used])
        entry["rps_ratio_c16_ci"] = median_ci([rps_ratios[i] for i in used])
        if anonymous is not None:
            entry.update(_versus_anonymous(row, anonymous, used))
        entry["checks"] = _checks(entry)
        entry["pass"] = all(c["pass"] for c in entry["checks"]) if entry["checks"] else None
        table.append(entry)
    _compare_with_baseline(table)
    return table


def _versus_anonymous(row: Row, anonymous: Row, used: list[int]) -> dict[str, Any]:
    """An authenticated ``row`` over the ``anonymous`` one, round by round (kind ``auth``)."""
    p50, rps = _ratios(row, anonymous)
    return {
        "anonymous": anonymous.config.name,
        "anon_p50_ratio_c1_rounds": [round(r, 3) for r in p50],
        "anon_rps_ratio_c16_rounds": [round(r, 3) for r in rps],
        "anon_p50_ratio_c1": _median([p50[i] for i in used]),
        "anon_rps_ratio_c16": _median([rps[i] for i in used]),
        "anon_p50_ratio_c1_ci": median_ci([p50[i] for i in used]),
        "anon_rps_ratio_c16_ci": median_ci([rps[i] for i in used]),
    }


BASELINE_SUFFIX = " @baseline"


def _compare_with_baseline(table: list[dict[str, Any]]) -> None:
    """A/B: each configuration against its ``--baseline`` twin, round by round (same floor)."""
    by_name = {entry["name"]: entry for entry in table}
    for entry in table:
        twin = by_name.get(entry["name"] + BASELINE_SUFFIX)
        if twin is None:
            continue
        p50, rps = (
            [a / b for a, b in zip(entry[key], twin[key], strict=True)]
            for key in ("p50_ratio_c1_rounds", "rps_ratio_c16_rounds")
        )
        entry["vs_baseline"] = {
            "p50_c1": _median(list(p50)),
            "p50_c1_ci": median_ci(p50),
            "rps_c16": _median(list(rps)),
            "rps_c16_ci": median_ci(rps),
        }


def median_ci(values: list[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """A distribution-free confidence interval for the median of ``values``.

    The interval between the k-th smallest and the k-th largest value, with the largest k whose
    coverage (the probability that the true median lies inside, from the binomial distribution
    with p = 1/2) is at least ``confidence``; with too few values for that, the full range. It
    assumes only that the rounds are independent draws, which interleaving approximates.
    """
    if not values:
        return None
    ordered = sorted(values)
    n = len(ordered)
    k = 1
    while k < n // 2 and _coverage(n, k + 1) >= confidence:
        k += 1
    return round(ordered[k - 1], 3), round(ordered[n - k], 3)


def _coverage(n: int, k: int) -> float:
    """P(x_(k) <= median <= x_(n-k+1)) for n independent draws."""
    below = sum(math.comb(n, i) for i in range(k)) / (1 << n)
    return 1 - 2 * below


def _merge(counters: list[dict[str, int]]) -> dict[str, int]:
    merged: dict[str, int] = {}
    for counter in counters:
        for key, value in counter.items():
            merged[key] = merged.get(key, 0) + value
    return merged


def _checks(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The targets of ``entry``'s kind, each judged by the median, its interval beside it."""
    kind = entry["kind"]
    wanted: list[tuple[str, str, str, float]] = []  # metric, ratio key, direction, line
    if kind == "read":
        wanted = [
            ("c=1 p50", "p50_ratio_c1", "<=", READ_P50_MAX_RATIO),
            ("c=16 r/s", "rps_ratio_c16", ">=", READ_RPS_MIN_RATIO),
        ]
    elif kind == "hold":
        wanted = [("c=16 r/s", "rps_ratio_c16", ">=", HOLD_RPS_MIN_RATIO)]
    elif kind == "auth" and "anonymous" in entry:
        wanted = [
            ("c=1 p50 auth/anon", "anon_p50_ratio_c1", "<=", AUTH_P50_MAX_RATIO),
            ("c=16 r/s auth/anon", "anon_rps_ratio_c16", ">=", AUTH_RPS_MIN_RATIO),
        ]
    checks = []
    for metric, key, direction, line in wanted:
        median, ci = entry[key], entry[f"{key}_ci"]
        meets = median is not None and (median <= line if direction == "<=" else median >= line)
        sure = ci is not None and (
            (ci[1] <= line if direction == "<=" else ci[0] >= line)
            if meets
            else (ci[0] > line if direction == "<=" else ci[1] < line)
        )
        checks.append(
            {
                "metric": metric,
                "ratio": median,
                "ci": ci,
                "target": f"{direction} {line}",
                "pass": meets,
                "sure": sure,
            }
        )
    return checks


def print_table(table: list[dict[str, Any]], extra: dict[str, Any]) -> None:
    header = (
        f"{'configuration':<36} {'c1 p50':>7} {'c1 r/s':>7} {'c16 p99':>7} {'c16 r/s':>7} "
        f"{'cpu/req':>7} {'p50 x [95% CI]':>19} {'r/s x [95% CI]':>19} {'cpu x':>6} "
        f"{'lg':>4} {'frgn':>4}  verdict"
    )
    print(header)
    print("-" * len(header))
    for entry in table:
        c1, c16 = entry["c1"], entry["c16"]
        verdict = _verdict_text(entry)
        print(
            f"{entry['name']:<36} {_f(c1['p50_ms'])} {_f(c1['req_per_s'], 0)} "
            f"{_f(c16['p99_ms'])} {_f(c16['req_per_s'], 0)} "
            f"{_f(c16['server_cpu_us_per_req'], 0)} "
            f"{_ratio(entry['p50_ratio_c1'], entry['p50_ratio_c1_ci'])} "
            f"{_ratio(entry['rps_ratio_c16'], entry['rps_ratio_c16_ci'])} "
            f"{_f(entry['cpu_ratio_c16'], 2, 6)} "
            f"{_f(c16['loadgen_cpu_share'], 1, 4)} {_f(c16['foreign_cpu_cores'], 1, 4)}  "
            f"{verdict}"
        )
    print("(ms; r/s = requests/s; cpu/req = server CPU us per request at c=16; x = ratio to the")
    print(" bare-SDK floor's no-op tools/call in the same round, median over rounds, with the")
    print(" median's 95% confidence interval over the rounds the verdict reads; lg = load")
    print(" generator CPU share at c=16 (1.0 = its core saturated); frgn = cores used by other")
    print(f" tenants; the verdict reads the quiet rounds (frgn <= {QUIET_FOREIGN_CORES} in all")
    print(f" four runs of the pair) when there are {MIN_QUIET_ROUNDS} or more, else all rounds)")
    print_verdicts(table)
    print_versus_anonymous(table)
    print_baseline_comparison(table)
    cold = extra["cold_start"]
    print(
        f"cold start (CLI, fresh db, median of {cold['spawns']}): "
        f"ready {cold['ready_s_median']:.3f} s"
        f", first tools/list {cold['first_tools_list_s_median']:.3f} s"
        f" (stack import floor {cold['stack_import_floor_s_median']:.3f} s;"
        f" warm-up spawn {cold['first_spawn_s']:.3f} s, compiling only in a fresh venv)"
        f"  {'PASS' if cold['pass'] else 'MISS'} <= {COLD_START_MAX_S} s"
    )
    rss = extra["peak_rss_kib"]
    print(
        f"peak RSS: real {rss.get('real')} KiB, real+slots {rss.get('real+slots')} KiB, "
        f"floor {rss.get('floor')} KiB"
        + (f", real+oauth {rss['real+oauth']} KiB" if rss.get("real+oauth") else "")
    )
    size = extra["context_bytes"]
    print(
        f"instructions: {size['instructions_bytes']} B; "
        f"tools/list: {size['tools_list_model_bytes']} B model-visible "
        f"({size['tools_list_wire_bytes']} B on the wire); one booking: "
        f"{size['one_booking_model_bytes']} B model-visible in {len(size['steps'])} steps "
        f"({size['one_booking_wire_bytes']} B on the wire)"
    )
    problems = size.get("budget_problems") or []
    print(f"context budget (harness/context-budget.json): {'; '.join(problems) or 'PASS'}")
    print(f"placement: {extra['placement']}")


def _verdict_text(entry: dict[str, Any]) -> str:
    if entry["pass"] is None:
        return ""
    sure = all(check["sure"] for check in entry["checks"])
    return ("PASS" if entry["pass"] else "FAIL") + ("" if sure else "~")


def print_verdicts(table: list[dict[str, Any]]) -> None:
    """One line per target: the median ratio, its 95% interval, the line and PASS or FAIL."""
    print()
    print("verdicts (median ratio [95% CI] over the rounds read; to the bare-SDK floor, or")
    print(" auth/anon: the authenticated read over the same anonymous read of the same round):")
    passed = total = 0
    for entry in table:
        if not entry["checks"]:
            continue
        parts = []
        for check in entry["checks"]:
            total += 1
            passed += check["pass"]
            ci = check["ci"] or (float("nan"), float("nan"))
            parts.append(
                f"{check['metric']} {_f(check['ratio'], 2, 4)}x [{ci[0]:.2f}-{ci[1]:.2f}] "
                f"{check['target']} {'PASS' if check['pass'] else 'FAIL'}"
                f"{'' if check['sure'] else '~'}"
            )
        rounds = len(entry["quiet_rounds"]) if entry["verdict_rounds"] == "quiet" else None
        used = f"{rounds} quiet rounds" if rounds else f"all {len(entry['p50_ratio_c1_rounds'])}"
        print(f"  {entry['name']:<35} " + "   ".join(parts) + f"  ({used})")
    print(f"targets met: {passed}/{total}  (~: the interval straddles the line; more rounds or a")
    print(" quieter machine could turn that verdict)")


def print_versus_anonymous(table: list[dict[str, Any]]) -> None:
    """Each authenticated read over its anonymous twin, every round, then the median [CI]."""
    compared = [entry for entry in table if "anonymous" in entry]
    if not compared:
        return
    print()
    print("authenticated, quota-counted / anonymous, per round (-> median [95% CI] read):")
    for entry in compared:
        print(f"  {entry['name']} / {entry['anonymous']}")
        for label, key in (("c=1 p50", "anon_p50_ratio_c1"), ("c=16 r/s", "anon_rps_ratio_c16")):
            rounds = " ".join(f"{value:.2f}" for value in entry[f"{key}_rounds"])
            print(f"    {label:<8} {rounds}  -> {_ratio(entry[key], entry[f'{key}_ci']).strip()}")


def print_baseline_comparison(table: list[dict[str, Any]]) -> None:
    compared = [entry for entry in table if "vs_baseline" in entry]
    if not compared:
        return
    print()
    print("A/B against --baseline (this tree / baseline, per round, median [95% CI]):")
    for entry in compared:
        ab = entry["vs_baseline"]
        print(
            f"  {entry['name']:<34} c=1 p50 {_ratio(ab['p50_c1'], ab['p50_c1_ci'])}"
            f"   c=16 r/s {_ratio(ab['rps_c16'], ab['rps_c16_ci'])}"
        )


def _ratio(median: float | None, ci: tuple[float, float] | None) -> str:
    if median is None or ci is None:
        return f"{'-':>19}"
    return f"{median:5.2f} [{ci[0]:4.2f}-{ci[1]:4.2f}]".rjust(19)


def _f(value: float | None, digits: int = 2, width: int = 7) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.{digits}f}"
