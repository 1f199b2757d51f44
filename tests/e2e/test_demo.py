"""``expert-booking-mcp demo`` runs the whole story and explains what a reader sees."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def test_the_demo_books_through_the_sandbox_and_explains_its_lines(tmp_path: Path) -> None:
    """Its own server on the defaults, whatever the operator's environment and ./.env say."""
    (tmp_path / ".env").write_text("PORT=abc\nHOLD_TTL_SECONDS=1\n", encoding="utf-8")
    operator = {
        **os.environ,
        "AUTH_MODE": "oauth",
        "QUOTA_PER_CALLER_PER_MINUTE": "2",
        "CLIENT_CLOCK_TOLERANCE_SECONDS": "0",
        "OTEL_TRACES_EXPORTER": "zipkin",
    }
    done = subprocess.run(
        [sys.executable, "-m", "expert_booking", "demo"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=operator,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "The demo also plays the person" in out
    assert "presses Pay on the payment page (the demo plays the payer)" in out
    assert "clientSentAt <= serverReceivedAt [<= serverResultCreatedAt]" in out
    assert re.search(r"CONFIRMED v2 paidAt \S+", out)
    summaries = [
        line for line in out.splitlines() if line.strip().startswith("booking.") and ": " in line
    ]
    assert summaries
    for line in summaries:
        text = line.split(": ", 1)[1]
        assert text.endswith((" …", ".")), f"summary cut mid-word: {line!r}"
