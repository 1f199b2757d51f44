"""Kill-switch state on SQLite, the rules of what may be switched, and the watcher."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from expert_booking.access.ports import DisabledTool, ToolSwitchState
from expert_booking.access.tool_switches import (
    ToolSwitchError,
    ToolSwitchWatcher,
    check_switchable,
    clean_reason,
)
from expert_booking.adapters.sqlite_store import SqliteBookingStore
from expert_booking.adapters.sqlite_tool_switches import SqliteToolSwitches
from expert_booking.domain.errors import StorageBusyError

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LOGICAL = ("booking.hold_slot", "booking.get_booking")
CATALOG = ("tool_catalog.search", "tool_catalog.call")

pytestmark = pytest.mark.anyio


@pytest.fixture
async def switches(store: SqliteBookingStore, db_path: Path) -> SqliteToolSwitches:
    """Depends on ``store``: opening it migrated the tables."""
    return SqliteToolSwitches(db_path)


async def test_a_fresh_database_has_nothing_disabled_at_version_0(
    switches: SqliteToolSwitches,
) -> None:
    assert await switches.version() == 0
    assert await switches.load() == ToolSwitchState(version=0)


async def test_disable_and_enable_each_move_the_version_by_one(
    switches: SqliteToolSwitches,
) -> None:
    state = await switches.disable("booking.hold_slot", "payment outage", AT)
    assert state == ToolSwitchState(
        version=1,
        disabled={"booking.hold_slot": DisabledTool("booking.hold_slot", "payment outage", AT)},
    )
    assert await switches.load() == state
    again = await switches.disable("booking.hold_slot", "still out", AT)
    assert again.version == 2
    assert again.disabled["booking.hold_slot"].reason == "still out"
    assert await switches.enable("booking.hold_slot") is True
    assert await switches.load() == ToolSwitchState(version=3)


async def test_enabling_a_tool_that_is_on_changes_nothing(switches: SqliteToolSwitches) -> None:
    assert await switches.enable("booking.hold_slot") is False
    assert await switches.version() == 0


async def test_a_write_lock_held_elsewhere_is_storage_busy_and_changes_nothing(
    store: SqliteBookingStore, db_path: Path
) -> None:
    impatient = SqliteToolSwitches(db_path, busy_timeout_ms=50)
    other = sqlite3.connect(db_path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(StorageBusyError):
            await impatient.disable("booking.hold_slot", "x", AT)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert await impatient.load() == ToolSwitchState(version=0)


async def test_the_watcher_sees_a_change_written_through_another_connection(
    switches: SqliteToolSwitches, db_path: Path
) -> None:
    seen: list[tuple[int, int]] = []
    watcher = ToolSwitchWatcher(
        switches,
        interval_seconds=3600,
        on_change=lambda old, new: seen.append((old.version, new.version)),
    )
    await watcher.start()
    try:
        assert watcher.disabled("booking.hold_slot") is None
        await SqliteToolSwitches(db_path).disable("booking.hold_slot", "outage", AT)
        await watcher.refresh()
        switch = watcher.disabled("booking.hold_slot")
        assert switch is not None
        assert switch.reason == "outage"
        await watcher.refresh()  # no new version: no reload, no second notice
        assert seen == [(0, 1)]
    finally:
        await watcher.stop()
        await watcher.stop()


async def test_the_watcher_polls_by_itself(switches: SqliteToolSwitches, db_path: Path) -> None:
    changed = asyncio.Event()
    watcher = ToolSwitchWatcher(
        switches, interval_seconds=0.01, on_change=lambda old, new: changed.set()
    )
    await watcher.start()
    try:
        await switches.disable("booking.get_booking", "audit", AT)
        await asyncio.wait_for(changed.wait(), timeout=5)
        assert watcher.disabled("booking.get_booking") is not None
    finally:
        await watcher.stop()


class FlakyStore:
    """The real store, except that polls fail while ``failing`` is set."""

    def __init__(self, inner: SqliteToolSwitches) -> None:
        self.inner = inner
        self.failing = False

    async def version(self) -> int:
        if self.failing:
            raise StorageBusyError
        return await self.inner.version()

    async def load(self) -> ToolSwitchState:
        return await self.inner.load()

    async def disable(self, name: str, reason: str, at: datetime) -> ToolSwitchState:
        return await self.inner.disable(name, reason, at)

    async def enable(self, name: str) -> bool:
        return await self.inner.enable(name)


async def test_a_failed_poll_keeps_the_last_known_state(
    switches: SqliteToolSwitches, caplog: pytest.LogCaptureFixture
) -> None:
    await switches.disable("booking.hold_slot", "outage", AT)
    flaky = FlakyStore(switches)
    watcher = ToolSwitchWatcher(flaky, interval_seconds=3600)
    await watcher.start()
    await switches.enable("booking.hold_slot")
    flaky.failing = True
    with caplog.at_level(logging.WARNING, logger="expert_booking.access"):
        await watcher.refresh()
    assert watcher.disabled("booking.hold_slot") is not None
    assert "tool switches not refreshed (STORAGE_BUSY); keeping version 1" in caplog.text
    flaky.failing = False
    await watcher.refresh()
    assert watcher.disabled("booking.hold_slot") is None
    await watcher.stop()


def test_catalog_tools_cannot_be_switched() -> None:
    with pytest.raises(ToolSwitchError, match="catalog tool and cannot be disabled"):
        check_switchable("tool_catalog.call", logical=LOGICAL, catalog=CATALOG)


@pytest.mark.parametrize("name", ["booking.nope", "", "BOOKING.HOLD_SLOT"])
def test_unknown_tool_names_are_refused(name: str) -> None:
    with pytest.raises(ToolSwitchError, match="unknown tool"):
        check_switchable(name, logical=LOGICAL, catalog=CATALOG)


def test_logical_tools_can_be_switched() -> None:
    check_switchable("booking.hold_slot", logical=LOGICAL, catalog=CATALOG)


def test_a_reason_is_trimmed_and_must_be_one_short_printable_line() -> None:
    assert clean_reason("  payment outage \n") == "payment outage"
    for bad in ["", "   ", "a\nb", "tab\there", "x" * 201]:
        with pytest.raises(ToolSwitchError):
            clean_reason(bad)
    assert clean_reason("x" * 200) == "x" * 200
