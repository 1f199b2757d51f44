"""A spawned server and payment sandbox sharing one database, as a user runs them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from expert_booking.testing.sandbox_pair import server_with_sandbox
from expert_booking.testing.server_process import ServerProcess


@dataclass(frozen=True)
class Pair:
    """The server and the sandbox it queries; the sandbox reads the server's database."""

    server: ServerProcess
    sandbox: ServerProcess


def running_pair(tmp: Path) -> Iterator[Pair]:
    """Start the sandbox on the server's future database, then the server pointed at it."""
    with server_with_sandbox(tmp / "expert-booking.db") as (server, sandbox):
        yield Pair(server, sandbox)


def hold_arguments(slot_id: str) -> dict[str, Any]:
    return {
        "name": "booking.hold_slot",
        "arguments": {
            "slotId": slot_id,
            "customer": {"name": "Li Hua", "email": "Li.Hua@Example.com"},
            "idempotencyKey": str(uuid.uuid4()),
        },
        "requestSpanId": str(uuid.uuid4()),
    }


def confirm_arguments(booking: dict[str, Any], approved_at: str) -> dict[str, Any]:
    intent = booking["confirmationIntent"]
    return {
        "name": "booking.confirm_booking",
        "arguments": {
            "bookingId": booking["bookingId"],
            "expectedVersion": booking["version"],
            "idempotencyKey": str(uuid.uuid4()),
            "humanApproval": {
                "approvalId": str(uuid.uuid4()),
                "decision": "APPROVE",
                "approvedAt": approved_at,
                "intent": intent["intent"],
                "intentHash": intent["intentHash"],
            },
        },
        "requestSpanId": str(uuid.uuid4()),
    }
