"""A server (re)started while another process holds the database's write lock starts and reads.

Before, the start-up check's write probe waited out the busy timeout and ended the start with
"SQLITE_BUSY: database is locked", status 2: a crashed server could not be restarted during
another process's long write (durability audit). Now writes answer STORAGE_BUSY until the lock
is released, as for a running server.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from expert_booking.client import open_client
from expert_booking.testing.server_process import ServerProcess, ServerStartError

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_a_server_starts_and_serves_reads_while_another_process_writes(
    tmp_path: Path,
) -> None:
    database = tmp_path / "expert-booking.db"
    with ServerProcess(db_path=database):
        pass  # created, migrated and seeded
    env = {**os.environ, "BOOKING_DB_BUSY_TIMEOUT_MS": "200"}
    with closing(sqlite3.connect(database, isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")
        with ServerProcess(db_path=database, env=env) as server:
            warning = json.loads(server.wait_for_stderr(lambda line: "write lock" in line))
            assert warning["level"] == "WARNING"
            assert "writes wait or answer STORAGE_BUSY" in warning["message"]
            async with open_client(server.url) as client:
                listed = await client.list_tools()
                result = await client.call_tool(
                    "tool_catalog.search", {"query": "hold a slot", "limit": 1}
                )
            other.execute("ROLLBACK")
    assert len(listed.tools) == 3
    assert result.structured_content is not None
    assert result.structured_content["ok"] is True


def test_an_upgrade_that_must_migrate_under_the_lock_ends_in_one_line(tmp_path: Path) -> None:
    """Migrations must write: with the lock held the start ends with status 2 and one line
    naming the lock, not a lifespan traceback (review)."""
    database = tmp_path / "expert-booking.db"
    with ServerProcess(db_path=database):
        pass
    with closing(sqlite3.connect(database, isolation_level=None)) as other:
        newest = "SELECT MAX(version) FROM schema_migrations"
        other.execute(f"DELETE FROM schema_migrations WHERE version = ({newest})")  # noqa: S608
        other.execute("BEGIN IMMEDIATE")
        env = {**os.environ, "BOOKING_DB_BUSY_TIMEOUT_MS": "200"}
        starting = ServerProcess(db_path=database, env=env)
        with pytest.raises(ServerStartError, match="1 migration"):
            starting.start()
        other.execute("ROLLBACK")
    assert "Traceback" not in "\n".join(starting.stderr_lines)
