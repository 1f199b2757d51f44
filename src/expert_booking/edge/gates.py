"""The /mcp gate: refuses what CONTRACT section 2 refuses, before the framework or SDK runs."""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from mcp_types import HEADER_MISMATCH, INVALID_REQUEST, PARSE_ERROR, UNSUPPORTED_PROTOCOL_VERSION
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from expert_booking.edge.timestamps import MCP_PATHS
from expert_booking.edge.wire_time import (
    CLIENT_SENT_HEADER,
    CLIENT_SENT_META,
    SCOPE_CLIENT_SENT_AT,
    SUPPORTED_PROTOCOL_VERSION,
)
from expert_booking.settings import SettingsError

MISSING_CLIENT_TIMESTAMP: Final = "MISSING_CLIENT_TIMESTAMP"
CLIENT_TIMESTAMP_MISMATCH: Final = "CLIENT_TIMESTAMP_MISMATCH"
CLIENT_TIMESTAMP_FORMAT: Final = "YYYY-MM-DDTHH:MM:SS.mmmZ"

_HOST = b"host"
_ORIGIN = b"origin"
_VERSION = b"mcp-protocol-version"
_CLIENT_SENT = CLIENT_SENT_HEADER.encode()
_CONTENT_LENGTH = b"content-length"
_READ_HEADERS = frozenset({_HOST, _ORIGIN, _VERSION, _CLIENT_SENT, _CONTENT_LENGTH})
_LOWERCASED = frozenset({_HOST, _ORIGIN})
_OWS = b" \t"
_SUPPORTED = [SUPPORTED_PROTOCOL_VERSION]
_SEND_VERSION = (
    f"Send MCP-Protocol-Version: {SUPPORTED_PROTOCOL_VERSION}; "
    f"this server supports only {SUPPORTED_PROTOCOL_VERSION}"
)
_CLIENT_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")
_STAMP_HOWTO = (
    f"send header {CLIENT_SENT_HEADER} and params._meta.{CLIENT_SENT_META} with the same "
    f"RFC 3339 UTC timestamp ({CLIENT_TIMESTAMP_FORMAT}) taken when the request is sent"
)


def _split_authority(authority: str) -> tuple[str, str | None] | None:
    """Split ``host[:port]`` (IPv6 in brackets) into a name and a port; None if malformed."""
    if authority.startswith("["):
        end = authority.find("]") + 1
        name, rest = (authority[:end], authority[end:]) if end else ("", "")
        colon, port = rest[:1], rest[1:]
        if rest and colon != ":":
            name = ""
    elif authority.count(":") > 1:  # a bare IPv6 literal in configuration
        name, colon, port = f"[{authority}]", "", ""
    else:
        name, colon, port = authority.partition(":")
    if not name or (colon and not (port.isascii() and port.isdigit())):
        return None
    return name, port if colon else None


@dataclass(frozen=True, slots=True)
class HostAllowList:
    """Allowed ``Host`` values: names allowed with any or no port, and exact ``name:port`` pairs."""

    any_port: frozenset[str]
    exact: frozenset[str]

    @classmethod
    def from_entries(cls, entries: tuple[str, ...]) -> HostAllowList:
        """Build from ``ALLOWED_HOSTS`` entries (``127.0.0.1``, ``[::1]``, ``example.com:8443``).

        Raises:
            SettingsError: an entry is not a host name with an optional port.
        """
        any_port: set[str] = set()
        exact: set[str] = set()
        for entry in entries:
            split = _split_authority(entry.strip().lower())
            if split is None:
                raise SettingsError(f"ALLOWED_HOSTS entry {entry!r} is not host[:port]")
            name, port = split
            if port is None:
                any_port.add(name)
            else:
                exact.add(f"{name}:{port}")
        return cls(frozenset(any_port), frozenset(exact))

    def allows(self, host: str) -> bool:
        """Whether a (trimmed, lower-cased) ``Host`` header value is allowed."""
        split = _split_authority(host)
        if split is None:
            return False
        name, port = split
        return name in self.any_port or (port is not None and f"{name}:{port}" in self.exact)

    def sdk_patterns(self) -> list[str]:
        """The same list for the SDK's ``TransportSecuritySettings`` (``name:*`` needs a port)."""
        return sorted({*self.any_port, *(f"{name}:*" for name in self.any_port), *self.exact})


