"""Schemathesis against the OpenAPI description of ``POST /mcp`` built from ``schemas/``.

Positive cases are schema-valid ``tools/call`` requests for every catalog tool and every logical
tool behind ``tool_catalog.call``; negative cases break the body or the declared headers.
Headers stay consistent with a valid body (``Mcp-Name`` = ``params.name``) unless schemathesis
broke the headers on purpose; the stamping transport always sets ``x-mcp-client-sent-at`` and
``_meta.clientSentAt`` together. Every response must meet :func:`exchange_problems`.
"""

from __future__ import annotations

import importlib.resources
import json
import sqlite3
import sys
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import given, settings
from schemathesis import Case, GenerationMode

from harness.db_invariants import check_invariants
from harness.openapi import (
    CATALOG_TOOLS,
    LOGICAL_TOOLS,
    PROTOCOL_VERSION,
    build_openapi,
    load_schema,
)
from tests.fuzz.conftest import (
    HEADERS,
    META,
    MIN_REQUESTS_PER_RUN,
    DatabaseWatch,
    Exchange,
    UnsendableError,
    Wire,
    exchange_problems,
)

pytestmark = pytest.mark.fuzz

OPERATION = schemathesis.openapi.from_dict(build_openapi())["/mcp"]["POST"]

POSITIVE_EXAMPLES = 800
NEGATIVE_EXAMPLES = 1300
MIN_SENT = {"schemathesis-positive": 700, "schemathesis-negative": 1100}
"""Floors per mode (a few negative cases cannot be sent, e.g. an illegal header value)."""

FUZZ_SETTINGS = settings(
    deadline=None,  # network round trips; latency is not the property under test
    derandomize=True,  # the same cases on every CI run
    database=None,
    print_blob=True,
)

outcomes: Counter[str] = Counter()


def test_openapi_has_one_variant_per_tool_the_server_offers(wire: Wire) -> None:
    """The description covers exactly the server's tools (verbatim schemas) and logical tools."""
    document = build_openapi()
    body = document["paths"]["/mcp"]["post"]["requestBody"]["content"]["application/json"]
    titles = sorted(variant["title"] for variant in body["schema"]["oneOf"])
    assert titles == sorted(
        [f"tools/call {name}" for name in CATALOG_TOOLS if name != "tool_catalog.call"]
        + [f"tools/call tool_catalog.call -> {name}" for name in LOGICAL_TOOLS]
    )
    listing = {
        "jsonrpc": "2.0",
        "id": wire.next_id(),
        "method": "tools/list",
        "params": {"_meta": META},
    }
    headers = [(k, "tools/list" if k == "mcp-method" else v) for k, v in HEADERS.items()]
    exchange = wire.send(json.dumps(listing).encode(), headers, "schema-drift")
    assert exchange_problems(exchange) == []
    tools = {tool["name"]: tool["inputSchema"] for tool in exchange.message["result"]["tools"]}
    assert tools == {name: load_schema(stem) for name, stem in CATALOG_TOOLS.items()}
    found = wire.call_tool("tool_catalog.search", {"query": "", "limit": 20}, source="schema-drift")
    envelope = found.envelope
    assert envelope is not None
    assert envelope["ok"], envelope
    assert {item["name"] for item in envelope["data"]["items"]} == set(LOGICAL_TOOLS)


def _declared_headers_valid(headers: dict[str, Any]) -> bool:
    return (
        headers.get("MCP-Protocol-Version") == PROTOCOL_VERSION
        and headers.get("Mcp-Method") == "tools/call"
        and headers.get("Mcp-Name") in CATALOG_TOOLS
    )


def _integral_floats_as_ints(value: Any) -> Any:
    """JSON Schema counts 1.0 as an integer; this server (no coercion) and JSON-RPC ids do not.

    A real client serialises the integer 1 as ``1``, so positive cases are sent that way.
    """
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _integral_floats_as_ints(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral_floats_as_ints(item) for item in value]
    return value


