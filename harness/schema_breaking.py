"""Breaking changes between two versions of a JSON Schema, judged by who reads the document.

A document the server receives (tool arguments, the payment service's answer) breaks its senders
when the newer version rejects a value the older one accepted: a tightening. A document the
server sends (results, snapshots, errors, the envelope) also breaks its strict readers when the
newer version lets the server send a value the older one rejected: a widening. By the project's
policy (NOTES: "Results: an added property is not breaking, an added enum value is") a property
added to a sent document, required or not, is not breaking, and neither is a looser
``additionalProperties``. Tightenings are reported for sent documents too: a removed result
property breaks whoever reads it, and the differ does not tell harmless tightenings apart.
"""

from __future__ import annotations

import enum
import json
from typing import Any

_LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_ALL_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
_BRANCHES = ("anyOf", "oneOf")
_JUDGED = frozenset(
    {"type", "enum", "const", "$ref", "pattern", "format", "properties", "required", "items"}
    | {"additionalProperties", "$defs", "dependentSchemas", *_LOWER_BOUNDS, *_UPPER_BOUNDS}
    | set(_BRANCHES)
)
ANNOTATIONS = frozenset(
    {"description", "title", "examples", "$comment", "default", "deprecated"}
    | {"readOnly", "writeOnly", "$schema", "$id"}
)
"""Keywords that never change which values a schema accepts; edits to them are never reported."""

# Where a schema holds subschemas: a map of them, one, or a list of them.
_SCHEMA_MAPS = ("properties", "$defs", "dependentSchemas", "patternProperties")
_SCHEMA_VALUES = ("items", "additionalProperties", "not", "if", "then", "else", "contains")
_SCHEMA_VALUES_MORE = ("propertyNames", "unevaluatedItems", "unevaluatedProperties")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


class Direction(enum.Flag):
    """Who reads a document: the server (``RECEIVED``), its callers (``SENT``), or both."""

    RECEIVED = enum.auto()
    SENT = enum.auto()


def breaking_changes(
    old: dict[str, Any], new: dict[str, Any], *, direction: Direction = Direction.RECEIVED
) -> list[str]:
    """Changes from ``old`` to ``new`` that break a reader of a document read in ``direction``.

    Every direction gets the tightenings (what ``new`` may reject that ``old`` accepted), except
    two that only a ``RECEIVED`` document reports, as in a sent one they add a property: a
    property that is new and required, and a new ``dependentSchemas`` entry. ``SENT``
    adds the widenings: a type or enum value gained, an enum, const, pattern, format, ``$ref``
    or ``dependentSchemas`` entry dropped, a bound lowered, raised or dropped, a property no
    longer required, an ``anyOf``/``oneOf`` branch gained or the keyword dropped. A gained
    ``oneOf`` branch is reported in every direction (a value matching two is rejected).
    ``integer`` is a subset of ``number``.

    Walks ``properties``, ``items``, ``additionalProperties`` (tightenings only),
    ``dependentSchemas``, ``$defs`` and ``anyOf``/``oneOf`` branches: branches found unchanged
    in both lists (in any order, annotations aside) are set aside, the rest are compared by
    position. ``$ref`` targets are compared by name; the referenced ``$defs`` entry is compared
    on its own. Any other keyword that is not in ``ANNOTATIONS`` is not judged: any change to it
    is reported.
    Each entry is ``"<JSON Pointer>: <what changed>"``.
    """
    return _compare(old, new, "", direction)


def judged_form(schema: Any, *, keep: frozenset[str] = frozenset()) -> Any:
    """``schema`` without its ``ANNOTATIONS`` (except ``keep``, at the root only): what is judged.

    Two schemas with the same judged form accept the same values. Property names and the values
    of ``enum``, ``const`` and ``required`` are kept whatever they spell.
    """
    if not isinstance(schema, dict):
        return schema
    form: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ANNOTATIONS and key not in keep:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            form[key] = {name: judged_form(entry) for name, entry in value.items()}
        elif key in _SCHEMA_VALUES or key in _SCHEMA_VALUES_MORE:
            form[key] = judged_form(value)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            form[key] = [judged_form(entry) for entry in value]
        else:
            form[key] = value
    return form


