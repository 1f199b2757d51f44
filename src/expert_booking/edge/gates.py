"""The /mcp gate: refuses what CONTRACT section 2 refuses, before the framework or SDK runs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from mcp_types import INVALID_REQUEST
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from expert_booking.edge.allow_lists import HostAllowList, OriginAllowList
from expert_booking.edge.bearer_gate import BearerAuth
from expert_booking.edge.client_time import check_client_sent_at
from expert_booking.edge.message_checks import (
    METHOD_HEADER,
    NAME_HEADER,
    SEND_VERSION,
    SUPPORTED_VERSIONS,
    VERSION_HEADER,
    check_message,
    check_routing_headers,
    request_id_of,
    rpc_method,
)
from expert_booking.edge.refusals import (
    Refusal,
    RefusalLog,
    sdk_refusals_logged,
    send_jsonrpc_error,
)
from expert_booking.edge.wire_time import (
    CLIENT_SENT_HEADER,
    SCOPE_CLIENT_SENT_AT,
    SCOPE_RECEIVED_AT,
    SUPPORTED_PROTOCOL_VERSION,
)

_HOST = b"host"
_ORIGIN = b"origin"
_CLIENT_SENT = CLIENT_SENT_HEADER.encode()
_CONTENT_LENGTH = b"content-length"
_CONTENT_TYPE = b"content-type"
_ACCEPT = b"accept"
_AUTHORIZATION = b"authorization"
_READ_HEADERS = frozenset(
    {_HOST, _ORIGIN, VERSION_HEADER, _CLIENT_SENT, _CONTENT_LENGTH, _CONTENT_TYPE, _ACCEPT}
    | {_AUTHORIZATION, METHOD_HEADER, NAME_HEADER}
)
_LOWERCASED = frozenset({_HOST, _ORIGIN})
_OWS = b" \t"
_JSON = "application/json"
_ACCEPTS_JSON = frozenset({_JSON, "application/*", "*/*"})


class DirectEntry(Protocol):
    """Answers a checked request itself (``True``) or leaves it to the SDK (``False``)."""

    async def __call__(self, scope: Scope, decoded: Any, send: Send) -> bool: ...


@dataclass(frozen=True, slots=True)
class GateLimits:
    """What the gate bounds: the body size, and how far the client's clock may be off."""

    max_body_bytes: int
    client_clock_tolerance: timedelta


