"""Hypothesis strategies built from ``schemas/``: valid arguments, near-valid ones, booking flows.

- Valid arguments for every catalog and logical tool (:func:`from_json_schema`, a strategy built
  from the schema document) never fail with INTERNAL_ERROR and are never refused as
  INVALID_ARGUMENTS (except an instant outside the years 1-9999 once converted to UTC).
- Near-valid arguments - one required key dropped, one unknown key added, one value of the wrong
  type, one format/pattern broken, one bound crossed - are refused with INVALID_ARGUMENTS, and
  ``details.violations`` names the mutated field by its JSON Pointer (and only fields that the
  schema really rejects).
- Generated customers go through whole booking flows against the payment stub (holds, refusals,
  PENDING / FAILED / CLOSED / PAID answers), so the database invariants are checked on a store
  that has seen every booking transition.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import jsonschema_rs
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from expert_booking.domain.model import format_instant
from expert_booking.testing.payment_stub import PaymentStub
from harness.openapi import CATALOG_TOOLS, LOGICAL_TOOLS, inline_refs, load_schema
from tests.fuzz.conftest import DatabaseWatch, Exchange, Wire, exchange_problems

pytestmark = pytest.mark.fuzz

TOOLS: Final = {
    **{name: stem for name, stem in CATALOG_TOOLS.items() if name != "tool_catalog.call"},
    **LOGICAL_TOOLS,
}
SCHEMAS: Final = {tool: inline_refs(load_schema(stem)) for tool, stem in TOOLS.items()}
ORACLES: Final = {
    tool: jsonschema_rs.Draft202012Validator(schema, validate_formats=True)
    for tool, schema in SCHEMAS.items()
}
"""An independent validator (Rust, ECMA-262 patterns as JSON Schema requires) as the oracle."""

VALID_EXAMPLES = 120
NEAR_VALID_EXAMPLES = 160
FLOW_EXAMPLES = 30
MAX_CONFIRMED = 3
"""Flows that end PAID keep their slot for good; the seed has six slots."""

SETTINGS: Final = settings(
    deadline=None,  # network round trips; latency is not the property under test
    derandomize=True,  # the same examples on every CI run
    database=None,
    print_blob=True,
)


# --------------------------------------------------------------------------- strategies
#
# hypothesis-jsonschema 0.23.1 cannot build any object schema under hypothesis 6.170.15
# ("AttributeError: 'many' object has no attribute 'more'"), so the strategies are built here from
# the schema documents. They cover the keywords the input schemas use and refuse any other, so a
# schema change cannot silently escape the fuzzing.

_SUPPORTED: Final = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "enum", "const", "pattern",
        "format", "minLength", "maxLength", "minimum", "maximum", "title", "description",
        "items", "minItems", "maxItems", "uniqueItems",
    }
)  # fmt: skip


EDGE_MOMENTS: Final = (
    datetime.min.replace(tzinfo=UTC),
    datetime.max.replace(tzinfo=UTC),
    datetime(2030, 9, 2, 2, 0, tzinfo=UTC),
)
"""Only the wall-clock fields are used; the offset is drawn separately."""


@st.composite
def rfc3339_date_times(draw: st.DrawFn) -> str:
    """RFC 3339 date-times: ``Z`` or a numeric offset up to 14 h, 0 to 6 fraction digits.

    Years 1 and 9999 with an extreme offset name instants just outside Python's datetime range;
    they are valid date-times all the same.
    """
    moment = draw(st.datetimes() | st.sampled_from(EDGE_MOMENTS))
    fraction = draw(st.sampled_from(["", ".0", ".123", ".999999"]))
    minutes = draw(st.sampled_from([0, 0, 60, -300, 330, 345, 840, -840, -720]))
    zone = "Z" if minutes == 0 else f"{'+' if minutes > 0 else '-'}{abs(minutes) // 60:02d}:"
    zone += "" if minutes == 0 else f"{abs(minutes) % 60:02d}"
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}{fraction}{zone}"
    )


def _string(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    fmt = schema.get("format")
    if fmt == "uuid":
        return st.uuids().map(str)
    if fmt == "date-time":
        return rfc3339_date_times()
    if fmt is not None:
        raise ValueError(f"no strategy for format {fmt!r}")
    if "pattern" in schema:
        # from_regex reads the pattern as Python does; keep what ECMA-262 accepts too
        # (Python's \s lacks U+FEFF, for instance).
        oracle = jsonschema_rs.Draft202012Validator(schema)
        return st.from_regex(schema["pattern"], fullmatch=True).filter(oracle.is_valid)
    return st.text(min_size=low, max_size=high)


def from_json_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid against ``schema`` (an inlined input schema, no ``$ref``)."""
    unknown = set(schema) - _SUPPORTED
    if unknown:
        raise ValueError(f"no strategy for keywords {sorted(unknown)}")
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "object":
        properties: dict[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", []))
        return st.fixed_dictionaries(
            {k: from_json_schema(v) for k, v in properties.items() if k in required},
            optional={k: from_json_schema(v) for k, v in properties.items() if k not in required},
        )
    if kind == "string":
        return _string(schema)
    if kind == "integer":
        return st.integers(min_value=schema.get("minimum"), max_value=schema.get("maximum"))
    if kind == "array":
        return st.lists(
            from_json_schema(schema["items"]),
            min_size=schema.get("minItems", 0),
            max_size=schema.get("maxItems"),
            unique=schema.get("uniqueItems", False),
        )
    raise ValueError(f"no strategy for type {kind!r}")


def arguments(tool: str) -> st.SearchStrategy[Any]:
    """Schema-valid arguments for a catalog or logical tool."""
    return from_json_schema(SCHEMAS[tool])


def call(wire: Wire, tool: str, args: Any, span: uuid.UUID, source: str) -> Exchange:
    """Call a catalog tool directly, or a logical one through ``tool_catalog.call``."""
    if tool in LOGICAL_TOOLS:
        wrapped = {"name": tool, "arguments": args, "requestSpanId": str(span)}
        return wire.call_tool("tool_catalog.call", wrapped, source=source)
    return wire.call_tool(tool, args, source=source)


def envelope_of(exchange: Exchange) -> dict[str, Any]:
    """The envelope, after checking every response property."""
    problems = exchange_problems(exchange)
    assert problems == [], f"{problems}\n{exchange.request_text[:600]}\n{exchange.text[:900]}"
    envelope = exchange.envelope
    assert exchange.status == 200, exchange.text[:900]
    assert envelope is not None, exchange.text[:900]
    return envelope


def code_of(envelope: dict[str, Any]) -> str:
    return "ok" if envelope["ok"] else str(envelope["error"]["code"])


@pytest.mark.parametrize("tool", list(TOOLS))
def test_schema_valid_arguments_never_get_internal_or_argument_errors(
    wire: Wire, tool: str
) -> None:
    @settings(SETTINGS, max_examples=VALID_EXAMPLES)
    @given(args=arguments(tool), span=st.uuids())
    def run(args: Any, span: uuid.UUID) -> None:
        envelope = envelope_of(call(wire, tool, args, span, "hypothesis-valid"))
        if code_of(envelope) == "INVALID_ARGUMENTS":
            pointers = [v["pointer"] for v in envelope["error"]["details"]["violations"]]
            assert all(_unrepresentable(resolve(args, p)) for p in pointers), pointers

    before = wire.counts["hypothesis-valid"]
    run()
    assert wire.counts["hypothesis-valid"] - before >= VALID_EXAMPLES // 2


def resolve(document: Any, json_pointer: str) -> Any:
    """The value at an RFC 6901 pointer (``None`` when there is none)."""
    for token in json_pointer.split("/")[1:]:
        key = token.replace("~1", "/").replace("~0", "~")
        if not isinstance(document, dict) or key not in document:
            return None
        document = document[key]
    return document


def _unrepresentable(value: Any) -> bool:
    """A valid RFC 3339 instant outside what the server can represent (year 0 or 10000 in UTC).

    The only schema-valid value the server may refuse as INVALID_ARGUMENTS; it must never
    fail with INTERNAL_ERROR on one.
    """
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value).astimezone(UTC)  # 3.11 reads "Z"
    except OverflowError:
        return True
    except ValueError:
        return False
    return False


