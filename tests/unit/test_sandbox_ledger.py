"""The sandbox ledger: the file's shape checked at load, one exclusive holder, durable renames."""

from __future__ import annotations

import gc
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from expert_booking.sandbox.ledger import (
    FINAL_STATUSES,
    LEDGER_VERSION,
    SHOWN_ID_CHARS,
    Ledger,
    LedgerError,
    schema,
)

PAID = {
    "status": "PAID",
    "paidAt": "2030-01-01T00:00:00.000Z",
    "changedAt": "2030-01-01T00:00:00.000Z",
}
MESSAGE = {
    "id": 1,
    "at": "2030-01-01T00:00:00.000Z",
    "kind": "payment.paid",
    "bookingId": "booking-1",
    "status": "PAID",
    "amount": "5.00",
    "currency": "CNY",
}


def _lock_file(path: Path) -> Path:
    return path.with_name(f"{path.name}.lock")


def _settle(ledger: Ledger, booking_id: str = "booking-1") -> None:
    ledger.settle(booking_id, "PAID", at="2030-01-01T00:00:00.000Z", amount="5.00", currency="CNY")


@pytest.mark.parametrize(
    "data",
    [
        {"version": 1},
        {"version": 1, "payments": [], "mailbox": []},
        {"version": 1, "payments": {}, "mailbox": {}},
        {"version": 1, "payments": {}},
        {"version": 1, "payments": {"booking-1": "PAID"}, "mailbox": []},
        {"version": 1, "payments": {"booking-1": {**PAID, "status": "PENDING"}}, "mailbox": []},
        {"version": 1, "payments": {"booking-1": {**PAID, "status": "REFUNDED"}}, "mailbox": []},
        {"version": 1, "payments": {"booking-1": {**PAID, "paidAt": 5}}, "mailbox": []},
        {"version": 1, "payments": {"booking-1": {"status": "PAID"}}, "mailbox": []},
        {"version": 1, "payments": {}, "mailbox": ["payment.paid"]},
        {"version": 1, "payments": {}, "mailbox": [{**MESSAGE, "id": "1"}]},
        {"version": 1, "payments": {}, "mailbox": [{**MESSAGE, "bookingId": None}]},
        {"version": 1, "payments": {}, "mailbox": [{**MESSAGE, "status": "SOMETHING"}]},
        {"version": 1, "payments": {"\ud800": PAID}, "mailbox": []},
    ],
)
def test_a_ledger_of_another_shape_is_refused_when_read(tmp_path: Path, data: Any) -> None:
    """It started, then every request was an unlogged 500 (security review)."""
    path = tmp_path / "ledger.json"
    text = json.dumps(data)  # a lone surrogate becomes its \\ud800 escape
    path.write_text(text, encoding="utf-8")
    with pytest.raises(LedgerError, match="is not a version 1 ledger: ") as refused:
        Ledger(path)
    assert "\n" not in str(refused.value)
    assert path.read_text(encoding="utf-8") == text  # never overwritten


def test_a_ledger_whose_version_is_true_and_not_1_is_refused(tmp_path: Path) -> None:
    """``True == 1`` in Python: the schema's ``"const": 1`` tells a boolean from the number."""
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps({"version": True, "payments": {}, "mailbox": []}), "utf-8")
    with pytest.raises(LedgerError, match=re.escape('/version does not meet {"const": 1}')):
        Ledger(path)


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"version": 1, "mailbox": []}, "/payments is missing"),
        ({"version": 1, "payments": {}, "mailbox": {}}, '/mailbox does not meet {"type": "array"}'),
        (
            {"version": 1, "payments": {"b" * 500: {**PAID, "paidAt": None}}, "mailbox": []},
            f"the payment of '{'b' * SHOWN_ID_CHARS}…' is not a final status",
        ),
        (
            {"version": 1, "payments": {}, "mailbox": [MESSAGE, {**MESSAGE, "id": 2.0}]},
            "mailbox message 2 is not a message of the documented shape",
        ),
        (
            {"version": 1, "payments": {"\ud800": PAID}, "mailbox": []},
            "it holds a lone surrogate",
        ),
    ],
)
def test_a_refused_ledger_says_where_it_departs_from_the_schema(
    tmp_path: Path, data: Any, said: str
) -> None:
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(LedgerError) as refused:
        Ledger(path)
    assert str(refused.value).startswith(f"{path} is not a version 1 ledger: ")
    assert said in str(refused.value)
    assert "b" * (SHOWN_ID_CHARS + 1) not in str(refused.value)


def test_the_schema_is_a_draft_2020_12_document_of_the_ledgers_version_and_statuses() -> None:
    """One list of final statuses: the schema's enum is pinned to ``FINAL_STATUSES``."""
    document = schema()
    Draft202012Validator.check_schema(document)
    assert document["properties"]["version"] == {"const": LEDGER_VERSION}
    assert tuple(document["$defs"]["finalStatus"]["enum"]) == FINAL_STATUSES


def test_a_ledger_of_the_documented_shape_is_read_back(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    data = {
        "version": 1,
        "payments": {
            "booking-1": PAID,
            "booking-2": {"status": "CLOSED", "paidAt": None, "changedAt": "2030-01-01T00:00:01Z"},
        },
        "mailbox": [MESSAGE],
    }
    path.write_text(json.dumps(data), encoding="utf-8")
    ledger = Ledger(path)
    assert (ledger.payment("booking-1").status, ledger.payment("booking-2").status) == (
        "PAID",
        "CLOSED",
    )
    _settle(ledger, "booking-3")
    assert [message["id"] for message in Ledger(path).mailbox()] == [2, 1]


def test_an_exclusive_ledger_refuses_a_second_one_in_this_process_until_it_is_gone(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.json"
    first = Ledger(path, exclusive=True)
    with pytest.raises(LedgerError, match="another payment sandbox uses the ledger"):
        Ledger(path, exclusive=True)
    _settle(first)
    del first
    gc.collect()
    second = Ledger(path, exclusive=True)
    assert second.payment("booking-1").status == "PAID"
    assert _lock_file(path).is_file()


def test_a_ledger_refused_after_taking_the_lock_lets_it_go(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    path.write_text("{}", encoding="utf-8")
    with pytest.raises(LedgerError, match="not a version 1 ledger"):
        Ledger(path, exclusive=True)
    path.unlink()
    Ledger(path, exclusive=True)  # the refused one holds nothing


def test_a_ledger_opened_without_exclusive_takes_no_lock(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    Ledger(path)
    Ledger(path)
    assert not _lock_file(path).exists()


def test_a_recorded_change_has_its_rename_synced_in_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the directory's fsync a power loss can undo a rename reported as recorded."""
    synced: list[int] = []
    real_fsync = os.fsync

    def spy(descriptor: int) -> None:
        synced.append(os.fstat(descriptor).st_mode)
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", spy)
    ledger = Ledger(tmp_path / "ledger.json")
    _settle(ledger)
    kinds = ["directory" if stat.S_ISDIR(mode) else "file" for mode in synced]
    assert kinds == ["file", "directory"]
