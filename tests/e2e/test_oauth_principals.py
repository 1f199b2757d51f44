"""Two real-token principals against one server in ``AUTH_MODE=oauth`` (ownership and quotas).

The AS (npm ``oidc-provider``) has two clients, ``agent-a`` and ``agent-b``; a
client-credentials token's subject is its client id, so each token is its own principal
``(issuer, client id)``. What one principal held, the other cannot see or change: get, confirm,
cancel and reschedule answer byte for byte as for an unknown booking id, the booking is
unchanged afterwards, and list (also by the owner's idempotency key) finds nothing; one
idempotency key used by both makes two bookings; and each principal spends its own quota.
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

from expert_booking.testing.server_process import ServerProcess
from harness.authorization_server import AuthorizationServer, Client, Key, Resource
from harness.mcp_calls import (
    McpCall,
    confirm_arguments,
    encode,
    hold_arguments,
    logical,
    with_bearer,
)

pytestmark = pytest.mark.e2e

RESOURCE = "https://booking.example/mcp"
A = Client("agent-a", "secret-a")
B = Client("agent-b", "secret-b")
PER_CALLER = 4
UNKNOWN_BOOKING = "booking-" + "0" * 32


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
    headers, body = encode(with_bearer(call, bearer), request_id=1, stamped=True)
    response = httpx.post(server.url, content=body, headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    envelope: dict[str, Any] = response.json()["result"]["structuredContent"]
    return envelope


def code(envelope: dict[str, Any]) -> str | None:
    return None if envelope["ok"] else str(envelope["error"]["code"])


def answered_as_unknown(
    server: ServerProcess, bearer: str, name: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    """``name(arguments)`` refused exactly as the same call on an id no booking has.

    The unknown id goes first with the same idempotency key (a refusal records nothing under
    it); the two errors must be the same JSON text once the id is written the same way, i.e.
    code, message, retryable, details and recovery tell nothing about the booking's existence.
    """
    booking_id = arguments["bookingId"]
    unknown = send(server, logical(name, arguments | {"bookingId": UNKNOWN_BOOKING}), bearer)
    answered = send(server, logical(name, arguments), bearer)
    assert code(unknown) == "BOOKING_NOT_FOUND", unknown
    assert code(answered) == "BOOKING_NOT_FOUND", answered
    assert json.dumps(answered["error"]).replace(booking_id, UNKNOWN_BOOKING) == json.dumps(
        unknown["error"]
    )
    return answered


def test_another_principals_booking_is_an_unknown_booking(
    server: ServerProcess, auth_server: AuthorizationServer
) -> None:
    alice, bob = token(auth_server, A), token(auth_server, B)
    hold = hold_arguments("slot-ai-001")
    held = send(server, logical("booking.hold_slot", hold), alice)
    assert held["ok"] is True, held
    booking = held["data"]
    booking_id, version = booking["bookingId"], booking["version"]

    answered_as_unknown(server, bob, "booking.get_booking", {"bookingId": booking_id})
    approved = confirm_arguments(booking, approved_at=datetime.now(UTC))
    answered_as_unknown(server, bob, "booking.confirm_booking", approved)
    change = {"bookingId": booking_id, "expectedVersion": version}
    cancel = change | {"idempotencyKey": str(uuid.uuid4())}
    answered_as_unknown(server, bob, "booking.cancel_booking", cancel)
    move = change | {"newSlotId": "slot-ai-002", "idempotencyKey": str(uuid.uuid4())}
    answered_as_unknown(server, bob, "booking.reschedule_booking", move)
    listed = send(server, logical("booking.list_bookings", {"limit": 50}), bob)
    assert listed["ok"] is True
    assert booking_id not in json.dumps(listed["data"])
    by_key = {"limit": 50, "idempotencyKey": hold["idempotencyKey"]}
    found = send(server, logical("booking.list_bookings", by_key), bob)
    assert (found["ok"], found["data"]["bookings"], found["data"]["total"]) == (True, [], 0), found

    own = send(server, logical("booking.get_booking", {"bookingId": booking_id}), alice)
    assert own["ok"] is True
    # bob's confirm, cancel and reschedule changed nothing
    assert (own["data"]["status"], own["data"]["version"]) == ("HELD", version)
    assert own["data"]["slotId"] == booking["slotId"]
    mine = send(server, logical("booking.list_bookings", by_key), alice)
    assert [item["bookingId"] for item in mine["data"]["bookings"]] == [booking_id]


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
