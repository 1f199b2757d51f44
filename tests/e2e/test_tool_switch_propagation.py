"""A kill switch reaches every server process on the database within 2 s, without a restart.

Seen both ways: each server logs the change, and its very next call of the tool is refused
with ``TOOL_DISABLED`` (the operator's reason, ``meta.disabledTools``), while catalog data stays
byte for byte what it was; after ``enable`` the tool runs again on both.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from expert_booking.__main__ import main
from expert_booking.testing.server_process import ServerProcess
from tests.e2e.rawhttp import call_logical, call_tool

pytestmark = pytest.mark.e2e

PROPAGATION_BOUND_SECONDS = 2.0
REASON = "payment provider outage"
SEARCH = {"query": "hold a slot", "limit": 3}


def admin(db: Path, *argv: str) -> None:
    """The operator's command, in this process (the servers are the other processes)."""
    assert main(["admin", "tools", *argv, "--db", str(db)]) == 0


def switch_line(version: int, disabled: str) -> Callable[[str], bool]:
    def matches(line: str) -> bool:
        if not line.startswith("{"):
            return False
        message = str(json.loads(line).get("message", ""))
        return message.startswith(f"tool switches at version {version}: disabled {disabled} ")

    return matches


def _port(server: ServerProcess) -> int:
    return int(server.base_url.rsplit(":", 1)[1])


def _hold(server: ServerProcess, slot_id: str) -> dict[str, Any]:
    arguments = {
        "slotId": slot_id,
        "customer": {"name": "Ada", "email": "ada@example.com"},
        "idempotencyKey": str(uuid.uuid4()),
    }
    return call_logical(_port(server), "booking.hold_slot", arguments)


def test_disable_and_enable_reach_two_running_servers_on_one_file(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    first = ServerProcess(db_path=db).launch()
    try:
        second = ServerProcess(db_path=db).launch()
        try:
            first.wait_ready()
            second.wait_ready()
            before = call_tool(_port(first), "tool_catalog.search", SEARCH)
            assert "disabledTools" not in before["meta"]
            admin(db, "disable", "booking.hold_slot", "--reason", REASON)
            changed_at = time.monotonic()
            for server in (first, second):
                server.wait_for_stderr(
                    switch_line(1, "booking.hold_slot"), timeout=PROPAGATION_BOUND_SECONDS
                )
                refused = _hold(server, "slot-ai-001")
                assert refused["ok"] is False, refused
                error = refused["error"]
                assert error["code"] == "TOOL_DISABLED"
                assert error["retryable"] is False
                assert error["details"] == {"name": "booking.hold_slot", "reason": REASON}
                assert REASON in error["message"]
                assert "disabledTools" in error["recovery"]["action"]
                assert refused["meta"]["disabledTools"] == [
                    {"name": "booking.hold_slot", "reason": REASON}
                ]
            assert time.monotonic() - changed_at < PROPAGATION_BOUND_SECONDS
            # Live state is meta only: the catalog's data is unchanged to the byte.
            during = call_tool(_port(second), "tool_catalog.search", SEARCH)
            assert json.dumps(during["data"]) == json.dumps(before["data"])
            assert during["meta"]["disabledTools"] == [
                {"name": "booking.hold_slot", "reason": REASON}
            ]
            admin(db, "enable", "booking.hold_slot")
            for server, slot_id in ((first, "slot-ai-001"), (second, "slot-law-001")):
                server.wait_for_stderr(switch_line(2, "none"), timeout=PROPAGATION_BOUND_SECONDS)
                held = _hold(server, slot_id)
                assert held["ok"] is True, held
                assert "disabledTools" not in held["meta"]
            refusals = [
                record["refusal"]
                for server in (first, second)
                for record in server.json_log_records()
                if isinstance(record.get("refusal"), dict)
                and record["refusal"].get("code") == "TOOL_DISABLED"
            ]
            assert [line["tool"] for line in refusals] == ["booking.hold_slot"] * 2
            assert all(line["caller"] == {"address": "127.0.0.1"} for line in refusals)
        finally:
            second.stop()
    finally:
        first.stop()


def test_a_server_started_after_the_change_starts_with_it(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    admin(db, "disable", "booking.get_booking", "--reason", "audit")
    with ServerProcess(db_path=db) as server:
        server.wait_for_stderr(switch_line(1, "booking.get_booking"), timeout=5)