def _wire_request(
    case: Case[Any], *, positive: bool = False
) -> tuple[bytes, list[tuple[str, str]]]:
    """The body bytes and headers to send for ``case``."""
    kwargs = case.as_transport_kwargs(base_url="http://127.0.0.1")
    if "json" in kwargs:
        sent = kwargs["json"]
        if positive:
            sent = _integral_floats_as_ints(sent)
        elif (
            isinstance(sent, dict) and isinstance(sent.get("id"), float) and sent["id"].is_integer()
        ):
            sent = {**sent, "id": int(sent["id"])}  # a JSON-RPC id is a string or an integer
        body = json.dumps(sent).encode()
    else:
        data = kwargs.get("data", b"")
        body = data.encode() if isinstance(data, str) else bytes(data)
    headers = {str(k): str(v) for k, v in kwargs["headers"].items() if k.lower() != "connection"}
    headers["Accept"] = "application/json, text/event-stream"
    if _declared_headers_valid(dict(case.headers or {})):
        # Valid headers: make them agree with the body, as a real client would.
        sent = kwargs.get("json")
        params = sent.get("params") if isinstance(sent, dict) else None
        name = params.get("name") if isinstance(params, dict) else None
        if isinstance(name, str) and name.isascii() and name.isprintable():
            headers["Mcp-Name"] = name
        else:
            headers.pop("Mcp-Name", None)
    return body, list(headers.items())


def _send(wire: Wire, case: Case[Any], source: str, *, positive: bool = False) -> Exchange | None:
    body, headers = _wire_request(case, positive=positive)
    try:
        return wire.send(body, headers, source)
    except UnsendableError:
        return None


def _describe(exchange: Exchange) -> str:
    return (
        f"request {exchange.request_text[:600]}\nresponse {exchange.status} {exchange.text[:900]}"
    )


def test_positive_tools_call_requests_get_valid_envelopes(wire: Wire) -> None:
    """Every schema-valid call reaches its tool: HTTP 200 and a valid envelope.

    Valid arguments are never refused as INVALID_ARGUMENTS.
    """

    @settings(FUZZ_SETTINGS, max_examples=POSITIVE_EXAMPLES)
    @given(case=OPERATION.as_strategy(generation_mode=GenerationMode.POSITIVE))
    def run(case: Case[Any]) -> None:
        exchange = _send(wire, case, "schemathesis-positive", positive=True)
        assert exchange is not None, "a positive case must be sendable"
        problems = exchange_problems(exchange)
        assert problems == [], f"{problems}\n{_describe(exchange)}"
        envelope = exchange.envelope
        assert exchange.status == 200, _describe(exchange)
        assert envelope is not None, _describe(exchange)
        code = "ok" if envelope["ok"] else envelope["error"]["code"]
        outcomes[f"positive {code}"] += 1
        assert code != "INVALID_ARGUMENTS", _describe(exchange)

    before = wire.counts["schemathesis-positive"]
    run()
    assert wire.counts["schemathesis-positive"] - before >= MIN_SENT["schemathesis-positive"]


def test_negative_requests_never_break_the_server(wire: Wire) -> None:
    """Broken bodies and headers get a JSON-RPC answer (or a refusing envelope), never a 5xx."""

    @settings(FUZZ_SETTINGS, max_examples=NEGATIVE_EXAMPLES)
    @given(case=OPERATION.as_strategy(generation_mode=GenerationMode.NEGATIVE))
    def run(case: Case[Any]) -> None:
        exchange = _send(wire, case, "schemathesis-negative")
        if exchange is None:
            return
        problems = exchange_problems(exchange)
        assert problems == [], f"{problems}\n{_describe(exchange)}"
        envelope = exchange.envelope
        if envelope is not None:
            outcomes["negative " + ("ok" if envelope["ok"] else envelope["error"]["code"])] += 1
        else:
            error = (exchange.message or {}).get("error") or {}
            outcomes[f"negative HTTP {exchange.status} {error.get('code')}"] += 1

    before = wire.counts["schemathesis-negative"]
    run()
    assert wire.counts["schemathesis-negative"] - before >= MIN_SENT["schemathesis-negative"]


def _unguarded_db(db: Path) -> sqlite3.Connection:
    """A migrated database without its unique index, with expert e1 and slots s1, s2."""
    migrations = importlib.resources.files("expert_booking.adapters") / "migrations"
    connection = sqlite3.connect(db)
    for script in sorted(migrations.iterdir(), key=lambda item: item.name):
        if script.name.endswith(".sql"):
            connection.executescript(script.read_text(encoding="utf-8"))
    connection.executescript(
        """
        DROP INDEX one_active_booking_per_slot;
        INSERT INTO experts VALUES ('e1', 'E', 'AI', '');
        INSERT INTO slots VALUES ('s1', 'e1', '2030-01-01T00:00:00.000Z',
                                  '2030-01-01T01:00:00.000Z', '500.00', 'CNY');
        INSERT INTO slots VALUES ('s2', 'e1', '2030-01-02T00:00:00.000Z',
                                  '2030-01-02T01:00:00.000Z', '500.00', 'CNY');
        """
    )
    return connection


