"""The gate's client timestamp check (CONTRACT section 2, ``CLIENT_CLOCK_TOLERANCE_SECONDS``)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any, Final

from mcp_types import INVALID_REQUEST

from expert_booking.edge.refusals import Refusal
from expert_booking.edge.wire_time import CLIENT_SENT_HEADER, CLIENT_SENT_META
from expert_booking.version import DISTRIBUTION

MISSING_CLIENT_TIMESTAMP: Final = "MISSING_CLIENT_TIMESTAMP"
CLIENT_TIMESTAMP_MISMATCH: Final = "CLIENT_TIMESTAMP_MISMATCH"
CLIENT_TIMESTAMP_OUT_OF_RANGE: Final = "CLIENT_TIMESTAMP_OUT_OF_RANGE"
CLIENT_TIMESTAMP_FORMAT: Final = "RFC 3339 UTC with milliseconds, YYYY-MM-DDTHH:MM:SS.mmmZ"
# The shipped commands that stamp every request for a client that cannot (CONTRACT section 6).
STAMPING_COMMANDS: Final = (
    f"{DISTRIBUTION} stdio --url URL",
    f"{DISTRIBUTION} proxy --upstream URL",
)

# RFC 3339 (section 5.6) in UTC at millisecond precision: ``T``/``Z`` may be lower case, and UTC
# may be written ``+00:00`` or ``-00:00`` (section 4.3); another offset is not UTC.
_CLIENT_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}(?:[Zz]|[+-]00:00)"
)
_STAMP_HOWTO = (
    f"send header {CLIENT_SENT_HEADER} and params._meta.{CLIENT_SENT_META} with the same "
    f"timestamp ({CLIENT_TIMESTAMP_FORMAT}) taken when the request is sent"
)
_NO_STAMPS_HOWTO = (
    f"A client that cannot stamp requests can connect through `{STAMPING_COMMANDS[0]}` "
    f"(an MCP stdio server for the host) or `{STAMPING_COMMANDS[1]}` (a local HTTP proxy); "
    "both stamp every request at the moment it is sent"
)


def utc_ms_instant(value: object) -> datetime | None:
    """The (naive UTC) instant of an RFC 3339 UTC millisecond time; None if it is not one.

    The form every wire timestamp takes (CONTRACT section 2), in each spelling RFC 3339 allows
    for UTC: ``Z`` or ``z``, ``+00:00``, ``-00:00``, ``T`` or ``t``.
    """
    if not isinstance(value, str) or _CLIENT_TIME.fullmatch(value) is None:
        return None
    try:  # calendar check: month 13 or hour 24 fail
        return datetime.fromisoformat(f"{value[:10]}T{value[11:23]}")
    except ValueError:
        return None


def skew_ms(client_sent_at: str, server_received_at: str) -> int | None:
    """``serverReceivedAt - clientSentAt`` in milliseconds (both RFC 3339 UTC, milliseconds).

    Positive: the request arrived after the client's stamp (transit time, or a client clock
    behind the server's); negative: a client clock ahead. None when either is not that form.
    """
    sent = utc_ms_instant(client_sent_at)
    received = utc_ms_instant(server_received_at)
    if sent is None or received is None:
        return None
    return (received - sent) // timedelta(milliseconds=1)


def check_client_sent_at(
    header: str | None,
    message: dict[str, Any],
    request_id: Any,
    *,
    received_at: str | None,
    tolerance: timedelta,
) -> str | Refusal:
    """The validated client time, or the refusal (400, -32600, the id echoed).

    Header ``x-mcp-client-sent-at`` and ``params._meta.clientSentAt`` must both be RFC 3339
    UTC times with milliseconds and the same string (``MISSING_CLIENT_TIMESTAMP``,
    ``CLIENT_TIMESTAMP_MISMATCH``), and no further than ``tolerance`` from ``received_at``, the
    server's ingress time (``CLIENT_TIMESTAMP_OUT_OF_RANGE``). A refusal never carries the
    client's time.
    """
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    in_meta = meta.get(CLIENT_SENT_META) if isinstance(meta, dict) else None
    problems: list[str] = []
    sent = utc_ms_instant(header) if header else None
    if not header:
        problems.append(f"header {CLIENT_SENT_HEADER} is missing or repeated")
    elif sent is None:
        problems.append(f"header {CLIENT_SENT_HEADER} is not {CLIENT_TIMESTAMP_FORMAT}")
    if in_meta is None:
        problems.append(f"params._meta.{CLIENT_SENT_META} is missing")
    elif in_meta != header and utc_ms_instant(in_meta) is None:
        problems.append(f"params._meta.{CLIENT_SENT_META} is not {CLIENT_TIMESTAMP_FORMAT}")
    if problems or header is None or sent is None:
        unstamped = not header and in_meta is None
        return _missing(problems, request_id, unstamped=unstamped)
    if in_meta != header:
        return Refusal(
            400,
            INVALID_REQUEST,
            f"Client timestamp mismatch: header {CLIENT_SENT_HEADER} and "
            f"params._meta.{CLIENT_SENT_META} differ. To fix, {_STAMP_HOWTO}",
            CLIENT_TIMESTAMP_MISMATCH,
            {"code": CLIENT_TIMESTAMP_MISMATCH},
            request_id,
        )
    received = utc_ms_instant(received_at)
    if received is not None and abs(received - sent) > tolerance:
        return _out_of_range(received - sent, tolerance, request_id)
    return header


def _missing(problems: list[str], request_id: Any, *, unstamped: bool) -> Refusal:
    message = (
        f"Missing or malformed client timestamp: {'; '.join(problems)}. To fix, {_STAMP_HOWTO}"
    )
    data: dict[str, Any] = {"code": MISSING_CLIENT_TIMESTAMP, "problems": problems}
    if unstamped:
        # Nothing was stamped at all: most likely a client that cannot, not a broken one.
        message = f"{message}. {_NO_STAMPS_HOWTO}"
        data["stampingCommands"] = list(STAMPING_COMMANDS)
    return Refusal(400, INVALID_REQUEST, message, MISSING_CLIENT_TIMESTAMP, data, request_id)


def _out_of_range(skew: timedelta, tolerance: timedelta, request_id: Any) -> Refusal:
    seconds = int(tolerance.total_seconds())
    observed = round(skew.total_seconds(), 3)
    direction = "behind" if skew > timedelta(0) else "ahead of"
    return Refusal(
        400,
        INVALID_REQUEST,
        f"Client timestamp out of range: {CLIENT_SENT_HEADER} is {abs(observed)} s {direction} "
        f"the server's receipt time, more than the {seconds} s tolerated "
        "(CLIENT_CLOCK_TOLERANCE_SECONDS). Synchronise the client's clock (NTP) and stamp "
        "the time at the moment the request is sent.",
        CLIENT_TIMESTAMP_OUT_OF_RANGE,
        {
            "code": CLIENT_TIMESTAMP_OUT_OF_RANGE,
            "toleranceSeconds": seconds,
            "observedSkewSeconds": observed,
        },
        request_id,
    )