# --------------------------------------------------------------------------- near-valid


@dataclass(frozen=True)
class Site:
    """A value inside the arguments, with its schema."""

    path: tuple[str, ...]
    schema: dict[str, Any]
    value: Any


def sites(schema: dict[str, Any], value: Any, path: tuple[str, ...] = ()) -> Iterator[Site]:
    """Every value of ``value`` that ``schema`` describes, depth first."""
    yield Site(path, schema, value)
    if isinstance(value, dict):
        for key, item in value.items():
            child = schema.get("properties", {}).get(key)
            if isinstance(child, dict):
                yield from sites(child, item, (*path, key))


def pointer(path: tuple[str, ...]) -> str:
    """RFC 6901."""
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in path)


def set_at(document: Any, path: tuple[str, ...], value: Any) -> Any:
    """A copy of ``document`` with ``value`` at ``path``."""
    if not path:
        return value
    head, *rest = path
    return {**document, head: set_at(document[head], tuple(rest), value)}


def drop_at(document: Any, path: tuple[str, ...]) -> Any:
    """A copy of ``document`` without the key at ``path``."""
    head, *rest = path
    if not rest:
        return {key: item for key, item in document.items() if key != head}
    return {**document, head: drop_at(document[head], tuple(rest))}


WRONG_TYPED: Final[tuple[Any, ...]] = (12345, 1.5, "1", "true", True, None, [], {}, [1], {"a": 1})
"""Values of every JSON type; a mutation picks one whose type the schema does not allow."""

