"""The MCP requests the harness sends: calls of the catalog and logical tools, and their wire form.

``encode`` gives the headers and body as the SDK client sends them (2026-07-28, ``_meta``
envelope, ``Mcp-Method``/``Mcp-Name``), minus the client timestamp, which the sending client
stamps at its send boundary (``stamped=True``: stamped now, for a plain HTTP client).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import mcp_types

from expert_booking.domain.model import format_instant
from expert_booking.edge.wire_time import (
    CLIENT_SENT_HEADER,
    CLIENT_SENT_META,
    SUPPORTED_PROTOCOL_VERSION,
)

_REQUEST_IDS = itertools.count(1)


@dataclass(frozen=True, slots=True)
class McpCall:
    """One MCP request before encoding: JSON-RPC ``method``, ``params`` and the ``Mcp-Name``."""

    method: str
    params: dict[str, Any]
    name: str | None = None
    bearer: str | None = None
    """An OAuth access token, sent as ``Authorization: Bearer`` (``AUTH_MODE=oauth``)."""


def with_bearer(call: McpCall, token: str) -> McpCall:
    """``call`` sent with the access token ``token``."""
    return dataclasses.replace(call, bearer=token)


def tools_list() -> McpCall:
    return McpCall("tools/list", {})


def tools_call(name: str, arguments: dict[str, Any]) -> McpCall:
    return McpCall("tools/call", {"name": name, "arguments": arguments}, name=name)


def logical(name: str, arguments: dict[str, Any], request_span_id: str | None = None) -> McpCall:
    """``tool_catalog.call`` of the logical tool ``name``."""
    return tools_call(
        "tool_catalog.call",
        {
            "name": name,
            "arguments": arguments,
            "requestSpanId": request_span_id or str(uuid.uuid4()),
        },
    )


def hold_arguments(
    slot_id: str,
    *,
    key: str | None = None,
    name: str = "Load Test",
    email: str = "Load@Example.com",
) -> dict[str, Any]:
    """Arguments of ``booking.hold_slot`` (a new idempotency key unless ``key`` is given)."""
    return {
        "slotId": slot_id,
        "customer": {"name": name, "email": email},
        "idempotencyKey": key or str(uuid.uuid4()),
    }


def confirm_arguments(
    booking: dict[str, Any], *, approved_at: datetime, key: str | None = None
) -> dict[str, Any]:
    """Arguments of ``booking.confirm_booking`` approving the snapshot's confirmationIntent.

    ``intent`` and ``intentHash`` are copied unchanged from the hold result, as a host must.
    """
    intent = booking["confirmationIntent"]
    return {
        "bookingId": booking["bookingId"],
        "expectedVersion": booking["version"],
        "idempotencyKey": key or str(uuid.uuid4()),
        "humanApproval": {
            "approvalId": str(uuid.uuid4()),
            "decision": "APPROVE",
            "approvedAt": format_instant(approved_at),
            "intent": intent["intent"],
            "intentHash": intent["intentHash"],
        },
    }


def encode(
    call: McpCall, request_id: int | None = None, *, stamped: bool = False
) -> tuple[dict[str, str], bytes]:
    """Headers and body of ``call`` as the SDK client sends them.

    Without the client timestamp (the sending client stamps it at its send boundary), or,
    ``stamped``, with the time now in header ``x-mcp-client-sent-at`` and ``_meta.clientSentAt``
    (for a test that posts the body with a plain HTTP client).
    """
    meta: dict[str, Any] = {
        mcp_types.PROTOCOL_VERSION_META_KEY: SUPPORTED_PROTOCOL_VERSION,
        mcp_types.CLIENT_INFO_META_KEY: {"name": "expert-booking-loadgen", "version": "0.1.0"},
        mcp_types.CLIENT_CAPABILITIES_META_KEY: {},
    }
    message = {
        "jsonrpc": "2.0",
        "id": next(_REQUEST_IDS) if request_id is None else request_id,
        "method": call.method,
        # _meta first: RawHttpClient stamps it by splicing the first '"_meta":{'.
        "params": {"_meta": meta, **call.params},
    }
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": SUPPORTED_PROTOCOL_VERSION,
        "mcp-method": call.method,
    }
    if call.name is not None:
        headers["mcp-name"] = call.name
    if call.bearer is not None:
        headers["authorization"] = f"Bearer {call.bearer}"
    if stamped:
        sent = format_instant(datetime.now(UTC))
        meta[CLIENT_SENT_META] = sent
        headers[CLIENT_SENT_HEADER] = sent
    return headers, json.dumps(message, separators=(",", ":")).encode()
