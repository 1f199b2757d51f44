"""HttpPaymentQuery against a respx router: request shape, trace propagation, failure mapping."""

from __future__ import annotations

import gzip
import json
import logging
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx
import pytest
import respx
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from expert_booking.adapters.payments_http import MAX_ANSWER_BYTES, HttpPaymentQuery
from expert_booking.domain.errors import BookingError
from expert_booking.domain.model import PaymentAnswer, PaymentStatus
from expert_booking.edge.schemas import SchemaRegistry
from expert_booking.ports import TraceContext
from tests.fakes import TRACE, MutableClock

pytestmark = pytest.mark.anyio

BASE_URL = "http://payments.test"
NOW = datetime(2030, 9, 1, 0, 1, 2, 345000, tzinfo=UTC)
BOOKING_ID = "booking-0123456789abcdef0123456789abcdef"
PAID_BODY = {
    "bookingId": BOOKING_ID,
    "status": "PAID",
    "amount": "500.00",
    "currency": "CNY",
    "paidAt": "2030-09-01T00:00:30.000Z",
}
# The last "amount" is the booking's: read as the last value wins, it would confirm.
_DUPLICATE_AMOUNT = json.dumps(PAID_BODY).replace('"amount"', '"amount": "1.00", "amount"').encode()
ANSWER_SCHEMA = SchemaRegistry.load()["payment_answer"].validator
TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


@pytest.fixture
def router() -> respx.MockRouter:
    return respx.MockRouter(base_url=BASE_URL, assert_all_called=False)


@pytest.fixture
async def client(router: respx.MockRouter) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.MockTransport(router.async_handler)
    async with httpx.AsyncClient(base_url=BASE_URL, transport=transport, timeout=3.0) as client:
        yield client


@pytest.fixture
def payments(client: httpx.AsyncClient) -> HttpPaymentQuery:
    return HttpPaymentQuery(
        client, MutableClock(NOW), deadline_seconds=3.0, answer_schema=ANSWER_SCHEMA
    )


def _route(router: respx.MockRouter, booking_id: str = BOOKING_ID) -> respx.Route:
    return router.get(f"/payments/{booking_id}")


async def test_a_paid_answer_is_returned_with_paid_at_parsed(
    router: respx.MockRouter, payments: HttpPaymentQuery
) -> None:
    _route(router).respond(200, json=PAID_BODY)
    assert await payments.query_payment(BOOKING_ID, TRACE) == PaymentAnswer(
        booking_id=BOOKING_ID,
        status=PaymentStatus.PAID,
        amount="500.00",
        currency="CNY",
        paid_at=datetime(2030, 9, 1, 0, 0, 30, tzinfo=UTC),
        received_at=NOW,
    )


async def test_a_pending_answer_may_have_a_null_paid_at(
    router: respx.MockRouter, payments: HttpPaymentQuery
) -> None:
    _route(router).respond(200, json={**PAID_BODY, "status": "PENDING", "paidAt": None})
    result = await payments.query_payment(BOOKING_ID, TRACE)
    assert result.status == "PENDING"
    assert result.paid_at is None


@pytest.mark.parametrize("status", ["PAID", "PENDING", "FAILED", "CLOSED"])
async def test_an_answer_without_paid_at_reads_as_a_null_paid_at(
    router: respx.MockRouter, payments: HttpPaymentQuery, status: str
) -> None:
    """CONTRACT 4: "PAID needs paidAt, else PAYMENT_MISMATCH": the domain refuses a PAID one."""
    _route(router).respond(200, json=_body(status=status, paidAt=_MISSING))
    result = await payments.query_payment(BOOKING_ID, TRACE)
    assert (result.status, result.paid_at) == (status, None)


async def test_an_inexact_amount_is_passed_through_for_the_domain_to_refuse(
    router: respx.MockRouter, payments: HttpPaymentQuery
) -> None:
    _route(router).respond(200, json={**PAID_BODY, "amount": "500.0"})
    result = await payments.query_payment(BOOKING_ID, TRACE)
    assert result.amount == "500.0"


@pytest.mark.parametrize(
    "body",
    [
        {**PAID_BODY, "status": "REFUNDED"},
        {**PAID_BODY, "status": "paid"},
        {**PAID_BODY, "refundId": "r-1"},
        {k: v for k, v in PAID_BODY.items() if k != "currency"},
    ],
    ids=["unknown-status", "lower-case-status", "unknown-field", "missing-field"],
)
async def test_an_answer_outside_the_contract_shape_is_unavailable_and_retryable(
    router: respx.MockRouter, payments: HttpPaymentQuery, body: dict[str, object]
) -> None:
    _route(router).respond(200, json=body)
    with pytest.raises(BookingError) as excinfo:
        await payments.query_payment(BOOKING_ID, TRACE)
    assert excinfo.value.code == "PAYMENT_UNAVAILABLE"
    assert excinfo.value.retryable
    assert excinfo.value.details == {"reason": "MALFORMED"}


