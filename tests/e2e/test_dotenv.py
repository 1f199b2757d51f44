"""``serve`` reads ``./.env``; the environment wins over it, and flags win over both."""

from __future__ import annotations

import os
from pathlib import Path

import httpx2
import pytest

from expert_booking.testing.server_process import ServerProcess

pytestmark = pytest.mark.e2e


def host_status(server: ServerProcess) -> int:
    """The status of a POST /mcp whose Host is 127.0.0.1 (421 when that Host is not allowed)."""
    response = httpx2.post(server.url, content=b"{}", headers={"content-type": "application/json"})
    return response.status_code


def test_dotenv_in_the_working_directory_configures_serve(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("ALLOWED_HOSTS=booking.example\nPORT=1\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in {"ALLOWED_HOSTS", "PORT"}}
    with ServerProcess(env=env, cwd=tmp_path) as server:  # --port 0 wins over PORT=1
        assert host_status(server) == 421


def test_the_environment_wins_over_dotenv(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("ALLOWED_HOSTS=booking.example\n", encoding="utf-8")
    env = {**os.environ, "ALLOWED_HOSTS": "127.0.0.1"}
    with ServerProcess(env=env, cwd=tmp_path) as server:
        assert host_status(server) == 400


def test_a_dotenv_where_the_tests_run_reaches_no_spawned_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A developer's ``./.env`` in the checkout must not configure the servers tests spawn.

    They run in their database's directory unless told otherwise (they used to inherit the test
    run's, and read its ``.env``); ``harness.serve_controlled``'s children too.
    """
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / ".env").write_text("ALLOWED_HOSTS=booking.example\n", encoding="utf-8")
    monkeypatch.chdir(checkout)
    env = {k: v for k, v in os.environ.items() if k != "ALLOWED_HOSTS"}
    (tmp_path / "db").mkdir()
    with ServerProcess(env=env, db_path=tmp_path / "db" / "booking.db") as server:
        assert host_status(server) == 400  # the default allow-list: 127.0.0.1 is allowed
