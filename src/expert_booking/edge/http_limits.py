"""Bounds on what a client controls below ASGI: header bytes and count, read deadlines, connections.

uvicorn 0.54 under httptools has no header-size limit and no header or body read deadline,
and its ``limit_concurrency`` answers 503 without ``Retry-After``. :class:`BoundedHttpProtocol`
is uvicorn's own httptools protocol with those bounds added where the bytes arrive, before a
request exists; its answers are plain HTTP (there is no JSON-RPC request yet) and close the
connection. Like every response (CONTRACT section 2) they carry ``x-mcp-server-received-at`` and
``x-mcp-server-responded-at`` when the protocol is bound with the server's clock: both the moment
of the refusal, as no request reached the application to be received. Everything else is
uvicorn's code path unchanged.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from expert_booking.domain.model import format_instant
from expert_booking.edge.refusals import RefusalLog
from expert_booking.edge.wire_time import SERVER_RECEIVED_HEADER, SERVER_RESPONDED_HEADER

if TYPE_CHECKING:
    from expert_booking.ports import Clock
    from expert_booking.settings import Settings

Headers = list[tuple[bytes, bytes]]

FD_RESERVE: Final = 64
"""Descriptors kept free of connections (database, log, payment client, listening socket)."""
RETRY_AFTER_SECONDS: Final = 1


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """The bounds (``HTTP_*`` settings); ``max_connections`` already fits the descriptor limit."""

    max_header_bytes: int
    max_headers: int
    header_timeout: float
    body_timeout: float
    max_connections: int

    @classmethod
    def from_settings(cls, settings: Settings, descriptor_limit: int) -> HttpLimits:
        """The ``HTTP_*`` settings, connections capped by :func:`connection_cap`."""
        return cls(
            max_header_bytes=settings.http_max_header_bytes,
            max_headers=settings.http_max_headers,
            header_timeout=settings.http_header_timeout_seconds,
            body_timeout=settings.http_body_timeout_seconds,
            max_connections=connection_cap(settings.http_max_connections, descriptor_limit),
        )


def connection_cap(configured: int, descriptor_limit: int) -> int:
    """``configured``, lowered so connections leave ``FD_RESERVE`` descriptors free (at least 1)."""
    return max(1, min(configured, descriptor_limit - FD_RESERVE))


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with bounded headers, read deadlines and connections.

    - Header section: the request line and headers may hold at most ``max_header_bytes``
      (names, values and separators) and ``max_headers`` fields, else 431. While a header
      section is incomplete, the bytes received for it are counted as they arrive, so a
      never-ending header is refused once it passes the limit (httptools buffers it until
      complete), never held whole in memory.
    - Deadlines: a request's header section must be complete ``header_timeout`` seconds after
      the connection opened or the request's first byte arrived, and its body
      ``body_timeout`` seconds after the headers. A late request gets 408 if no response has
      started, and the connection is closed either way. Idle time between requests is
      uvicorn's ``timeout_keep_alive``.
    - Connections: a request on a connection beyond ``max_connections`` open ones gets 503
      with ``Retry-After`` and the connection is closed.

    Use :meth:`bound` to make the class uvicorn instantiates (``uvicorn.Config(http=...)``).
    """

    limits: ClassVar[HttpLimits]
    refusals: ClassVar[RefusalLog]
    clock: ClassVar[Clock | None]

    @classmethod
    def bound(
        cls, limits: HttpLimits, refusals: RefusalLog, clock: Clock | None = None
    ) -> type[BoundedHttpProtocol]:
        """A subclass that applies ``limits`` (uvicorn constructs protocols itself).

        With ``clock`` (the MCP server's) the refusals carry the server timestamp headers.
        """
        attributes: dict[str, Any] = {"limits": limits, "refusals": refusals, "clock": clock}
        return type("BoundedHttpProtocol", (cls,), attributes)

    def _stamps(self) -> Headers:
        if self.clock is None:
            return []
        now = format_instant(self.clock.now()).encode()
        return [(SERVER_RECEIVED_HEADER.encode(), now), (SERVER_RESPONDED_HEADER.encode(), now)]

    def connection_made(  # type: ignore[override]  # uvicorn's own signature (a stream transport)
        self, transport: asyncio.Transport
    ) -> None:
        """Start counting and arm the first request's header deadline."""
        self._deadline: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._in_headers = True
        self._header_bytes = 0
        self._exact_header_bytes = 0
        self._header_fields = 0
        self._arm(self.limits.header_timeout, "HEADER_TIMEOUT")

    def connection_lost(self, exc: Exception | None) -> None:
        """Drop the deadline with the connection."""
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Feed uvicorn's parser, counting the bytes of an incomplete header section."""
        if self._in_headers:
            if self._deadline is None:  # the first byte of a request after keep-alive
                self._arm(self.limits.header_timeout, "HEADER_TIMEOUT")
            self._header_bytes += len(data)
        super().data_received(data)
        if (
            self._in_headers
            and self._header_bytes > self.limits.max_header_bytes
            and not self.transport.is_closing()
        ):
            self._refuse_raw(431, "HEADERS_TOO_LARGE", self._header_limit_text())

    def on_message_begin(self) -> None:
        """A new request: count its header section from zero."""
        super().on_message_begin()
        self._in_headers = True
        self._header_bytes = 0
        self._exact_header_bytes = 0
        self._header_fields = 0

    def on_url(self, url: bytes) -> None:
        """Count the request target towards the header section."""
        super().on_url(url)
        self._exact_header_bytes += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        """Count one field (``name: value`` and its line break)."""
        super().on_header(name, value)
        self._header_fields += 1
        self._exact_header_bytes += len(name) + len(value) + 4

    def on_headers_complete(self) -> None:
        """Start the request, or a refusal in its place (431, 503); arm the body deadline."""
        self._in_headers = False
        self._disarm()
        refusal = self._refusal_after_headers()
        if refusal is None:
            super().on_headers_complete()
        else:
            app, self.app = self.app, refusal
            try:
                super().on_headers_complete()
            finally:
                self.app = app
        self._arm(self.limits.body_timeout, "BODY_TIMEOUT")

    def on_message_complete(self) -> None:
        """The request is read: no read deadline until the next one begins."""
        self._disarm()
        super().on_message_complete()
        self._in_headers = True
        self._header_bytes = 0

    def _refusal_after_headers(self) -> _PlainAnswer | None:
        if (
            self._exact_header_bytes > self.limits.max_header_bytes
            or self._header_fields > self.limits.max_headers
        ):
            self._log(431, "HEADERS_TOO_LARGE")
            return _PlainAnswer(431, self._header_limit_text(), self._stamps())
        if len(self.connections) > self.limits.max_connections:
            self._log(503, "TOO_MANY_CONNECTIONS")
            return _PlainAnswer(
                503,
                f"More than {self.limits.max_connections} connections are open; retry shortly.",
                [*self._stamps(), (b"retry-after", str(RETRY_AFTER_SECONDS).encode())],
            )
        return None

    def _header_limit_text(self) -> str:
        return (
            f"The request header section is larger than {self.limits.max_header_bytes} bytes "
            f"or has more than {self.limits.max_headers} fields."
        )

    def _arm(self, seconds: float, reason: str) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired, reason)

    def _disarm(self) -> None:
        deadline = self._deadline
        if deadline is not None:
            deadline.cancel()
            self._deadline = None

    def _expired(self, reason: str) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        cycle: RequestResponseCycle | None = self.cycle  # None before the first request
        answering = cycle is not None and cycle.response_started and not cycle.response_complete
        answered = cycle is not None and cycle.response_complete and reason == "BODY_TIMEOUT"
        if answering or answered:  # e.g. a 413 sent before the body: no second answer
            self._log(None, reason)
            self.transport.close()
            return
        phase = "header section" if reason == "HEADER_TIMEOUT" else "body"
        seconds = (
            self.limits.header_timeout if reason == "HEADER_TIMEOUT" else self.limits.body_timeout
        )
        self._refuse_raw(408, reason, f"The request {phase} did not arrive within {seconds:g} s.")

    def _refuse_raw(self, status: int, reason: str, text: str) -> None:
        """Answer without a request cycle (none exists or it must not answer) and close."""
        self._log(status, reason)
        self._disarm()
        cycle: RequestResponseCycle | None = self.cycle
        if cycle is not None:
            cycle.keep_alive = False
        self.transport.write(_plain_response(status, text, self._stamps()))
        self.transport.close()

    def _log(self, status: int | None, reason: str) -> None:
        scope: dict[str, Any] | None = self.scope  # type: ignore[assignment]  # None before a request
        method = scope.get("method") if scope is not None else None
        self.refusals.refused(
            status=0 if status is None else status,
            reason=reason,
            http_method=method,
            peer=self.client,
        )


_REASONS: Final = {
    408: b"Request Timeout",
    431: b"Request Header Fields Too Large",
    503: b"Service Unavailable",
}


def _plain_headers(body: bytes, extra: Headers) -> Headers:
    return [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *extra,
    ]


def _plain_response(status: int, text: str, extra: Headers) -> bytes:
    body = text.encode()
    lines = [b"HTTP/1.1 %d %s" % (status, _REASONS[status])]
    lines += [name + b": " + value for name, value in _plain_headers(body, extra)]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


class _PlainAnswer:
    """An ASGI app answering one plain-text refusal with ``Connection: close``."""

    __slots__ = ("_extra", "_status", "_text")

    def __init__(self, status: int, text: str, extra: Headers) -> None:
        self._status = status
        self._text = text
        self._extra = extra

    async def __call__(self, _scope: Any, _receive: Any, send: Any) -> None:
        body = self._text.encode()
        headers = _plain_headers(body, self._extra)
        await send({"type": "http.response.start", "status": self._status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})
