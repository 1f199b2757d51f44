"""Per-action tracing: ids, spans and one JSON line per action (CONTRACT section 5).

The lines go to an ``ActionLineSink`` (the server's ``json_logging.JsonLinesHandler``) or the
``expert_booking.actions`` logger; no customer data is in them.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    StatusCode,
    TraceFlags,
)

from expert_booking.domain.errors import ErrorCode
from expert_booking.domain.model import format_instant
from expert_booking.edge.json_text import compact_text
from expert_booking.edge.validation import unicode_text
from expert_booking.ports import Clock, TraceContext, new_span_id
from expert_booking.version import DISTRIBUTION

SOURCE = DISTRIBUTION
"""The ``source`` of every JSON line this process writes."""
ACTION_LOGGER = "expert_booking.actions"
UNKNOWN_CALLER = "unknown"
CallerLabel = Mapping[str, str | None]
"""What an action line says about its caller (``access.caller.Caller.log_value()``)."""
_CALLER_LIMIT = 120
_ZERO_TRACE = "0" * 32

action_logger = logging.getLogger(ACTION_LOGGER)


def derive_trace_id(request_span_id: str | None) -> str:
    """The 32-hex trace id of a request: the UUID's own digits, so one request is one trace.

    A nil UUID hashes instead (an all-zero trace id is invalid in W3C trace context); no
    ``requestSpanId`` (a catalog search or read may omit it) gives a random trace id. It runs
    before the arguments are validated, so any string hashes, a lone surrogate included (the
    validation then refuses it with the call's envelope).
    """
    if request_span_id is None:
        return secrets.token_hex(16)
    try:
        digits = uuid.UUID(request_span_id).hex
    except ValueError:
        digits = _hashed(request_span_id)
    if digits == _ZERO_TRACE:
        digits = _hashed(request_span_id)
    return digits


def _hashed(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class CacheStatus(StrEnum):
    """``meta.cache`` of an envelope (``schemas/envelope.json``): how the answer was made."""

    HIT = "HIT"
    MISS = "MISS"
    BYPASS = "BYPASS"

    @classmethod
    def of(cls, cache_hit: bool) -> CacheStatus:  # noqa: FBT001 - the one fact it reads
        """HIT for an answer from a cache, MISS for one computed and cached."""
        return cls.HIT if cache_hit else cls.MISS


@dataclass(slots=True)
class Action:
    """One catalog or logical action in progress: its ids, and its outcome once known."""

    name: str
    trace_id: str
    span_id: str
    operation_id: str
    parent_span_id: str | None
    caller: CallerLabel
    client: str | None = None
    error_code: str | None = None
    cancelled: bool = False
    cache: str = CacheStatus.BYPASS
    client_skew_ms: int | None = None
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
        self.cache = CacheStatus.BYPASS

    def interrupt(self, exception: type[BaseException]) -> None:
        """Record that an exception ended the action before it had a result.

        Cancelled (the request was cut off: a client gone, a server shutting down), or an
        error nothing mapped, which the caller gets as a JSON-RPC internal error.
        """
        self.cancelled = issubclass(exception, asyncio.CancelledError)
        if not self.cancelled:
            self.error_code = ErrorCode.INTERNAL_ERROR
        self.cache = CacheStatus.BYPASS

    @property
    def outcome(self) -> str:
        """``ok``, ``error`` (see ``error_code``) or ``cancelled``."""
        if self.cancelled:
            return "cancelled"
        return "ok" if self.error_code is None else "error"


class ActionScope:
    """``with observer.action(...) as action``: the action, finished however the block ends.

    A plain context manager rather than ``@contextmanager``: two run per ``tools/call``, and
    the generator machinery cost about as much as the span.
    """

    __slots__ = ("_action", "_observer", "_span", "_started")

    def __init__(
        self, observer: ActionObserver, action: Action, span: trace.Span | None, started: float
    ) -> None:
        self._observer = observer
        self._action = action
        self._span = span
        self._started = started

    def __enter__(self) -> Action:
        return self._action

    def __exit__(self, exception: type[BaseException] | None, *_details: object) -> None:
        if exception is not None:
            self._action.interrupt(exception)
        self._observer.finish(self._action, self._span, self._started)


class ActionLineSink(Protocol):
    """Where action lines go when not through ``logging`` (``configure_logging``'s handler)."""

    def write_line(self, line: str) -> None:
        """Write one JSON action line (without its line break)."""


class ActionObserver:
    """Opens an OpenTelemetry span and writes one JSON log line per action.

    Lines go to the ``expert_booking.actions`` logger, or straight to ``lines`` when given
    (the handler ``configure_logging`` returned): the same bytes to the same stream, without
    a ``LogRecord`` and the handler chain, which cost about as much as the rest of the line
    (NOTES.md, The MCP edge). The logger's level still decides whether a line is written.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        tracer: trace.Tracer | None = None,
        lines: ActionLineSink | None = None,
        spans: bool = True,
    ) -> None:
        """Observe actions with ``clock`` for the line's timestamp.

        Args:
            clock: The injected clock.
            tracer: Spans come from it; the global provider's tracer by default.
            lines: Where action lines go; the ``expert_booking.actions`` logger by default.
            spans: False when no provider exports spans (``configure_tracing`` set none up):
                the OpenTelemetry API is then skipped, not called as a no-op twice per
                ``tools/call``. Ids, line and outcome are the same as with a no-op tracer.
        """
        self._clock = clock
        self._tracer = tracer if tracer is not None else trace.get_tracer("expert_booking")
        self._lines = lines
        self._spans = spans

    def action(
        self,
        name: str,
        *,
        trace_id: str,
        caller: CallerLabel,
        client: str | None = None,
        parent: Action | None = None,
        client_skew_ms: int | None = None,
    ) -> ActionScope:
        """One action for a ``with`` block: a span (under ``parent`` or the caller) and a line.

        ``caller`` is who called (``Caller.log_value()``: the verified principal or the peer
        address), ``client`` the client's self-declared ``clientInfo`` label, logged beside it
        and never instead of it.

        ``client_skew_ms`` (server receipt minus ``clientSentAt``) goes on the line as
        ``clientSkewMs`` so clock drift can be alerted on; a child action has its parent's.

        The caller's request is modelled as a remote parent span on the derived trace id, so
        every span of one ``requestSpanId`` shares one trace even without an incoming
        ``traceparent``. With no SDK provider the span is a no-op and the ids are made here.
        The span is not made current: downstream ports get ``Action.trace_context``
        explicitly, and skipping the context switch keeps the no-exporter path cheap.
        """
        started = time.perf_counter()
        span: trace.Span | None = None
        own: SpanContext | None = None
        if self._spans:
            parent_span = _parent_span(parent, trace_id)
            span = self._start_span(name, parent_span, _request_links(parent))
            own = span.get_span_context()
            # A no-op tracer hands back the parent's context: then the ids are made here.
            if not own.is_valid or own.span_id == parent_span.get_span_context().span_id:
                own = None
        current = Action(
            name=name,
            trace_id=format(own.trace_id, "032x") if own is not None else trace_id,
            span_id=format(own.span_id, "016x") if own is not None else new_span_id(),
            operation_id=str(uuid.uuid4()),
            parent_span_id=parent.span_id if parent is not None else None,
            caller=caller,
            client=client,
            client_skew_ms=parent.client_skew_ms if parent is not None else client_skew_ms,
            span=span,
        )
        return ActionScope(self, current, span, started)

    def _start_span(self, name: str, parent_span: trace.Span, links: Sequence[Link]) -> trace.Span:
        return self._tracer.start_span(
            name,
            context=trace.set_span_in_context(parent_span),
            kind=SpanKind.INTERNAL,
            attributes={"expert_booking.action": name},
            links=links,
            record_exception=False,
            set_status_on_exception=False,
        )

    def finish(self, action: Action, span: trace.Span | None, started: float) -> None:
        """End ``action``'s span, if any, and write its log line (``ActionScope`` calls this)."""
        if span is not None:
            _finish_span(span, action)
            span.end()
        self._log(action, (time.perf_counter() - started) * 1000)

    def _log(self, action: Action, duration_ms: float) -> None:
        if not action_logger.isEnabledFor(logging.INFO):
            return
        record = {
            "source": SOURCE,
            "timestamp": format_instant(self._clock.now()),
            "caller": action.caller,
            "client": action.client,
            "action": action.name,
            "durationMs": round(duration_ms, 3),
            "trace_id": action.trace_id,
            "span_id": action.span_id,
            "parent_span_id": action.parent_span_id,
            "operation_id": action.operation_id,
            "outcome": action.outcome,
            "errorCode": action.error_code,
            "cache": action.cache,
            "clientSkewMs": action.client_skew_ms,
        }
        line = compact_text(record)
        if self._lines is not None:
            self._lines.write_line(line)
            return
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
    return unicode_text(label[:_CALLER_LIMIT])  # logged as UTF-8: no lone surrogates


def _parent_span(parent: Action | None, trace_id: str) -> trace.Span:
    """``parent``'s span, or the caller's request as a remote span on the derived trace."""
    if parent is not None and parent.span is not None:
        return parent.span
    return NonRecordingSpan(_remote_parent(trace_id))


def _request_links(parent: Action | None) -> Sequence[Link]:
    """A link from a top action to the span current where it starts: the HTTP request's.

    The action's trace is derived from ``requestSpanId`` (CONTRACT section 5), so it cannot be
    the request span's trace; the link lets a trace viewer go from one to the other.
    """
    if parent is not None:
        return ()
    current = trace.get_current_span().get_span_context()
    return (Link(current),) if current.is_valid else ()


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
    span.set_attribute("expert_booking.outcome", action.outcome)
    span.set_attribute("expert_booking.cache", action.cache)
    failure = "cancelled" if action.cancelled else action.error_code
    if failure is not None:
        span.set_attribute("error.type", failure)
        span.set_status(StatusCode.ERROR, failure)
