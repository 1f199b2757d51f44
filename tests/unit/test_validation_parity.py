"""The jsonschema_rs fast accept path never disagrees with the full jsonschema path.

``validate_arguments`` answers "valid" from ``fast_accepts`` alone, so ``fast_accepts`` must be
True only where the full path (ECMA-262 patterns, strict integers, lone surrogates, the
jsonschema format checks) finds nothing. The instances are built from the schema documents:
valid ones, then mutated towards the places where two implementations usually differ.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expert_booking.edge.schemas import SchemaRegistry
from expert_booking.edge.validation import (
    ecma_regex,
    fast_accepts,
    full_violations,
    validate_arguments,
)

REGISTRY = SchemaRegistry.load()
LOGICAL_INPUTS = sorted(
    stem for stem in REGISTRY if stem.endswith("_input")
)  # booking.* and tool_catalog.* arguments
OPAQUE = {"tool_catalog_call_input": ("arguments",)}

UUID = "0b6f3c1e-3f7e-4d52-9a66-6f3f0c7b9a10"
PATTERN_EXAMPLES = {
    "^[^@\\s]+@[^@\\s]+$": st.sampled_from(["a@b", "Zoe.Unal@Example.COM", "李@例子.中国"]),
    "^[A-Z]{3}$": st.sampled_from(["CNY", "EUR"]),
    "^[0-9]+\\.[0-9]{2}$": st.sampled_from(["500.00", "0.99"]),
    "^sha256:[0-9a-f]{64}$": st.just("sha256:" + "ab" * 32),
    "^tool://[a-z_]+\\.[a-z_]+$": st.sampled_from(["tool://booking.hold_slot", "tool://a.b"]),
}
FORMAT_EXAMPLES = {
    "uuid": st.sampled_from([UUID, UUID.upper(), "00000000-0000-0000-0000-000000000000"]),
    "date-time": st.sampled_from(
        ["2030-09-02T02:00:00.000Z", "2030-09-02T02:00:00+08:00", "2030-09-02t02:00:00z"]
    ),
}
# Values that sit on the known seams between implementations (and plain wrong types).
ODD_VALUES: list[Any] = [
    1.0,
    2.0,
    0.5,
    -1,
    0,
    10**30,
    True,
    None,
    "",
    "x",
    [],
    {},
    "\ud800",
    "a\udfffb",
    "CNY\n",
    "cny",
    "CN",
    "500.0",
    "500.00\n",
    "sha256:" + "AB" * 32,
    "a@b\n",
    "a\ufeffb@c",
    "a\u00a0b@c",
    "a\x85b@c",
    "a\u180eb@c",
    "a\u2028b@c",
    "a@@b",
    "tool://Booking.hold_slot",
    "tool://booking.hold_slot\n",
    "2030-13-01T00:00:00Z",
    "2030-02-30T00:00:00Z",
    "2030-06-30T23:59:60Z",
    "2030-09-02T24:00:00Z",
    "2030-09-02 02:00:00Z",
    "2030-09-02T02:00:00",
    "2030-09-02T02:00:00+0800",
    "2030-09-02T02:00:00.Z",
    "٢٠٣٠-09-02T02:00:00Z",
    "2030-09-02T02:00:00.000Z\n",
    "not-a-uuid",
    UUID + "\n",
    "{" + UUID + "}",
    UUID.replace("-", ""),
    "urn:uuid:" + UUID,
    UUID[:30] + "-" + UUID[30:35],
    UUID[:-1] + "g",
    "x" * 201,
    "APPROVE",
    "approve",
    "APPROVE\n",
]

ODD_STRINGS = [value for value in ODD_VALUES if isinstance(value, str)]


def resolve(node: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    target: Any = root
    for part in str(ref).removeprefix("#/").split("/"):
        target = target[part]
    return resolve(target, root)


def valid_value(node: Mapping[str, Any], root: Mapping[str, Any]) -> st.SearchStrategy[Any]:  # noqa: PLR0911
    """A strategy of values valid for ``node`` (the keywords these documents use)."""
    node = resolve(node, root)
    if "enum" in node:
        return st.sampled_from(list(node["enum"]))
    kind = node.get("type")
    if kind == "object":
        properties = node.get("properties", {})
        if not properties:  # tool_catalog.call's opaque "arguments"
            return st.dictionaries(
                st.text(max_size=5), st.integers() | st.text(max_size=5) | st.floats(), max_size=3
            )
        required = set(node.get("required", ()))
        optional = sorted(set(properties) - required)
        return st.fixed_dictionaries(
            {name: valid_value(properties[name], root) for name in sorted(required)},
            optional={name: valid_value(properties[name], root) for name in optional},
        )
    if kind == "array":
        return st.lists(
            valid_value(node["items"], root),
            min_size=node.get("minItems", 0),
            max_size=node.get("maxItems", 5),
            unique=node.get("uniqueItems", False),
        )
    if kind == "integer":
        return st.integers(node.get("minimum", -(10**6)), node.get("maximum", 10**6))
    if kind == "string":
        if "format" in node:
            return FORMAT_EXAMPLES[node["format"]]
        if "pattern" in node:
            return PATTERN_EXAMPLES[node["pattern"]]
        return st.text(
            alphabet=st.characters(exclude_categories=["Cs"]),
            min_size=node.get("minLength", 0),
            max_size=min(node.get("maxLength", 20), 20),
        )
    raise AssertionError(f"no strategy for {node!r}")  # a new keyword: extend the builder


def paths(instance: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(instance, dict):
        for key, value in instance.items():
            found.extend(paths(value, (*prefix, key)))
    elif isinstance(instance, list):
        for index, value in enumerate(instance):
            found.extend(paths(value, (*prefix, index)))
    return found


@st.composite
def near_valid(draw: st.DrawFn, stem: str) -> Any:
    """A valid instance of ``stem``, then zero to three mutations at random places."""
    schema = REGISTRY[stem].schema
    instance = copy.deepcopy(draw(valid_value(schema, schema)))
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.sampled_from(paths(instance)))
        *parent_path, last = path or (None,)
        parent: Any = instance
        for part in parent_path:
            parent = parent[part]
        operation = draw(st.sampled_from(["replace", "drop", "add", "suffix", "string"]))
        if not path:
            if operation == "replace":
                instance = draw(st.sampled_from(ODD_VALUES))
            continue
        if operation == "replace":
            parent[last] = draw(st.sampled_from(ODD_VALUES))
        elif operation == "drop" and isinstance(parent, dict):
            del parent[last]
        elif operation == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "\ud800", "phone", "note", "cursor"]))] = draw(
                st.sampled_from(ODD_VALUES)
            )
        elif operation == "string" and isinstance(parent[last], str):
            parent[last] = draw(st.sampled_from(ODD_STRINGS))
        elif operation == "suffix" and isinstance(parent[last], str):
            parent[last] += draw(st.sampled_from(["\n", " ", "\ud800", "\u3000", "0"]))
        elif operation == "suffix" and isinstance(parent[last], int):
            parent[last] = float(parent[last])
    return instance


def assert_parity(stem: str, instance: Any) -> None:
    validator, fast = REGISTRY[stem].validator, REGISTRY[stem].fast
    opaque = OPAQUE.get(stem, ())
    full = full_violations(validator, instance, opaque=opaque)
    if fast_accepts(fast, instance):
        assert full == [], (stem, instance, full)
    assert validate_arguments(validator, instance, fast=fast, opaque=opaque) == full


@pytest.mark.parametrize("stem", LOGICAL_INPUTS)
@settings(derandomize=True, max_examples=300, deadline=None)
@given(data=st.data())
def test_fast_path_and_full_path_agree(stem: str, data: st.DataObject) -> None:
    assert_parity(stem, data.draw(near_valid(stem)))


@pytest.mark.parametrize("stem", LOGICAL_INPUTS)
@settings(derandomize=True, max_examples=50, deadline=None)
@given(data=st.data())
def test_plain_valid_instances_take_the_fast_path(stem: str, data: st.DataObject) -> None:
    """Every document has a jsonschema_rs twin, and it accepts what the full path accepts."""
    schema = REGISTRY[stem].schema
    instance = data.draw(valid_value(schema, schema))
    validator = REGISTRY[stem].validator
    assert full_violations(validator, instance, opaque=OPAQUE.get(stem, ())) == []
    has_float = any(isinstance(value, float) for value in _leaves(instance))
    assert fast_accepts(REGISTRY[stem].fast, instance) is not has_float


def _leaves(instance: Any) -> list[Any]:
    if isinstance(instance, dict):
        return [leaf for value in instance.values() for leaf in _leaves(value)]
    return [instance]


@pytest.mark.parametrize(
    ("stem", "instance"),
    [
        ("booking_search_available_slots_input", {"query": "", "limit": 1.0}),
        ("booking_search_available_slots_input", {"query": "\ud800", "limit": 1}),
        ("booking_search_available_slots_input", {"query": "", "limit": 1, "\ud800": 1}),
        (
            "booking_search_available_slots_input",
            {"query": "", "limit": 1, "startsAfter": "2030-06-30T23:59:60Z"},
        ),
        ("tool_catalog_call_input", {"name": "x", "arguments": {"a": 1.0}, "requestSpanId": UUID}),
        (
            "tool_catalog_call_input",
            {"name": "x", "arguments": {"a": "\udc00"}, "requestSpanId": UUID},
        ),
    ],
)
def test_the_known_seams_never_take_the_fast_path(stem: str, instance: Any) -> None:
    assert not fast_accepts(REGISTRY[stem].fast, instance)
    assert_parity(stem, instance)


def test_the_email_pattern_agrees_on_every_code_point() -> None:
    """``\\s`` is where regex engines differ most; jsonschema_rs must match ECMA-262 exactly."""
    fast = REGISTRY["booking_hold_slot_input"].fast
    pattern = ecma_regex("^[^@\\s]+@[^@\\s]+$")
    customer = {"name": "n", "email": ""}
    base = {"slotId": "s", "customer": customer, "idempotencyKey": UUID}
    for code in range(0x30000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        email = f"a{chr(code)}b@c"
        customer["email"] = email
        assert fast_accepts(fast, base) is bool(pattern.search(email)), hex(code)
