"""Read-only HTTP adapter of the payment status service (CONTRACT section 4)."""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any
from urllib.parse import quote

import httpx
from opentelemetry import trace as otel_trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)

from expert_booking.domain.errors import PaymentUnavailableError
from expert_booking.domain.model import (
    PaymentAnswer,
    PaymentStatus,
    format_instant,
    parse_instant,
)
from expert_booking.ports import Clock, TraceContext

logger = logging.getLogger("expert_booking.payments")
_tracer = otel_trace.get_tracer(__name__)

REQUEST_SENT_HEADER = "x-mcp-server-request-sent-at"
PAYMENT_RESPONDED_HEADER = "x-payment-responded-at"
_STRING_FIELDS = ("bookingId", "status", "amount", "currency")
_FIELDS = frozenset((*_STRING_FIELDS, "paidAt"))
_INVALID_SPAN_ID = "0" * 16


class _MalformedAnswerError(ValueError):
    """The 200 body is not a payment answer of the contract's shape."""


class HttpPaymentQuery:
    """``PaymentQueryPort`` over ``GET {base}/payments/{bookingId}``.

    The composition root builds the ``httpx.AsyncClient`` (base URL, per-phase timeouts) and
    owns its lifetime. ``deadline_seconds`` bounds the whole exchange: httpx timeouts apply per
    phase, so a service trickling its body would otherwise exceed PAYMENT_TIMEOUT_SECONDS.
    Every failure to get a well-formed answer (schemas/payment_answer.json) is
    ``PaymentUnavailableError`` (retryable); whether it matches the booking is the domain's call.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        clock: Clock,
        *,
        deadline_seconds: float,
        tracer: Tracer | None = None,
    ) -> None:
        """Use ``client`` for requests and ``clock`` for the wire timestamps.

        ``tracer`` defaults to this module's OpenTelemetry API tracer (the global provider).
        """
        self._client = client
        self._clock = clock
        self._deadline_seconds = deadline_seconds
        self._tracer = tracer or _tracer

    async def query_payment(self, booking_id: str, trace: TraceContext) -> PaymentAnswer:
        """Return the payment's current state as the service reports it.

        The request runs in a CLIENT span that is a child of ``trace``; its ``traceparent`` is
        sent downstream.

        Raises:
            PaymentUnavailableError: timeout, connection error, non-200 or malformed body;
                ``details.reason`` is TIMEOUT, CONNECTION, HTTP_STATUS or MALFORMED.
        """
        with self._tracer.start_as_current_span(
            "payment.query",
            context=_parent_context(trace),
            kind=SpanKind.CLIENT,
            attributes={"http.request.method": "GET"},
            record_exception=False,  # exception text may carry the URL
            set_status_on_exception=False,
        ) as span:
            try:
                return await self._query(booking_id, trace, span)
            except PaymentUnavailableError as exc:
                span.set_status(Status(StatusCode.ERROR, str(exc.details["reason"])))
                raise

    async def _query(self, booking_id: str, trace: TraceContext, span: Span) -> PaymentAnswer:
        sent_at = format_instant(self._clock.now())
        headers = {"traceparent": _child_traceparent(trace, span), REQUEST_SENT_HEADER: sent_at}
        try:
            async with asyncio.timeout(self._deadline_seconds):
                response = await self._client.get(
                    "/payments/" + quote(booking_id, safe=""), headers=headers
                )
        except (httpx.TimeoutException, TimeoutError) as exc:
            raise PaymentUnavailableError(reason="TIMEOUT") from exc
        except httpx.DecodingError as exc:
            raise PaymentUnavailableError(reason="MALFORMED") from exc
        except httpx.HTTPError as exc:
            raise PaymentUnavailableError(reason="CONNECTION") from exc
        received_at = format_instant(self._clock.now())
        span.set_attribute("http.response.status_code", response.status_code)
        logger.info(
            "payment answer: status %s, sent %s, payment service responded %s, received %s",
            response.status_code,
            sent_at,
            response.headers.get(PAYMENT_RESPONDED_HEADER),
            received_at,
            extra={
                "booking_id": booking_id,
                "http_status": response.status_code,
                "request_sent_at": sent_at,
                "payment_responded_at": response.headers.get(PAYMENT_RESPONDED_HEADER),
                "response_received_at": received_at,
            },
        )
        if response.status_code != httpx.codes.OK:
            raise PaymentUnavailableError(reason="HTTP_STATUS")
        try:
            return _parse_answer(response.json())
        except (ValueError, RecursionError) as exc:  # JSON, UTF-8, shape, status, timestamps
            raise PaymentUnavailableError(reason="MALFORMED") from exc


def _parse_answer(doc: Any) -> PaymentAnswer:
    if not isinstance(doc, dict):
        raise _MalformedAnswerError("not an object")
    if doc.keys() != _FIELDS:  # the contract's closed shape: missing or unknown keys
        raise _MalformedAnswerError("not the five fields of a payment answer")
    for name in _STRING_FIELDS:
        if not isinstance(doc[name], str):
            raise _MalformedAnswerError(f"{name} is not a string")
    paid_at = doc["paidAt"]
    if paid_at is not None and not isinstance(paid_at, str):
        raise _MalformedAnswerError("paidAt is neither a string nor null")
    if doc["status"] not in PaymentStatus.__members__:
        raise _MalformedAnswerError("unknown payment status")
    return PaymentAnswer(
        booking_id=doc["bookingId"],
        status=PaymentStatus(doc["status"]),
        amount=doc["amount"],
        currency=doc["currency"],
        paid_at=None if paid_at is None else parse_instant(paid_at),
    )


def _parent_context(trace_context: TraceContext) -> Context | None:
    """The OTel context whose span is the action span described by ``trace_context``."""
    current = otel_trace.get_current_span().get_span_context()
    if (
        current.is_valid
        and format(current.trace_id, "032x") == trace_context.trace_id
        and format(current.span_id, "016x") == trace_context.span_id
    ):
        return None  # the action span is already current: keep its context (baggage etc.)
    parent = SpanContext(
        trace_id=int(trace_context.trace_id, 16),
        span_id=int(trace_context.span_id, 16),
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return otel_trace.set_span_in_context(NonRecordingSpan(parent))


def _child_traceparent(trace_context: TraceContext, span: Span) -> str:
    """``traceparent`` naming this request's span as a child of the action span.

    With a real tracer provider that is the CLIENT span itself. With the no-op API the span
    just repeats its parent's ids, so a fresh span id is generated instead: the payment
    service still sees a child of the action span, never the action span itself.
    """
    context = span.get_span_context()
    span_id = format(context.span_id, "016x")
    if (
        context.is_valid
        and format(context.trace_id, "032x") == trace_context.trace_id
        and span_id != trace_context.span_id
    ):
        return f"00-{trace_context.trace_id}-{span_id}-{int(context.trace_flags):02x}"
    fresh = secrets.token_hex(8)
    while fresh == _INVALID_SPAN_ID:
        fresh = secrets.token_hex(8)
    return f"00-{trace_context.trace_id}-{fresh}-01"
