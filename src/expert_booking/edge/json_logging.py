"""JSON-lines logging for the whole process: every line on stderr one JSON object (CONTRACT §5).

Every record of the ``expert_booking`` loggers (and, in the server, of every logger) is one
JSON object per line: the action lines (already JSON, written as they are) and everything else
(warnings, errors with tracebacks).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from expert_booking.domain.model import format_instant
from expert_booking.edge.log_writer import LoopBatchedWriter
from expert_booking.edge.observability import ACTION_LOGGER, SOURCE, action_logger
from expert_booking.edge.validation import has_lone_surrogate

ROOT_LOGGER = "expert_booking"
# ``extra`` fields a log record may carry into its JSON line (an allow-list: no customer data).
LOG_CONTEXT_FIELDS = (
    "operation_id",
    "trace_id",
    "span_id",
    "parent_span_id",
    "outcome",
    "http_status",
    "request_sent_at",
    "payment_responded_at",
    "response_received_at",
    "refusal",
)


class JsonLinesFormatter(logging.Formatter):
    """One JSON object per record; an action line (already a JSON object) passes unchanged.

    Other records become ``{source, timestamp, level, logger, message}`` plus, for an
    exception, ``exc_type`` and ``traceback`` (the formatted traceback as one string field:
    the log is the only place a trace may appear) and the ``LOG_CONTEXT_FIELDS`` a caller
    passed in ``extra``.
    """

    def format(self, record: logging.LogRecord) -> str:
        if record.name == ACTION_LOGGER:
            return record.getMessage()
        entry: dict[str, Any] = {
            "source": SOURCE,
            "timestamp": format_instant(datetime.fromtimestamp(record.created, UTC)),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in LOG_CONTEXT_FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                entry[name] = value
        if record.exc_info and record.exc_info[0] is not None:
            entry["exc_type"] = record.exc_info[0].__name__
            entry["traceback"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":"), default=str)
        if has_lone_surrogate(line):
            # A lone surrogate (from a caller's bad text) cannot be written as UTF-8: escape it.
            line = json.dumps(entry, separators=(",", ":"), default=str)
        return line


class JsonLinesHandler(logging.StreamHandler[LoopBatchedWriter]):
    """JSON lines to ``stream`` (``JsonLinesFormatter``, ``LoopBatchedWriter``).

    The handler ``configure_logging`` installs, and an ``ActionLineSink``: made before the
    app (which writes its action lines to it) and installed when serving starts.
    """

    def __init__(self, stream: TextIO) -> None:
        super().__init__(LoopBatchedWriter(stream))
        self.setFormatter(JsonLinesFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        """Write ``record``; a warning or error at once, not at the end of the loop iteration.

        What precedes a stall or a crash is what an operator needs most (``LoopBatchedWriter``).
        """
        super().emit(record)
        if record.levelno >= logging.WARNING:
            try:
                self.stream.drain()
            except (OSError, ValueError):
                self.handleError(record)

    def write_line(self, line: str) -> None:
        """Write an action line as the handler would write its record (thread-safe).

        A stream that cannot be written (closed, broken pipe) is reported the way ``logging``
        reports it (``handleError``), never raised into the action that logged.
        """
        try:
            self.stream.write(line + self.terminator)
            self.stream.flush()
        except (OSError, ValueError):
            self.handleError(logging.makeLogRecord({"name": ACTION_LOGGER, "msg": line}))


def configure_logging(
    destination: TextIO | JsonLinesHandler = sys.stderr, *, every_logger: bool = False
) -> JsonLinesHandler:
    """Write every ``expert_booking`` log record at INFO and above as JSON lines.

    One handler on the ``expert_booking`` logger (``propagate=False``, so nothing also reaches
    the root logger or Python's last-resort handler) formats with ``JsonLinesFormatter``. The
    action lines of ``expert_booking.actions`` reach it by propagation and are written once,
    exactly as ``ActionObserver`` made them. INFO and action lines logged on an event loop
    reach the stream together at the end of the loop iteration (``LoopBatchedWriter``);
    warnings, errors and lines from other threads at once.
    With ``every_logger`` (the server process) the same handler also serves the root logger
    at WARNING, and Python's warnings are logged: uvicorn's, the SDK's and any library's
    records become JSON lines too, so every line on stderr is JSON.
    Calling this again replaces the earlier handler (and writes what that one still kept); an
    app built with ``action_lines=`` an earlier handler keeps writing its action lines there.

    Args:
        destination: the stream, or a ``JsonLinesHandler`` made earlier for it (the one an
            app already writes its action lines to).
        every_logger: also install it on the root logger (see above).

    Returns:
        The installed handler, so a caller (or a test) can remove it again.
    """
    handler = (
        destination if isinstance(destination, JsonLinesHandler) else JsonLinesHandler(destination)
    )
    targets = [logging.getLogger(ROOT_LOGGER)]
    if every_logger:
        targets.append(logging.getLogger())
    for target in targets:
        for old in [h for h in target.handlers if isinstance(h, JsonLinesHandler)]:
            if old is not handler:
                target.removeHandler(old)
                old.stream.drain()
        for plain in [h for h in target.handlers if h.__class__ is logging.StreamHandler]:
            target.removeHandler(plain)  # a plain-text stream handler (basicConfig)
        if handler not in target.handlers:
            target.addHandler(handler)
    root = targets[0]
    root.setLevel(logging.INFO)
    root.propagate = False
    action_logger.propagate = True  # to the handler above: one line per action, not two
    if every_logger:
        logging.getLogger().setLevel(logging.WARNING)
        logging.captureWarnings(capture=True)
        for name in _SERVER_LOGGERS:  # their own handlers (uvicorn's dictConfig) write text
            server_logger = logging.getLogger(name)
            server_logger.handlers.clear()
            server_logger.propagate = True
    return handler


_SERVER_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")


def startup_line(message: str) -> str:
    """``message`` as the JSON line of an error record (for use before logging is set up)."""
    record = logging.makeLogRecord(
        {
            "name": "expert_booking.server",
            "levelno": logging.ERROR,
            "levelname": "ERROR",
            "msg": message,
        }
    )
    return JsonLinesFormatter().format(record)