@dataclass(frozen=True, slots=True)
class OriginAllowList:
    """Allowed ``Origin`` values: ``scheme://host`` with any port, and exact ``scheme://host:port``."""

    any_port: frozenset[str]
    exact: frozenset[str]

    @classmethod
    def from_entries(cls, entries: tuple[str, ...]) -> OriginAllowList:
        """Build from ``ALLOWED_ORIGINS`` entries (``http://127.0.0.1``, ``https://a.example:8443``).

        Raises:
            SettingsError: an entry is not ``scheme://host[:port]``.
        """
        any_port: set[str] = set()
        exact: set[str] = set()
        for entry in entries:
            split = _split_origin(entry.strip().lower().rstrip("/"))
            if split is None:
                raise SettingsError(f"ALLOWED_ORIGINS entry {entry!r} is not scheme://host[:port]")
            base, port = split
            if port is None:
                any_port.add(base)
            else:
                exact.add(f"{base}:{port}")
        return cls(frozenset(any_port), frozenset(exact))

    def allows(self, origin: str) -> bool:
        """Whether a (trimmed, lower-cased, non-empty) ``Origin`` header value is allowed."""
        split = _split_origin(origin)
        if split is None:
            return False
        base, port = split
        return base in self.any_port or (port is not None and f"{base}:{port}" in self.exact)

    def sdk_patterns(self) -> list[str]:
        """The same list for the SDK's ``TransportSecuritySettings``."""
        return sorted({*self.any_port, *(f"{base}:*" for base in self.any_port), *self.exact})


def _split_origin(origin: str) -> tuple[str, str | None] | None:
    scheme, sep, authority = origin.partition("://")
    if not sep or not scheme.isalpha() or not authority or "/" in authority or "@" in authority:
        return None
    split = _split_authority(authority)
    if split is None:
        return None
    return f"{scheme}://{split[0]}", split[1]


@dataclass(frozen=True, slots=True)
class _Refusal:
    status: int
    code: int
    message: str
    data: dict[str, Any] | None = None
    request_id: Any = None
    allow_post: bool = False


