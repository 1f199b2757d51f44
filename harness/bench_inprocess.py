"""The benchmark in process: server CPU per request without sockets, and cProfile.

``python -m harness.bench --inprocess [--requests N]`` and ``--profile CONFIG`` run this: the
same configurations as the HTTP benchmark (``harness.bench.CONFIGS``), sent straight into the
ASGI apps, so the figure is robust against a noisy box. The oauth app trusts the bench's own
oidc-provider, as over HTTP, and its calls carry that server's real token.
"""

from __future__ import annotations

import contextlib
import cProfile
import dataclasses
import pstats
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import httpx
from starlette.types import ASGIApp

from expert_booking.bootstrap import build_asgi_app
from expert_booking.domain.model import format_instant
from expert_booking.settings import Settings
from harness.bench import (
    CONFIGS,
    OAUTH,
    Bench,
    Plan,
    authorization_server,
    calls_for,
    oauth_env,
    oauth_principal,
)
from harness.bench_db import BENCH_PRICE, create_bench_db
from harness.floor_app import build_floor_app
from harness.inprocess import inprocess_app
from harness.loadgen import AsgiCaller, HttpClient, make_http_client
from harness.mcp_calls import McpCall, hold_arguments, logical


def _paid_for_every_booking(request: httpx.Request) -> httpx.Response:
    booking_id = request.url.path.rsplit("/", 1)[-1]
    body = {
        "bookingId": booking_id,
        "status": "PAID",
        "amount": BENCH_PRICE[0],
        "currency": BENCH_PRICE[1],
        "paidAt": format_instant(datetime.now(UTC)),  # after the hold, not in the future
    }
    return httpx.Response(200, json=body)


async def inprocess(plan: Plan, requests: int, profile: str | None) -> dict[str, Any]:
    """Server CPU per request of every configuration, in this process, at concurrency 1.

    The apps are the real ones (``build_asgi_app``; the bare-SDK ``build_floor_app``) with the
    payment service answered by an ``httpx.MockTransport`` (so confirm excludes the HTTP
    client's cost). Requests go straight into the ASGI app: the figure is the server's own
    CPU per request, without uvicorn and sockets. With ``profile`` set to a configuration
    name, that configuration runs under cProfile and the top functions are printed.
    """
    costs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-inproc-") as tmp_name:
        tmp = Path(tmp_name)
        await create_bench_db(tmp / "bench.db", plan.slots)
        transport = httpx.MockTransport(_paid_for_every_booking)
        settings = Settings(payment_query_base_url="http://payments.test", hold_ttl_seconds=3600)
        apps = {
            "floor": cast("ASGIApp", build_floor_app()),
            "real": build_asgi_app(
                dataclasses.replace(settings, db_path=tmp / "seed.db"), payments_transport=transport
            ),
            "real+slots": build_asgi_app(
                dataclasses.replace(settings, db_path=tmp / "bench.db"),
                payments_transport=transport,
            ),
        }
        async with contextlib.AsyncExitStack() as stack:
            auth = stack.enter_context(authorization_server())
            oauth = Settings.from_env(oauth_env({}, auth.issuer))
            apps[OAUTH] = build_asgi_app(
                dataclasses.replace(
                    settings,
                    db_path=tmp / "oauth.db",
                    auth_mode=oauth.auth_mode,
                    auth_issuer=oauth.auth_issuer,
                    auth_resource=oauth.auth_resource,
                    quota_per_caller_per_minute=oauth.quota_per_caller_per_minute,
                    quota_global_per_minute=oauth.quota_global_per_minute,
                ),
                payments_transport=transport,
            )
            clients: dict[str, HttpClient] = {}
            for name, app in apps.items():
                asgi = await stack.enter_async_context(inprocess_app(app))
                clients[name] = await stack.enter_async_context(make_http_client(inner=asgi))
            callers = {name: AsgiCaller(app) for name, app in apps.items()}
            url = "http://127.0.0.1:3000/mcp"
            replayed = hold_arguments("slot-law-002")
            seed_hold = await callers["real"].send(logical("booking.hold_slot", replayed))
            bench = Bench(
                plan=plan,
                urls=dict.fromkeys(apps, url),
                pids={},
                clients=clients,
                stub=_NoStub(),  # type: ignore[arg-type]
                get_booking_id=seed_hold.envelope["data"]["bookingId"],
                replayed_hold=replayed,
            )
            bench.oauth_token, bench.oauth_booking_id = await oauth_principal(
                auth, clients[OAUTH], url, replayed
            )
            for config in CONFIGS:
                if profile is not None and config.name != profile:
                    continue
                caller = callers[config.server]
                make_call = await calls_for(bench, config, requests * 2)
                for index in range(min(requests, 200)):  # warm-up
                    await caller.send(_next_call(make_call, index, config.name))
                profiler = cProfile.Profile() if profile else None
                cpu = time.process_time()
                if profiler:
                    profiler.enable()
                for index in range(requests, 2 * requests):
                    reply = await caller.send(_next_call(make_call, index, config.name))
                    failure = config.check(index, reply)
                    if failure is not None:
                        raise RuntimeError(f"{config.name}: {failure} {reply.message}")
                if profiler:
                    profiler.disable()
                costs[config.name] = (time.process_time() - cpu) / requests * 1e6
                print(f"  in process {config.name:<38} {costs[config.name]:8.0f} us CPU/request")
                if profiler:
                    stats = pstats.Stats(profiler)
                    stats.sort_stats("tottime").print_stats(30)
                    stats.sort_stats("cumulative").print_stats(40)
    floor = costs.get("floor noop tools/call")
    return {
        "requests": requests,
        "cpu_us_per_request": {name: round(value, 1) for name, value in costs.items()},
        "ratio_to_floor": {name: round(value / floor, 2) for name, value in costs.items() if floor},
    }


def _next_call(make_call: Callable[[int], McpCall | None], index: int, name: str) -> McpCall:
    call = make_call(index)
    if call is None:
        msg = f"{name}: the prepared calls ran out at request {index}"
        raise RuntimeError(msg)
    return call


class _NoStub:
    """In process the payment service is a MockTransport that answers PAID for everything."""

    def set_answer(self, *_args: Any, **_kwargs: Any) -> None:
        return None