NOT_A_UUID: Final = (
    "not-a-uuid",
    "123e4567e89b12d3a456426614174000",
    "123e4567-e89b-12d3-a456-42661417400",
    "123e4567-e89b-12d3-a456-4266141740000",
    "g23e4567-e89b-12d3-a456-426614174000",
)
NOT_A_DATE_TIME: Final = (
    "yesterday",
    "2030-09-02",
    "2030-09-02T02:00:00",
    "2030-13-02T02:00:00.000Z",
    "2030-09-02T25:00:00.000Z",
    "2030-02-30T02:00:00Z",
    "2030/09/02T02:00:00Z",
)
PATTERN_BREAKERS: Final = (
    "",
    " ",
    "x y",
    "500.0",
    "5.000",
    "cny",
    "CNYY",
    "no-at-sign",
    "a@b@c",
    "a b@c",
    "sha256:XYZ",
    "sha256:" + "0" * 63,
    "tool://Booking.Hold",
    "http://booking.hold_slot",
)


def _options(site: Site) -> list[str]:
    """The mutations that can break ``site``."""
    schema, value = site.schema, site.value
    kinds = []
    if isinstance(value, dict) and set(schema.get("required", [])) & set(value):
        kinds.append("drop")
    if isinstance(value, dict) and schema.get("additionalProperties") is False:
        kinds.append("add")
    if site.path:
        kinds.append("type")
    if isinstance(value, str) and schema.get("format") in {"uuid", "date-time"}:
        kinds.append("format")
    if isinstance(value, str) and "pattern" in schema:
        kinds.append("pattern")
    if isinstance(value, int) and {"minimum", "maximum"} & set(schema):
        kinds.append("bound")
    if isinstance(value, str) and (schema.get("minLength", 0) > 0 or "maxLength" in schema):
        kinds.append("length")
    if "enum" in schema:
        kinds.append("enum")
    if isinstance(value, list) and (
        schema.get("minItems", 0) > 0 or (schema.get("uniqueItems") and value)
    ):
        kinds.append("count")
    return kinds


