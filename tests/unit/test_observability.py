"""Trace ids, spans and the one-JSON-line-per-action log; tracing set-up from OTEL_* variables."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from expert_booking.domain.errors import BookingError, InternalError
from expert_booking.edge import wire
from expert_booking.edge.envelope import build_meta, failure, guarded
from expert_booking.edge.json_logging import ROOT_LOGGER, JsonLinesHandler, configure_logging
from expert_booking.edge.observability import (
    ACTION_LOGGER,
    ActionObserver,
    caller_of,
    derive_trace_id,
)
from expert_booking.telemetry import TracingConfigError, configure_tracing
from tests.fakes import MutableClock, logged_text

HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")
RFC3339_MS_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
LOG_KEYS = {
    "clientSkewMs",
    "source",
    "timestamp",
    "caller",
    "client",
    "action",
    "durationMs",
    "trace_id",
    "span_id",
    "parent_span_id",
    "operation_id",
    "outcome",
    "errorCode",
    "cache",
}

PEER = {"address": "127.0.0.1"}


@contextmanager
def logging_restored() -> Iterator[None]:
    """Undo ``configure_logging``: its handlers, levels and propagation."""
    loggers = [logging.getLogger(ROOT_LOGGER), logging.getLogger(ACTION_LOGGER)]
    saved = [(lg, lg.level, lg.propagate, list(lg.handlers)) for lg in loggers]
    try:
        yield
    finally:
        for logger, level, propagate, handlers in saved:
            logger.handlers[:] = handlers
            logger.setLevel(level)
            logger.propagate = propagate


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    with logging_restored():
        configure_logging(stream)
        yield stream


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in logged_text(stream).splitlines()]


def test_trace_id_is_the_request_span_uuid_digits() -> None:
    request = "4bf92f35-77b3-4da6-a3ce-929d0e0e4736"
    assert derive_trace_id(request) == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert derive_trace_id(request.upper()) == derive_trace_id(request)


def test_nil_uuid_and_missing_request_span_still_give_valid_trace_ids() -> None:
    nil = derive_trace_id(str(uuid.UUID(int=0)))
    assert HEX32.match(nil)
    assert nil != "0" * 32
    assert nil == derive_trace_id(str(uuid.UUID(int=0)))
    first, second = derive_trace_id(None), derive_trace_id(None)
    assert HEX32.match(first)
    assert first != second


@pytest.mark.parametrize("spans", [True, False], ids=["api-tracer", "no-spans"])
def test_each_action_logs_one_json_line_with_the_contract_fields(
    log_stream: io.StringIO, spans: bool
) -> None:
    observer = ActionObserver(MutableClock(), spans=spans)
    trace_id = derive_trace_id(str(uuid.uuid4()))
    with observer.action("tool_catalog.call", trace_id=trace_id, caller=PEER) as outer:
        with observer.action(
            "booking.hold_slot", trace_id=trace_id, caller=PEER, parent=outer
        ) as inner:
            inner.fail("SLOT_UNAVAILABLE")
        outer.fail("SLOT_UNAVAILABLE")
    child, parent = lines(log_stream)
    assert set(child) == LOG_KEYS
    assert child["source"] == "expert-booking-mcp"
    assert child["timestamp"] == "2030-09-01T00:00:00.000Z"
    assert child["action"] == "booking.hold_slot"
    assert child["outcome"] == "error"
    assert child["errorCode"] == "SLOT_UNAVAILABLE"
    assert child["trace_id"] == parent["trace_id"] == trace_id
    assert child["parent_span_id"] == parent["span_id"]
    assert child["span_id"] != parent["span_id"]
    assert HEX16.match(str(child["span_id"]))
    assert child["operation_id"] != parent["operation_id"]
    assert isinstance(child["durationMs"], float)
    assert inner.trace_context.traceparent == f"00-{trace_id}-{inner.span_id}-01"


def test_action_lines_written_straight_to_the_handler_equal_those_through_the_logger() -> None:
    stream = io.StringIO()
    with logging_restored():
        handler = configure_logging(stream)
        for observer in (
            ActionObserver(MutableClock()),
            ActionObserver(MutableClock(), lines=handler),
        ):
            with observer.action("tool_catalog.search", trace_id="1" * 32, caller=PEER) as action:
                action.succeed("MISS")
        through_logger, direct = lines(stream)
        for per_action in ("span_id", "operation_id", "durationMs"):
            del through_logger[per_action], direct[per_action]
        assert direct == through_logger
        # The logger's level still decides, whichever way a line would go.
        logging.getLogger(ACTION_LOGGER).setLevel(logging.WARNING)
        with ActionObserver(MutableClock(), lines=handler).action(
            "tool_catalog.search", trace_id="1" * 32, caller=PEER
        ):
            pass
        assert len(lines(stream)) == 2


@pytest.mark.anyio
async def test_on_the_event_loop_a_warning_is_written_at_once_with_what_waited() -> None:
    stream = io.StringIO()
    with logging_restored():
        configure_logging(stream)
        logging.getLogger("expert_booking.services").info("waits for the loop iteration")
        assert stream.getvalue() == ""
        logging.getLogger("expert_booking.services").warning("written at once")
        messages = [json.loads(line)["message"] for line in stream.getvalue().splitlines()]
    assert messages == ["waits for the loop iteration", "written at once"]


def test_an_action_line_to_a_broken_stream_does_not_fail_the_action(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stream = io.StringIO()
    with logging_restored():
        handler = configure_logging(stream)
        stream.close()
        with ActionObserver(MutableClock(), lines=handler).action(
            "tool_catalog.search", trace_id="1" * 32, caller=PEER
        ) as action:
            action.succeed("MISS")
    assert "Logging error" in capsys.readouterr().err  # reported as logging reports it


def test_configuring_logging_with_a_handler_made_earlier_installs_that_handler() -> None:
    stream = io.StringIO()
    with logging_restored():
        made = JsonLinesHandler(stream)
        assert configure_logging(made) is made
        assert configure_logging(made) is made
        assert logging.getLogger(ROOT_LOGGER).handlers.count(made) == 1
        logging.getLogger("expert_booking.edge").warning("once")
        assert [json.loads(line)["message"] for line in logged_text(stream).splitlines()] == [
            "once"
        ]


def test_a_successful_action_logs_its_cache_status(log_stream: io.StringIO) -> None:
    observer = ActionObserver(MutableClock())
    with observer.action("tool_catalog.search", trace_id="1" * 32, caller=PEER) as action:
        action.succeed("HIT")
    (record,) = lines(log_stream)
    assert (record["outcome"], record["errorCode"], record["cache"]) == ("ok", None, "HIT")
    assert record["parent_span_id"] is None


@pytest.mark.parametrize(
    ("raised", "outcome", "code"),
    [(asyncio.CancelledError, "cancelled", None), (RuntimeError, "error", "INTERNAL_ERROR")],
)
def test_an_action_an_exception_ends_is_not_logged_as_a_success(
    log_stream: io.StringIO, raised: type[BaseException], outcome: str, code: str | None
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observer = ActionObserver(MutableClock(), tracer=provider.get_tracer("expert_booking"))
    with (
        pytest.raises(raised),
        observer.action("tool_catalog.call", trace_id="1" * 32, caller=PEER) as outer,
        observer.action("booking.hold_slot", trace_id="1" * 32, caller=PEER, parent=outer),
    ):
        raise raised
    records, spans = lines(log_stream), exporter.get_finished_spans()
    assert (len(records), len(spans)) == (2, 2)
    for record in records:
        assert (record["outcome"], record["errorCode"]) == (outcome, code)
    for span in spans:
        assert span.status.status_code is trace.StatusCode.ERROR
        assert span.attributes is not None
        assert span.attributes["expert_booking.outcome"] == outcome
    provider.shutdown()


@pytest.mark.anyio
async def test_an_unexpected_error_is_one_json_log_line_with_operation_id_and_traceback(
    log_stream: io.StringIO, capsys: pytest.CaptureFixture[str]
) -> None:
    async def explode() -> None:
        raise RuntimeError("SELECT secret FROM /var/lib/booking.db")

    mapped = await guarded(explode, operation_id="op-42")
    assert isinstance(mapped, BookingError)
    meta = build_meta(
        trace_id="1" * 32,
        span_id="2" * 16,
        operation_id="op-42",
        client_sent_at="2030-09-01T00:00:00.000Z",
        server_received_at="2030-09-01T00:00:00.001Z",
        server_result_created_at="2030-09-01T00:00:00.002Z",
        cache="BYPASS",
    )
    response = json.dumps(failure(mapped, meta, wire.render_booking))
    (record,) = lines(log_stream)  # exactly one line, the traceback escaped inside it
    assert record["source"] == "expert-booking-mcp"
    assert RFC3339_MS_UTC.match(str(record["timestamp"]))
    assert (record["level"], record["logger"]) == ("ERROR", "expert_booking.edge")
    assert record["operation_id"] == "op-42"
    assert record["exc_type"] == "RuntimeError"
    assert str(record["traceback"]).startswith("Traceback (most recent call last):")
    assert "RuntimeError: SELECT secret" in str(record["traceback"])
    assert mapped.code == "INTERNAL_ERROR"
    for leak in ("Traceback", "RuntimeError", "secret", "/var/lib"):
        assert leak not in response
    assert capsys.readouterr().err == ""  # nothing reached Python's last-resort handler


@pytest.mark.anyio
async def test_an_internal_error_an_adapter_raised_is_logged_with_the_operation_id_and_cause(
    log_stream: io.StringIO,
) -> None:
    async def store_fails() -> None:
        try:
            raise sqlite3.OperationalError("no such table: idempotency")
        except sqlite3.Error as exc:
            raise InternalError from exc  # as the store's translate_error raises it

    mapped = await guarded(store_fails, operation_id="op-43")
    assert isinstance(mapped, InternalError)
    (record,) = lines(log_stream)
    assert (record["level"], record["operation_id"]) == ("ERROR", "op-43")
    assert "sqlite3.OperationalError: no such table: idempotency" in str(record["traceback"])


class Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_every_expert_booking_record_is_a_json_line_and_action_lines_are_written_once(
    log_stream: io.StringIO, capsys: pytest.CaptureFixture[str]
) -> None:
    at_root = Collected()
    logging.getLogger().addHandler(at_root)
    try:
        log_each_kind_of_record()
    finally:
        logging.getLogger().removeHandler(at_root)
    warning, payment, store, action = lines(log_stream)
    assert warning == {
        "source": "expert-booking-mcp",
        "timestamp": warning["timestamp"],
        "level": "WARNING",
        "logger": "expert_booking.services",
        "message": "reconciliation needed: b-1",
    }
    assert RFC3339_MS_UTC.match(str(warning["timestamp"]))
    assert (payment["level"], payment["trace_id"]) == ("INFO", "3" * 32)
    assert "booking_id" not in payment  # only the allow-listed context fields
    assert store["message"] == "bad text \ud800"  # escaped in the line, not lost
    logged_text(log_stream).encode("utf-8")  # every line is writable as UTF-8
    assert set(action) == LOG_KEYS
    assert action["action"] == "tool_catalog.search"
    assert capsys.readouterr().err == ""
    assert at_root.records == []  # nothing propagates to the root logger


def log_each_kind_of_record() -> None:
    logging.getLogger("expert_booking.services").warning("reconciliation needed: %s", "b-1")
    logging.getLogger("expert_booking.payments").info(
        "payment answer: status %s", 200, extra={"trace_id": "3" * 32, "booking_id": "b-1"}
    )
    logging.getLogger("expert_booking.store").error("bad text \ud800")
    logging.getLogger("expert_booking.store").debug("below INFO: not written")
    with ActionObserver(MutableClock()).action(
        "tool_catalog.search", trace_id="1" * 32, caller=PEER
    ):
        pass


def test_configuring_logging_again_replaces_the_handler() -> None:
    first, second = io.StringIO(), io.StringIO()
    with logging_restored():
        configure_logging(first)
        configure_logging(second)
        logging.getLogger("expert_booking.edge").warning("once")
    assert first.getvalue() == ""
    assert [json.loads(line)["message"] for line in logged_text(second).splitlines()] == ["once"]


def test_spans_share_the_derived_trace_and_nest_the_logical_action() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observer = ActionObserver(MutableClock(), tracer=provider.get_tracer("expert_booking"))
    trace_id = derive_trace_id(str(uuid.uuid4()))
    with observer.action("tool_catalog.call", trace_id=trace_id, caller=PEER) as outer:
        with observer.action("booking.get_booking", trace_id=trace_id, caller=PEER, parent=outer):
            pass
        outer.fail("BOOKING_NOT_FOUND")
    inner_span, outer_span = exporter.get_finished_spans()
    assert format(outer_span.context.trace_id, "032x") == trace_id
    assert format(inner_span.context.trace_id, "032x") == trace_id
    assert inner_span.parent is not None
    assert inner_span.parent.span_id == outer_span.context.span_id
    assert outer.span_id == format(outer_span.context.span_id, "016x")
    assert outer_span.parent is not None
    assert outer_span.parent.is_remote
    assert outer_span.attributes is not None
    assert outer_span.attributes["error.type"] == "BOOKING_NOT_FOUND"
    assert outer_span.status.status_code is trace.StatusCode.ERROR
    assert inner_span.attributes is not None
    assert set(inner_span.attributes) == {
        "expert_booking.action",
        "expert_booking.operation_id",
        "expert_booking.outcome",
        "expert_booking.cache",
    }
    provider.shutdown()


def test_a_top_action_links_to_the_request_span_it_runs_in() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("expert_booking")
    observer = ActionObserver(MutableClock(), tracer=tracer)
    trace_id = derive_trace_id(str(uuid.uuid4()))
    with (
        tracer.start_as_current_span("tools/call") as request_span,
        observer.action("tool_catalog.call", trace_id=trace_id, caller=PEER) as outer,
        observer.action("booking.get_booking", trace_id=trace_id, caller=PEER, parent=outer),
    ):
        pass
    inner, top, request = exporter.get_finished_spans()
    assert request.context.trace_id != int(trace_id, 16)  # two traces: the link joins them
    assert [link.context for link in top.links] == [request_span.get_span_context()]
    assert inner.links == ()
    provider.shutdown()


def test_an_observer_without_spans_never_calls_the_tracer(log_stream: io.StringIO) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observer = ActionObserver(
        MutableClock(), tracer=provider.get_tracer("expert_booking"), spans=False
    )
    trace_id = derive_trace_id(str(uuid.uuid4()))
    with observer.action("tool_catalog.call", trace_id=trace_id, caller=PEER) as outer:
        inner_scope = observer.action(
            "booking.get_booking", trace_id=trace_id, caller=PEER, parent=outer
        )
        with inner_scope as inner:
            pass
    assert exporter.get_finished_spans() == ()
    assert (outer.span, inner.span) == (None, None)
    assert inner.trace_context.traceparent == f"00-{trace_id}-{inner.span_id}-01"
    child, parent = lines(log_stream)
    assert child["parent_span_id"] == parent["span_id"] == outer.span_id
    provider.shutdown()


def test_caller_is_the_client_label_or_unknown() -> None:
    info = {"io.modelcontextprotocol/clientInfo": {"name": "claude", "version": "2.1"}}
    assert caller_of(info) == "claude/2.1"
    assert caller_of({"io.modelcontextprotocol/clientInfo": {"name": "x"}}) == "x"
    assert caller_of({"io.modelcontextprotocol/clientInfo": "weird"}) == "unknown"
    assert caller_of(None) == "unknown"
    long_name = {"io.modelcontextprotocol/clientInfo": {"name": "n" * 500, "version": "1"}}
    assert len(caller_of(long_name)) == 120


def test_a_caller_label_with_a_lone_surrogate_is_logged_as_unicode_text() -> None:
    label = caller_of({"io.modelcontextprotocol/clientInfo": {"name": "bot\ud800", "version": "1"}})
    assert label == "bot\ufffd/1"


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"OTEL_TRACES_EXPORTER": "none"},
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
        {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"},
    ],
)
def test_no_tracer_provider_unless_asked_for(env: dict[str, str]) -> None:
    assert configure_tracing(env, install_global=False) is None


@pytest.mark.parametrize(
    ("env", "exporter_type"),
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, OTLPSpanExporter),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x:4318/v1/traces"}, OTLPSpanExporter),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, OTLPSpanExporter),
        ({"OTEL_TRACES_EXPORTER": "Console"}, ConsoleSpanExporter),
    ],
)
def test_tracing_is_configured_from_the_standard_variables(
    env: dict[str, str], exporter_type: type
) -> None:
    provider = configure_tracing(
        {**env, "OTEL_SERVICE_NAME": "booking-test"}, service_version="1.2.3", install_global=False
    )
    assert provider is not None
    try:
        assert provider.resource.attributes["service.name"] == "booking-test"
        assert provider.resource.attributes["service.version"] == "1.2.3"
        processors = provider._active_span_processor._span_processors
        assert [type(p._batch_processor._exporter) for p in processors] == [exporter_type]  # type: ignore[attr-defined]
    finally:
        provider.shutdown()


def test_the_console_exporter_writes_each_span_as_one_json_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    provider = configure_tracing({"OTEL_TRACES_EXPORTER": "console"}, install_global=False)
    assert provider is not None
    tracer = provider.get_tracer("expert_booking")
    for name in ("tool_catalog.call", "booking.get_booking"):
        tracer.start_span(name, attributes={"expert_booking.action": name}).end()
    provider.shutdown()  # flushes the batch

    lines = capsys.readouterr().err.splitlines()
    assert [json.loads(line)["name"] for line in lines] == [
        "tool_catalog.call",
        "booking.get_booking",
    ]


def test_default_service_name_and_unknown_exporter() -> None:
    provider = configure_tracing({"OTEL_TRACES_EXPORTER": "console"}, install_global=False)
    assert provider is not None
    assert provider.resource.attributes["service.name"] == "expert-booking-mcp"
    provider.shutdown()
    with pytest.raises(TracingConfigError):
        configure_tracing({"OTEL_TRACES_EXPORTER": "zipkin"}, install_global=False)