async def test_a_body_that_trickles_past_the_deadline_is_a_timeout(
    router: respx.MockRouter,
) -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await anyio.sleep(5)  # the simulated slow service, cut off by the 0.05 s deadline
        return httpx.Response(200, json=PAID_BODY)

    _route(router).mock(side_effect=slow)
    client = httpx.AsyncClient(
        base_url=BASE_URL, transport=httpx.MockTransport(router.async_handler)
    )
    payments = HttpPaymentQuery(
        client, MutableClock(NOW), deadline_seconds=0.05, answer_schema=ANSWER_SCHEMA
    )
    with anyio.fail_after(5), pytest.raises(BookingError) as excinfo:
        await payments.query_payment(BOOKING_ID, TRACE)
    assert excinfo.value.code == "PAYMENT_UNAVAILABLE"
    assert excinfo.value.details == {"reason": "TIMEOUT"}
    await client.aclose()


async def test_the_request_carries_a_child_traceparent_and_the_send_time(
    router: respx.MockRouter, payments: HttpPaymentQuery
) -> None:
    route = _route(router).respond(200, json=PAID_BODY)
    await payments.query_payment(BOOKING_ID, TRACE)
    request = route.calls.last.request
    assert request.method == "GET"
    assert request.headers["x-mcp-server-request-sent-at"] == "2030-09-01T00:01:02.345Z"
    match = TRACEPARENT.match(request.headers["traceparent"])
    assert match is not None
    trace_id, span_id, flags = match.groups()
    assert trace_id == TRACE.trace_id
    assert span_id not in {TRACE.span_id, "0" * 16}
    assert flags == "01"


async def test_each_query_is_a_new_child_span(
    router: respx.MockRouter, payments: HttpPaymentQuery
) -> None:
    route = _route(router).respond(200, json=PAID_BODY)
    await payments.query_payment(BOOKING_ID, TRACE)
    await payments.query_payment(BOOKING_ID, TRACE)
    first, second = (call.request.headers["traceparent"] for call in route.calls)
    assert first != second


async def test_the_booking_id_is_quoted_into_one_path_segment(
    router: respx.MockRouter, payments: HttpPaymentQuery
) -> None:
    route = router.route().respond(404)
    with pytest.raises(BookingError):
        await payments.query_payment("booking/../x y?z", TRACE)
    assert route.calls.last.request.url.raw_path == b"/payments/booking%2F..%2Fx%20y%3Fz"


