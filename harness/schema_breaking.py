"""Breaking changes between two versions of a JSON Schema: what the newer one may reject."""

from __future__ import annotations

import json
from typing import Any

_LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_ALL_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})


def breaking_changes(
    old: dict[str, Any], new: dict[str, Any], *, result: bool = False
) -> list[str]:
    """Changes from ``old`` to ``new`` that can reject a value ``old`` accepted.

    With ``result`` the document describes what the server sends (a tool result, a snapshot,
    an error): a property added to it, required or not, breaks no caller, which never sent it
    (the rest is judged as for an input; issue 13 item 8 judges results fully from the
    consumer's side).

    Walks ``properties``, ``items``, ``$defs`` and ``anyOf``/``oneOf`` branches by position.
    Each entry is ``"<JSON Pointer>: <what changed>"``. Loosening changes (a new optional
    property, a wider bound, an added enum value) are not reported. ``$ref`` targets are compared
    by name only; the referenced ``$defs`` entry is compared on its own.
    """
    return _compare(old, new, "", result=result)


def _compare(old: Any, new: Any, at: str, *, result: bool = False) -> list[str]:
    if not isinstance(old, dict) or not isinstance(new, dict):
        if old is True and new is not True:
            return [f"{at or '/'}: schema `true` became {json.dumps(new)}"]
        return []
    where = at or "/"
    found = [f"{where}: {message}" for message in _keyword_changes(old, new)]
    found.extend(_property_changes(old, new, at, result=result))
    found.extend(_nested_changes(old, new, at, result=result))
    return found


def _keyword_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return [*_value_set_changes(old, new), *_bound_changes(old, new)]


def _value_set_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    found: list[str] = []
    if lost := sorted(_types(old) - _types(new)):
        found.append(f"type no longer allows {', '.join(lost)}")
    if "enum" in new and new["enum"] != old.get("enum"):
        if "enum" not in old:
            found.append("enum added")
        elif lost_values := [value for value in old["enum"] if value not in new["enum"]]:
            found.append(f"enum value(s) removed: {', '.join(map(json.dumps, lost_values))}")
    if "const" in new and ("const" not in old or old["const"] != new["const"]):
        found.append(f"const set to {json.dumps(new['const'])}")
    if new.get("additionalProperties") is False and old.get("additionalProperties") is not False:
        found.append("additionalProperties became false")
    if "$ref" in new and new["$ref"] != old.get("$ref"):
        found.append(f"$ref changed to {new['$ref']!r} (was {old.get('$ref', 'unset')!r})")
    return found


def _bound_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    tightened = [
        key for key in _LOWER_BOUNDS if key in new and (key not in old or new[key] > old[key])
    ] + [key for key in _UPPER_BOUNDS if key in new and (key not in old or new[key] < old[key])]
    found = [f"{key} tightened to {new[key]} (was {old.get(key, 'unset')})" for key in tightened]
    found.extend(
        f"{key} changed to {new[key]!r} (was {old.get(key, 'unset')!r})"
        for key in ("pattern", "format")
        if key in new and new[key] != old.get(key)
    )
    return found


def _types(node: dict[str, Any]) -> frozenset[str]:
    declared = node.get("type")
    if declared is None:
        return _ALL_TYPES
    if isinstance(declared, str):
        return frozenset({declared})
    return frozenset(declared)


def _property_changes(
    old: dict[str, Any], new: dict[str, Any], at: str, *, result: bool
) -> list[str]:
    where = at or "/"
    old_props: dict[str, Any] = old.get("properties", {})
    new_props: dict[str, Any] = new.get("properties", {})
    found = [
        f"{where}: property {name!r} removed or renamed"
        for name in old_props
        if name not in new_props
    ]
    for name, schema in new_props.items():
        if name in old_props:
            found.extend(
                _compare(old_props[name], schema, f"{at}/properties/{name}", result=result)
            )
    old_required = set(old.get("required", []))
    found.extend(
        f"{where}: property {name!r} is newly required"
        for name in new.get("required", [])
        if name not in old_required and not (result and name not in old_props)
    )
    return found


def _nested_changes(
    old: dict[str, Any], new: dict[str, Any], at: str, *, result: bool
) -> list[str]:
    where = at or "/"
    found: list[str] = []
    if "items" in old or "items" in new:
        found.extend(
            _compare(old.get("items", True), new.get("items", True), f"{at}/items", result=result)
        )
    new_defs: dict[str, Any] = new.get("$defs", {})
    for name, schema in old.get("$defs", {}).items():
        if name in new_defs:
            found.extend(_compare(schema, new_defs[name], f"{at}/$defs/{name}", result=result))
        else:
            found.append(f"{where}: $defs entry {name!r} removed")
    for keyword in ("anyOf", "oneOf"):
        if keyword not in new:
            continue
        old_branches: list[Any] = old.get(keyword, [])
        new_branches: list[Any] = new[keyword]
        if keyword not in old:
            found.append(f"{where}: {keyword} added")
        elif len(new_branches) < len(old_branches):
            lost = len(old_branches) - len(new_branches)
            found.append(f"{where}: {keyword} lost {lost} branch(es)")
        for index, (before, after) in enumerate(zip(old_branches, new_branches, strict=False)):
            found.extend(_compare(before, after, f"{at}/{keyword}/{index}", result=result))
    return found