def test_invariant_checker_reports_every_kind_of_violation(tmp_path: Path) -> None:
    """check_invariants is not vacuous: each invariant it guards is reported when broken."""
    db = tmp_path / "broken.db"
    with closing(_unguarded_db(db)) as connection:
        row = (
            "INSERT INTO bookings (booking_id, slot_id, expert_id, starts_at, ends_at, "
            "customer_json, status, version, held_at, expires_at, confirmed_at, "
            "payment_page_url, payment_status, payment_amount, payment_currency, paid_at, "
            "refund_due, cancelled_at) VALUES (?, ?, 'e1', '2030-01-01T00:00:00.000Z', "
            "'2030-01-01T01:00:00.000Z', '{}', ?, ?, ?, ?, ?, 'u', ?, ?, 'CNY', ?, ?, ?)"
        )
        held, expires, later = (
            "2029-12-31T23:00:00.000Z",
            "2029-12-31T23:05:00.000Z",
            "2029-12-31T23:01:00.000Z",
        )
        # booking, slot, status, version, held, expires, confirmed, payment, amount, paid,
        # refund due, cancelled
        rows = [
            ("b1", "s1", "HELD", 1, held, expires, None, "PENDING", "500.00", None, 0, None),
            ("b2", "s1", "CONFIRMED", 2, held, expires, later, "PENDING", "400.00", None, 0, None),
            ("b3", "s1", "EXPIRED", 1, held, expires, None, "PENDING", "500.00", None, 0, None),
            ("b4", "nowhere", "PAYMENT_FAILED", 2, held, expires, None, "FAILED", "500.00", None,
             0, None),
            ("b5", "s2", "CANCELLED", 3, held, expires, later, "PAID", "500.00", later, 1, later),
            ("b6", "s2", "HELD", 4, held, expires, None, "PENDING", "500.00", None, 0, None),
            ("b7", "s2", "PAYMENT_CLOSED", 2, held, expires, None, "FAILED", "500.00", None, 0,
             None),
            ("b8", "s2", "EXPIRED", 2, held, expires, None, "PAID", "500.00", later, 0, None),
            ("b9", "s2", "EXPIRED", 2, "h", "2030-01-01T04:35:00.000+05:30", later, "PENDING",
             "500.00", None, 0, None),
            ("b10", "s2", "HELD", 1, expires, held, None, "PENDING", "500.00", None, 0, None),
            # cancelled unpaid, then a payment heard in flight: legal (no line below)
            ("b11", "s1", "CANCELLED", 3, held, expires, None, "PAID", "500.00", later, 1, later),
        ]  # fmt: skip
        connection.executemany(row, rows)
        connection.commit()
    previous = {"b1": (3, "HELD"), "gone": (1, "HELD"), "b5": (3, "CONFIRMED")}
    previous |= {"b6": (2, "EXPIRED"), "b4": (1, "HELD"), "b11": (2, "CANCELLED")}
    found = check_invariants(db, previous=previous)
    assert found == [  # b4's HELD -> PAYMENT_FAILED is allowed: only its slot is wrong
        "slot s1: 2 HELD/CONFIRMED bookings (b1,b2)",
        "slot s2: 2 HELD/CONFIRMED bookings (b10,b6)",
        (
            "booking b3: status EXPIRED at version 1 (every change bumps the version, so only "
            "HELD may be at version 1)"
        ),
        "booking b1: version went from 3 to 1",
        "booking b5: CONFIRMED became CANCELLED at the same version 3",
        (
            "booking b6: EXPIRED (version 2) became HELD (version 4), which the state machine "
            "does not allow"
        ),
        "booking gone: disappeared (was version 1)",
        (
            "CONFIRMED booking b2: payment status PENDING; no paidAt; paid 400.00 CNY but the "
            "slot costs 500.00 CNY"
        ),
        "PAYMENT_CLOSED booking b7: payment not CLOSED",
        "EXPIRED booking b9: confirmedAt but never confirmed",
        "EXPIRED booking b8: paid and released but owed no refund",
        (
            "booking b10: held_at 2029-12-31T23:05:00.000Z is not before expires_at "
            "2029-12-31T23:00:00.000Z"
        ),
        (
            "booking b9: held_at 'h' is not an RFC 3339 instant; expires_at "
            "'2030-01-01T04:35:00.000+05:30' is not canonical UTC text"
        ),
        "booking b4: unknown slot nowhere",
    ]


