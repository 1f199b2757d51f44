"""``expert-booking-mcp admin tools ...`` through the command line, on a real database file."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from expert_booking.__main__ import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BOOKING_DB_PATH", "")  # blank reads as unset; recorded, so restored
    return tmp_path / "booking.db"


def test_disable_list_enable_round_trip(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "admin", "tools", "list", "--db", str(db)) == (
        0,
        "no tool is disabled (version 0)\n",
        (
            f"expert-booking-mcp: no database was at {db}: created it; servers on another file "
            "do not see this change (check --db / BOOKING_DB_PATH)\n"
        ),
    )
    status, out, _ = run(
        capsys,
        "admin",
        "tools",
        "disable",
        "booking.hold_slot",
        "--reason",
        " outage ",
        "--db",
        str(db),
    )
    assert (status, out) == (0, "booking.hold_slot disabled (version 1): outage\n")
    status, out, _ = run(capsys, "admin", "tools", "list", "--db", str(db))
    assert status == 0
    name, since, reason = out.rstrip("\n").split("\t")
    assert (name, reason) == ("booking.hold_slot", "outage")
    assert since.startswith("disabled since 20")
    assert run(capsys, "admin", "tools", "enable", "booking.hold_slot", "--db", str(db))[:2] == (
        0,
        "booking.hold_slot enabled\n",
    )
    assert run(capsys, "admin", "tools", "enable", "booking.hold_slot", "--db", str(db))[:2] == (
        0,
        "booking.hold_slot was not disabled\n",
    )


def test_the_database_comes_from_dotenv_as_for_serve(
    db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(db.parent)
    (db.parent / ".env").write_text(f"BOOKING_DB_PATH={db}\n", encoding="utf-8")
    assert run(capsys, "admin", "tools", "list", "--db", str(db))[0] == 0  # creates the file
    assert run(capsys, "admin", "tools", "disable", "booking.hold_slot", "--reason", "x") == (
        0,
        "booking.hold_slot disabled (version 1): x\n",
        "",  # the file existed: no note
    )
    assert not (db.parent / "expert-booking.db").exists()
    assert run(capsys, "admin", "tools", "list", "--db", str(db))[1].startswith(
        "booking.hold_slot\t"
    )


def test_the_database_comes_from_the_environment_as_for_serve(
    db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BOOKING_DB_PATH", str(db))
    assert (
        run(capsys, "admin", "tools", "disable", "booking.get_booking", "--reason", "audit")[0] == 0
    )
    monkeypatch.delenv("BOOKING_DB_PATH")
    out = run(capsys, "admin", "tools", "list", "--db", str(db))[1]
    assert out.startswith("booking.get_booking\t")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ("disable", "tool_catalog.call", "--reason", "x"),
            "expert-booking-mcp: tool_catalog.call is a catalog tool and cannot be disabled",
        ),
        (
            ("disable", "booking.nope", "--reason", "x"),
            "expert-booking-mcp: unknown tool 'booking.nope'",
        ),
        (
            ("enable", "tool_catalog.search"),
            "expert-booking-mcp: tool_catalog.search is a catalog tool",
        ),
        (
            ("disable", "booking.hold_slot", "--reason", "  "),
            "expert-booking-mcp: --reason must say why",
        ),
    ],
)
def test_refusals_are_one_line_with_status_2_and_change_nothing(
    db: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    status, out, err = run(capsys, "admin", "tools", *argv, "--db", str(db))
    assert status == 2
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith(message)
    assert run(capsys, "admin", "tools", "list", "--db", str(db))[1] == (
        "no tool is disabled (version 0)\n"
    )


def test_disable_requires_a_reason(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as excinfo:
        main(["admin", "tools", "disable", "booking.hold_slot", "--db", str(db)])
    assert excinfo.value.code == 2
    assert "--reason" in capsys.readouterr().err


def test_a_database_locked_past_the_busy_timeout_reads_but_refuses_a_change_with_75(
    db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another process's long write: ``list`` still answers; ``disable`` says why and how to
    go on (it was "the database STORAGE_BUSY: STORAGE_BUSY", status 2) (durability audit)."""
    assert run(capsys, "admin", "tools", "list", "--db", str(db))[0] == 0  # creates, migrates
    monkeypatch.setenv("BOOKING_DB_BUSY_TIMEOUT_MS", "200")
    with closing(sqlite3.connect(db, isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")
        assert run(capsys, "admin", "tools", "list", "--db", str(db))[:2] == (
            0,
            "no tool is disabled (version 0)\n",
        )
        status, out, err = run(
            capsys,
            "admin",
            "tools",
            "disable",
            "booking.hold_slot",
            "--reason",
            "x",
            "--db",
            str(db),
        )
        other.execute("ROLLBACK")
    assert (status, out) == (75, "")
    assert err == (
        f"expert-booking-mcp: nothing was changed: another process held the write lock of {db} "
        "for longer than BOOKING_DB_BUSY_TIMEOUT_MS (200 ms); retry, or raise that timeout\n"
    )
    assert run(capsys, "admin", "tools", "list", "--db", str(db))[1] == (
        "no tool is disabled (version 0)\n"
    )