async def test_with_a_real_tracer_the_client_span_is_the_downstream_parent(
    router: respx.MockRouter, client: httpx.AsyncClient
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    payments = HttpPaymentQuery(
        client,
        MutableClock(NOW),
        deadline_seconds=3.0,
        answer_schema=ANSWER_SCHEMA,
        tracer=provider.get_tracer("test"),
    )
    route = _route(router).respond(200, json=PAID_BODY)

    await payments.query_payment(BOOKING_ID, TRACE)

    (span,) = exporter.get_finished_spans()
    assert span.name == "payment.query"
    assert span.kind is SpanKind.CLIENT
    assert span.parent is not None
    assert format(span.parent.span_id, "016x") == TRACE.span_id
    assert format(span.context.trace_id, "032x") == TRACE.trace_id
    assert dict(span.attributes or {}) == {
        "http.request.method": "GET",
        "http.response.status_code": 200,
    }
    sent = route.calls.last.request.headers["traceparent"]
    assert sent == f"00-{TRACE.trace_id}-{span.context.span_id:016x}-01"
    provider.shutdown()


async def test_with_a_real_tracer_a_failure_marks_the_span_without_recording_the_url(
    router: respx.MockRouter, client: httpx.AsyncClient
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    payments = HttpPaymentQuery(
        client,
        MutableClock(NOW),
        deadline_seconds=3.0,
        answer_schema=ANSWER_SCHEMA,
        tracer=provider.get_tracer("test"),
    )
    _route(router).mock(side_effect=httpx.ConnectError("connect to payments.test failed"))

    with pytest.raises(BookingError):
        await payments.query_payment(BOOKING_ID, TRACE)

    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "CONNECTION"
    assert span.events == ()
    provider.shutdown()


async def test_the_payment_response_time_and_local_receive_time_are_logged(
    router: respx.MockRouter, payments: HttpPaymentQuery, caplog: pytest.LogCaptureFixture
) -> None:
    _route(router).respond(
        200, json=PAID_BODY, headers={"x-payment-responded-at": "2030-09-01T00:01:02.300Z"}
    )
    with caplog.at_level(logging.DEBUG, logger="expert_booking.payments"):
        await payments.query_payment(BOOKING_ID, TRACE)
    (record,) = [r for r in caplog.records if r.name == "expert_booking.payments"]
    assert record.__dict__["payment_responded_at"] == "2030-09-01T00:01:02.300Z"
    assert record.__dict__["response_received_at"] == "2030-09-01T00:01:02.345Z"
    assert record.__dict__["http_status"] == 200
    assert record.__dict__["trace_id"] == TRACE.trace_id
    assert record.__dict__["parent_span_id"] == TRACE.span_id
    assert record.__dict__["outcome"] == "PAID"
    assert "None" not in record.getMessage()


@pytest.mark.parametrize("header", ["zelda.quux@example.org", "2030-09-01T00:01:02.300Z" * 600])
async def test_a_response_time_that_is_not_an_instant_is_not_logged(
    router: respx.MockRouter,
    payments: HttpPaymentQuery,
    caplog: pytest.LogCaptureFixture,
    header: str,
) -> None:
    _route(router).respond(200, json=PAID_BODY, headers={"x-payment-responded-at": header})
    with caplog.at_level(logging.DEBUG, logger="expert_booking.payments"):
        await payments.query_payment(BOOKING_ID, TRACE)
    (record,) = [r for r in caplog.records if r.name == "expert_booking.payments"]
    assert record.__dict__["payment_responded_at"] is None
    assert "payment service responded -" in record.getMessage()


async def test_a_query_cut_off_by_its_request_is_logged_as_cancelled(
    router: respx.MockRouter, payments: HttpPaymentQuery, caplog: pytest.LogCaptureFixture
) -> None:
    asked = anyio.Event()

    async def never_answers(request: httpx.Request) -> httpx.Response:
        asked.set()
        await anyio.Event().wait()
        raise AssertionError  # pragma: no cover - cancelled above

    _route(router).mock(side_effect=never_answers)
    with caplog.at_level(logging.DEBUG, logger="expert_booking.payments"):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(payments.query_payment, BOOKING_ID, TRACE)
            with anyio.fail_after(5):
                await asked.wait()
            tasks.cancel_scope.cancel()
    (record,) = [r for r in caplog.records if r.name == "expert_booking.payments"]
    assert record.__dict__["outcome"] == "CANCELLED"
    assert record.__dict__["trace_id"] == TRACE.trace_id


async def test_a_failed_query_is_logged_with_its_trace_and_reason(
    router: respx.MockRouter, payments: HttpPaymentQuery, caplog: pytest.LogCaptureFixture
) -> None:
    _route(router).respond(503)
    with (
        caplog.at_level(logging.DEBUG, logger="expert_booking.payments"),
        pytest.raises(BookingError),
    ):
        await payments.query_payment(BOOKING_ID, TRACE)
    (record,) = [r for r in caplog.records if r.name == "expert_booking.payments"]
    assert record.__dict__["trace_id"] == TRACE.trace_id
    assert record.__dict__["outcome"] == "UNAVAILABLE:HTTP_STATUS"
    assert record.__dict__["http_status"] == 503
    assert "payment service responded -" in record.getMessage()


async def test_the_answer_is_asked_for_without_content_encoding(
    router: respx.MockRouter, payments: HttpPaymentQuery
) -> None:
    route = _route(router).respond(200, json=PAID_BODY)
    await payments.query_payment(BOOKING_ID, TRACE)
    assert route.calls.last.request.headers["accept-encoding"] == "identity"


async def test_a_paid_at_with_an_offset_is_read_as_the_same_instant(
    router: respx.MockRouter, payments: HttpPaymentQuery
) -> None:
    _route(router).respond(200, json=_body(paidAt="2030-09-01t08:00:30.5+08:00"))
    result = await payments.query_payment(BOOKING_ID, TRACE)
    assert result.paid_at == datetime(2030, 9, 1, 0, 0, 30, 500000, tzinfo=UTC)


# fromisoformat reads each of these; none is RFC 3339 (the first three come from ISO 8601).
LAX_INSTANTS = (
    "20300901T000030Z",
    "2030-W35-7T00:00:30+00:00",
    "2030-09-01 00:00:30Z",
    "2030-09-01T00:00Z",
    "2030-09-01T00:00:30.000Z\n",
    "2030-09-01T23:59:60Z",
)


async def _chunks(data: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(data), 4096):
        yield data[start : start + 4096]
    yield b'{"x":1}'


def _chunked(data: bytes) -> AsyncIterator[bytes]:
    """A body without Content-Length: the cap must hold while it streams."""
    return _chunks(data)


def _body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {**PAID_BODY, **changes}
    return {key: value for key, value in body.items() if value is not _MISSING}


_MISSING = object()


@pytest.mark.parametrize(
    ("respond", "reason"),
    [
        ({"side_effect": httpx.ReadTimeout("read timed out")}, "TIMEOUT"),
        ({"side_effect": httpx.ConnectTimeout("connect timed out")}, "TIMEOUT"),
        ({"side_effect": httpx.PoolTimeout("pool timed out")}, "TIMEOUT"),
        ({"side_effect": httpx.ConnectError("connection refused")}, "CONNECTION"),
        ({"side_effect": httpx.RemoteProtocolError("peer closed")}, "CONNECTION"),
        ({"return_value": httpx.Response(500, json=PAID_BODY)}, "HTTP_STATUS"),
        ({"return_value": httpx.Response(404)}, "HTTP_STATUS"),
        ({"return_value": httpx.Response(201, json=PAID_BODY)}, "HTTP_STATUS"),
        ({"return_value": httpx.Response(200, content=b"{not json")}, "MALFORMED"),
        ({"return_value": httpx.Response(200, content=_DUPLICATE_AMOUNT)}, "MALFORMED"),
        ({"return_value": httpx.Response(200, content=b"\xff\xfe\x00")}, "MALFORMED"),
        ({"return_value": httpx.Response(200, json=[PAID_BODY])}, "MALFORMED"),
        ({"return_value": httpx.Response(200, json=_body(amount=_MISSING))}, "MALFORMED"),
        ({"return_value": httpx.Response(200, json=_body(bookingId=_MISSING))}, "MALFORMED"),
        ({"return_value": httpx.Response(200, json=_body(status=_MISSING))}, "MALFORMED"),
        ({"return_value": httpx.Response(200, json=_body(currency=_MISSING))}, "MALFORMED"),
        ({"return_value": httpx.Response(200, json=_body(amount=500.0))}, "MALFORMED"),
        ({"return_value": httpx.Response(200, json=_body(status=None))}, "MALFORMED"),
        ({"return_value": httpx.Response(200, json=_body(paidAt=1788220800))}, "MALFORMED"),
        ({"return_value": httpx.Response(200, json=_body(paidAt="yesterday"))}, "MALFORMED"),
        (
            {"return_value": httpx.Response(200, json=_body(paidAt="2030-09-01T00:00:30"))},
            "MALFORMED",
        ),
        *(
            ({"return_value": httpx.Response(200, json=_body(paidAt=lax))}, "MALFORMED")
            for lax in LAX_INSTANTS
        ),
        (
            {
                "return_value": httpx.Response(
                    200,
                    content=gzip.compress(json.dumps(PAID_BODY).encode()),
                    headers={"content-encoding": "gzip"},
                )
            },
            "MALFORMED",
        ),
        (
            {"return_value": httpx.Response(200, json=_body(amount="5" * MAX_ANSWER_BYTES))},
            "TOO_LARGE",
        ),
        (
            # A new one-shot stream per request, so the case can run again in one process.
            {
                "side_effect": lambda _: httpx.Response(
                    200, content=_chunked(b" " * MAX_ANSWER_BYTES)
                )
            },
            "TOO_LARGE",
        ),
    ],
)
async def test_every_failure_to_get_a_well_formed_answer_is_payment_unavailable(
    router: respx.MockRouter,
    payments: HttpPaymentQuery,
    respond: dict[str, Any],
    reason: str,
) -> None:
    _route(router).mock(**respond)
    with pytest.raises(BookingError) as excinfo:
        await payments.query_payment(BOOKING_ID, TRACE)
    error = excinfo.value
    assert error.code == "PAYMENT_UNAVAILABLE"
    assert error.retryable is True
    assert error.details == {"reason": reason}
    assert (error.__cause__ is None) == (reason == "HTTP_STATUS")
    assert BASE_URL not in str(error)
    assert BOOKING_ID not in str(error)


async def test_when_the_action_span_is_current_the_payment_span_is_its_child(
    router: respx.MockRouter, client: httpx.AsyncClient
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    payments = HttpPaymentQuery(
        client, MutableClock(NOW), deadline_seconds=3.0, answer_schema=ANSWER_SCHEMA, tracer=tracer
    )
    _route(router).respond(200, json=PAID_BODY)

    with tracer.start_as_current_span("booking.confirm_booking") as action:
        context = action.get_span_context()
        trace = TraceContext(format(context.trace_id, "032x"), format(context.span_id, "016x"))
        await payments.query_payment(BOOKING_ID, trace)

    child, parent = exporter.get_finished_spans()
    assert child.parent is not None
    assert child.parent.span_id == parent.context.span_id
    assert child.context.trace_id == parent.context.trace_id
    provider.shutdown()
