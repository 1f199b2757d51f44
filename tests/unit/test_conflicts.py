"""Help on conflict (``domain.conflicts``): ranking alternatives, and the intent diff."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta
from typing import Any

from expert_booking.domain.conflicts import FieldChange, intent_changes, rank_alternatives
from expert_booking.domain.model import Money, Slot
from tests.fakes import SLOT_AI_001_STARTS_AT, T0, make_slot

TAKEN = make_slot()  # slot-ai-001: exp-ai-001, AI, 2030-09-02T02:00Z, 500.00 CNY


def _slot(slot_id: str, hours: float, expert: str = "exp-ai-001", **changes: Any) -> Slot:
    start = SLOT_AI_001_STARTS_AT + timedelta(hours=hours)
    base = replace(
        TAKEN,
        slot_id=slot_id,
        expert_id=expert,
        starts_at=start,
        ends_at=start + timedelta(hours=1),
    )
    return replace(base, **changes)


def _ids(slots: tuple[Slot, ...]) -> list[str]:
    return [slot.slot_id for slot in slots]


def _ranked(*candidates: Slot, **options: object) -> list[str]:
    shuffled = list(candidates)
    random.Random(7).shuffle(shuffled)  # the order the store returns them in does not matter
    return _ids(rank_alternatives(TAKEN, shuffled, now=T0, **options))  # type: ignore[arg-type]


def test_the_same_expert_comes_first_nearest_start_first_and_a_tie_goes_to_the_earlier() -> None:
    assert _ranked(
        _slot("plus-3", 3), _slot("minus-2", -2), _slot("plus-2", 2), _slot("plus-1", 1)
    ) == [
        "plus-1",
        "minus-2",
        "plus-2",
    ]


def test_a_tie_at_one_instant_goes_to_the_smaller_slot_id() -> None:
    assert _ranked(_slot("b", 1), _slot("a", 1), _slot("c", 5)) == ["a", "b", "c"]


def test_one_place_is_kept_for_another_expert_free_at_the_same_start() -> None:
    colleague = _slot("mz", 0, "exp-ai-002")
    mine = [_slot(f"mine-{n}", n) for n in (1, 2, 3, 4)]
    assert _ranked(*mine, colleague) == ["mine-1", "mine-2", "mz"]
    # Places the other kind cannot fill go to this one: no colleague, three of the same expert;
    assert _ranked(*mine) == ["mine-1", "mine-2", "mine-3"]
    # one hour of the same expert, two colleagues (by slot id) after it;
    colleagues = [
        _slot(name, 0, expert)
        for name, expert in (("jb", "exp-ai-003"), ("mz", "exp-ai-002"), ("zz", "exp-ai-004"))
    ]
    assert _ranked(mine[0], *colleagues) == ["mine-1", "jb", "mz"]
    # none of the same expert: three colleagues.
    assert _ranked(*colleagues) == ["jb", "mz", "zz"]
    # A limit of one keeps the order: the same expert first.
    assert _ranked(*mine, colleague, limit=1) == ["mine-1"]
    assert _ranked(*mine, colleague, limit=0) == []


def test_only_slots_that_can_stand_in_are_offered() -> None:
    candidates = [
        TAKEN,  # the taken slot itself
        _slot("started", -30 * 24),  # starts before now (T0)
        replace(_slot("at-now", 0), starts_at=T0),  # starts at now: begun
        _slot("other-time-colleague", 1, "exp-ai-002"),  # another expert at another time
        _slot("law", 0, "exp-law-001", specialty="LAW"),  # another specialty at the same time
        _slot("ok", 5),
    ]
    assert _ranked(*candidates) == ["ok"]


def test_a_price_keeps_only_slots_at_that_price() -> None:
    cheaper = _slot("cheaper", 1, price=Money("400.00", "CNY"))
    euro = _slot("euro", 1, price=Money("500.00", "EUR"))
    same = _slot("same", 2)
    assert _ranked(cheaper, euro, same) == ["cheaper", "euro", "same"]
    assert _ranked(cheaper, euro, same, price=Money("500.00", "CNY")) == ["same"]


def test_a_candidate_listed_twice_is_offered_once() -> None:
    twice = _slot("twice", 1)
    assert _ranked(twice, twice, _slot("next", 2)) == ["twice", "next"]


def test_the_diff_names_exactly_the_fields_that_differ_in_sorted_order() -> None:
    approved = {"amount": "1.00", "bookingId": "b", "slotId": "s-1", "version": 1}
    current = {"amount": "500.00", "bookingId": "b", "slotId": "s-2", "version": 1}
    assert intent_changes(approved, current) == (
        FieldChange("amount", "1.00", "500.00"),
        FieldChange("slotId", "s-1", "s-2"),
    )
    assert intent_changes(current, current) == ()


def test_a_field_on_one_side_only_is_none_on_the_other() -> None:
    assert intent_changes({"version": 1}, {"action": "CANCEL", "version": 1}) == (
        FieldChange("action", None, "CANCEL"),
    )
    assert intent_changes({"newSlotId": "s"}, {}) == (FieldChange("newSlotId", "s", None),)


def test_nested_keys_are_dotted_paths_and_types_count() -> None:
    approved = {"price": {"amount": "1.00", "currency": "CNY"}, "version": True, "tags": [1]}
    current = {"price": {"amount": "2.00", "currency": "CNY"}, "version": 1, "tags": [1, 2]}
    assert intent_changes(approved, current) == (
        FieldChange("price.amount", "1.00", "2.00"),
        FieldChange("tags", [1], [1, 2]),
        FieldChange("version", True, 1),  # JSON tells true from 1
    )
    assert intent_changes({"price": {}}, {"price": {}}) == ()
    assert intent_changes({"price": {}}, {"price": {"amount": "1.00"}}) == (
        FieldChange("price", {}, None),
        FieldChange("price.amount", None, "1.00"),
    )


def test_a_limit_of_two_still_keeps_one_place_for_another_expert() -> None:
    colleague = _slot("mz", 0, "exp-ai-002")
    mine = [_slot(f"mine-{n}", n) for n in (1, 2, 3)]
    assert _ranked(*mine, colleague, limit=2) == ["mine-1", "mz"]
    assert _ranked(*mine, limit=2) == ["mine-1", "mine-2"]
