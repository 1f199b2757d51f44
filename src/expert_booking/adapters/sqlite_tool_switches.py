"""``ToolSwitchStore`` on the SQLite file the servers share (tables of migration 4).

Each operation opens its own short-lived stdlib connection on a worker thread
(``asyncio.to_thread``): the state is read twice a second per process and written by an
operator, so a connection per call (~0.1 ms) is cheaper than a thread of its own, and the
booking store's connections stay untouched. Writes take ``BEGIN IMMEDIATE`` and bump the
version in the same transaction as the row they change; a load reads the version and the rows
in one read transaction, so a state is never a mix of two versions. The tables must exist:
open the ``SqliteBookingStore`` (which migrates) first.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from expert_booking.access.ports import DisabledTool, ToolSwitchState
from expert_booking.adapters.sqlite_transaction import DEFAULT_BUSY_TIMEOUT_MS, translate_error
from expert_booking.domain.errors import InternalError
from expert_booking.domain.model import format_instant, parse_instant

T = TypeVar("T")


class SqliteToolSwitches:
    """The kill-switch state in ``tool_switches`` / ``tool_switch_version``."""

    def __init__(self, path: Path | str, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS) -> None:
        """Use the database at ``path`` (already migrated)."""
        self._path = str(path)
        self._timeout = busy_timeout_ms / 1000

    async def version(self) -> int:
        """The current version (one indexed read of one row)."""
        return await self._run(_read_version)

    async def load(self) -> ToolSwitchState:
        """The disabled tools with the version they belong to."""
        return await self._run(_load)

    async def disable(self, name: str, reason: str, at: datetime) -> ToolSwitchState:
        """Switch ``name`` off with ``reason`` (replacing an earlier reason); the new state."""

        def write(connection: sqlite3.Connection) -> ToolSwitchState:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute(
                "INSERT INTO tool_switches (tool, reason, disabled_at) VALUES (?, ?, ?) "
                "ON CONFLICT (tool) DO UPDATE SET reason = excluded.reason, "
                "disabled_at = excluded.disabled_at",
                (name, reason, format_instant(at)),
            )
            _bump(connection)
            state = _read_state(connection)
            connection.execute("COMMIT")
            return state

        return await self._run(write)

    async def enable(self, name: str) -> bool:
        """Switch ``name`` on; ``False`` (and no new version) when it was not disabled."""

        def write(connection: sqlite3.Connection) -> bool:
            connection.execute("BEGIN IMMEDIATE")
            deleted = connection.execute("DELETE FROM tool_switches WHERE tool = ?", (name,))
            changed = deleted.rowcount > 0
            if changed:
                _bump(connection)
            connection.execute("COMMIT")
            return changed

        return await self._run(write)

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(self._call, work)

    def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        try:
            connection = sqlite3.connect(self._path, timeout=self._timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise translate_error(exc) from exc
        try:
            return work(connection)
        except sqlite3.Error as exc:
            raise translate_error(exc) from exc
        finally:
            connection.close()  # an open transaction is rolled back


def _bump(connection: sqlite3.Connection) -> None:
    connection.execute("UPDATE tool_switch_version SET version = version + 1 WHERE id = 1")


def _read_version(connection: sqlite3.Connection) -> int:
    row = connection.execute("SELECT version FROM tool_switch_version WHERE id = 1").fetchone()
    if row is None or not isinstance(row[0], int):
        raise InternalError("the tool switch version row is missing or not an integer")
    return row[0]


def _load(connection: sqlite3.Connection) -> ToolSwitchState:
    connection.execute("BEGIN")
    state = _read_state(connection)
    connection.execute("COMMIT")
    return state


def _read_state(connection: sqlite3.Connection) -> ToolSwitchState:
    version = _read_version(connection)
    rows = connection.execute(
        "SELECT tool, reason, disabled_at FROM tool_switches ORDER BY tool"
    ).fetchall()
    try:
        disabled = {
            tool: DisabledTool(name=tool, reason=reason, disabled_at=parse_instant(at))
            for tool, reason, at in rows
        }
    except (TypeError, ValueError) as exc:
        raise InternalError("a tool switch row is not in the form migration 4 writes") from exc
    return ToolSwitchState(version=version, disabled=disabled)
