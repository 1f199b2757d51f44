"""Server wire timestamps (CONTRACT section 2): ingress and response-boundary stamps on /mcp."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from typing import Any, Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from expert_booking.domain.model import format_instant
from expert_booking.edge.json_text import compact_text, parse_strict
from expert_booking.edge.wire_time import (
    CLIENT_SENT_META,
    SCOPE_CLIENT_SENT_AT,
    SCOPE_RECEIVED_AT,
    SERVER_RECEIVED_HEADER,
    SERVER_RECEIVED_META,
    SERVER_RESPONDED_HEADER,
    SERVER_RESPONDED_META,
)
from expert_booking.ports import Clock

_PLACEHOLDER: Final = secrets.token_hex(12)  # as long as an instant; never sent, so unguessable
_RESERVED_META: Final = {
    CLIENT_SENT_META: _PLACEHOLDER,
    SERVER_RECEIVED_META: _PLACEHOLDER,
    SERVER_RESPONDED_META: _PLACEHOLDER,
}
# The reservation as the SDK writes it (``json.dumps`` with compact separators, keys in order).
_RESERVED_TEXT: Final = json.dumps(_RESERVED_META, separators=(",", ":"))[1:-1].encode()
_RECEIVED = SERVER_RECEIVED_HEADER.encode()
_RESPONDED = SERVER_RESPONDED_HEADER.encode()
_OWN_HEADERS = frozenset({b"content-length", _RECEIVED, _RESPONDED})


class TimestampLayer:
    """Outermost layer of the MCP endpoint: stamps every response with server times.

    At ingress it stores ``format_instant(clock.now())`` in ``scope[SCOPE_RECEIVED_AT]``. At the
    response boundary (the last body chunk is ready) it takes ``respondedAt`` and sends headers
    ``x-mcp-server-received-at`` / ``x-mcp-server-responded-at``. A JSON body holding a JSON-RPC
    ``result`` object also gets ``result._meta.serverReceivedAt`` / ``serverRespondedAt`` and,
    when the gate validated one, ``clientSentAt`` (from ``scope[SCOPE_CLIENT_SENT_AT]``; never
    invented). An SSE response is passed through with the headers only. The router
    (``edge.http_app``) hands it exactly the requests that reach MCP.

    This server's own result handlers reserve the three stamps in ``result._meta``
    (:func:`reserved_stamps`), so the boundary writes them into the body's text in place; any
    other result (the SDK's ``server/discover``, the empty listings) is parsed, stamped and
    encoded again.
    """

    __slots__ = ("_app", "_clock")

    def __init__(self, app: ASGIApp, *, clock: Clock) -> None:
        """Wrap ``app``."""
        self._app = app
        self._clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one HTTP request."""
        stamps = _RequestStamps(self._clock)
        scope[SCOPE_RECEIVED_AT] = stamps.latest
        scope[_SCOPE_RESERVED] = _RESERVED_META
        scope[_SCOPE_STAMPS] = stamps
        await self._app(scope, receive, _StampingSend(send, scope, stamps))


class _RequestStamps:
    """One request's stamps, each the clock's time unless the clock went back since the last.

    CONTRACT 2 lets a client check ``serverReceivedAt <= serverResultCreatedAt <=
    serverRespondedAt``; a wall clock stepped back mid-request (NTP, a restored VM) would
    otherwise date a later stamp before an earlier one. Stamps share one text format, so
    their text order is their time order. (A streamed response would take its responded stamp
    as its headers go out, before its result: this server answers JSON, ``http_app``.)
    """

    __slots__ = ("_clock", "latest")

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.latest = format_instant(clock.now())

    def next(self) -> str:
        """The next stamp: now, or the latest stamp when the clock reads earlier."""
        now = format_instant(self._clock.now())
        self.latest = max(self.latest, now)
        return self.latest


def result_created_at(scope: Mapping[str, Any], received_at: str, clock: Clock) -> str:
    """``serverResultCreatedAt``: the request's next stamp (never before one it already has)."""
    stamps = scope.get(_SCOPE_STAMPS)
    if isinstance(stamps, _RequestStamps):
        return stamps.next()
    return max(received_at, format_instant(clock.now()))  # no layer: the in-process client


class _StampingSend:
    """The ``send`` callable handed to the inner app for one request."""

    __slots__ = (
        "_chunks",
        "_received_at",
        "_responded_at",
        "_scope",
        "_send",
        "_stamps",
        "_start",
        "_streaming",
    )

    def __init__(self, send: Send, scope: Scope, stamps: _RequestStamps) -> None:
        self._send = send
        self._scope = scope
        self._received_at = stamps.latest
        self._stamps = stamps
        self._start: Message | None = None
        self._chunks: list[bytes] = []
        self._streaming = False
        self._responded_at = ""

    async def __call__(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            if _header(message, b"content-type").startswith(b"text/event-stream"):
                # A stream is not parsed: headers, and any reservation filled in place.
                self._streaming = True
                self._responded_at = self._stamps.next()
                await self._send(self._stamped(message, self._responded_at, None))
            else:
                self._start = message
            return
        if kind == "http.response.body" and self._streaming:
            await self._send(self._filled_event(message))
            return
        if kind != "http.response.body" or self._start is None:
            await self._send(message)
            return
        body: bytes = message.get("body", b"")
        if message.get("more_body", False):
            self._chunks.append(body)
            return
        if self._chunks:
            self._chunks.append(body)
            body = b"".join(self._chunks)
            self._chunks.clear()
        responded_at = self._stamps.next()
        if body and _header(self._start, b"content-type").startswith(b"application/json"):
            body = _merge_result_meta(
                body, self._scope.get(SCOPE_CLIENT_SENT_AT), self._received_at, responded_at
            )
        await self._send(self._stamped(self._start, responded_at, len(body)))
        await self._send({"type": "http.response.body", "body": body, "more_body": False})

    def _filled_event(self, message: Message) -> Message:
        """An event-stream chunk with a reservation in it filled (with the headers' times)."""
        client_sent_at = self._scope.get(SCOPE_CLIENT_SENT_AT)
        body: bytes = message.get("body", b"")
        if not isinstance(client_sent_at, str) or _RESERVED_TEXT not in body:
            return message
        filled = _filled(body, client_sent_at, self._received_at, self._responded_at)
        return {**message, "body": filled}

    def _stamped(self, start: Message, responded_at: str, body_length: int | None) -> Message:
        drop = _OWN_HEADERS if body_length is not None else _OWN_HEADERS - {b"content-length"}
        headers = [(k, v) for k, v in start.get("headers", ()) if k.lower() not in drop]
        if body_length is not None:
            headers.append((b"content-length", str(body_length).encode()))
        headers.append((_RECEIVED, self._received_at.encode()))
        headers.append((_RESPONDED, responded_at.encode()))
        return {**start, "headers": headers}


_SCOPE_RESERVED: Final = "expert_booking.reserved_stamps"
_SCOPE_STAMPS: Final = "expert_booking.request_stamps"


def reserved_stamps(scope: Mapping[str, Any]) -> Mapping[str, str] | None:
    """The ``result._meta`` entries a result handler adds so the boundary stamps it in place.

    ``None`` when no ``TimestampLayer`` serves the request (the SDK's in-process client) or
    no client time was validated (the boundary would have no ``clientSentAt`` to write, and
    never invents one): then nothing is reserved. The values are a per-process placeholder
    the boundary replaces with the three stamps; one it cannot replace is dropped
    (:func:`_merge`), so no placeholder reaches a client.
    """
    reserved = scope.get(_SCOPE_RESERVED)
    if reserved is not _RESERVED_META or not isinstance(scope.get(SCOPE_CLIENT_SENT_AT), str):
        return None
    return reserved


def _header(message: Message, name: bytes) -> bytes:
    for key, value in message.get("headers", ()):
        if key.lower() == name:
            return bytes(value).lower()
    return b""


def _merge_result_meta(
    body: bytes, client_sent_at: str | None, received_at: str, responded_at: str
) -> bytes:
    """Return ``body`` with the wire timestamps merged into ``result._meta`` (if it has one).

    A result that reserved the stamps (:func:`reserved_stamps`) gets them written over the
    reservation's text: only JSON structure can hold it (a quote inside a JSON string is
    escaped), and the placeholder is this process's secret, so it is exactly that
    ``result._meta``'s entries. Any other body is parsed, merged and encoded again with
    msgspec (``json_text``; a tools/list body: 15-17 us). A body msgspec refuses (a lone
    surrogate escape, ``NaN``, a number beyond its range) takes the standard library, and one
    that is not a JSON-RPC result object, or would need ``NaN`` or ``Infinity`` written, goes
    out unstamped.
    """
    if client_sent_at is not None and _RESERVED_TEXT in body:
        return _filled(body, client_sent_at, received_at, responded_at)
    stamps = {SERVER_RECEIVED_META: received_at, SERVER_RESPONDED_META: responded_at}
    if client_sent_at is not None:
        stamps = {CLIENT_SENT_META: client_sent_at, **stamps}
    try:
        message = parse_strict(body)
    except (ValueError, RecursionError):
        return _stamped_by_stdlib(body, stamps)
    if not _merge(message, stamps):
        return body
    return compact_text(message).encode()


def _filled(body: bytes, client_sent_at: str, received_at: str, responded_at: str) -> bytes:
    """``body`` with its (last) reservation's text replaced by the three stamps."""
    at = body.rfind(_RESERVED_TEXT)
    stamps = {
        CLIENT_SENT_META: client_sent_at,
        SERVER_RECEIVED_META: received_at,
        SERVER_RESPONDED_META: responded_at,
    }
    return body[:at] + compact_text(stamps)[1:-1].encode() + body[at + len(_RESERVED_TEXT) :]


def _stamped_by_stdlib(body: bytes, stamps: dict[str, str]) -> bytes:
    try:
        message: Any = json.loads(body)
    except (ValueError, RecursionError):
        return body
    if not _merge(message, stamps):
        return body
    try:  # never emit NaN or Infinity, which are not JSON: then the body goes out unstamped
        return json.dumps(message, separators=(",", ":"), allow_nan=False).encode()
    except ValueError:
        return body


def _merge(message: Any, stamps: dict[str, str]) -> bool:
    """Merge ``stamps`` into ``message["result"]["_meta"]``; False when there is no result.

    A reserved stamp that ``stamps`` does not replace is dropped, never sent.
    """
    if not isinstance(message, dict):
        return False
    result = message.get("result")
    if not isinstance(result, dict):
        return False
    meta = result.get("_meta")
    if not isinstance(meta, dict):
        meta = {}
        result["_meta"] = meta
    meta.update(stamps)
    for key in [key for key in _RESERVED_META if meta.get(key) == _PLACEHOLDER]:
        del meta[key]
    return True
