"""Benchmark: the real server against a floor server, measured in the same run, as ratios.

Usage::

    python -m harness.bench [--quick] [--out bench-results/report.json] [--rounds N]
                            [--window S] [--slots N] [--engine raw|httpx2] [--only TEXT]
                            [--baseline PYTHON]   # A/B: also the CLI of PYTHON's venv
    python -m harness.bench --inprocess [--requests N]     # server CPU/request, no sockets
    python -m harness.bench --profile "call hold_slot"     # cProfile one configuration

What runs (docs/perf-floor.md is the method):

* Three child processes with the CLI's uvicorn settings (uvloop + httptools, access log off,
  ``gc.freeze()`` after startup), pinned to CPU 1 where the box has two CPUs
  (``sched_setaffinity`` in the child before exec, as ``taskset -c 1``); this process (load
  generator and payment stub) is pinned to CPU 0:

  - ``floor``: ``harness.floor_app``, the bare SDK: its low-level ``Server`` with one async
    no-op tool on Litestar + uvicorn, tuned as the CLI is, and nothing of this project's;
  - ``real``: ``expert-booking-mcp serve`` on a fresh database (the six seed slots and one
    seed hold, the one ``get_booking`` reads, ``list_bookings`` lists and the replay repeats):
    the read tools are measured here;
  - ``real+oauth``: the same CLI on its own fresh seed database in ``AUTH_MODE=oauth``, its
    issuer npm ``oidc-provider`` on loopback (``harness.authorization_server``, started here),
    quotas on with limits no run reaches (10^9 a minute: every call is counted, none refused):
    its reads carry a real access token as ``Authorization: Bearer`` (verified once, then
    found by its SHA-256 in the verifier's cache until it expires) and each is compared with
    the same anonymous read on ``real`` in the same round (issue 14 item 7: p50 at c=1 at most
    1.15x, req/s at c=16 at least 0.85x); ``get_booking`` reads the token principal's own hold;
  - ``real+slots``: the same CLI on a bench database, i.e. the store's own migrations and seed
    plus ``--slots`` extra slots (``harness.bench_db``), so that every measured hold is a
    successful hold transaction of its own slot and every confirm is a full confirm (fresh
    approval, the payment GET answered PAID by the stub, the PENDING -> PAID commit). Both real
    servers run with ``HOLD_TTL_SECONDS=3600`` so that no hold expires mid-run (a mass release
    would land in a random window).

* Per round (``--rounds``, order shuffled each round, floor included): for every configuration a
  short warm-up, then concurrency 1 and 16, each bounded by a request count and a time window;
  an authenticated configuration and its anonymous twin take their windows in turn.
  Ratios are taken per round against the floor's no-op ``tools/call`` of the same round, then the
  median over rounds is reported with its 95% confidence interval (``bench_report``): p50 at
  c=1, req/s at c=16 and server CPU us/request at c=16 (utime+stime of the server process over
  the window). Other tenants' CPU use is recorded per run; with enough quiet rounds the verdicts
  read only those; a verdict (PASS or FAIL by the median) is marked ~ when its interval
  straddles the target.
* Load generator: ``loadgen.RawHttpClient`` by default (one write per request, stamped exactly
  like ``ClientSentAtTransport``); ``--engine httpx2`` uses httpx2 + ``ClientSentAtTransport``,
  whose client CPU per request is about the floor server's, so its core saturates first.
* Cold start: median of the spawns of the CLI on a fresh database, Popen to ready line and to
  the first ``tools/list`` answer, with warm bytecode (one unmeasured spawn first).
  Peak RSS: ``VmHWM`` of each server at the end.
* Context bytes: the bytes of ``tools/list`` and the bytes a model must read to make one booking
  (defined in ``booking_bytes``), measured through the official stamping transport and checked
  against the committed ``harness/context-budget.json`` (the default ``nox`` enforces it too).

The JSON report goes to ``--out`` (default ``bench-results/report-<UTC time>.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from expert_booking.domain.model import format_instant
from expert_booking.testing.payment_stub import PaymentStub
from harness.authorization_server import AuthorizationServer, Resource
from harness.bench_cold_start import cold_start
from harness.bench_context import ContextBudget, booking_bytes, budget_problems
from harness.bench_db import BENCH_PRICE, bench_slot_id, create_bench_db
from harness.bench_report import Row, print_table, summarize
from harness.bench_servers import (
    LOADGEN_CPU,
    SERVER_CPU,
    check_pinned,
    cli_server,
    floor_server,
    peak_rss_kib,
    pin_to,
)
from harness.loadgen import (
    Check,
    HttpClient,
    LoadResult,
    RawHttpClient,
    Reply,
    envelope_ok,
    jsonrpc_ok,
    make_http_client,
    run_load,
    send,
)
from harness.mcp_calls import (
    McpCall,
    confirm_arguments,
    hold_arguments,
    logical,
    tools_call,
    tools_list,
    with_bearer,
)

# --------------------------------------------------------------------------------------------
# configurations


@dataclass(frozen=True)
class Plan:
    """How long and how much to measure."""

    rounds: int
    window_s: float
    warmup_s: float
    max_requests: int
    confirm_rate: float  # first guess of confirms/s, before a measurement says better
    spawns: int
    slots: int


FULL = Plan(
    rounds=9,
    window_s=1.5,
    warmup_s=0.3,
    max_requests=50_000,
    confirm_rate=300.0,
    spawns=5,
    slots=40_000,
)
QUICK = Plan(
    rounds=1,
    window_s=0.15,
    warmup_s=0.03,
    max_requests=400,
    confirm_rate=300.0,
    spawns=1,
    slots=2_000,
)


# Slots one round of a full run takes at most: holds (warm-up, c=1, c=16) at up to ~1,000 per
# second of window, plus the confirms' holds (a confirm is slower than a hold, and its supply is
# CONFIRM_HEADROOM times its expected count). Measured here: ~4,700 per round with 2 s windows.
_HOLDS_PER_WINDOW_SECOND = 1_000
CONFIRM_HEADROOM = 1.5


def slots_needed(plan: Plan) -> int:
    """Extra bench slots that ``plan`` can use up (a run stops with an error past them)."""
    holds = (plan.warmup_s + 2 * plan.window_s) * _HOLDS_PER_WINDOW_SECOND
    return int(plan.rounds * holds * (1 + CONFIRM_HEADROOM)) + 1_000


def confirm_supply(plan: Plan, rate: float, window_s: float, concurrency: int) -> int:
    """How many confirms to prepare for one window: what ``rate`` fills it with, plus headroom.

    Sized from the time budget, so the supply lasts the window at the expected rate; a faster
    server than expected runs it out, and that run ends early, flagged ``exhausted``, with its
    figures over what it sent (the next window sizes from the rate just measured).
    """
    expected = rate * window_s * CONFIRM_HEADROOM
    return max(2 * concurrency, min(plan.max_requests, int(expected) + 2 * concurrency))


@dataclass
class Bench:
    """The servers, clients and shared state of one run."""

    plan: Plan
    urls: dict[str, str]
    pids: dict[str, int]
    clients: dict[str, HttpClient]
    stub: PaymentStub
    get_booking_id: str
    replayed_hold: dict[str, Any]  # the arguments of the seed hold: sent again, a replay
    oauth_token: str = ""  # a read+write access token for the oauth server's resource
    oauth_booking_id: str = ""  # the hold of that token's principal on the oauth server
    next_slot: Iterator[int] = field(default_factory=lambda: iter(range(10**9)))
    sequence: Iterator[int] = field(default_factory=lambda: iter(range(10**9)))
    rates: dict[tuple[str, int], float] = field(default_factory=dict)  # last measured req/s
    # The same bench as another server sees it (its own seed booking): ``--baseline``.
    views: dict[str, Bench] = field(default_factory=dict)

    def slot(self) -> str:
        index = next(self.next_slot)
        if index >= self.plan.slots:
            msg = f"the bench database has only {self.plan.slots} extra slots; raise --slots"
            raise RuntimeError(msg)
        return bench_slot_id(index)


@dataclass(frozen=True)
class Config:
    """One measured request type: which server, how request ``i`` looks, what counts as ok."""

    name: str
    server: str
    kind: str  # floor | read | hold | confirm | info | auth
    check: Check
    make: Callable[[Bench], McpCall] | None = None
    # async (bench, count) -> make_call: a finite supply of count calls, None once used up
    prepare: Callable[[Bench, int], Any] | None = None
    anonymous: str | None = None  # kind auth: the anonymous configuration it is judged against


def _search_miss(bench: Bench) -> McpCall:
    """A slot search whose cache key is new every time (startsAfter moves by one second)."""
    second = next(bench.sequence)
    starts_after = format_instant(datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=second))
    return logical(
        "booking.search_available_slots", {"query": "AI", "limit": 5, "startsAfter": starts_after}
    )


async def _prepare_confirms(bench: Bench, count: int) -> Callable[[int], McpCall | None]:
    """Hold ``count`` fresh bench slots (untimed), answer PAID for each, approve each now.

    The confirms are handed out one per request until they run out (``None``), whatever the
    request's index: a hold that failed or came late only shortens the supply.
    """
    held: list[dict[str, Any]] = []

    async def keep(_index: int, reply: Reply) -> None:
        if reply.envelope.get("ok"):
            held.append(reply.envelope["data"])

    await run_load(
        bench.clients["real+slots"],
        bench.urls["real+slots"],
        lambda _i: logical("booking.hold_slot", hold_arguments(bench.slot())),
        requests=count,
        concurrency=16,
        time_limit_s=120,
        on_reply=keep,
    )
    if not held:
        msg = f"none of {count} holds for the confirm supply succeeded"
        raise RuntimeError(msg)
    approved_at = datetime.now(UTC)
    calls = []
    for booking in held:
        bench.stub.set_answer(booking["bookingId"], status="PAID", amount=BENCH_PRICE[0])
        arguments = confirm_arguments(booking, approved_at=approved_at)
        calls.append(logical("booking.confirm_booking", arguments))
    supply = iter(calls)
    return lambda _index: next(supply, None)


OAUTH = "real+oauth"
OAUTH_RESOURCE = "https://bench.example/mcp"
OAUTH_TOKEN_TTL_SECONDS = 24 * 3600  # longer than any run: no token expires mid-measurement
UNREACHED_QUOTA = str(10**9)  # per minute: every call counted, none refused


CONFIGS: tuple[Config, ...] = (
    Config("floor noop tools/call", "floor", "floor", jsonrpc_ok, lambda _: tools_call("noop", {})),
    Config("tools/list", "real", "read", jsonrpc_ok, lambda _: tools_list()),
    Config(
        "tool_catalog.search",
        "real",
        "read",
        envelope_ok,
        lambda _: tools_call("tool_catalog.search", {"query": "hold a slot", "limit": 5}),
    ),
    Config(
        "tool_catalog.read",
        "real",
        "read",
        envelope_ok,
        lambda _: tools_call(
            "tool_catalog.read", {"uri": "tool://booking.hold_slot", "offset": 0, "limit": 40}
        ),
    ),
    Config(
        "call search_slots (cache hit)",
        "real",
        "read",
        envelope_ok,
        lambda _: logical("booking.search_available_slots", {"query": "AI", "limit": 5}),
    ),
    Config("call search_slots (cache miss)", "real", "read", envelope_ok, _search_miss),
    Config(
        "call get_booking",
        "real",
        "read",
        envelope_ok,
        lambda b: logical("booking.get_booking", {"bookingId": b.get_booking_id}),
    ),
    Config(
        "call list_bookings",
        "real",
        "read",
        envelope_ok,
        lambda _: logical("booking.list_bookings", {"limit": 10}),
    ),
    Config(
        "call hold_slot (replay)",
        "real",
        "read",
        envelope_ok,
        lambda b: logical("booking.hold_slot", b.replayed_hold),
    ),
    Config(
        "call hold_slot",
        "real+slots",
        "hold",
        envelope_ok,
        lambda b: logical("booking.hold_slot", hold_arguments(b.slot())),
    ),
    Config("call confirm_booking", "real+slots", "confirm", envelope_ok, prepare=_prepare_confirms),
    Config("call search_slots (miss, +slots db)", "real+slots", "info", envelope_ok, _search_miss),
    Config(
        "call get_booking (oauth+quota)",
        OAUTH,
        "auth",
        envelope_ok,
        lambda b: with_bearer(
            logical("booking.get_booking", {"bookingId": b.oauth_booking_id}), b.oauth_token
        ),
        anonymous="call get_booking",
    ),
    Config(
        "call search_slots hit (oauth+quota)",
        OAUTH,
        "auth",
        envelope_ok,
        lambda b: with_bearer(
            logical("booking.search_available_slots", {"query": "AI", "limit": 5}), b.oauth_token
        ),
        anonymous="call search_slots (cache hit)",
    ),
)


# --------------------------------------------------------------------------------------------
# measuring


async def measure(bench: Bench, config: Config, concurrency: int, window_s: float) -> LoadResult:
    client = bench.clients[config.server]
    url = bench.urls[config.server]
    requests = bench.plan.max_requests
    if config.prepare is not None:
        rate = bench.rates.get((config.name, concurrency), bench.plan.confirm_rate)
        requests = confirm_supply(bench.plan, rate, window_s, concurrency)
    make_call = await calls_for(bench, config, requests)
    result = await run_load(
        client,
        url,
        make_call,
        requests=requests,
        concurrency=concurrency,
        time_limit_s=window_s,
        label=config.name,
        check=config.check,
        server_pid=bench.pids[config.server],
    )
    if result.count and window_s >= bench.plan.window_s:  # a warm-up's rate is no guide
        bench.rates[config.name, concurrency] = result.throughput
    return result


BASELINE = "baseline"


def with_baseline(configs: tuple[Config, ...]) -> tuple[Config, ...]:
    """``configs`` plus, for each read tool and the hold, a twin on the ``--baseline`` CLI."""
    twins = []
    for config in configs:
        if config.kind not in ("read", "hold") or config.make is None:
            continue
        twins.append(
            dataclasses.replace(
                config,
                name=f"{config.name} @{BASELINE}",
                server=config.server.replace("real", BASELINE),
                make=_as_baseline_sees_it(config.make),
            )
        )
    return (*configs, *twins)


def _as_baseline_sees_it(make: Callable[[Bench], McpCall]) -> Callable[[Bench], McpCall]:
    return lambda bench: make(bench.views[BASELINE])


def selected(only: list[str] | None) -> tuple[Config, ...]:
    """The configurations whose name contains one of ``only`` (all without it), floor first.

    An authenticated configuration brings the anonymous one it is judged against.
    """
    if not only:
        return CONFIGS
    chosen = {config.name for config in CONFIGS if any(text in config.name for text in only)}
    chosen |= {config.anonymous for config in CONFIGS if config.name in chosen and config.anonymous}
    return tuple(config for config in CONFIGS if config.kind == "floor" or config.name in chosen)


async def calls_for(bench: Bench, config: Config, count: int) -> Callable[[int], McpCall | None]:
    """How request ``i`` of ``config`` looks; a prepared config supplies ``count`` calls."""
    if config.prepare is not None:
        return await config.prepare(bench, count)  # type: ignore[no-any-return]
    assert config.make is not None
    make = config.make
    return lambda _index: make(bench)


def groups(configs: list[Config], rng: random.Random) -> list[list[Config]]:
    """``configs`` in their order, each authenticated one grouped with its anonymous twin.

    A pair is measured window by window in turn (``run_rounds``), its order drawn by ``rng``,
    so that both sides of a ratio see the same seconds of a shared box.
    """
    names = {config.name for config in configs}
    twins = {config.anonymous: config for config in configs if config.anonymous in names}
    result = []
    for config in configs:
        if config.anonymous in names:
            continue  # measured beside its anonymous twin
        group = [config] if config.name not in twins else [config, twins[config.name]]
        rng.shuffle(group)
        result.append(group)
    return result


async def run_rounds(bench: Bench, configs: tuple[Config, ...]) -> dict[str, Row]:
    rows = {config.name: Row(config) for config in configs}
    rng = random.Random(20261129)
    for round_number in range(bench.plan.rounds):
        order = list(configs)
        rng.shuffle(order)
        for group in groups(order, rng):
            for config in group:
                await measure(bench, config, 16, bench.plan.warmup_s)
            for concurrency in (1, 16):
                for config in group:
                    result = await measure(bench, config, concurrency, bench.plan.window_s)
                    rows[config.name].runs[concurrency].append(result)
                    _progress(round_number, result)
    return rows


def _progress(round_number: int, result: LoadResult) -> None:
    summary = result.summary()
    print(
        f"  round {round_number + 1} {result.label:<38} c={result.concurrency:<2} "
        f"n={summary['requests']:<6} p50={summary['p50_ms']} ms  {summary['req_per_s']} req/s"
        + (f"  failures={summary['failures']}" if summary["failures"] else ""),
        file=sys.stderr,
        flush=True,
    )


# --------------------------------------------------------------------------------------------
# main


def authorization_server() -> AuthorizationServer:
    """The oidc-provider the oauth CLI trusts (not started), tokens valid longer than a run."""
    return AuthorizationServer(resources=[Resource(OAUTH_RESOURCE, ttl=OAUTH_TOKEN_TTL_SECONDS)])


def oauth_env(env: dict[str, str], issuer: str) -> dict[str, str]:
    """``env`` for the CLI in ``AUTH_MODE=oauth`` trusting ``issuer``, quotas on and unreached."""
    return {
        **env,
        "AUTH_MODE": "oauth",
        "AUTH_ISSUER": issuer,
        "AUTH_RESOURCE": OAUTH_RESOURCE,
        "QUOTA_PER_CALLER_PER_MINUTE": UNREACHED_QUOTA,
        "QUOTA_GLOBAL_PER_MINUTE": UNREACHED_QUOTA,
    }


async def oauth_principal(
    auth: AuthorizationServer, client: HttpClient, url: str, hold: dict[str, Any]
) -> tuple[str, str]:
    """A real access token from ``auth`` and the hold its principal makes with it (``hold``)."""
    token = await asyncio.to_thread(auth.access_token, OAUTH_RESOURCE)
    held = await send(client, url, with_bearer(logical("booking.hold_slot", hold), token))
    if held.envelope.get("ok") is not True:
        msg = f"the oauth server refused the bench token's hold: {held.message}"
        raise RuntimeError(msg)
    return token, str(held.envelope["data"]["bookingId"])


def _client(engine: str) -> HttpClient:
    return RawHttpClient() if engine == "raw" else make_http_client(connections=16)


async def run(
    plan: Plan,
    engine: str = "raw",
    configs: tuple[Config, ...] = CONFIGS,
    baseline: str | None = None,
) -> dict[str, Any]:
    pin = pin_to(SERVER_CPU) is not None and pin_to(LOADGEN_CPU) is not None
    if pin:
        os.sched_setaffinity(0, {LOADGEN_CPU})  # this thread; threads started later inherit it
    placement = (
        f"servers on CPU {SERVER_CPU}, load generator + payment stub on CPU {LOADGEN_CPU} "
        "(sched_setaffinity, as taskset -c)"
        if pin
        else "unpinned (fewer than 2 usable CPUs): compare only with unpinned runs"
    )
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp_name:
        tmp = Path(tmp_name)
        await create_bench_db(tmp / "bench.db", plan.slots)
        async with PaymentStub.running() as stub, contextlib.AsyncExitStack() as stack:
            env = {
                **os.environ,
                "PAYMENT_QUERY_BASE_URL": stub.base_url,
                "HOLD_TTL_SECONDS": "3600",
            }
            servers = {
                "floor": floor_server(tmp / "floor.db", env, pin=pin),
                "real": cli_server(tmp / "seed.db", env, pin=pin),
                "real+slots": cli_server(tmp / "bench.db", env, pin=pin),
            }
            auth: AuthorizationServer | None = None
            if any(config.server == OAUTH for config in configs):
                auth = stack.enter_context(authorization_server())
                servers[OAUTH] = cli_server(tmp / "oauth.db", oauth_env(env, auth.issuer), pin=pin)
            if baseline is not None:
                shutil.copyfile(tmp / "bench.db", tmp / "base-bench.db")
                for name, db in ((BASELINE, "base.db"), (f"{BASELINE}+slots", "base-bench.db")):
                    servers[name] = cli_server(tmp / db, env, pin=pin, python=baseline)
            for server in servers.values():
                server.launch()
                stack.callback(server.close)
            for server in servers.values():
                server.wait_ready()
                if pin:
                    check_pinned(server.pid)
            clients: dict[str, HttpClient] = {}
            for name in servers:
                client = _client(engine)
                stack.push_async_callback(client.aclose)
                clients[name] = client
            urls = {name: server.url for name, server in servers.items()}
            replayed = hold_arguments("slot-law-002")
            seeds = {
                name: (
                    await send(clients[name], urls[name], logical("booking.hold_slot", replayed))
                )
                for name in ("real", BASELINE)
                if name in servers
            }
            bench = Bench(
                plan=plan,
                urls=urls,
                pids={name: server.pid for name, server in servers.items()},
                clients=clients,
                stub=stub,
                get_booking_id=seeds["real"].envelope["data"]["bookingId"],
                replayed_hold=replayed,
            )
            if auth is not None:
                bench.oauth_token, bench.oauth_booking_id = await oauth_principal(
                    auth, clients[OAUTH], urls[OAUTH], replayed
                )
            if BASELINE in seeds:
                booking_id = seeds[BASELINE].envelope["data"]["bookingId"]
                bench.views[BASELINE] = dataclasses.replace(bench, get_booking_id=booking_id)
            started = time.perf_counter()
            rows = await run_rounds(bench, configs)
            elapsed = time.perf_counter() - started
            async with make_http_client(connections=1) as official:
                context = await booking_bytes(official, urls["real"], stub)
            context["budget_problems"] = budget_problems(context, ContextBudget.load())
            rss = {name: peak_rss_kib(server.pid) for name, server in servers.items()}
        cold = await asyncio.to_thread(cold_start, plan.spawns, env, pin=pin)
    table = summarize(rows)
    extra = {
        "cold_start": cold,
        "peak_rss_kib": rss,
        "context_bytes": context,
        "placement": placement,
    }
    print_table(table, extra)
    return {
        "created_at": format_instant(datetime.now(UTC)),
        "python": sys.version.split()[0],
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "plan": dataclasses.asdict(plan),
        "measure_seconds": round(elapsed, 1),
        "results": table,
        **extra,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run with tiny counts")
    parser.add_argument("--out", type=Path, help="JSON report path")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 9, quick 1)")
    parser.add_argument("--window", type=float, help="seconds per measurement (default 1.5)")
    parser.add_argument(
        "--slots", type=int, help="extra bench slots (default: what the rounds can use up)"
    )
    parser.add_argument(
        "--engine",
        choices=("raw", "httpx2"),
        default="raw",
        help="load generator HTTP client (default raw: httpx2 saturates its core first)",
    )
    parser.add_argument(
        "--inprocess",
        action="store_true",
        help="server CPU per request in process (no sockets) instead of the HTTP benchmark",
    )
    parser.add_argument(
        "--only",
        metavar="TEXT",
        action="append",
        help="measure only configurations whose name contains TEXT (repeatable; floor always)",
    )
    parser.add_argument(
        "--baseline",
        metavar="PYTHON",
        help="A/B: also measure the read tools on the CLI of this interpreter's environment "
        "(e.g. a venv with the commit to compare installed), interleaved in the same rounds",
    )
    parser.add_argument("--profile", metavar="CONFIG", help="cProfile one configuration in process")
    parser.add_argument("--requests", type=int, default=2000, help="in-process requests per config")
    args = parser.parse_args(argv)
    if args.only and (args.inprocess or args.profile):
        parser.error("--only applies to the HTTP benchmark (--profile picks one configuration)")
    configs = selected(args.only)
    if args.only and len(configs) == 1:
        parser.error(f"--only {args.only} matches no configuration besides the floor")
    if args.inprocess or args.profile:
        from harness.bench_inprocess import inprocess  # it imports this module

        plan = dataclasses.replace(QUICK, slots=max(QUICK.slots, args.requests * 8))
        report = asyncio.run(inprocess(plan, args.requests, args.profile))
        print(json.dumps(report, indent=2))
        return 0
    plan = QUICK if args.quick else FULL
    if args.rounds:
        plan = dataclasses.replace(plan, rounds=args.rounds)
    if args.window:
        plan = dataclasses.replace(plan, window_s=args.window)
    if args.slots:
        plan = dataclasses.replace(plan, slots=args.slots)
    else:  # every measured hold takes a slot: enough for the rounds and windows asked for
        servers = 2 if args.baseline else 1  # the slot numbers are shared by both bench dbs
        plan = dataclasses.replace(plan, slots=max(plan.slots, servers * slots_needed(plan)))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or Path("bench-results") / f"report-{stamp}.json"
    if args.baseline:
        configs = with_baseline(configs)
    report = asyncio.run(run(plan, args.engine, configs, args.baseline))
    report["only"] = args.only
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"report: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
