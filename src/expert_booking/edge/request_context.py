"""The request a ``tools/call`` serves, read once at the edge: its times and its ``CallContext``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from expert_booking.accept_language import preferred_language
from expert_booking.access.caller import Caller, IpNetwork, resolve_caller
from expert_booking.call_context import LOCAL, CallContext, Principal
from expert_booking.domain.model import format_instant, parse_instant
from expert_booking.edge.bearer_gate import SCOPE_PRINCIPAL
from expert_booking.edge.client_time import MISSING_CLIENT_TIMESTAMP
from expert_booking.edge.wire_time import CLIENT_SENT_META, SCOPE_CLIENT_SENT_AT, SCOPE_RECEIVED_AT
from expert_booking.ports import Clock, TraceContext


def asgi_scope(ctx: ServerRequestContext[Any]) -> Mapping[str, Any]:
    """The ASGI scope of the HTTP request, or ``{}`` (the SDK's in-process client has none)."""
    scope = getattr(ctx.request, "scope", None)
    return scope if isinstance(scope, Mapping) else {}


def request_times(
    meta: Mapping[str, Any] | None, scope: Mapping[str, Any], clock: Clock
) -> tuple[str, str]:
    """``clientSentAt`` and ``serverReceivedAt`` of this request.

    Over HTTP the timestamp middleware put both into the ASGI scope. Whatever is missing there
    (the SDK's in-process client has no HTTP request; tests use it) comes from
    ``params._meta.clientSentAt`` and from the clock now. A request without a client time is
    refused as over HTTP, never given an invented one.

    Raises:
        MCPError: -32600 with ``data.code = "MISSING_CLIENT_TIMESTAMP"``.
    """
    sent = _text(scope.get(SCOPE_CLIENT_SENT_AT))
    if sent is None:
        stamped = (meta or {}).get(CLIENT_SENT_META)
        if not isinstance(stamped, str) or not _is_instant(stamped):
            raise MCPError(
                code=types.INVALID_REQUEST,
                message="Missing or malformed clientSentAt (RFC 3339 UTC).",
                data={"code": MISSING_CLIENT_TIMESTAMP},
            )
        sent = stamped
    received = _text(scope.get(SCOPE_RECEIVED_AT))
    return sent, received if received is not None else format_instant(clock.now())


def call_context(
    scope: Mapping[str, Any], trace: TraceContext, client_sent_at: str, server_received_at: str
) -> CallContext:
    """The ``CallContext`` of one request.

    The principal is the one the Bearer gate verified (``AUTH_MODE=oauth``), else ``LOCAL``.
    """
    headers = scope.get("headers") or ()
    client = scope.get("client")
    peer = f"{client[0]}:{client[1]}" if isinstance(client, tuple | list) and client else None
    return CallContext(
        principal=request_principal(scope),
        trace=trace,
        client_sent_at=parse_instant(client_sent_at),
        server_received_at=parse_instant(server_received_at),
        locale=preferred_language(_header(headers, b"accept-language")),
        peer=peer,
    )


def request_principal(scope: Mapping[str, Any]) -> Principal:
    """The principal the Bearer gate verified (``AUTH_MODE=oauth``), else ``LOCAL``."""
    principal = scope.get(SCOPE_PRINCIPAL)
    return principal if isinstance(principal, Principal) else LOCAL


def request_caller(
    scope: Mapping[str, Any], principal: Principal, trusted_proxies: Sequence[IpNetwork]
) -> Caller:
    """Who calls (``access.caller``): an authenticated principal, else the peer address.

    The forwarding headers are decoded only when the peer is a trusted proxy.
    """
    client = scope.get("client")
    peer = client[0] if isinstance(client, tuple | list) and client else None
    return resolve_caller(
        principal=principal if principal.issuer is not None else None,
        peer=peer,
        headers=_text_headers(scope.get("headers") or ()),
        trusted_proxies=trusted_proxies,
    )


def _text_headers(headers: Iterable[tuple[bytes, bytes]]) -> Iterator[tuple[str, str]]:
    for name, value in headers:
        yield name.decode("latin-1"), value.decode("latin-1")


def _header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _text(value: object) -> str | None:
    if isinstance(value, datetime):
        return format_instant(value)
    return value if isinstance(value, str) else None


def _is_instant(text: str) -> bool:
    try:
        parse_instant(text)
    except ValueError:
        return False
    return True
