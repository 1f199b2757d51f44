"""Quotas over HTTP at their boundary: per caller and global, and whose address counts.

Spawned servers with ``QUOTA_*`` set (so quotas are on in ``none`` mode); raw stamped requests
from loopback, some through a trusted proxy naming the client. The windows are a minute long,
so each server's sequence runs once, straight through, well inside its first minute.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from expert_booking.testing.server_process import ServerProcess
from tests.e2e.rawhttp import call_logical, call_tool

pytestmark = pytest.mark.e2e

SEARCH = {"query": "hold a slot", "limit": 1}
UNKNOWN_BOOKING = {"bookingId": f"booking-{'0' * 32}"}


def _server(**env: str) -> ServerProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("QUOTA_", "TRUSTED_"))}
    return ServerProcess(env={**clean, **env})


@pytest.fixture(scope="module")
def per_caller() -> Iterator[ServerProcess]:
    with _server(QUOTA_PER_CALLER_PER_MINUTE="30") as running:
        yield running


@pytest.fixture(scope="module")
def proxied() -> Iterator[ServerProcess]:
    env = {
        "QUOTA_PER_CALLER_PER_MINUTE": "2",
        "QUOTA_GLOBAL_PER_MINUTE": "5",
        "TRUSTED_PROXIES": "127.0.0.1",
    }
    with _server(**env) as running:
        yield running


def _port(server: ServerProcess) -> int:
    return int(server.base_url.rsplit(":", 1)[1])


def _search(port: int, headers: dict[str, str] | None = None) -> dict[str, Any]:
    return call_tool(port, "tool_catalog.search", SEARCH, headers=headers)


def _assert_limited(envelope: dict[str, Any], limit: str) -> None:
    assert envelope["ok"] is False, envelope
    error = envelope["error"]
    assert error["code"] == "RATE_LIMITED"
    assert error["retryable"] is True
    assert error["details"]["limit"] == limit
    assert 1 <= error["details"]["retryAfterSeconds"] <= 60
    assert "retryAfterSeconds" in error["recovery"]["action"]
    assert envelope["meta"]["quotaRemaining"] == 0


def _refusal_lines(server: ServerProcess) -> list[dict[str, Any]]:
    return [
        record["refusal"]
        for record in server.json_log_records()
        if isinstance(record.get("refusal"), dict) and record["refusal"].get("code")
    ]


def test_the_30th_call_of_a_caller_is_admitted_and_the_31st_refused(
    per_caller: ServerProcess,
) -> None:
    port = _port(per_caller)
    remaining = []
    for n in range(30):
        # Business refusals count too; an untrusted peer's X-Forwarded-For is ignored.
        headers = {"X-Forwarded-For": f"198.51.100.{n}"}
        if n % 3 == 0:
            envelope = call_logical(port, "booking.get_booking", UNKNOWN_BOOKING, headers=headers)
            assert envelope["error"]["code"] == "BOOKING_NOT_FOUND"
        else:
            envelope = _search(port, headers)
            assert envelope["ok"] is True
        remaining.append(envelope["meta"]["quotaRemaining"])
    assert remaining == list(range(29, -1, -1))

    refused = _search(port, {"X-Forwarded-For": "203.0.113.7"})
    _assert_limited(refused, "CALLER")
    _assert_limited(call_logical(port, "booking.get_booking", UNKNOWN_BOOKING), "CALLER")

    operation_id = refused["meta"]["operationId"]
    line = per_caller.wait_for_stderr(lambda text: operation_id in text and '"refusal"' in text)
    logged = json.loads(line)["refusal"]
    assert logged == {
        "code": "RATE_LIMITED",
        "tool": "tool_catalog.search",
        "caller": {"address": "127.0.0.1"},
        "operationId": operation_id,
        "limit": "CALLER",
        "retryAfterSeconds": refused["error"]["details"]["retryAfterSeconds"],
    }


def test_a_trusted_proxy_names_callers_and_the_global_limit_holds_at_its_boundary(
    proxied: ServerProcess,
) -> None:
    port = _port(proxied)
    alice = {"X-Forwarded-For": "192.0.2.1"}
    # Two of this caller's own (per caller 2), then its own limit refuses it.
    assert [_search(port, alice)["meta"]["quotaRemaining"] for _ in range(2)] == [1, 0]
    _assert_limited(_search(port, alice), "CALLER")
    # RFC 7239 from the proxy names another caller: the third admission of five.
    bob = {"Forwarded": 'for="[2001:db8::1]:4711"'}
    assert _search(port, bob)["meta"]["quotaRemaining"] == 1
    # Both headers at once: one of them passed the proxy untouched, so the proxy itself is
    # the caller, whatever they name (each call names others; all land in one bucket).
    both = [
        {"Forwarded": f"for=192.0.2.{n}", "X-Forwarded-For": f"192.0.2.{n + 1}"}
        for n in (10, 20, 30)
    ]
    assert _search(port, both[0])["meta"]["quotaRemaining"] == 1
    assert _search(port, both[1])["meta"]["quotaRemaining"] == 0  # the 5th: global is full
    _assert_limited(_search(port, both[2]), "CALLER")  # its own limit named first
    # A fresh caller with its whole own quota is refused by the global limit alone.
    carol = {"X-Forwarded-For": "192.0.2.99, 127.0.0.1"}
    last = _search(port, carol)
    _assert_limited(last, "GLOBAL")

    proxied.wait_for_stderr(lambda text: last["meta"]["operationId"] in text)

    callers = [(line["caller"], line["limit"]) for line in _refusal_lines(proxied)]
    assert callers == [
        ({"address": "192.0.2.1"}, "CALLER"),
        ({"address": "127.0.0.1"}, "CALLER"),
        ({"address": "192.0.2.99"}, "GLOBAL"),
    ]