def test_invariant_checker_orders_confirmation_reschedules_and_cancellation(
    tmp_path: Path,
) -> None:
    """A change recorded before the state it left, or after a start, is reported."""
    db = tmp_path / "reordered.db"
    change = '{{"slot_id": "s1", "expert_id": "e1", "starts_at": "2030-01-01T00:00:00.000Z", '
    change += '"ends_at": "2030-01-01T01:00:00.000Z", "changed_at": "{}"}}'
    held, confirmed = "2029-12-31T20:00:00.000Z", "2029-12-31T21:00:00.000Z"
    early, late = "2029-12-31T20:30:00.000Z", "2029-12-31T22:00:00.000Z"
    moved_late = f"[{change.format('2030-01-01T00:30:00.000Z')}]"
    with closing(_unguarded_db(db)) as connection:
        connection.executemany(
            "INSERT INTO bookings (booking_id, slot_id, expert_id, starts_at, ends_at, "
            "customer_json, status, version, held_at, expires_at, confirmed_at, "
            "payment_page_url, payment_status, payment_amount, payment_currency, paid_at, "
            "refund_due, cancelled_at, history_json) VALUES (?, 's2', 'e1', "
            "'2030-01-02T00:00:00.000Z', '2030-01-02T01:00:00.000Z', '{}', 'CANCELLED', ?, "
            "?, '2029-12-31T20:05:00.000Z', ?, 'u', 'PAID', '500.00', 'CNY', ?, 1, ?, ?)",
            [
                ("c1", 3, held, confirmed, confirmed, early, "[]"),
                ("c2", 4, held, confirmed, confirmed, late, f"[{change.format(early)}]"),
                ("c3", 5, held, confirmed, confirmed, early, f"[{change.format(late)}]"),
                ("c4", 4, held, confirmed, confirmed, late, f"[{change.format(late)}]"),
                # after the start: of the booking (2030-01-02), of the slot a reschedule left
                ("c5", 3, held, confirmed, confirmed, "2030-01-02T00:00:00.000Z", "[]"),
                ("c6", 4, held, confirmed, confirmed, "2030-01-01T01:00:00.000Z", moved_late),
            ],
        )
        connection.commit()
    assert check_invariants(db) == [
        (
            "booking c1: confirmed_at 2029-12-31T21:00:00.000Z is not before cancelled_at "
            "2029-12-31T20:30:00.000Z"
        ),
        (
            "booking c2: confirmed_at 2029-12-31T21:00:00.000Z is after history[0].changed_at "
            "2029-12-31T20:30:00.000Z"
        ),
        (
            "booking c3: confirmed_at 2029-12-31T21:00:00.000Z is not before cancelled_at "
            "2029-12-31T20:30:00.000Z; history[0].changed_at 2029-12-31T22:00:00.000Z is after "
            "cancelled_at 2029-12-31T20:30:00.000Z"
        ),
        (
            "booking c5: cancelled_at 2030-01-02T00:00:00.000Z is not before starts_at "
            "2030-01-02T00:00:00.000Z"
        ),
        (
            "booking c6: history[0].changed_at 2030-01-01T00:30:00.000Z is not before the start "
            "of the slot it left or moved to"
        ),
    ]


def test_fuzz_run_sent_enough_requests_and_left_the_database_consistent(
    wire: Wire, database_watch: DatabaseWatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """At least 2,000 generated requests per run; the database invariants held after each test."""
    with capsys.disabled():
        counts = ", ".join(f"{source} {n}" for source, n in sorted(wire.counts.items()))
        sys.stdout.write(f"\nfuzz requests: {wire.generated} generated ({counts})\n")
        sys.stdout.writelines(f"  {key}: {n}\n" for key, n in sorted(outcomes.items()))
    assert wire.generated >= MIN_REQUESTS_PER_RUN
    assert database_watch.check("at the end") == []
    assert database_watch.violations == []
