"""``python -m harness.clock FILE SECONDS``: the shell's way to move a controlled server's clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from harness.clock import OffsetFileClock, main


def test_the_command_sets_the_offset_every_clock_on_the_file_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    offset_file = tmp_path / "clock"
    clock = OffsetFileClock(offset_file)
    assert main([str(offset_file), "360"]) == 0
    assert "offset +360 s" in capsys.readouterr().out
    ahead = clock.now() - datetime.now(UTC)
    assert timedelta(seconds=359) < ahead <= timedelta(seconds=360)
    assert main([str(offset_file), "-30.5"]) == 0
    behind = datetime.now(UTC) - clock.now()
    assert timedelta(seconds=30) < behind <= timedelta(seconds=31)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["only-a-file"],
        ["f", "soon"],
        ["f", "nan"],
        ["f", "inf"],
        ["f", "1e12"],
        ["f", "1", "2"],
    ],
)
def test_a_wrong_call_says_how_to_call_it(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(tmp_path / arg) if arg == "f" else arg for arg in argv]) == 2
    assert capsys.readouterr().err.startswith("usage: python -m harness.clock")
    assert not (tmp_path / "f").exists()  # nothing written: a server's clock keeps working