class McpRequestGate:
    """Pure-ASGI gate of the MCP endpoint, outside the web framework (so it sees raw headers).

    The router (``edge.http_app``) sends it exactly the requests that reach MCP, nothing
    else. It checks, in this order (each refusal is a JSON-RPC error, ``application/json``,
    one line of ``RefusalLog``, and no handler runs):

    1. ``Host`` (421; a bare IPv6 literal without brackets is malformed) and ``Origin`` (403)
       against the allow-lists; a missing Origin is allowed.
    2. Method: anything but POST gets 405 with ``Allow: POST``.
    3. ``Content-Type`` must be ``application/json`` (400) and ``Accept`` must admit it (406),
       as the SDK requires, so the SDK never answers these in plain text.
    4. Body: over ``max_body_bytes`` (declared or streamed) gets 413.
    5. ``MCP-Protocol-Version``: missing (-32020) or anything but 2026-07-28 (-32022) gets 400.
    6. JSON: unparseable gets 400 / -32700; nested deeper than ``MAX_JSON_DEPTH``
       (``edge.message_checks``) gets 400 / -32600 (``data.code`` ``JSON_TOO_DEEP``). A
       non-object body goes on to the SDK (-32600).
    7. ``AUTH_MODE=oauth`` only (``edge.bearer_gate``): a Bearer token the verifier accepts
       (401, or 400 for a repeated ``Authorization``) with the scope this request needs (403,
       ``insufficient_scope``), both with ``WWW-Authenticate``. Here, not first: the scope a
       request needs is in its body (``tool_catalog.call``'s ``arguments.name``), so the body
       must be read and parsed (within the same size bound) to name it in the challenge; and
       refusals that need no identity (a foreign Host or Origin, a malformed request) stay
       the same with or without a token. Before the client time: a caller without access
       learns nothing about the server's clock, and an OAuth client's first, tokenless
       request is answered with the challenge that starts its authorization.
    8. Client timestamp (``edge.client_time``): header ``x-mcp-client-sent-at`` and
       ``params._meta.clientSentAt`` RFC 3339 UTC with milliseconds, equal, and within
       ``client_clock_tolerance`` of the ingress time ``TimestampLayer`` recorded, else 400 /
       -32600 with ``data.code`` ``MISSING_CLIENT_TIMESTAMP``, ``CLIENT_TIMESTAMP_MISMATCH``
       or ``CLIENT_TIMESTAMP_OUT_OF_RANGE``.
    9. A request's ``Mcp-Method`` (and ``Mcp-Name`` of a named call) absent or empty: 400 /
       -32020, ``data.code`` ``MISSING_MCP_METHOD`` / ``MISSING_MCP_NAME`` (the SDK judges a
       present one, and notifications).

    Header values are compared after trimming optional whitespace; when a request carries such
    whitespace (or an upper-case Host/Origin) the scope's headers are rewritten trimmed so the
    SDK's own checks agree. The validated client time goes to ``scope[SCOPE_CLIENT_SENT_AT]``.
    A request past every check goes to ``direct`` (this server's own calls,
    ``edge.direct_calls``), else its buffered body is replayed to the inner app.
    """

    __slots__ = ("_app", "_auth", "_direct", "_hosts", "_limits", "_log", "_origins")

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: HostAllowList,
        origins: OriginAllowList,
        limits: GateLimits,
        refusal_log: RefusalLog,
        auth: BearerAuth | None = None,
        direct: DirectEntry | None = None,
    ) -> None:
        """Gate every request before ``app``; ``auth`` only in ``AUTH_MODE=oauth``."""
        self._app = app
        self._auth = auth
        self._direct = direct
        self._hosts = hosts
        self._origins = origins
        self._limits = limits
        self._log = refusal_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request."""
        headers = _read_headers(scope)
        limit = self._limits.max_body_bytes
        refusal = (
            self._check_peer(headers)
            or _check_method(scope["method"])
            or _check_media_types(headers)
            or _check_declared_length(headers.get(_CONTENT_LENGTH), limit)
        )
        if refusal is not None:
            await self._refuse(scope, send, refusal, None)
            return
        body = await _read_body(receive, limit)
        if body is None:  # the client went away
            return
        if isinstance(body, Refusal):
            await self._refuse(scope, send, body, None)
            return
        decoded, refusal = check_message(headers, body)
        if refusal is None and self._auth is not None:
            refusal = await self._auth.admit(
                scope, headers.get(_AUTHORIZATION, ""), decoded, request_id_of(decoded)
            )
        if refusal is None and isinstance(decoded, dict):
            outcome = check_client_sent_at(
                headers.get(_CLIENT_SENT, ""),
                decoded,
                request_id_of(decoded),
                received_at=scope.get(SCOPE_RECEIVED_AT),
                tolerance=self._limits.client_clock_tolerance,
            )
            if isinstance(outcome, Refusal):
                refusal = outcome
            else:
                scope[SCOPE_CLIENT_SENT_AT] = outcome
                refusal = check_routing_headers(headers, decoded)
        if refusal is not None:
            await self._refuse(scope, send, refusal, decoded)
            return
        logged = sdk_refusals_logged(send, self._log, scope, rpc_method(decoded))
        if self._direct is not None and await self._direct(scope, decoded, logged):
            return
        await self._app(scope, _replay(body, receive), logged)

    async def _refuse(self, scope: Scope, send: Send, refusal: Refusal, decoded: Any) -> None:
        self._log.refused(
            status=refusal.status,
            reason=refusal.reason,
            http_method=scope.get("method"),
            peer=scope.get("client"),
            rpc_method=rpc_method(decoded),
            refused_value=refusal.refused_value,
            detail=refusal.detail,
            caller=refusal.caller,
        )
        await send_jsonrpc_error(
            send,
            status=refusal.status,
            code=refusal.code,
            message=refusal.message,
            data=refusal.data,
            request_id=refusal.request_id,
            extra_headers=((b"allow", b"POST"), *refusal.headers)
            if refusal.allow_post
            else refusal.headers,
        )

    def _check_peer(self, headers: dict[bytes, str | None]) -> Refusal | None:
        host = headers.get(_HOST)
        if not host or not self._hosts.allows(host):
            return Refusal(
                421,
                INVALID_REQUEST,
                "Host header not allowed: connect to this server by one of its configured "
                "host names (ALLOWED_HOSTS)",
                "HOST_NOT_ALLOWED",
                {"code": "HOST_NOT_ALLOWED"},
                refused_value=host,
            )
        origin = headers.get(_ORIGIN, "")
        if origin is None or (origin and not self._origins.allows(origin)):
            return Refusal(
                403,
                INVALID_REQUEST,
                "Origin not allowed: send requests from a configured origin (ALLOWED_ORIGINS) "
                "or without an Origin header",
                "ORIGIN_NOT_ALLOWED",
                {"code": "ORIGIN_NOT_ALLOWED"},
                refused_value=origin,
            )
        return None


def _read_headers(scope: Scope) -> dict[bytes, str | None]:
    """The headers the gate reads, trimmed; ``None`` marks a header sent more than once.

    Rewrites ``scope["headers"]`` only when a value carries optional whitespace or an upper-case
    Host/Origin, so the SDK sees the same values the gate judged.
    """
    found: dict[bytes, str | None] = {}
    rewrite = False
    for name, value in scope["headers"]:
        if value and (value[0] in _OWS or value[-1] in _OWS):
            rewrite = True
        if name in _READ_HEADERS:
            text = value.strip(_OWS).decode("latin-1")
            if name in _LOWERCASED and text != text.lower():
                rewrite = True
                text = text.lower()
            found[name] = None if name in found else text
    if rewrite:
        scope["headers"] = [
            (name, value.strip(_OWS).lower() if name in _LOWERCASED else value.strip(_OWS))
            for name, value in scope["headers"]
        ]
    return found


def _check_method(method: str) -> Refusal | None:
    if method == "POST":
        return None
    return Refusal(
        405,
        INVALID_REQUEST,
        f"Only POST is supported on /mcp: MCP {SUPPORTED_PROTOCOL_VERSION} has no GET stream "
        f"and no session to DELETE. {SEND_VERSION}",
        "METHOD_NOT_ALLOWED",
        {"supported": SUPPORTED_VERSIONS},
        allow_post=True,
    )


def _check_media_types(headers: dict[bytes, str | None]) -> Refusal | None:
    """The SDK's Content-Type and Accept rules (JSON responses), answered as JSON-RPC."""
    content_type = headers.get(_CONTENT_TYPE) or ""
    parts = [part.strip() for part in content_type.split(";")[0].split(",")]
    if not content_type.lower().startswith(_JSON) or _JSON not in parts:
        return Refusal(
            400,
            INVALID_REQUEST,
            "Unsupported Content-Type: send the JSON-RPC request with "
            "Content-Type: application/json",
            "UNSUPPORTED_CONTENT_TYPE",
            {"code": "UNSUPPORTED_CONTENT_TYPE", "expected": _JSON},
            refused_value=content_type,
        )
    accept = headers.get(_ACCEPT) or ""
    types = {item.split(";")[0].strip().lower() for item in accept.split(",")}
    if not types & _ACCEPTS_JSON:
        return Refusal(
            406,
            INVALID_REQUEST,
            "Not Acceptable: this server answers with application/json; send "
            "Accept: application/json, text/event-stream",
            "NOT_ACCEPTABLE",
            {"code": "NOT_ACCEPTABLE", "expected": _JSON},
            refused_value=accept,
        )
    return None


def _too_large(limit: int) -> Refusal:
    return Refusal(
        413,
        INVALID_REQUEST,
        f"Request body is larger than {limit} bytes; send a smaller request",
        "REQUEST_TOO_LARGE",
        {"code": "REQUEST_TOO_LARGE", "maxBytes": limit},
    )


def _check_declared_length(declared: str | None, limit: int) -> Refusal | None:
    if declared and declared.isdigit() and int(declared) > limit:
        return _too_large(limit)
    return None


async def _read_body(receive: Receive, limit: int) -> bytes | Refusal | None:
    """Read the whole body; a refusal past ``limit``, None when the client disconnects."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return _too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the buffered body over once, then defers to the server's."""
    pending = True

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
