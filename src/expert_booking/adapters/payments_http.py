"""Read-only HTTP adapter of the payment status service (CONTRACT section 4)."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx
from jsonschema.protocols import Validator
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

from expert_booking.adapters.http_body import (
    IDENTITY_HEADERS,
    BodyTooLargeError,
    EncodedBodyError,
    read_capped,
)
from expert_booking.domain.errors import PaymentUnavailableError
from expert_booking.domain.model import (
    PaymentAnswer,
    PaymentStatus,
    format_instant,
    parse_instant,
)
from expert_booking.ports import Clock, TraceContext, new_span_id

logger = logging.getLogger("expert_booking.payments")
_tracer = otel_trace.get_tracer(__name__)

REQUEST_SENT_HEADER = "x-mcp-server-request-sent-at"
PAYMENT_RESPONDED_HEADER = "x-payment-responded-at"
PAYMENTS_PATH = "/payments/"  # + the booking id: CONTRACT section 4
_INSTANT_TEXT_LIMIT = 64  # an RFC 3339 date-time with nanoseconds and an offset is 35


MAX_ANSWER_BYTES = 64 * 1024
"""Largest payment answer body read (the contract's answer is ~150 bytes)."""


class _MalformedAnswerError(ValueError):
    """The 200 body is not a payment answer of the contract's shape."""


class HttpPaymentQuery:
    """``PaymentQueryPort`` over ``GET {base}/payments/{bookingId}``.

    The composition root builds the ``httpx.AsyncClient`` (base URL, per-phase timeouts) and
    owns its lifetime. ``deadline_seconds`` bounds the whole exchange: httpx timeouts apply per
    phase, so a service trickling its body would otherwise exceed PAYMENT_TIMEOUT_SECONDS.

    The body is read as it travels (``Accept-Encoding: identity``; a ``Content-Encoding`` is
    refused, never decoded) and at most ``MAX_ANSWER_BYTES`` of it, so neither a large nor a
    highly compressed answer can cost memory or event-loop time. It must then be valid against
    ``schemas/payment_answer.json`` (``answer_schema``, the compiled validator of the schema
    registry: one source of truth for the shape). Every failure to get such an answer is
    ``PaymentUnavailableError`` (retryable); whether it matches the booking is the domain's call.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        clock: Clock,
        *,
        deadline_seconds: float,
        answer_schema: Validator,
        tracer: Tracer | None = None,
    ) -> None:
        """Use ``client`` for requests and ``clock`` for the wire timestamps.

        ``tracer`` defaults to this module's OpenTelemetry API tracer (the global provider).
        """
        self._client = client
        self._clock = clock
        self._deadline_seconds = deadline_seconds
        self._answer_schema = answer_schema
        self._tracer = tracer or _tracer

    async def query_payment(self, booking_id: str, trace: TraceContext) -> PaymentAnswer:
        """Return the payment's current state as the service reports it.

        The request runs in a CLIENT span that is a child of ``trace``; its ``traceparent`` is
        sent downstream. One log line names the trace, the exchange's times and its outcome
        (the payment status, or why the service counts as unavailable).

        Raises:
            PaymentUnavailableError: timeout, connection error, non-200, oversized or
                malformed body; ``details.reason`` is TIMEOUT, CONNECTION, HTTP_STATUS,
                TOO_LARGE or MALFORMED.
        """
        with self._tracer.start_as_current_span(
            "payment.query",
            context=_parent_context(trace),
            kind=SpanKind.CLIENT,
            attributes={"http.request.method": "GET"},
            record_exception=False,  # exception text may carry the URL
            set_status_on_exception=False,
        ) as span:
            exchange = _Exchange(trace, _child_traceparent(trace, span))
            exchange.sent_at = format_instant(self._clock.now())
            try:
                answer = await self._query(booking_id, exchange, span)
            except PaymentUnavailableError as exc:
                reason = str(exc.details["reason"])
                span.set_status(Status(StatusCode.ERROR, reason))
                exchange.log(f"UNAVAILABLE:{reason}")
                raise
            except asyncio.CancelledError:  # the request was cut off: say so, then go on
                span.set_status(Status(StatusCode.ERROR, "CANCELLED"))
                exchange.log("CANCELLED")
                raise
            exchange.log(answer.status.value)
            return answer

    async def _query(self, booking_id: str, exchange: _Exchange, span: Span) -> PaymentAnswer:
        headers = {
            "traceparent": exchange.traceparent,
            REQUEST_SENT_HEADER: exchange.sent_at,
            "accept": "application/json",
            **IDENTITY_HEADERS,
        }
        try:
            async with (
                asyncio.timeout(self._deadline_seconds),
                self._client.stream(
                    "GET", PAYMENTS_PATH + quote(booking_id, safe=""), headers=headers
                ) as response,
            ):
                exchange.http_status = response.status_code
                exchange.responded_at = _instant_or_none(
                    response.headers.get(PAYMENT_RESPONDED_HEADER)
                )
                span.set_attribute("http.response.status_code", response.status_code)
                if response.status_code != httpx.codes.OK:
                    raise PaymentUnavailableError(reason="HTTP_STATUS")
                body = await read_capped(response, MAX_ANSWER_BYTES)
        except (httpx.TimeoutException, TimeoutError) as exc:
            raise PaymentUnavailableError(reason="TIMEOUT") from exc
        except BodyTooLargeError as exc:
            raise PaymentUnavailableError(reason="TOO_LARGE") from exc
        except EncodedBodyError as exc:
            raise PaymentUnavailableError(reason="MALFORMED") from exc
        except httpx.HTTPError as exc:
            raise PaymentUnavailableError(reason="CONNECTION") from exc
        received = self._clock.now()
        exchange.received_at = format_instant(received)
        try:
            return self._parse_answer(body, received)
        except (ValueError, RecursionError) as exc:  # JSON, UTF-8, shape, status, timestamps
            raise PaymentUnavailableError(reason="MALFORMED") from exc

    def _parse_answer(self, body: bytes, received_at: datetime) -> PaymentAnswer:
        doc: Any = json.loads(body.decode("utf-8"), object_pairs_hook=_members_once)
        if not self._answer_schema.is_valid(doc):
            raise _MalformedAnswerError("not a payment answer (schemas/payment_answer.json)")
        paid_at = doc.get("paidAt")  # absent is null (CONTRACT 4: PAID without it: MISMATCH)
        return PaymentAnswer(
            booking_id=doc["bookingId"],
            status=PaymentStatus(doc["status"]),
            amount=doc["amount"],
            currency=doc["currency"],
            paid_at=None if paid_at is None else parse_instant(paid_at),
            received_at=received_at,
        )


@dataclass(slots=True)
class _Exchange:
    """What one payment query's log line reports."""

    trace: TraceContext
    traceparent: str
    sent_at: str = ""
    http_status: int | None = None
    responded_at: str | None = None
    received_at: str | None = None

    def log(self, outcome: str) -> None:
        """One line: the trace, the payment span, the times and the outcome; no customer data."""
        span_id = self.traceparent.split("-")[2]
        logger.info(
            "payment query %s: HTTP %s, sent %s, payment service responded %s, received %s",
            outcome,
            "-" if self.http_status is None else self.http_status,
            self.sent_at,
            self.responded_at or "-",
            self.received_at or "-",
            extra={
                "trace_id": self.trace.trace_id,
                "span_id": span_id,
                "parent_span_id": self.trace.span_id,
                "outcome": outcome,
                "http_status": self.http_status,
                "request_sent_at": self.sent_at,
                "payment_responded_at": self.responded_at,
                "response_received_at": self.received_at,
            },
        )


def _members_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose member names are unique; a repeated name is malformed.

    RFC 8259 leaves duplicates to the reader: ``{"amount": "1.00", "amount": "500.00"}`` would
    otherwise be read as its last value, and money is not decided by a reader's choice.
    """
    members = dict(pairs)
    if len(members) != len(pairs):
        msg = "a member name repeats"
        raise _MalformedAnswerError(msg)
    return members


def _instant_or_none(text: str | None) -> str | None:
    """The payment service's response time as it sent it, if that is an RFC 3339 date-time.

    Anything else is dropped: free text from a dependency, of any length, never reaches the log.
    """
    if text is None or len(text) > _INSTANT_TEXT_LIMIT:
        return None
    try:
        parse_instant(text)
    except ValueError:
        return None
    return text


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
    return TraceContext(trace_context.trace_id, new_span_id()).traceparent
