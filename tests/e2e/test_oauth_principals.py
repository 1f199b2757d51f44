"""Two real-token principals against one server in ``AUTH_MODE=oauth`` (ownership and quotas).

The AS (npm ``oidc-provider``) has two clients, ``agent-a`` and ``agent-b``; a
client-credentials token's subject is its client id, so each token is its own principal
``(issuer, client id)``. What one principal held, the other cannot see or change: get, confirm
and list answer exactly as for an unknown booking; one idempotency key used by both makes two
bookings; and each principal spends its own quota.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from expert_booking.domain.model import format_instant
from expert_booking.testing.server_process import ServerProcess
from harness.authorization_server import AuthorizationServer, Client, Key, Resource
from harness.mcp_calls import McpCall, confirm_arguments, encode, hold_arguments, logical

pytestmark = pytest.mark.e2e

RESOURCE = "https://booking.example/mcp"
A = Client("agent-a", "secret-a")
B = Client("agent-b", "secret-b")
PER_CALLER = 4


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthorizationServer]:
    with AuthorizationServer(
        resources=[Resource(RESOURCE)], clients=(A, B), keys=[Key.rsa("rsa-1")]
    ) as running:
        yield running


def oauth_env(auth_server: AuthorizationServer, per_caller: int) -> dict[str, str]:
    return {
        **os.environ,
        "AUTH_MODE": "oauth",
        "AUTH_ISSUER": auth_server.issuer,
        "AUTH_RESOURCE": RESOURCE,
        "QUOTA_PER_CALLER_PER_MINUTE": str(per_caller),
        "QUOTA_GLOBAL_PER_MINUTE": "100000",
    }


@pytest.fixture(scope="module")
def server(auth_server: AuthorizationServer) -> Iterator[ServerProcess]:
    with ServerProcess(env=oauth_env(auth_server, 100000)) as running:
        yield running


def token(auth_server: AuthorizationServer, client: Client) -> str:
    response = auth_server.token(RESOURCE, "booking:read booking:write", client=client)
    response.raise_for_status()
    return str(response.json()["access_token"])


def send(server: ServerProcess, call: McpCall, bearer: str) -> dict[str, Any]:
    """``call`` stamped now with ``bearer``; the envelope (HTTP 200 expected)."""
    headers, body = encode(call, request_id=1)
    sent = format_instant(datetime.now(UTC))
    message = json.loads(body)
    message["params"]["_meta"]["clientSentAt"] = sent
    response = httpx.post(
        server.url,
        content=json.dumps(message),
        headers={**headers, "x-mcp-client-sent-at": sent, "authorization": f"Bearer {bearer}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    envelope: dict[str, Any] = response.json()["result"]["structuredContent"]
    return envelope


def code(envelope: dict[str, Any]) -> str | None:
    return None if envelope["ok"] else str(envelope["error"]["code"])


def test_another_principals_booking_is_an_unknown_booking(
    server: ServerProcess, auth_server: AuthorizationServer
) -> None:
    alice, bob = token(auth_server, A), token(auth_server, B)
    held = send(server, logical("booking.hold_slot", hold_arguments("slot-ai-001")), alice)
    assert held["ok"] is True, held
    booking = held["data"]
    unknown = send(
        server, logical("booking.get_booking", {"bookingId": "booking-" + "0" * 32}), bob
    )
    assert code(unknown) == "BOOKING_NOT_FOUND"

    got = send(server, logical("booking.get_booking", {"bookingId": booking["bookingId"]}), bob)
    assert code(got) == "BOOKING_NOT_FOUND"
    assert got["error"]["message"] == unknown["error"]["message"]
    assert set(got["error"]["details"]) == set(unknown["error"]["details"])
    approved = confirm_arguments(booking, approved_at=datetime.now(UTC))
    confirmed = send(server, logical("booking.confirm_booking", approved), bob)
    assert code(confirmed) == "BOOKING_NOT_FOUND"
    listed = send(server, logical("booking.list_bookings", {"limit": 50}), bob)
    assert listed["ok"] is True
    assert booking["bookingId"] not in json.dumps(listed["data"])

    own = send(server, logical("booking.get_booking", {"bookingId": booking["bookingId"]}), alice)
    assert own["ok"] is True
    assert own["data"]["status"] == "HELD"  # bob's confirm changed nothing
    assert own["data"]["version"] == booking["version"]
    mine = send(server, logical("booking.list_bookings", {"limit": 50}), alice)
    assert booking["bookingId"] in json.dumps(mine["data"])


def test_one_idempotency_key_used_by_two_principals_makes_two_bookings(
    server: ServerProcess, auth_server: AuthorizationServer
) -> None:
    alice, bob = token(auth_server, A), token(auth_server, B)
    key = str(uuid.uuid4())
    first = send(
        server, logical("booking.hold_slot", hold_arguments("slot-ai-002", key=key)), alice
    )
    second = send(
        server, logical("booking.hold_slot", hold_arguments("slot-law-001", key=key)), bob
    )
    assert first["ok"] is True, first
    assert second["ok"] is True, second
    assert first["data"]["bookingId"] != second["data"]["bookingId"]
    assert second["data"]["slotId"] == "slot-law-001"


def test_each_principal_spends_its_own_quota(auth_server: AuthorizationServer) -> None:
    alice, bob = token(auth_server, A), token(auth_server, B)
    search = logical("booking.search_available_slots", {"query": "AI", "limit": 1})
    with ServerProcess(env=oauth_env(auth_server, PER_CALLER)) as limited:
        for index in range(PER_CALLER):
            envelope = send(limited, search, alice)
            assert envelope["ok"] is True, (index, envelope)
            assert envelope["meta"]["quotaRemaining"] == PER_CALLER - 1 - index
        refused = send(limited, search, alice)
        assert code(refused) == "RATE_LIMITED"
        assert refused["error"]["details"]["limit"] == "CALLER"
        assert send(limited, search, bob)["ok"] is True
