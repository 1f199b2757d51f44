"""Server wire timestamps (CONTRACT section 2): ingress and response-boundary stamps on /mcp."""

from __future__ import annotations

import json
import re
from typing import Any

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
    """

    __slots__ = ("_app", "_clock")

    def __init__(self, app: ASGIApp, *, clock: Clock) -> None:
        """Wrap ``app``."""
        self._app = app
        self._clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one HTTP request."""
        received_at = format_instant(self._clock.now())
        scope[SCOPE_RECEIVED_AT] = received_at
        await self._app(scope, receive, _StampingSend(send, scope, received_at, self._clock))


class _StampingSend:
    """The ``send`` callable handed to the inner app for one request."""

    __slots__ = ("_chunks", "_clock", "_received_at", "_scope", "_send", "_start", "_streaming")

    def __init__(self, send: Send, scope: Scope, received_at: str, clock: Clock) -> None:
        self._send = send
        self._scope = scope
        self._received_at = received_at
        self._clock = clock
        self._start: Message | None = None
        self._chunks: list[bytes] = []
        self._streaming = False

    async def __call__(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            if _header(message, b"content-type").startswith(b"text/event-stream"):
                # result._meta cannot be rewritten mid-stream: headers only.
                self._streaming = True
                await self._send(self._stamped(message, format_instant(self._clock.now()), None))
            else:
                self._start = message
            return
        if kind != "http.response.body" or self._streaming or self._start is None:
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
        responded_at = format_instant(self._clock.now())
        if body and _header(self._start, b"content-type").startswith(b"application/json"):
            body = _merge_result_meta(
                body, self._scope.get(SCOPE_CLIENT_SENT_AT), self._received_at, responded_at
            )
        await self._send(self._stamped(self._start, responded_at, len(body)))
        await self._send({"type": "http.response.body", "body": body, "more_body": False})

    def _stamped(self, start: Message, responded_at: str, body_length: int | None) -> Message:
        drop = _OWN_HEADERS if body_length is not None else _OWN_HEADERS - {b"content-length"}
        headers = [(k, v) for k, v in start.get("headers", ()) if k.lower() not in drop]
        if body_length is not None:
            headers.append((b"content-length", str(body_length).encode()))
        headers.append((_RECEIVED, self._received_at.encode()))
        headers.append((_RESPONDED, responded_at.encode()))
        return {**start, "headers": headers}


def _header(message: Message, name: bytes) -> bytes:
    for key, value in message.get("headers", ()):
        if key.lower() == name:
            return bytes(value).lower()
    return b""


def _merge_result_meta(
    body: bytes, client_sent_at: str | None, received_at: str, responded_at: str
) -> bytes:
    """Return ``body`` with the wire timestamps merged into ``result._meta`` (if it has one)."""
    stamps = {SERVER_RECEIVED_META: received_at, SERVER_RESPONDED_META: responded_at}
    if client_sent_at is not None:
        stamps = {CLIENT_SENT_META: client_sent_at, **stamps}
    inserted = _insert_stamps(body, stamps)
    return inserted if inserted is not None else _reencode_with_stamps(body, stamps)


# The SDK's JSON-RPC success response, up to the value of ``result`` (an ASCII prefix).
_RESULT_PREFIX = re.compile(
    rb'\{"jsonrpc":"2\.0","id":(?:-?(?:0|[1-9][0-9]*)|"[^"\\\x00-\x1f]*"),"result":(?=\{)'
)
_JSON_SPACE = b" \t\n\r"


def _insert_stamps(body: bytes, stamps: dict[str, str]) -> bytes | None:
    """``body`` with ``stamps`` written into ``result._meta`` as text; ``None``: not that shape.

    Saves the re-encoding of the whole response (two thirds of the cost; tools/list is 6 KB).
    ``result`` is still parsed, so this gives the same parsed message as
    ``_reencode_with_stamps`` for any body it accepts: the body must be exactly
    ``{"jsonrpc":"2.0","id":<int or plain string>,"result":<object>}`` (the prefix above, then
    ``result``, then only the closing brace and JSON space), and ``result`` must either end
    with a ``_meta`` object holding none of the stamp keys (the SDK puts ``_meta`` last, with
    its serverInfo) or have no ``_meta`` at all. The stamps then go in right before the
    closing brace of that last member, which must be the text's last member too (checked
    against the SDK's encoding of ``_meta``), so no key is duplicated or lost even when
    ``result`` repeats a key. Anything else returns ``None``, and so does a ``result`` the
    strict parser refuses (``NaN``, a lone surrogate escape).
    """
    prefix = _RESULT_PREFIX.match(body)
    if prefix is None:
        return None
    end = len(body.rstrip(_JSON_SPACE))  # the body's closing brace is at end - 1
    result_close = end - 2  # the closing brace of result: no space may stand between them
    if result_close < prefix.end() or body[end - 1] != _CLOSE or body[result_close] != _CLOSE:
        return None
    try:
        result = parse_strict(body[prefix.end() : end - 1])
    except (ValueError, RecursionError):
        return None
    if not isinstance(result, dict):
        return None
    members = compact_text(stamps)[1:-1]  # "k":"v",... without braces
    meta = result.get("_meta")
    if meta is None and "_meta" not in result:
        insert_at, members = result_close, f'"_meta":{{{members}}}'
        if result:
            members = "," + members
    elif (
        isinstance(meta, dict)
        and next(reversed(result)) == "_meta"
        and not stamps.keys() & meta.keys()
        # _meta is also the last member in the text (with a repeated key, a parser's last
        # key need not be the text's last member).
        and _ends_with_meta(body, result_close, meta)
    ):
        # Before the closing brace of result._meta, the last member of result.
        insert_at = result_close - 1
        if meta:
            members = "," + members
    else:
        return None
    return body[:insert_at] + members.encode() + body[insert_at:]


_CLOSE = ord("}")
# The SDK writes responses with json.dumps(separators=(",", ":")): ASCII escapes, compact.
_SDK_ENCODER = json.JSONEncoder(separators=(",", ":"))


def _ends_with_meta(body: bytes, end: int, meta: dict[str, Any]) -> bool:
    """Whether ``body[:end]`` ends with the member ``"_meta":<meta>`` in compact JSON."""
    if body.endswith(b'"_meta":' + _SDK_ENCODER.encode(meta).encode(), 0, end):
        return True
    return body.endswith(b'"_meta":' + compact_text(meta).encode(), 0, end)  # raw UTF-8


def _reencode_with_stamps(body: bytes, stamps: dict[str, str]) -> bytes:
    """The general path: parse the whole message, merge ``stamps``, encode it again."""
    try:
        message: Any = json.loads(body)
    except (ValueError, RecursionError):
        return body
    if not isinstance(message, dict):
        return body
    result = message.get("result")
    if not isinstance(result, dict):
        return body
    meta = result.get("_meta")
    if not isinstance(meta, dict):
        meta = {}
        result["_meta"] = meta
    meta.update(stamps)
    try:  # never emit NaN or Infinity, which are not JSON: then the body goes out unstamped
        return json.dumps(message, separators=(",", ":"), allow_nan=False).encode()
    except ValueError:
        return body