def _compare(old: Any, new: Any, at: str, direction: Direction) -> list[str]:
    if old == new:
        return []
    where = at or "/"
    if new is False:
        return [f"{where}: schema became `false`"]
    if old is False:
        return [f"{where}: schema `false` became {json.dumps(new)}"] if _sent(direction) else []
    old_node = {} if old is True else old
    new_node = {} if new is True else new
    if not isinstance(old_node, dict) or not isinstance(new_node, dict):
        return [f"{where}: schema changed (not judged: treated as breaking)"]
    messages = [*_tightenings(old_node, new_node), *_unjudged_changes(old_node, new_node)]
    if _sent(direction):
        messages.extend(_widenings(old_node, new_node))
    found = [f"{where}: {message}" for message in messages]
    found.extend(_property_changes(old_node, new_node, at, direction))
    found.extend(_nested_changes(old_node, new_node, at, direction))
    return found


def _sent(direction: Direction) -> bool:
    return Direction.SENT in direction


# ------------------------------------------------------------------------------- keywords


def _tightenings(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    found: list[str] = []
    if lost := sorted(name for name in _types(old) if not _allows(_types(new), name)):
        found.append(f"type no longer allows {', '.join(lost)}")
    if "enum" in new and new["enum"] != old.get("enum"):
        if "enum" not in old:
            found.append("enum added")
        elif lost_values := [value for value in old["enum"] if value not in new["enum"]]:
            found.append(f"enum value(s) removed: {', '.join(map(json.dumps, lost_values))}")
    if "const" in new and ("const" not in old or old["const"] != new["const"]):
        found.append(f"const set to {json.dumps(new['const'])}")
    if new.get("additionalProperties") is False and old.get("additionalProperties", True) is True:
        found.append("additionalProperties became false")
    if "$ref" in new and new["$ref"] != old.get("$ref"):
        found.append(f"$ref changed to {new['$ref']!r} (was {old.get('$ref', 'unset')!r})")
    tightened = [
        key for key in _LOWER_BOUNDS if key in new and (key not in old or new[key] > old[key])
    ] + [key for key in _UPPER_BOUNDS if key in new and (key not in old or new[key] < old[key])]
    found.extend(
        f"{key} tightened to {new[key]} (was {old.get(key, 'unset')})" for key in tightened
    )
    found.extend(
        f"{key} changed to {new[key]!r} (was {old.get(key, 'unset')!r})"
        for key in ("pattern", "format")
        if key in new and new[key] != old.get(key)
    )
    return found


def _widenings(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    found: list[str] = []
    if gained := sorted(name for name in _types(new) if not _allows(_types(old), name)):
        found.append(f"type widened to allow {', '.join(gained)}")
    if "enum" in old and "enum" not in new:
        found.append("enum removed")
    elif "enum" in old and (added := [value for value in new["enum"] if value not in old["enum"]]):
        found.append(f"enum value(s) added: {', '.join(map(json.dumps, added))}")
    found.extend(
        f"{key} removed (was {json.dumps(old[key])})"
        for key in ("const", "pattern", "format", "$ref")
        if key in old and key not in new
    )
    loosened = [
        key for key in _LOWER_BOUNDS if key in old and (key not in new or new[key] < old[key])
    ] + [key for key in _UPPER_BOUNDS if key in old and (key not in new or new[key] > old[key])]
    found.extend(f"{key} loosened to {new.get(key, 'unset')} (was {old[key]})" for key in loosened)
    return found


def _unjudged_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    found: list[str] = []
    for key in sorted((old.keys() | new.keys()) - _JUDGED - ANNOTATIONS):
        if key in old and key in new and _judged_keyword(old, key) == _judged_keyword(new, key):
            continue
        change = "added" if key not in old else "removed" if key not in new else "changed"
        found.append(f"keyword `{key}` {change} (not judged: treated as breaking)")
    return found


def _judged_keyword(node: dict[str, Any], key: str) -> Any:
    """``node[key]`` without the annotations of the subschemas it holds (``allOf``, ``not``...)."""
    return judged_form({key: node[key]})[key]


def _types(node: dict[str, Any]) -> frozenset[str]:
    declared = node.get("type")
    if declared is None:
        return _ALL_TYPES
    if isinstance(declared, str):
        return frozenset({declared})
    return frozenset(declared)


def _allows(types: frozenset[str], name: str) -> bool:
    return name in types or (name == "integer" and "number" in types)


# ---------------------------------------------------------------------------- subschemas


def _property_changes(
    old: dict[str, Any], new: dict[str, Any], at: str, direction: Direction
) -> list[str]:
    where = at or "/"
    old_props: dict[str, Any] = old.get("properties", {})
    new_props: dict[str, Any] = new.get("properties", {})
    removed = [name for name in old_props if name not in new_props]
    found = [f"{where}: property {name!r} removed or renamed" for name in removed]
    for name, schema in new_props.items():
        if name in old_props:
            found.extend(_compare(old_props[name], schema, f"{at}/properties/{name}", direction))
    old_required: list[str] = old.get("required", [])
    new_required: list[str] = new.get("required", [])
    found.extend(
        f"{where}: property {name!r} is newly required"
        for name in new_required
        if name not in old_required and (Direction.RECEIVED in direction or name in old_props)
    )
    if _sent(direction):
        found.extend(
            f"{where}: property {name!r} is no longer required"
            for name in old_required
            if name not in new_required and name not in removed
        )
    return found


def _nested_changes(
    old: dict[str, Any], new: dict[str, Any], at: str, direction: Direction
) -> list[str]:
    found: list[str] = []
    if "items" in old or "items" in new:
        found.extend(
            _compare(old.get("items", True), new.get("items", True), f"{at}/items", direction)
        )
    old_extra = old.get("additionalProperties", True)
    new_extra = new.get("additionalProperties", True)
    if isinstance(old_extra, dict) or isinstance(new_extra, dict):
        # Tightenings only: an extra property in a result is an added property (policy).
        tightenings = direction & Direction.RECEIVED
        found.extend(_compare(old_extra, new_extra, f"{at}/additionalProperties", tightenings))
    found.extend(_named_schemas(old, new, "$defs", at, direction, added=False, removed=True))
    # An entry constrains the object whenever its property is present: one added tightens an
    # input; in a result it declares a property the object may carry, an added one (policy).
    receiving = Direction.RECEIVED in direction
    found.extend(
        _named_schemas(
            old, new, "dependentSchemas", at, direction, added=receiving, removed=_sent(direction)
        )
    )
    for keyword in _BRANCHES:
        found.extend(_branch_changes(old, new, keyword, at, direction))
    return found


def _named_schemas(
    old: dict[str, Any],
    new: dict[str, Any],
    keyword: str,
    at: str,
    direction: Direction,
    *,
    added: bool,
    removed: bool,
) -> list[str]:
    """Entries of a name -> schema map compared by name; ``added``/``removed``: report those."""
    where = at or "/"
    old_map: dict[str, Any] = old.get(keyword, {})
    new_map: dict[str, Any] = new.get(keyword, {})
    found: list[str] = []
    for name, schema in old_map.items():
        if name in new_map:
            found.extend(_compare(schema, new_map[name], f"{at}/{keyword}/{name}", direction))
        elif removed:
            found.append(f"{where}: {keyword} entry {name!r} removed")
    if added:
        found.extend(
            f"{where}: {keyword} entry {name!r} added" for name in new_map if name not in old_map
        )
    return found


def _branch_changes(
    old: dict[str, Any], new: dict[str, Any], keyword: str, at: str, direction: Direction
) -> list[str]:
    where = at or "/"
    if keyword not in new:
        return [f"{where}: {keyword} removed"] if keyword in old and _sent(direction) else []
    if keyword not in old:
        return [f"{where}: {keyword} added"]
    unmatched_old, unmatched_new = _unmatched(old[keyword], new[keyword])
    # A oneOf branch that accepts more can make a value match two, which oneOf rejects.
    judged = direction | Direction.SENT if keyword == "oneOf" else direction
    found: list[str] = []
    for before, (index, after) in zip(unmatched_old, unmatched_new, strict=False):
        found.extend(_compare(before, after, f"{at}/{keyword}/{index}", judged))
    difference = len(unmatched_new) - len(unmatched_old)
    if difference < 0:
        found.append(f"{where}: {keyword} lost {-difference} branch(es)")
    elif difference > 0 and (_sent(direction) or keyword == "oneOf"):
        # A new oneOf branch also rejects a value that now matches two branches.
        found.append(f"{where}: {keyword} gained {difference} branch(es)")
    return found


def _unmatched(old: list[Any], new: list[Any]) -> tuple[list[Any], list[tuple[int, Any]]]:
    """The branches of ``old`` and (index, branch) of ``new`` left after pairing equal ones."""
    remaining = [(index, branch, _canonical(branch)) for index, branch in enumerate(new)]
    unmatched_old: list[Any] = []
    for branch in old:
        text = _canonical(branch)
        match = next((i for i, (_, _, other) in enumerate(remaining) if other == text), None)
        if match is None:
            unmatched_old.append(branch)
        else:
            del remaining[match]
    return unmatched_old, [(index, branch) for index, branch, _ in remaining]


def _canonical(schema: Any) -> str:
    # Branches differing only in annotations are the same branch (moved, not changed).
    return json.dumps(judged_form(schema), sort_keys=True, ensure_ascii=False)
