"""The tool result envelope (CONTRACT section 3) and the edge's single error mapper."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from expert_booking.domain.errors import BookingError, ErrorCode, InternalError
from expert_booking.domain.model import Booking
from expert_booking.edge.error_texts import message_of, recovery_of, wire_details
from expert_booking.edge.json_text import compact_text
from expert_booking.edge.wire_time import (
    CLIENT_SENT_META,
    SERVER_RECEIVED_META,
    SERVER_RESULT_CREATED_META,
)

logger = logging.getLogger("expert_booking.edge")

T = TypeVar("T")
BookingRenderer = Callable[[Booking], dict[str, Any]]


def build_meta(
    *,
    trace_id: str,
    span_id: str,
    operation_id: str,
    client_sent_at: str,
    server_received_at: str,
    server_result_created_at: str,
    cache: str,
) -> dict[str, Any]:
    """The envelope's ``meta`` object: these strings, then any live state (``edge/admission``)."""
    return {
        "traceId": trace_id,
        "spanId": span_id,
        "operationId": operation_id,
        CLIENT_SENT_META: client_sent_at,
        SERVER_RECEIVED_META: server_received_at,
        SERVER_RESULT_CREATED_META: server_result_created_at,
        "cache": cache,
    }


def success(data: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
    """``{"ok": true, "data": ..., "meta": ...}``."""
    return {"ok": True, "data": data, "meta": meta}


def failure(
    error: BookingError, meta: Mapping[str, Any], booking_renderer: BookingRenderer
) -> dict[str, Any]:
    """``{"ok": false, "error": ..., "meta": ...}``; a booking on the error becomes a snapshot.

    Only the error's own client-safe fields are used: its code, message, details and retry
    rule, and its code's recovery sentence (``error_texts``). Nothing of a cause or traceback.
    """
    details = wire_details(error)
    if error.booking is not None:
        details["booking"] = booking_renderer(error.booking)
    return {
        "ok": False,
        "error": {
            "code": error.code,
            "message": message_of(error),
            "retryable": error.retryable,
            "details": details,
            "recovery": {"action": recovery_of(error)},
        },
        "meta": meta,
    }


async def guarded(run: Callable[[], Awaitable[T]], *, operation_id: str) -> T | BookingError:
    """Run ``run`` and map whatever it raises; the only broad ``except`` of the edge.

    A ``BookingError`` is returned as it is (its code is the contract). Anything else is logged
    here with its traceback and becomes ``INTERNAL_ERROR`` carrying only the operation id, so
    no stack trace, path, SQL or exception text ever reaches a caller. The log record carries
    ``operation_id`` as a field (see ``json_logging.configure_logging``), which ties the
    caller's error to the traceback in the log. An ``INTERNAL_ERROR`` an adapter raised (a
    store failure it could not name otherwise) is one of these: logged with its cause.
    """
    try:
        return await run()
    except Exception as error:  # the single broad except of the edge (house style 3.4)
        if isinstance(error, BookingError) and error.code is not ErrorCode.INTERNAL_ERROR:
            return error
        logger.exception(
            "unexpected error; operation_id=%s",
            operation_id,
            extra={"operation_id": operation_id},
        )
        return InternalError(operation_id=operation_id)


def to_call_result(envelope: Mapping[str, Any]) -> dict[str, Any]:
    """The wire form of the MCP ``CallToolResult``: the envelope as structured content and text.

    The text is the envelope as one compact JSON text. A plain dict, not a
    ``types.CallToolResult``: the SDK validates every handler result against the protocol's
    result schema anyway (``serialize_server_result``), so building the model first only added
    one more validation and one more JSON-mode dump of the whole envelope per call.
    """
    return {
        "content": [{"type": "text", "text": compact_text(envelope)}],
        "structuredContent": dict(envelope),
        "isError": not envelope["ok"],
        "resultType": "complete",  # required by 2026-07-28 (the model's default)
    }