def _drop(draw: st.DrawFn, valid: Any, site: Site) -> tuple[Any, str, tuple[str, ...]]:
    key = draw(st.sampled_from(sorted(set(site.schema["required"]) & set(site.value))))
    return drop_at(valid, (*site.path, key)), f"drop {key}", (*site.path, key)


def _add(draw: st.DrawFn, valid: Any, site: Site) -> tuple[Any, str, tuple[str, ...]]:
    known = set(site.schema.get("properties", {}))
    key = draw(st.text(min_size=1, max_size=12).filter(lambda k: k not in known))
    extra: Any = draw(st.sampled_from([1, "x", None, {}, []]))
    return set_at(valid, site.path, {**site.value, key: extra}), f"add {key!r}", (*site.path, key)


def _replacement(draw: st.DrawFn, kind: str, site: Site) -> Any:
    """A value for ``site`` that breaks its schema in the way ``kind`` names."""
    schema = site.schema
    if kind == "type":
        allowed = schema.get("type")
        types = {allowed} if isinstance(allowed, str) else set(allowed or [])
        pool: list[Any] = [v for v in WRONG_TYPED if not _has_type(v, types)]
    elif kind == "format":
        pool = list(NOT_A_UUID if schema["format"] == "uuid" else NOT_A_DATE_TIME)
    elif kind == "pattern":
        # ECMA-262 reading: "$" is the very end, and \s includes U+00A0 and U+FEFF.
        near = [site.value + "\n", site.value + "\u00a0", "\ufeff" + site.value]
        oracle = jsonschema_rs.Draft202012Validator({"pattern": schema["pattern"]})
        pool = [p for p in [*PATTERN_BREAKERS, *near] if not oracle.is_valid(p)]
    elif kind == "bound":
        pool = [schema["minimum"] - 1] if "minimum" in schema else []
        pool += [schema["maximum"] + 1] if "maximum" in schema else []
    elif kind == "length":
        pool = ["x" * (schema["minLength"] - 1)] if schema.get("minLength", 0) > 0 else []
        pool += ["x" * (schema["maxLength"] + 1)] if "maxLength" in schema else []
    elif kind == "count":  # too few items, or one twice
        pool = [[]] if schema.get("minItems", 0) > 0 else []
        pool += [[site.value[0], site.value[0]]] if schema.get("uniqueItems") and site.value else []
    else:  # enum
        pool = ["NOT_" + "_".join(map(str, schema["enum"]))]
    return draw(st.sampled_from(pool))


@st.composite
def near_valid(draw: st.DrawFn, tool: str) -> tuple[Any, str, str]:
    """``(arguments, mutation, pointer)``: valid arguments with exactly one field broken."""
    valid = draw(arguments(tool))
    options = [(kind, site) for site in sites(SCHEMAS[tool], valid) for kind in _options(site)]
    kind, site = draw(st.sampled_from(options))
    if kind == "drop":
        mutated, mutation, path = _drop(draw, valid, site)
    elif kind == "add":
        mutated, mutation, path = _add(draw, valid, site)
    else:
        replacement = _replacement(draw, kind, site)
        text = repr(replacement) if len(repr(replacement)) < 40 else f"<{len(replacement)} chars>"
        mutated, mutation, path = set_at(valid, site.path, replacement), f"{kind} {text}", site.path
    return mutated, mutation, pointer(path)


def _has_type(value: Any, types: set[str]) -> bool:
    checks = {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
        "null": value is None,
    }
    return any(checks[name] for name in types) if types else True


