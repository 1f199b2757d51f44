"""Per-action tracing and one JSON log line per action (CONTRACT section 5); no customer data."""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, StatusCode, TraceFlags

from expert_booking.domain.model import format_instant
from expert_booking.ports import Clock, TraceContext

SOURCE = "expert-booking-mcp"
ACTION_LOGGER = "expert_booking.actions"
UNKNOWN_CALLER = "unknown"
_CALLER_LIMIT = 120
_ZERO_TRACE = "0" * 32

action_logger = logging.getLogger(ACTION_LOGGER)


def derive_trace_id(request_span_id: str | None) -> str:
    """The 32-hex trace id of a request: the UUID's own digits, so one request is one trace.

    A nil UUID hashes instead (an all-zero trace id is invalid in W3C trace context); no
    ``requestSpanId`` (a catalog search or read may omit it) gives a random trace id.
    """
    if request_span_id is None:
        return secrets.token_hex(16)
    try:
        digits = uuid.UUID(request_span_id).hex
    except ValueError:
        digits = hashlib.sha256(request_span_id.encode()).hexdigest()[:32]
    if digits == _ZERO_TRACE:
        digits = hashlib.sha256(request_span_id.encode()).hexdigest()[:32]
    return digits


def new_span_id() -> str:
    """A fresh, non-zero 16-hex span id."""
    while (span_id := secrets.token_hex(8)) == "0" * 16:
        pass  # pragma: no cover - a 2**-64 event
    return span_id


@dataclass(slots=True)
class Action:
    """One catalog or logical action in progress: its ids, and its outcome once known."""

    name: str
    trace_id: str
    span_id: str
    operation_id: str
    parent_span_id: str | None
    caller: str
    error_code: str | None = None
    cache: str = "BYPASS"
    span: trace.Span | None = field(default=None, repr=False, compare=False)

    @property
    def trace_context(self) -> TraceContext:
        """W3C ids of this action, for ports that propagate ``traceparent`` downstream."""
        return TraceContext(trace_id=self.trace_id, span_id=self.span_id)

    def succeed(self, cache: str) -> None:
        """Record a successful outcome and its cache status."""
        self.error_code = None
        self.cache = cache

    def fail(self, code: str) -> None:
        """Record a failed outcome by its stable error code."""
        self.error_code = code
        self.cache = "BYPASS"


class ActionObserver:
    """Opens an OpenTelemetry span and writes one JSON log line per action."""

    def __init__(self, clock: Clock, *, tracer: trace.Tracer | None = None) -> None:
        self._clock = clock
        self._tracer = tracer if tracer is not None else trace.get_tracer("expert_booking")

    @contextmanager
    def action(
        self, name: str, *, trace_id: str, caller: str, parent: Action | None = None
    ) -> Iterator[Action]:
        """Run one action: a span (child of ``parent`` or of the caller) and one log line.

        The caller's request is modelled as a remote parent span on the derived trace id, so
        every span of one ``requestSpanId`` shares one trace even without an incoming
        ``traceparent``. With no SDK provider the span is a no-op and the ids are made here.
        The span is not made current: downstream ports get ``Action.trace_context``
        explicitly, and skipping the context switch keeps the no-exporter path cheap.
        """
        started = time.perf_counter()
        if parent is not None and parent.span is not None:
            parent_span: trace.Span = parent.span
        else:
            parent_span = NonRecordingSpan(_remote_parent(trace_id))
        span = self._tracer.start_span(
            name,
            context=trace.set_span_in_context(parent_span),
            kind=SpanKind.INTERNAL,
            attributes={"expert_booking.action": name},
            record_exception=False,
            set_status_on_exception=False,
        )
        own = span.get_span_context()
        # A no-op tracer hands back the parent's context: then the ids are made here.
        from_sdk = own.is_valid and own.span_id != parent_span.get_span_context().span_id
        current = Action(
            name=name,
            trace_id=format(own.trace_id, "032x") if from_sdk else trace_id,
            span_id=format(own.span_id, "016x") if from_sdk else new_span_id(),
            operation_id=str(uuid.uuid4()),
            parent_span_id=parent.span_id if parent is not None else None,
            caller=caller,
            span=span,
        )
        try:
            yield current
        finally:
            _finish_span(span, current)
            span.end()
            self._log(current, (time.perf_counter() - started) * 1000)

    def _log(self, action: Action, duration_ms: float) -> None:
        if not action_logger.isEnabledFor(logging.INFO):
            return
        record = {
            "source": SOURCE,
            "timestamp": format_instant(self._clock.now()),
            "caller": action.caller,
            "action": action.name,
            "durationMs": round(duration_ms, 3),
            "trace_id": action.trace_id,
            "span_id": action.span_id,
            "parent_span_id": action.parent_span_id,
            "operation_id": action.operation_id,
            "outcome": "ok" if action.error_code is None else "error",
            "errorCode": action.error_code,
            "cache": action.cache,
        }
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        # makeRecord + handle: the public path without findCaller's stack walk.
        action_logger.handle(
            action_logger.makeRecord(ACTION_LOGGER, logging.INFO, "", 0, line, (), None)
        )


def caller_of(meta: Mapping[str, Any] | None) -> str:
    """``name/version`` from the request's ``clientInfo`` (a client label, never a person)."""
    info = (meta or {}).get("io.modelcontextprotocol/clientInfo")
    if not isinstance(info, Mapping) or not isinstance(info.get("name"), str):
        return UNKNOWN_CALLER
    version = info.get("version")
    label = f"{info['name']}/{version}" if isinstance(version, str) else info["name"]
    return label[:_CALLER_LIMIT]


def configure_logging(stream: TextIO = sys.stderr) -> logging.Handler:
    """Send action lines, one JSON object each, to ``stream`` (the CLI passes stderr).

    Returns:
        The installed handler, so a caller (or a test) can remove it again.
    """
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))  # the message is the JSON line
    action_logger.addHandler(handler)
    action_logger.setLevel(logging.INFO)
    action_logger.propagate = False
    return handler


def _remote_parent(trace_id: str) -> SpanContext:
    """The caller's request as a span: the derived trace id, its low 64 bits as span id."""
    return SpanContext(
        trace_id=int(trace_id, 16),
        span_id=int(trace_id[16:], 16) or 1,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )


def _finish_span(span: trace.Span, action: Action) -> None:
    if not span.is_recording():
        return
    span.set_attribute("expert_booking.operation_id", action.operation_id)
    span.set_attribute("expert_booking.outcome", "ok" if action.error_code is None else "error")
    span.set_attribute("expert_booking.cache", action.cache)
    if action.error_code is not None:
        span.set_attribute("error.type", action.error_code)
        span.set_status(StatusCode.ERROR, action.error_code)