async def send_jsonrpc_error(
    send: Send,
    *,
    status: int,
    code: int,
    message: str,
    data: dict[str, Any] | None = None,
    request_id: Any = None,
    extra_headers: tuple[tuple[bytes, bytes], ...] = (),
) -> None:
    """Send ``{"jsonrpc":"2.0","id":..,"error":{..}}`` as ``application/json`` with ``status``."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "error": error}, separators=(",", ":")
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *extra_headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class McpRequestGate:
    """Pure-ASGI gate for the MCP paths, outside the web framework (so it sees raw headers).

    Other paths and the lifespan pass through untouched. On the MCP paths it checks, in this
    order (each refusal is a JSON-RPC error, ``application/json``, and no handler runs):

    1. ``Host`` (421) and ``Origin`` (403) against the allow-lists; a missing Origin is allowed.
    2. Method: anything but POST gets 405 with ``Allow: POST``.
    3. Body: over ``max_body_bytes`` (declared or streamed) gets 413.
    4. ``MCP-Protocol-Version``: missing (-32020) or anything but 2026-07-28 (-32022) gets 400.
    5. JSON: unparseable gets 400 / -32700. A non-object body goes on to the SDK (-32600).
    6. Client timestamp: header ``x-mcp-client-sent-at`` and ``params._meta.clientSentAt`` must
       both be ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (a real UTC calendar instant, exactly millisecond
       precision, no other offset) and equal, else 400 / -32600 with ``data.code``
       ``MISSING_CLIENT_TIMESTAMP`` or ``CLIENT_TIMESTAMP_MISMATCH``.

    Header values are compared after trimming optional whitespace; when a request carries such
    whitespace (or an upper-case Host/Origin) the scope's headers are rewritten trimmed so the
    SDK's own checks agree. The validated client time goes to ``scope[SCOPE_CLIENT_SENT_AT]``;
    the buffered body is replayed to the inner app.
    """

    __slots__ = ("_app", "_hosts", "_max_body_bytes", "_origins", "_paths")

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: HostAllowList,
        origins: OriginAllowList,
        max_body_bytes: int,
        paths: Collection[str] = MCP_PATHS,
    ) -> None:
        """Wrap ``app``; ``paths`` are the exact request paths to gate."""
        self._app = app
        self._hosts = hosts
        self._origins = origins
        self._max_body_bytes = max_body_bytes
        self._paths = frozenset(paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection."""
        if scope["type"] != "http" or scope["path"] not in self._paths:
            await self._app(scope, receive, send)
            return
        headers = _read_headers(scope)
        refusal = self._check_peer(headers) or _check_method(scope["method"])
        if refusal is None:
            refusal = _check_declared_length(headers.get(_CONTENT_LENGTH), self._max_body_bytes)
        if refusal is not None:
            await _send_refusal(send, refusal)
            return
        body = await _read_body(receive, self._max_body_bytes)
        if body is None:  # the client went away
            return
        if isinstance(body, _Refusal):
            await _send_refusal(send, body)
            return
        outcome = _check_message(headers, body)
        if isinstance(outcome, _Refusal):
            await _send_refusal(send, outcome)
            return
        if outcome is not None:
            scope[SCOPE_CLIENT_SENT_AT] = outcome
        await self._app(scope, _replay(body, receive), send)

    def _check_peer(self, headers: dict[bytes, str | None]) -> _Refusal | None:
        host = headers.get(_HOST)
        if not host or not self._hosts.allows(host):
            return _Refusal(
                421,
                INVALID_REQUEST,
                "Host header not allowed: connect to this server by one of its configured "
                "host names (ALLOWED_HOSTS)",
                {"code": "HOST_NOT_ALLOWED"},
            )
        origin = headers.get(_ORIGIN, "")
        if origin is None or (origin and not self._origins.allows(origin)):
            return _Refusal(
                403,
                INVALID_REQUEST,
                "Origin not allowed: send requests from a configured origin (ALLOWED_ORIGINS) "
                "or without an Origin header",
                {"code": "ORIGIN_NOT_ALLOWED"},
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


def _check_method(method: str) -> _Refusal | None:
    if method == "POST":
        return None
    return _Refusal(
        405,
        INVALID_REQUEST,
        f"Only POST is supported on /mcp: MCP {SUPPORTED_PROTOCOL_VERSION} has no GET stream "
        f"and no session to DELETE. {_SEND_VERSION}",
        {"supported": _SUPPORTED},
        allow_post=True,
    )


def _too_large(limit: int) -> _Refusal:
    return _Refusal(
        413,
        INVALID_REQUEST,
        f"Request body is larger than {limit} bytes; send a smaller request",
        {"code": "REQUEST_TOO_LARGE", "maxBytes": limit},
    )


def _check_declared_length(declared: str | None, limit: int) -> _Refusal | None:
    if declared and declared.isdigit() and int(declared) > limit:
        return _too_large(limit)
    return None


async def _read_body(receive: Receive, limit: int) -> bytes | _Refusal | None:
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


def _check_message(headers: dict[bytes, str | None], body: bytes) -> str | _Refusal | None:
    """Version, JSON and client-timestamp checks; the validated client time on success."""
    try:
        decoded: Any = json.loads(body)
    except (ValueError, RecursionError):
        decoded = _UNPARSEABLE
    request_id = _request_id(decoded)
    refusal = _check_version(headers, request_id)
    if refusal is not None:
        return refusal
    if decoded is _UNPARSEABLE:
        return _Refusal(
            400,
            PARSE_ERROR,
            "Parse error: the body is not valid JSON; send one JSON-RPC request object",
        )
    if not isinstance(decoded, dict):
        return None  # a batch or a scalar: the SDK answers -32600 itself
    return _check_client_sent_at(headers.get(_CLIENT_SENT, ""), decoded, request_id)


_UNPARSEABLE: Final = object()


def _request_id(decoded: Any) -> Any:
    if isinstance(decoded, dict):
        request_id = decoded.get("id")
        if isinstance(request_id, str) or (
            isinstance(request_id, int) and not isinstance(request_id, bool)
        ):
            return request_id
    return None


def _check_version(headers: dict[bytes, str | None], request_id: Any) -> _Refusal | None:
    requested = headers.get(_VERSION, "")
    if requested == SUPPORTED_PROTOCOL_VERSION:
        return None
    if requested is None:
        return _Refusal(
            400,
            HEADER_MISMATCH,
            f"MCP-Protocol-Version header appears more than once. {_SEND_VERSION}",
            {"supported": _SUPPORTED},
            request_id,
        )
    if not requested:
        return _Refusal(
            400,
            HEADER_MISMATCH,
            f"Missing MCP-Protocol-Version header. {_SEND_VERSION}",
            {"supported": _SUPPORTED},
            request_id,
        )
    return _Refusal(
        400,
        UNSUPPORTED_PROTOCOL_VERSION,
        f"Unsupported protocol version. {_SEND_VERSION}",
        {"supported": _SUPPORTED, "requested": requested},
        request_id,
    )


def _is_client_time(value: object) -> bool:
    if not isinstance(value, str) or _CLIENT_TIME.fullmatch(value) is None:
        return False
    try:
        datetime.fromisoformat(value[:-1])  # calendar check: month 13 or hour 24 fail here
    except ValueError:
        return False
    return True


def _check_client_sent_at(
    header: str | None, message: dict[str, Any], request_id: Any
) -> str | _Refusal:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    in_meta = meta.get(CLIENT_SENT_META) if isinstance(meta, dict) else None
    problems: list[str] = []
    if not header:
        problems.append(f"header {CLIENT_SENT_HEADER} is missing or repeated")
    elif not _is_client_time(header):
        problems.append(f"header {CLIENT_SENT_HEADER} is not {CLIENT_TIMESTAMP_FORMAT}")
    if in_meta is None:
        problems.append(f"params._meta.{CLIENT_SENT_META} is missing")
    elif in_meta != header and not _is_client_time(in_meta):
        problems.append(f"params._meta.{CLIENT_SENT_META} is not {CLIENT_TIMESTAMP_FORMAT}")
    if problems or header is None:
        return _Refusal(
            400,
            INVALID_REQUEST,
            f"Missing or malformed client timestamp: {'; '.join(problems)}. To fix, {_STAMP_HOWTO}",
            {"code": MISSING_CLIENT_TIMESTAMP, "problems": problems},
            request_id,
        )
    if in_meta != header:
        return _Refusal(
            400,
            INVALID_REQUEST,
            f"Client timestamp mismatch: header {CLIENT_SENT_HEADER} and "
            f"params._meta.{CLIENT_SENT_META} differ. To fix, {_STAMP_HOWTO}",
            {"code": CLIENT_TIMESTAMP_MISMATCH},
            request_id,
        )
    return header


async def _send_refusal(send: Send, refusal: _Refusal) -> None:
    await send_jsonrpc_error(
        send,
        status=refusal.status,
        code=refusal.code,
        message=refusal.message,
        data=refusal.data,
        request_id=refusal.request_id,
        extra_headers=((b"allow", b"POST"),) if refusal.allow_post else (),
    )


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