def local_pointers(tool: str, instance: Any) -> set[str]:
    """The pointers the oracle rejects (a missing or unknown key is named by its own pointer)."""
    found: set[str] = set()
    for error in ORACLES[tool].iter_errors(instance):
        path = tuple(str(part) for part in error.instance_path)
        kind = error.kind
        if isinstance(kind, jsonschema_rs.ValidationErrorKind.Required):
            found.add(pointer((*path, str(kind.property))))
        elif isinstance(kind, jsonschema_rs.ValidationErrorKind.AdditionalProperties):
            found |= {pointer((*path, str(key))) for key in kind.unexpected}
        else:
            found.add(pointer(path))
    return found


@pytest.mark.parametrize("tool", list(TOOLS))
def test_near_valid_arguments_are_refused_naming_the_mutated_field(wire: Wire, tool: str) -> None:
    @settings(SETTINGS, max_examples=NEAR_VALID_EXAMPLES)
    @given(case=near_valid(tool), span=st.uuids())
    def run(case: tuple[Any, str, str], span: uuid.UUID) -> None:
        mutated, mutation, expected = case
        note(f"mutation: {mutation} at {expected!r}")
        local = local_pointers(tool, mutated)
        assert expected in local, f"the mutation did not break the schema locally: {local}"
        envelope = envelope_of(call(wire, tool, mutated, span, "hypothesis-near-valid"))
        assert code_of(envelope) == "INVALID_ARGUMENTS", envelope
        reported = {v["pointer"] for v in envelope["error"]["details"]["violations"]}
        assert expected in reported, f"{mutation}: expected {expected!r} in {reported}"
        assert reported <= local, f"{mutation}: reported {reported - local} the schema allows"

    before = wire.counts["hypothesis-near-valid"]
    run()
    assert wire.counts["hypothesis-near-valid"] - before >= NEAR_VALID_EXAMPLES // 2


# --------------------------------------------------------------------------- booking flows

CUSTOMER: Final = SCHEMAS["booking.hold_slot"]["properties"]["customer"]

INTERIM: Final = ("PENDING", "MISMATCH", "UNAVAILABLE", "REJECT", "STALE", "VERSION", "HASH")
"""Confirm attempts that must change nothing, with the error each one gets."""
INTERIM_CODE: Final = {
    "PENDING": "PAYMENT_PENDING",
    "MISMATCH": "PAYMENT_MISMATCH",
    "UNAVAILABLE": "PAYMENT_UNAVAILABLE",
    "REJECT": "HUMAN_APPROVAL_REJECTED",
    "STALE": "HUMAN_APPROVAL_EXPIRED",
    "VERSION": "VERSION_CONFLICT",
    "HASH": "APPROVAL_INTENT_HASH_MISMATCH",
}
FINAL_STATUS: Final = {"FAILED": "PAYMENT_FAILED", "CLOSED": "PAYMENT_CLOSED", "PAID": "CONFIRMED"}

confirmed_flows: list[str] = []


