"""``harness.serve_controlled`` is ``serve`` with another clock, start-up checks included."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from expert_booking.testing.server_process import ServerStartError
from harness.serve_controlled import harness_server

pytestmark = pytest.mark.e2e

EVERYWHERE = "0.0.0.0"  # noqa: S104 - the bind the check must refuse


def test_a_controlled_server_refuses_what_serve_refuses_in_one_line(tmp_path: Path) -> None:
    """A non-loopback bind without access control: refused at start, as ``serve`` refuses it."""
    server = harness_server(
        [sys.executable, "-m", "harness.serve_controlled"],
        db_path=tmp_path / "booking.db",
        extra_args=["--clock-offset-file", str(tmp_path / "clock"), "--host", EVERYWHERE],
        env={**os.environ, "AUTH_MODE": "none"},
    )
    try:
        with pytest.raises(ServerStartError):
            server.start()
        assert server.returncode == 2
        (line,) = server.stderr_lines
        assert json.loads(line)["message"].startswith("expert-booking-mcp: configuration error:")
    finally:
        server.close()
    assert not (tmp_path / "booking.db").exists()  # refused before the database was touched
