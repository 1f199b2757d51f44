"""The sandbox ledger keeps in memory only what reached the disk."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from expert_booking.sandbox.ledger import Ledger, LedgerError


def test_a_change_that_could_not_be_written_was_never_made(tmp_path: Path) -> None:
    folder = tmp_path / "ledgers"
    folder.mkdir()
    ledger = Ledger(folder / "ledger.json")
    shutil.rmtree(folder)
    folder.write_text("a file where the ledger's directory was")  # the next write fails
    with pytest.raises(OSError, match="exists"):
        ledger.settle(
            "booking-1", "PAID", at="2030-01-01T00:00:00.000Z", amount="5.00", currency="CNY"
        )
    assert ledger.payment("booking-1").status == "PENDING"
    assert ledger.mailbox() == []
    folder.unlink()
    folder.mkdir()
    paid = ledger.settle(
        "booking-1", "PAID", at="2030-01-01T00:00:01.000Z", amount="5.00", currency="CNY"
    )
    assert (paid.status, ledger.mailbox()[0]["id"]) == ("PAID", 1)
    assert Ledger(folder / "ledger.json").payment("booking-1") == paid


def test_a_ledger_that_cannot_be_written_is_refused_at_start(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    with pytest.raises(LedgerError, match="no ledger can be written beside"):
        Ledger(blocker / "ledger.json")