def _logical(wire: Wire, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return envelope_of(call(wire, tool, args, uuid.uuid4(), "hypothesis-flow"))


def _approval(intent: dict[str, Any], *, decision: str = "APPROVE", age_s: float = 0) -> Any:
    approved_at = datetime.now(UTC) - timedelta(seconds=age_s)
    return {
        "approvalId": str(uuid.uuid4()),
        "decision": decision,
        "approvedAt": format_instant(approved_at),
        "intent": intent["intent"],
        "intentHash": intent["intentHash"],
    }


def _confirm(wire: Wire, booking: dict[str, Any], step: str, stub: PaymentStub) -> dict[str, Any]:
    """One confirm attempt shaped by ``step``; returns the envelope."""
    booking_id = booking["bookingId"]
    intent = booking["confirmationIntent"]
    price = intent["intent"]
    amount, currency = price["amount"], price["currency"]
    approval = _approval(intent)
    version = booking["version"]
    if step in {"PAID", "FAILED", "CLOSED", "PENDING"}:
        stub.set_answer(booking_id, status=step, amount=amount, currency=currency)
    elif step == "MISMATCH":
        stub.set_answer(booking_id, status="PAID", amount=amount + "1", currency=currency)
    elif step == "UNAVAILABLE":
        stub.set_answer(booking_id, http_status=503, raw_body="down")
    elif step == "REJECT":
        approval = _approval(intent, decision="REJECT")
    elif step == "STALE":
        approval = _approval(intent, age_s=3600)
    elif step == "VERSION":
        version += 1
    elif step == "HASH":
        approval["intentHash"] = "sha256:" + "0" * 64
    args = {
        "bookingId": booking_id,
        "expectedVersion": version,
        "idempotencyKey": str(uuid.uuid4()),
        "humanApproval": approval,
    }
    return _logical(wire, "booking.confirm_booking", args)


def test_generated_booking_flows_keep_the_store_consistent(
    wire: Wire, payment_stub: PaymentStub, database_watch: DatabaseWatch
) -> None:
    """Hold, refused confirms, then a final payment answer; invariants after every flow."""

    @settings(SETTINGS, max_examples=FLOW_EXAMPLES)
    @given(
        customer=from_json_schema(CUSTOMER),
        interim=st.lists(st.sampled_from(INTERIM), max_size=3),
        final=st.sampled_from(sorted(FINAL_STATUS)),
        data=st.data(),
    )
    def run(customer: Any, interim: list[str], final: str, data: st.DataObject) -> None:
        free = _logical(wire, "booking.search_available_slots", {"query": "", "limit": 50})
        slots = free["data"]["slots"]
        assert len(slots) >= 6 - MAX_CONFIRMED, "every flow but the PAID ones releases its slot"
        slot = data.draw(st.sampled_from(sorted(s["slotId"] for s in slots)), label="slot")
        hold_args = {"slotId": slot, "customer": customer, "idempotencyKey": str(uuid.uuid4())}
        held = _logical(wire, "booking.hold_slot", hold_args)
        assert held["ok"], held
        booking = held["data"]
        assert booking["customer"] == customer, "the customer is stored and echoed exactly"
        assert (booking["status"], booking["version"]) == ("HELD", 1)
        replay = _logical(wire, "booking.hold_slot", hold_args)
        assert replay["ok"], replay
        assert replay["data"]["bookingId"] == booking["bookingId"], "idempotent replay"
        rival = {**hold_args, "idempotencyKey": str(uuid.uuid4())}
        assert code_of(_logical(wire, "booking.hold_slot", rival)) == "SLOT_UNAVAILABLE"
        for step in interim:
            refused = _confirm(wire, booking, step, payment_stub)
            assert code_of(refused) == INTERIM_CODE[step], (step, refused)
        outcome = final if final != "PAID" or len(confirmed_flows) < MAX_CONFIRMED else "FAILED"
        done = _confirm(wire, booking, outcome, payment_stub)
        expected = "ok" if outcome == "PAID" else FINAL_STATUS[outcome]
        assert code_of(done) == expected, (outcome, done)
        got = _logical(wire, "booking.get_booking", {"bookingId": booking["bookingId"]})
        assert got["ok"], got
        assert got["data"]["status"] == FINAL_STATUS[outcome]
        assert got["data"]["version"] == 2, "every refused attempt changed nothing"
        if outcome == "PAID":
            confirmed_flows.append(booking["bookingId"])
        assert database_watch.check(f"flow {booking['bookingId']}") == []

    before = wire.counts["hypothesis-flow"]
    run()
    assert wire.counts["hypothesis-flow"] - before >= FLOW_EXAMPLES * 5


def test_hypothesis_run_left_the_database_consistent(database_watch: DatabaseWatch) -> None:
    """The invariants held after every test and flow of this module."""
    assert database_watch.check("at the end of the hypothesis module") == []
    assert database_watch.violations == []
