"""Client side of the wire-timestamp contract (CONTRACT section 2), for the official ``mcp`` client.

Every MCP request must carry the client's send time twice: as header ``x-mcp-client-sent-at``
and as ``params._meta.clientSentAt``, the same ``YYYY-MM-DDTHH:MM:SS.mmmZ`` string taken at the
real send boundary. :class:`ClientSentAtTransport` does that for any ``httpx2`` client;
:func:`open_client` builds a ready ``mcp.Client`` around it::

    async with open_client("http://127.0.0.1:3000/mcp") as client:
        tools = await client.list_tools()
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Final

import httpx2
import mcp_types
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp_types import METHOD_NOT_FOUND

from expert_booking.adapters.clock import SystemClock
from expert_booking.domain.model import format_instant
from expert_booking.edge.client_time import utc_ms_instant
from expert_booking.edge.wire_time import (
    CLIENT_SENT_HEADER,
    CLIENT_SENT_META,
    SERVER_RECEIVED_HEADER,
    SERVER_RESPONDED_HEADER,
)
from expert_booking.ports import Clock
from expert_booking.version import package_version

__all__ = (
    "ClientSentAtTransport",
    "Exchange",
    "ExchangeHandler",
    "ExchangeRecorder",
    "ServerConnectionError",
    "chain_error",
    "open_client",
)

ExchangeHandler = Callable[[httpx2.Request, httpx2.Response, str, str], None]
"""``(request as sent, response with headers, client_sent_at, client_received_at) -> None``."""

DEFAULT_TIMEOUT: Final = httpx2.Timeout(30.0, read=300.0)
"""The MCP SDK's own defaults: 30 s to connect/write, 300 s to read."""

_HEADER: Final = CLIENT_SENT_HEADER.encode()


