"""Help on conflict: ranked alternatives to a taken slot, and what changed since an approval.

Pure rules; the data comes in as arguments.

Alternatives (:func:`rank_alternatives`): a person who wanted a slot that is gone most likely
wants the same expert at another time, else another expert of the same specialty at that very
time. So the same expert's free slots come first, nearest start first (by absolute distance
from the taken slot's start; a tie goes to the earlier one, then to the smaller slot id), then
other experts' slots of the same specialty starting at the same instant (by slot id). At most
``limit`` (three) in all, and while another expert has such a slot, at most ``limit - 1`` of the
same expert: one place is kept for a different person, so an expert with many free hours does
not hide the colleague free at the wanted time. Places one kind cannot fill go to the other.
Only slots that can be held now count (not the taken one, not started); a ``price`` keeps only
slots at that price (a reschedule charges no difference).

Changes (:func:`intent_changes`): a field-level diff of two intent documents (the approved one
and the current one), each entry the field's path, its approved and its current value. Nested
keys are joined with ``.`` (``price.amount``); a key present on one side only has ``None`` on
the other. Fields in sorted path order, as the canonical intent sorts its keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from expert_booking.domain.model import Money, Slot

ALTERNATIVES_LIMIT = 3
"""How many alternatives a refusal offers at most."""


def rank_alternatives(
    taken: Slot,
    candidates: Iterable[Slot],
    *,
    now: datetime,
    price: Money | None = None,
    limit: int = ALTERNATIVES_LIMIT,
) -> tuple[Slot, ...]:
    """The best ``limit`` stand-ins for ``taken`` among free ``candidates``, best first.

    ``candidates`` are slots no booking holds (the caller's read); this rule drops the taken
    slot itself, slots that started by ``now``, other specialties, other experts' slots at
    other times and, with ``price``, slots at another price.
    """
    usable = {
        slot.slot_id: slot
        for slot in candidates
        if slot.slot_id != taken.slot_id
        and slot.starts_at > now
        and (price is None or slot.price == price)
    }.values()
    same = sorted(
        (slot for slot in usable if slot.expert_id == taken.expert_id),
        key=lambda slot: (abs(slot.starts_at - taken.starts_at), slot.starts_at, slot.slot_id),
    )
    others = sorted(
        (
            slot
            for slot in usable
            if slot.expert_id != taken.expert_id
            and slot.specialty == taken.specialty
            and slot.starts_at == taken.starts_at
        ),
        key=lambda slot: slot.slot_id,
    )
    if limit <= 0:
        return ()
    reserve = 1 if others and limit > 1 else 0
    same_places = min(len(same), limit - reserve)
    other_places = min(len(others), limit - same_places)
    same_places = min(len(same), limit - other_places)  # what the others left unused
    return (*same[:same_places], *others[:other_places])


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One field that differs: its path, the approved value and the current one."""

    field: str
    approved: Any
    current: Any


def intent_changes(
    approved: Mapping[str, Any], current: Mapping[str, Any]
) -> tuple[FieldChange, ...]:
    """Every field whose value differs between ``approved`` and ``current``, by sorted path.

    Nested mappings are compared key by key (``outer.inner``); any other value (lists
    included) as a whole. A key missing on one side has ``None`` there.
    """
    left = dict(_flatten(approved, ""))
    right = dict(_flatten(current, ""))
    return tuple(
        FieldChange(path, left.get(path), right.get(path))
        for path in sorted(left.keys() | right.keys())
        if path not in left or path not in right or not _same(left[path], right[path])
    )


def _flatten(document: Mapping[str, Any], prefix: str) -> Iterable[tuple[str, Any]]:
    for key, value in document.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from _flatten(value, f"{path}.")
        else:
            yield path, value


def _same(left: Any, right: Any) -> bool:
    """Equal and of the same type: ``1`` is not ``True``, nor ``1.0`` (JSON tells them apart)."""
    return type(left) is type(right) and left == right
