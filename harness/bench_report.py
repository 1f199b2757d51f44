"""The benchmark's summary and printed table: medians over rounds, ratios to the floor, verdicts.

Targets (issue: evidence, item 5): read tools p50 at concurrency 1 at most 1.5x the floor's
no-op ``tools/call`` and throughput at concurrency 16 at least 0.6x; hold at least 0.4x; cold
start at most 2 s. A verdict uses the quiet rounds when there are any.
"""

from __future__ import annotations

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
QUIET_FOREIGN_CORES = 0.25  # a round counts as quiet when other tenants used less than this


@dataclass
class Row:
    config: Config
    runs: dict[int, list[LoadResult]] = field(default_factory=lambda: {1: [], 16: []})


def _median(values: list[float | None]) -> float | None:
    clean = [value for value in values if value is not None]
    return statistics.median(clean) if clean else None


def summarize(rows: dict[str, Row]) -> list[dict[str, Any]]:
    floor = rows["floor noop tools/call"].runs
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
        pairs = list(zip(row.runs[1], floor[1], strict=True))
        entry["p50_ratio_c1"] = _median(
            [run.percentile_ms(50) / base.percentile_ms(50) for run, base in pairs]
        )
        pairs16 = list(zip(row.runs[16], floor[16], strict=True))
        entry["rps_ratio_c16"] = _median(
            [run.throughput / base.throughput for run, base in pairs16]
        )
        entry["cpu_ratio_c16"] = _median(
            [
                run.server_cpu_us_per_request / base.server_cpu_us_per_request
                for run, base in pairs16
                if run.server_cpu_us_per_request and base.server_cpu_us_per_request
            ]
        )
        quiet = [
            index
            for index in range(len(floor[16]))
            if all(
                (run.foreign_cpu or 0.0) <= QUIET_FOREIGN_CORES
                for run in (
                    row.runs[1][index],
                    row.runs[16][index],
                    floor[1][index],
                    floor[16][index],
                )
            )
        ]
        entry["quiet_rounds"] = quiet
        entry["p50_ratio_c1_quiet"] = _median(
            [pairs[i][0].percentile_ms(50) / pairs[i][1].percentile_ms(50) for i in quiet]
        )
        entry["rps_ratio_c16_quiet"] = _median(
            [pairs16[i][0].throughput / pairs16[i][1].throughput for i in quiet]
        )
        entry["target"], entry["pass"] = _verdict(entry)
        table.append(entry)
    return table


def _merge(counters: list[dict[str, int]]) -> dict[str, int]:
    merged: dict[str, int] = {}
    for counter in counters:
        for key, value in counter.items():
            merged[key] = merged.get(key, 0) + value
    return merged


def _verdict(entry: dict[str, Any]) -> tuple[str, bool | None]:
    kind = entry["kind"]
    if entry["quiet_rounds"]:
        entry = {
            **entry,
            "p50_ratio_c1": entry["p50_ratio_c1_quiet"],
            "rps_ratio_c16": entry["rps_ratio_c16_quiet"],
        }
    if kind == "read":
        ok = (entry["p50_ratio_c1"] or 99) <= READ_P50_MAX_RATIO and (
            entry["rps_ratio_c16"] or 0
        ) >= READ_RPS_MIN_RATIO
        return f"p50 <= {READ_P50_MAX_RATIO}x, req/s >= {READ_RPS_MIN_RATIO}x", ok
    if kind == "hold":
        ok = (entry["rps_ratio_c16"] or 0) >= HOLD_RPS_MIN_RATIO
        return f"req/s >= {HOLD_RPS_MIN_RATIO}x", ok
    return "-", None


def print_table(table: list[dict[str, Any]], extra: dict[str, Any]) -> None:
    header = (
        f"{'configuration':<36} {'c1 p50':>7} {'c1 p99':>7} {'c1 r/s':>7} "
        f"{'c16 p50':>7} {'c16 p99':>7} {'c16 r/s':>7} {'cpu/req':>7} "
        f"{'p50 x':>6} {'r/s x':>6} {'cpu x':>6} {'p50 xq':>6} {'r/s xq':>6} "
        f"{'lg':>4} {'frgn':>4}  verdict"
    )
    print(header)
    print("-" * len(header))
    for entry in table:
        c1, c16 = entry["c1"], entry["c16"]
        verdict = {True: "PASS", False: "MISS", None: ""}[entry["pass"]]
        print(
            f"{entry['name']:<36} {_f(c1['p50_ms'])} {_f(c1['p99_ms'])} {_f(c1['req_per_s'], 0)} "
            f"{_f(c16['p50_ms'])} {_f(c16['p99_ms'])} {_f(c16['req_per_s'], 0)} "
            f"{_f(c16['server_cpu_us_per_req'], 0)} {_f(entry['p50_ratio_c1'], 2, 6)} "
            f"{_f(entry['rps_ratio_c16'], 2, 6)} {_f(entry['cpu_ratio_c16'], 2, 6)} "
            f"{_f(entry['p50_ratio_c1_quiet'], 2, 6)} {_f(entry['rps_ratio_c16_quiet'], 2, 6)} "
            f"{_f(c16['loadgen_cpu_share'], 1, 4)} {_f(c16['foreign_cpu_cores'], 1, 4)}  "
            f"{verdict} {entry['target'] if entry['target'] != '-' else ''}"
        )
    print("(ms; r/s = requests/s; cpu/req = server CPU us per request at c=16; x = ratio to the")
    print(" floor's no-op tools/call in the same round, median over rounds; lg = load generator")
    print(" CPU share at c=16 (1.0 = its core saturated); frgn = cores used by other tenants;")
    print(
        f" xq = the same ratios over quiet rounds only (frgn <= {QUIET_FOREIGN_CORES} in all four"
    )
    print(" runs of the pair); the verdict uses xq when a quiet round exists)")
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


def _f(value: float | None, digits: int = 2, width: int = 7) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.{digits}f}"