class ClientSentAtTransport(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport that stamps the client send time on every request.

    At the send boundary (just before the inner transport gets the request) it reads
    ``clock.now()`` once, formats it as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` and sets header
    ``x-mcp-client-sent-at``. For a JSON POST body that is a JSON-RPC message with a ``method``
    it also sets ``params._meta.clientSentAt`` to the same string (creating ``params`` and
    ``_meta`` when absent, keeping every other key) and rewrites ``Content-Length``. Other
    bodies are sent unchanged. When the response headers arrive it reads the clock again
    (``clientReceivedAt``) and calls ``on_exchange``.
    """

    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport | None = None,
        *,
        clock: Clock | None = None,
        on_exchange: ExchangeHandler | None = None,
    ) -> None:
        """Wrap ``inner`` (default: a new ``httpx2.AsyncHTTPTransport``).

        Args:
            inner: the transport that really sends (``httpx2.ASGITransport`` in process).
            clock: the client's clock (default: the system clock).
            on_exchange: called once per exchange when the response headers have arrived.
                It must not raise: the server has already acted on the request, so an
                exception there fails a call whose effect (a hold, a confirmation) stands.
        """
        self._inner = inner if inner is not None else httpx2.AsyncHTTPTransport()
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._on_exchange = on_exchange

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Stamp ``request``, send it through the inner transport and return the response."""
        content: bytes | None = None
        if request.method == "POST" and _is_json(request.headers.get("content-type", "")):
            content = await request.aread()
        client_sent_at = format_instant(self._clock.now())
        stamped = _stamp(request, content, client_sent_at)
        response = await self._inner.handle_async_request(stamped)
        client_received_at = format_instant(self._clock.now())
        if self._on_exchange is not None:
            self._on_exchange(stamped, response, client_sent_at, client_received_at)
        return response

    async def aclose(self) -> None:
        """Close the inner transport."""
        await self._inner.aclose()


def _is_json(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def _stamp(request: httpx2.Request, content: bytes | None, client_sent_at: str) -> httpx2.Request:
    body = _with_client_sent_at(content, client_sent_at) if content else None
    if body is None:
        request.headers[CLIENT_SENT_HEADER] = client_sent_at
        return request
    headers = [
        (name, value)
        for name, value in request.headers.raw
        if name.lower() not in (_HEADER, b"content-length")
    ]
    headers.append((_HEADER, client_sent_at.encode()))
    return httpx2.Request(
        request.method,
        request.url,
        headers=headers,
        content=body,
        extensions=request.extensions,
    )


def _with_client_sent_at(content: bytes, client_sent_at: str) -> bytes | None:
    """The JSON-RPC message with ``params._meta.clientSentAt`` set; None to send it unchanged."""
    try:
        message: Any = json.loads(content)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "method" not in message:
        return None
    params = message.setdefault("params", {})
    if not isinstance(params, dict):
        return None
    meta = params.setdefault("_meta", {})
    if not isinstance(meta, dict):
        return None
    meta[CLIENT_SENT_META] = client_sent_at
    return json.dumps(message, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class Exchange:
    """The wire timestamps of one HTTP exchange, from its headers, plus what it was."""

    mcp_method: str | None
    status_code: int
    client_sent_at: str
    server_received_at: str | None
    server_responded_at: str | None
    client_received_at: str

    @classmethod
    def capture(
        cls,
        request: httpx2.Request,
        response: httpx2.Response,
        client_sent_at: str,
        client_received_at: str,
    ) -> Exchange:
        """Read one exchange (headers only: the body may not have arrived yet)."""
        return cls(
            mcp_method=request.headers.get("mcp-method"),
            status_code=response.status_code,
            client_sent_at=client_sent_at,
            server_received_at=response.headers.get(SERVER_RECEIVED_HEADER),
            server_responded_at=response.headers.get(SERVER_RESPONDED_HEADER),
            client_received_at=client_received_at,
        )

    def chain(self, result_created_at: str | None = None) -> list[str | None]:
        """``[clientSentAt, serverReceivedAt, serverRespondedAt, clientReceivedAt]``.

        A tool result's ``serverResultCreatedAt``, when given, goes between the server's two.
        """
        created = [] if result_created_at is None else [result_created_at]
        return [
            self.client_sent_at,
            self.server_received_at,
            *created,
            self.server_responded_at,
            self.client_received_at,
        ]


def chain_error(stamps: Sequence[str | None]) -> str | None:
    """What is wrong with a chain of wire timestamps, or ``None`` when it holds.

    ``stamps`` are in the contract's order (``clientSentAt``, ``serverReceivedAt``,
    ``serverResultCreatedAt`` where there is one, ``serverRespondedAt``, ``clientReceivedAt``).
    Each must be present and in the contract's form (RFC 3339 in UTC, with milliseconds: any
    of UTC's spellings the server accepts), and none may be earlier than the one before it.
    The instants are compared, not the strings: text in another spelling sorts wrongly.
    """
    instants = []
    for position, stamp in enumerate(stamps):
        if stamp is None:
            return f"stamp {position} is missing"
        instant = utc_ms_instant(stamp)
        if instant is None:
            return f"stamp {position} {stamp!r} is not RFC 3339 UTC with milliseconds"
        instants.append(instant)
    for position, (earlier, later) in enumerate(pairwise(instants)):
        if later < earlier:
            return f"stamp {position + 1} {stamps[position + 1]} is before {stamps[position]}"
    return None


class ExchangeRecorder:
    """An ``on_exchange`` handler that keeps the last ``limit`` exchanges in ``exchanges``."""

    def __init__(self, limit: int = 100) -> None:
        """Keep at most ``limit`` exchanges, oldest dropped first."""
        self.exchanges: list[Exchange] = []
        self._limit = limit

    def __call__(
        self,
        request: httpx2.Request,
        response: httpx2.Response,
        client_sent_at: str,
        client_received_at: str,
    ) -> None:
        """Record one exchange."""
        self.exchanges.append(
            Exchange.capture(request, response, client_sent_at, client_received_at)
        )
        if len(self.exchanges) > self._limit:
            del self.exchanges[0]


@asynccontextmanager
async def open_client(
    url: str,
    *,
    clock: Clock | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
    on_exchange: ExchangeHandler | None = None,
    client_name: str = "expert-booking-client",
    headers: Mapping[str, str] | None = None,
    http_timeout: httpx2.Timeout = DEFAULT_TIMEOUT,
    auth: httpx2.Auth | None = None,
) -> AsyncIterator[Client]:
    """Connect the official ``mcp.Client`` to ``url`` with client timestamps on every request.

    The client probes ``server/discover`` (``mode="auto"``) on entry and keeps no response
    cache (``cache=None``), so every ``list_tools()`` reaches the server and gets fresh
    timestamps.

    Args:
        url: the MCP endpoint, e.g. ``http://127.0.0.1:3000/mcp``.
        clock: the client's clock (default: the system clock).
        transport: the transport that really sends (default: a new HTTP transport);
            pass ``httpx2.ASGITransport`` to talk to an app in process.
        on_exchange: see :class:`ClientSentAtTransport`; :class:`ExchangeRecorder` fits.
        client_name: ``clientInfo.name`` sent in every request's ``_meta``.
        headers: extra headers for every request.
        http_timeout: HTTP timeouts.
        auth: the HTTP authentication, e.g. the SDK's OAuth provider
            (``mcp.client.auth.OAuthClientProvider``) for a server in ``AUTH_MODE=oauth``;
            each request it sends (retries after a token included) is stamped anew.

    Yields:
        The connected client; it is closed when the block exits.

    Raises:
        ServerConnectionError: the connection (the ``server/discover`` probe) failed, or a
            request of the block failed in transport (the server went away, or did not answer
            within ``http_timeout``): the SDK then cancels the block's call (``CancelledError``)
            and the client is gone. The message names ``url`` and the root cause. A call cut
            off that way may still commit: open a new client and ask ``booking.list_bookings``
            with its ``idempotencyKey``, or retry it with the same key.
    """
    stamping = ClientSentAtTransport(transport, clock=clock, on_exchange=on_exchange)
    probe = _DiscoverRefusal()
    async with httpx2.AsyncClient(
        transport=stamping,
        timeout=http_timeout,
        headers=dict(headers or {}),
        auth=auth,
        event_hooks={"response": [probe]},
    ) as http:
        client = Client(
            streamable_http_client(url, http_client=http),
            mode="auto",
            cache=None,
            client_info=mcp_types.Implementation(name=client_name, version=package_version()),
        )
        try:
            async with AsyncExitStack() as stack:
                try:
                    await stack.enter_async_context(client)
                except (ExceptionGroup, httpx2.HTTPError, MCPError, OSError) as exc:
                    raise ServerConnectionError(url, probe.cause(_root_cause(exc))) from None
                yield client
        except BaseExceptionGroup as group:
            lost = _transport_failure(group, url)
            if lost is None:
                raise
            raise ServerConnectionError(url, lost, connected=True) from group


class _DiscoverRefusal:
    """Keeps the server's refusal of the ``server/discover`` probe (an httpx response hook).

    When the probe is refused (a client clock out of the server's tolerance, say), the SDK's
    ``mode="auto"`` falls back to a legacy ``initialize``, which a 2026-only server refuses for
    its protocol version: then the probe's refusal is the one that says what is wrong.
    """

    def __init__(self) -> None:
        self.error: MCPError | httpx2.HTTPStatusError | None = None

    def cause(self, final: BaseException) -> BaseException:
        """The probe's refusal when ``final`` is only the fallback's; else ``final``.

        The fallback's refusal is no news after a version refusal, nor after a 404: nothing
        serves MCP at that path, which the SDK reports as an unknown method (-32601).
        """
        if isinstance(self.error, httpx2.HTTPStatusError):
            unknown = isinstance(final, MCPError) and final.error.code == METHOD_NOT_FOUND
            return self.error if unknown else final
        legacy = isinstance(final, MCPError) and final.error.code in _VERSION_REFUSALS
        return self.error if legacy and self.error is not None else final

    async def __call__(self, response: httpx2.Response) -> None:
        if response.is_success or response.request.headers.get("mcp-method") != "server/discover":
            return
        if response.status_code == httpx2.codes.NOT_FOUND:
            self.error = httpx2.HTTPStatusError(
                f"HTTP 404 {response.reason_phrase}", request=response.request, response=response
            )
            return
        if not response.headers.get("content-type", "").startswith("application/json"):
            return
        await response.aread()  # a JSON-RPC error: small (a 2026-only server's refusal)
        try:
            error = response.json()["error"]
            self.error = MCPError(int(error["code"]), str(error["message"]), error.get("data"))
        except (ValueError, KeyError, TypeError, AttributeError):
            return


class ServerConnectionError(ConnectionError):
    """:func:`open_client` could not connect, or lost the connection: ``url`` and the root cause.

    Attributes:
        url: the endpoint that was tried.
        cause: the innermost exception (e.g. ``httpx2.ConnectError``, ``httpx2.ReadTimeout``,
            or the server's ``MCPError`` refusal).
        connected: whether the client had connected (the failure cut off a request of the
            block) or not (the connection itself failed).
    """

    def __init__(self, url: str, cause: BaseException, *, connected: bool = False) -> None:
        if isinstance(cause, MCPError):
            reason = f"the server refused the connection: {cause.error.message}"
            reason += f" (JSON-RPC error {cause.error.code})"
        elif isinstance(cause, httpx2.HTTPStatusError):
            reason = f"{cause}: nothing serves MCP at that path (this server's is /mcp)"
        elif isinstance(cause, httpx2.TimeoutException):
            reason = (
                f"no answer in time ({type(cause).__name__}, http_timeout); the request may "
                "still complete on the server"
            )
        elif isinstance(cause, httpx2.ConnectError | OSError):
            detail = str(cause) or type(cause).__name__
            reason = f"nothing answers there ({detail}); is the server running?"
        else:
            reason = f"{type(cause).__name__}: {cause}"
        lead = "lost the connection to" if connected else "cannot connect to"
        super().__init__(f"{lead} the MCP server at {url}: {reason}")
        self.url = url
        self.cause = cause
        self.connected = connected


_VERSION_REFUSALS: Final = frozenset({-32020, -32022})
"""A missing or unsupported ``MCP-Protocol-Version``: how a 2026-only server refuses legacy."""


def _transport_failure(group: BaseExceptionGroup[BaseException], url: str) -> BaseException | None:
    """The first leaf of ``group`` when each is a transport failure of a request to ``url``.

    None otherwise: anything else in the group (the block's own exception, its own HTTP calls
    elsewhere) keeps the group as it is.
    """
    leaves = list(_leaves(group))
    endpoint = httpx2.URL(url)
    if leaves and all(_failed_request_to(leaf, endpoint) for leaf in leaves):
        return leaves[0]
    return None


def _failed_request_to(exc: BaseException, endpoint: httpx2.URL) -> bool:
    if not isinstance(exc, httpx2.TransportError):
        return False
    try:
        return exc.request.url == endpoint
    except RuntimeError:  # raised without its request: not known to be ours
        return False


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside (nested) exception groups, depth first; ``exc`` if it is none."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def _root_cause(exc: BaseException) -> BaseException:
    """The first leaf of (nested) exception groups: the task group wraps the real failure."""
    return next(_leaves(exc), exc)
