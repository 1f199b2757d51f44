"""Where the HTTP bounds are enforced: uvicorn's httptools protocol, bounded (``HttpLimits``).

uvicorn 0.54 under httptools has no header-size limit, no header or body read deadline, no
bound on trailer fields (it appends them to the request's headers) or on pipelined requests
(it parses ahead and queues them), no write deadline for a client that does not read, a
parse-error path that logs one unlimited WARNING per bad request, and its
``limit_concurrency`` answers 503 without ``Retry-After``. :class:`BoundedHttpProtocol` is
uvicorn's own httptools protocol with those bounds added where the bytes arrive; its answers are
plain HTTP (there is no JSON-RPC request yet) and close the connection. Like every response
(CONTRACT section 2) they carry ``x-mcp-server-received-at`` and ``x-mcp-server-responded-at``
when the protocol is bound with the server's clock: both the moment of the refusal, as no
request reached the application to be received. Everything else is uvicorn's code path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Final

import httptools
from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

from expert_booking.domain.model import format_instant
from expert_booking.edge.http_limits import HttpLimits
from expert_booking.edge.refusals import RefusalLog
from expert_booking.edge.wire_time import SERVER_RECEIVED_HEADER, SERVER_RESPONDED_HEADER

if TYPE_CHECKING:
    from expert_booking.ports import Clock

Headers = list[tuple[bytes, bytes]]

RETRY_AFTER_SECONDS: Final = 1
FEED_SLICE_BYTES: Final = 16 * 1024
"""The most a pipelined stream puts in uvicorn's queue at once (a few dozen small requests)."""
MAX_HELD_BYTES: Final = 1024 * 1024
"""Pipelined bytes held unparsed: reading pauses at the first, so a few reads (256 KiB each
under uvloop or asyncio) at most, unless something resumes reading mid-answer."""


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with bounded headers, bodies, pipelining and connections.

    - Header section: the request line and headers may hold at most ``max_header_bytes``
      (names, values and separators) and ``max_headers`` fields, else 431. While a header
      section is incomplete, the bytes received for it are counted as they arrive, so a
      never-ending header is refused once it passes the limit (httptools buffers it until
      complete), never held whole in memory. An absolute-form target (``POST http://h/mcp``)
      names the host the gate judges, as RFC 9112 section 3.2.2 wants, not the Host field.
    - After the header section a request may send ``max_tail_bytes`` (body, chunk framing,
      trailers), else 413 (or a close once an answer started). Trailer fields are counted
      against the header limits and dropped: RFC 9110 section 6.5.1 forbids merging them into
      the header section, where the gate would read them.
    - Deadlines: a request's header section must be complete ``header_timeout`` seconds after
      the connection opened or the request's first byte arrived, and its body
      ``body_timeout`` seconds after the headers. A late request gets 408 if no response has
      started, and the connection is closed either way. Idle time between requests is
      uvicorn's ``timeout_keep_alive``. A response the client leaves unread (the write buffer
      stays above its high-water mark) for ``body_timeout`` seconds drops the connection, and
      so does a close (idle, refused, ``Connection: close``) still waiting to drain then.
    - Pipelining: bytes that arrive while an earlier request waits for its answer (read whole,
      or queued behind another) are held unparsed, with reading paused and the read deadline
      stopped, and parsed once the answer is complete; reads are fed ``FEED_SLICE_BYTES`` at a
      time, so at most one slice's requests wait in uvicorn's queue. More than
      ``MAX_HELD_BYTES`` held drops the connection. No refusal is ever written in an earlier
      request's place: then the connection is only closed.
    - Connections: a request on a connection beyond ``max_connections`` open ones gets 503
      with ``Retry-After`` and the connection is closed; a connection beyond
      ``hard_max_connections`` is closed at once, unanswered, keeping descriptors free.
    - A version other than HTTP/1.1 or 1.0 gets 505, a transfer coding other than chunked 501.
    - Malformed HTTP gets 400 through the same refusal path (stamped, logged at most
      ``REFUSAL_LOG_LINES_PER_SECOND`` times a second), not uvicorn's unstamped one; so does
      a request asking for a protocol upgrade (httptools cannot parse past one), where uvicorn
      lost its body and logged two WARNINGs.
    - A request's writes become no-ops once the connection is closing, so a client that drops
      the connection mid-answer is not an application error.

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
        """Start counting and arm the first request's header deadline (or close at once)."""
        self._deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None
        self._linger: asyncio.TimerHandle | None = None
        self._lost = False
        self._held = bytearray()
        super().connection_made(transport)
        self._writes = _ClosingSafeTransport(transport, self._close_transport)
        self._in_headers = True
        self._in_tail = False
        self._header_bytes = 0
        self._exact_header_bytes = 0
        self._header_fields = 0
        self._tail_bytes = 0
        if len(self.connections) > self.limits.hard_max_connections:
            self._log(None, "TOO_MANY_CONNECTIONS")
            transport.abort()
            return
        self._arm(self.limits.header_timeout, "HEADER_TIMEOUT")

    def connection_lost(self, exc: Exception | None) -> None:
        """Drop the deadlines with the connection."""
        self._lost = True
        self._disarm()
        self._disarm_write()
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        self._held.clear()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Feed the parser, counting a request's bytes; hold what follows a request read whole.

        A read is fed ``FEED_SLICE_BYTES`` at a time, so what uvicorn queues of a pipelined
        stream is one slice's requests, not one read's.
        """
        if self._held or self._answering():
            self._hold(data)
            return
        if len(data) <= FEED_SLICE_BYTES:
            self._receive(data)
            return
        for start in range(0, len(data), FEED_SLICE_BYTES):
            if self.transport.is_closing():
                return
            if self._answering():
                self._hold(data[start:])
                return
            self._receive(data[start : start + FEED_SLICE_BYTES])

    def _receive(self, data: bytes) -> None:
        if self._in_headers:
            if self._deadline is None:  # the first byte of a request after keep-alive
                self._arm(self.limits.header_timeout, "HEADER_TIMEOUT")
            self._header_bytes += len(data)
        else:
            if self._deadline is None:  # the body again after it was held: a fresh deadline
                self._arm(self.limits.body_timeout, "BODY_TIMEOUT")
            self._tail_bytes += len(data)
        # A read that ends one part also carries the next: the next counts from zero (callbacks
        # reset the counts), so a count runs over only on reads that stay within its part.
        self._feed(data)
        if self.transport.is_closing():
            return
        if self._in_headers and self._header_bytes > self.limits.max_header_bytes:
            self._refuse_raw(431, "HEADERS_TOO_LARGE", self._header_limit_text())
        elif self._in_tail and self._tail_bytes > self.limits.max_tail_bytes:
            self._refuse_raw(413, "REQUEST_TOO_LARGE", self._tail_limit_text())

    def _feed(self, data: bytes) -> None:
        """Parse as uvicorn's ``data_received`` does; malformed HTTP is refused as the rest is."""
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass  # refused with 400 at its headers (uvicorn runs with ws="none")
        except httptools.HttpParserError:
            self._refuse_raw(400, "MALFORMED_HTTP", "The request is not valid HTTP/1.1.")

    def _answering(self) -> bool:
        """Whether what arrives now waits for an earlier answer.

        So it does behind a request queued behind another (its body included) and behind the
        last request read whole and not yet answered.
        """
        cycle: RequestResponseCycle | None = self.cycle
        if self.pipeline:
            return True
        return cycle is not None and not cycle.more_body and not cycle.response_complete

    def _hold(self, data: bytes) -> None:
        self._held += data
        self.flow.pause_reading()
        self._disarm()  # the wait is ours, not the client's: a fresh deadline once fed
        if len(self._held) > MAX_HELD_BYTES:
            self._drop("PIPELINE_TOO_DEEP")

    def on_response_complete(self) -> None:
        """Start the next request: a queued one (uvicorn's), else what was held, parsed now."""
        super().on_response_complete()
        if not self._held or self.transport.is_closing():
            return
        if self._answering():  # a queued request started: keep holding, reading paused
            self.flow.pause_reading()
            return
        held = bytes(self._held)
        self._held.clear()
        self.data_received(held)

    def pause_writing(self) -> None:
        """The client stopped reading: it has ``body_timeout`` seconds to drain the answer."""
        super().pause_writing()
        self._disarm_write()
        self._write_deadline = self.loop.call_later(self.limits.body_timeout, self._unread)

    def resume_writing(self) -> None:
        """The client reads again."""
        self._disarm_write()
        super().resume_writing()

    def _unread(self) -> None:
        # Even a closing transport: close() waits for the unread answer to drain, forever.
        self._write_deadline = None
        self._drop("RESPONSE_UNREAD")

    def _disarm_write(self) -> None:
        deadline = self._write_deadline
        if deadline is not None:
            deadline.cancel()
            self._write_deadline = None

    def on_message_begin(self) -> None:
        """A new request: count its header section from zero."""
        super().on_message_begin()
        self._coding: bytes | None = None
        self._in_headers = True
        self._in_tail = False
        self._header_bytes = 0
        self._exact_header_bytes = 0
        self._header_fields = 0

    def on_url(self, url: bytes) -> None:
        """Count the request target towards the header section."""
        super().on_url(url)
        self._exact_header_bytes += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        """Count one field (``name: value`` and its line break); a trailer field is dropped."""
        self._header_fields += 1
        self._exact_header_bytes += len(name) + len(value) + 4
        if len(name) == _CODING_LENGTH and name.lower() == b"transfer-encoding":
            self._coding = value  # llhttp refuses a second one
        if not self._in_headers:
            if (
                self._exact_header_bytes > self.limits.max_header_bytes
                or self._header_fields > self.limits.max_headers
            ) and not self.transport.is_closing():
                self._refuse_raw(431, "HEADERS_TOO_LARGE", self._header_limit_text())
            return
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        """Start the request, or a refusal in its place (431, 503); arm the body deadline.

        The header phase ends only once uvicorn made the request: its ``parse_url`` may still
        refuse the target (a port past 65535), and that refusal must see an earlier request
        still being answered.
        """
        self._disarm()
        self._host_from_absolute_target()
        refusal = self._refusal_after_headers()
        if refusal is None:
            super().on_headers_complete()
        else:
            app, self.app = self.app, refusal
            try:
                super().on_headers_complete()
            finally:
                self.app = app
        self._in_headers = False
        self._in_tail = True
        self._tail_bytes = 0
        cycle: RequestResponseCycle | None = self.cycle
        if cycle is not None:
            cycle.transport = self._writes  # type: ignore[assignment]  # the calls it makes
        self._arm(self.limits.body_timeout, "BODY_TIMEOUT")

    def on_message_complete(self) -> None:
        """The request is read: no read deadline until the next one begins.

        A request answered before its body ended (the application's 413) left no keep-alive
        timer (the body's bytes cancelled it): it starts now, or the connection idles forever.
        """
        self._disarm()
        super().on_message_complete()
        self._in_headers = True
        self._in_tail = False
        self._header_bytes = 0
        cycle: RequestResponseCycle | None = self.cycle
        if (
            cycle is not None
            and cycle.response_complete
            and self.timeout_keep_alive_task is None
            and not self.transport.is_closing()
        ):
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )

    def _host_from_absolute_target(self) -> None:
        """For ``http://authority/path`` the authority is the host (RFC 9112 section 3.2.2)."""
        scheme, separator, rest = self.url.partition(b"://")
        if not separator or scheme.lower() not in (b"http", b"https"):
            return
        authority = rest.split(b"/", 1)[0].split(b"?", 1)[0]
        self.headers[:] = [(name, value) for name, value in self.headers if name != b"host"]
        self.headers.append((b"host", authority))

    def _refusal_after_headers(self) -> _PlainAnswer | None:
        if (
            self._exact_header_bytes > self.limits.max_header_bytes
            or self._header_fields > self.limits.max_headers
        ):
            self._log(431, "HEADERS_TOO_LARGE")
            return _PlainAnswer(431, self._header_limit_text(), self._stamps())
        if self.parser.get_http_version() not in _VERSIONS:
            self._log(505, "HTTP_VERSION_UNSUPPORTED")
            return _PlainAnswer(505, "This server speaks HTTP/1.1 (and 1.0).", self._stamps())
        if self._coding is not None and self._coding.strip().lower() != b"chunked":
            # llhttp reads "gzip, chunked" as chunked and hands the application gzip bytes.
            self._log(501, "TRANSFER_CODING_UNSUPPORTED")
            text = "The only transfer coding understood is chunked (RFC 9112 section 6.1)."
            return _PlainAnswer(501, text, self._stamps())
        if self.parser.should_upgrade():
            # httptools stops at an upgrade and cannot resume: the body would be lost.
            self._log(400, "UPGRADE_UNSUPPORTED")
            text = "Protocol upgrades are not supported: send the request without Upgrade."
            return _PlainAnswer(400, text, self._stamps())
        if len(self.connections) > self.limits.max_connections:
            self._log(503, "TOO_MANY_CONNECTIONS")
            return _PlainAnswer(
                503,
                f"More than {self.limits.max_connections} connections are open; retry shortly.",
                [*self._stamps(), (b"retry-after", str(RETRY_AFTER_SECONDS).encode())],
            )
        return None

    def _tail_limit_text(self) -> str:
        return (
            f"The request sent more than {self.limits.max_tail_bytes} bytes after its header "
            f"section (the body limit is {self.limits.max_body_bytes} bytes)."
        )

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
        phase = "header section" if reason == "HEADER_TIMEOUT" else "body"
        seconds = (
            self.limits.header_timeout if reason == "HEADER_TIMEOUT" else self.limits.body_timeout
        )
        self._refuse_raw(408, reason, f"The request {phase} did not arrive within {seconds:g} s.")

    def _refuse_raw(self, status: int, reason: str, text: str) -> None:
        """Answer without a request cycle (none exists or it must not answer) and close.

        Only close when the answer would land in another's place: an earlier request is still
        unanswered (queued behind another, or the last one while the next one's headers are
        read), this one's answer started, or it was answered before its body ended.
        """
        cycle: RequestResponseCycle | None = self.cycle  # None before the first request
        earlier = bool(self.pipeline) or (
            self._in_headers and cycle is not None and not cycle.response_complete
        )
        answering = cycle is not None and cycle.response_started and not cycle.response_complete
        answered = cycle is not None and cycle.response_complete and not self._in_headers
        if earlier or answering or answered:  # e.g. a 413 sent before the body: no second one
            self._log(None, reason)
            self._close()
            return
        self._log(status, reason)
        self.transport.write(_plain_response(status, text, self._stamps()))
        self._close()

    def _close(self) -> None:
        """Close the connection; the request in progress sees a disconnect, its writes nothing.

        An answer the client does not read cannot keep it open: see ``_close_transport``.
        """
        self._disarm()
        cycle: RequestResponseCycle | None = self.cycle
        if cycle is not None:
            cycle.keep_alive = False
            cycle.disconnected = True
            cycle.message_event.set()
        self._close_transport()

    def _close_transport(self) -> None:
        """Close once what is written has drained, or abort ``body_timeout`` seconds later.

        ``close()`` waits for the write buffer; a client that reads nothing keeps it full, and
        the connection open and counted, for good, below the high-water mark where no
        ``pause_writing`` deadline runs.
        """
        self.transport.close()
        if self._linger is None and not self._lost:
            self._linger = self.loop.call_later(self.limits.body_timeout, self._abort_unread)

    def _abort_unread(self) -> None:
        self._linger = None
        if not self._lost:
            self._drop("RESPONSE_UNREAD")

    def _drop(self, reason: str) -> None:
        """Close at once, unanswered, whatever is still unwritten (one refusal line)."""
        self._log(None, reason)
        self._close()
        self.transport.abort()

    def timeout_keep_alive_handler(self) -> None:
        """Uvicorn's idle close, with the same bound on an answer left unread."""
        if not self.transport.is_closing():
            self._close_transport()

    def _log(self, status: int | None, reason: str) -> None:
        scope: dict[str, Any] | None = self.scope  # type: ignore[assignment]  # None before a request
        method = scope.get("method") if scope is not None else None
        self.refusals.refused(
            status=0 if status is None else status,
            reason=reason,
            http_method=method,
            peer=self.client,
        )


_VERSIONS: Final = frozenset({"1.1", "1.0"})
_CODING_LENGTH: Final = len(b"transfer-encoding")


def _plain_headers(body: bytes, extra: Headers) -> Headers:
    return [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *extra,
    ]


def _plain_response(status: int, text: str, extra: Headers) -> bytes:
    body = text.encode()
    fields = [name + b": " + value + b"\r\n" for name, value in _plain_headers(body, extra)]
    return STATUS_LINE[status] + b"".join(fields) + b"\r\n" + body


class _ClosingSafeTransport:
    """What a request cycle writes through: nothing once the connection is closing.

    uvloop closes a transport on a reset before the protocol hears of it; a write in between
    raises ``RuntimeError`` out of the application's ``send``, logged as its error.
    """

    __slots__ = ("_close", "_transport")

    def __init__(self, transport: asyncio.Transport, close: Callable[[], None]) -> None:
        self._transport = transport
        self._close = close

    def write(self, data: bytes) -> None:
        if not self._transport.is_closing():
            self._transport.write(data)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def close(self) -> None:
        self._close()


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
