"""A kill switch reaches every server process on the database within 2 s, without a restart."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from expert_booking.__main__ import main
from expert_booking.testing.server_process import ServerProcess

pytestmark = pytest.mark.e2e

PROPAGATION_BOUND_SECONDS = 2.0


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


def test_disable_and_enable_reach_two_running_servers_on_one_file(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    first = ServerProcess(db_path=db).launch()
    try:
        second = ServerProcess(db_path=db).launch()
        try:
            first.wait_ready()
            second.wait_ready()
            admin(db, "disable", "booking.hold_slot", "--reason", "payment provider outage")
            changed_at = time.monotonic()
            for server in (first, second):
                server.wait_for_stderr(
                    switch_line(1, "booking.hold_slot"), timeout=PROPAGATION_BOUND_SECONDS
                )
            assert time.monotonic() - changed_at < PROPAGATION_BOUND_SECONDS
            admin(db, "enable", "booking.hold_slot")
            for server in (first, second):
                server.wait_for_stderr(switch_line(2, "none"), timeout=PROPAGATION_BOUND_SECONDS)
        finally:
            second.stop()
    finally:
        first.stop()


def test_a_server_started_after_the_change_starts_with_it(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    admin(db, "disable", "booking.get_booking", "--reason", "audit")
    with ServerProcess(db_path=db) as server:
        server.wait_for_stderr(switch_line(1, "booking.get_booking"), timeout=5)
