"""``expert-booking-mcp proxy``: a reverse proxy that stamps the client timestamp on every request.

Third-party MCP clients (MCP Inspector, the official conformance suite) do not send
``x-mcp-client-sent-at``, which the server requires (CONTRACT section 2). This proxy sits between
such a client and the real server and forwards each request through an ``httpx2.AsyncClient``
whose transport is :class:`expert_booking.client.ClientSentAtTransport`, so the stamp is applied
exactly as the project's own clients apply it. The proxy has no timestamp logic of its own; the
time it stamps is the proxy's send time, so the ordering a client can check starts at the proxy.

Everything else passes through untouched: method, raw path, query string, body and every request
header in order, including ``Host`` and ``Origin`` (so DNS-rebinding checks still test the
server; a ``Connection`` header nominating either, or a request without ``Host``, is refused
with 400, as the upstream's own name would then pass those checks). Only hop-by-hop headers (RFC
9110 section 7.6.1) are dropped, in both directions, and optional whitespace around a request
header value is not re-sent (RFC 9110 section 5.5: it is not part of the value; the HTTP/1.1
client library refuses to send it). A server's own handling of such whitespace therefore has to
be probed directly, not through this proxy. The response streams back with its status and
headers; uvicorn adds no ``date``/``server`` header.

An upstream URL with credentials (``http://user:password@host/mcp``) is refused at start: the
HTTP client would send them as Basic auth over plain http, in place of every client's own
``Authorization`` (an ``AUTH_MODE=oauth`` Bearer token among them), and the server checks no Basic
auth. Where an upstream URL is shown (that refusal, the other start-up errors), its userinfo is
``***``, so a password never reaches a terminal or a log; the ready line and a 502 name an origin
that has none.

Usage (the conformance harness and the tests run the same class in a thread)::

    with StampingProxy.running("http://127.0.0.1:3000/mcp") as proxy:
        print(proxy.url)            # http://127.0.0.1:<port>/mcp, same path as the upstream

    expert-booking-mcp proxy --upstream http://127.0.0.1:3000/mcp [--host H] [--port 3001]
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
import threading
from collections.abc import Iterator
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import httpx2
import uvicorn
from starlette.types import Receive, Scope, Send

from expert_booking.addresses import is_loopback_host, shown_url
from expert_booking.client import ClientSentAtTransport
from expert_booking.version import DISTRIBUTION

__all__ = ("ProxyApp", "StampingProxy", "ThreadedServer")

_PREFIX: Final = f"{DISTRIBUTION} proxy"
logger = logging.getLogger("expert_booking.proxy")
HOP_BY_HOP: Final = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
"""Headers that describe one connection, not the message (RFC 9110 section 7.6.1)."""

_UPSTREAM_TIMEOUT: Final = httpx2.Timeout(30.0, read=120.0)
"""A read waits longer than the rest: the upstream answers a call only once its work is done."""

CHECKED_END_TO_END: Final = frozenset({b"host", b"origin"})
"""Headers the server's DNS-rebinding checks read: a request whose ``Connection`` nominates one
is refused (400), not forwarded without it. Dropped, ``Host`` would become the upstream's and a
missing ``Origin`` reads as no browser, so the checks would pass what they refuse directly
(RFC 9110 section 7.6.1 forbids nominating a field meant for every recipient anyway)."""

MAX_BODY_BYTES: Final = 16 * 1024 * 1024
"""Bodies up to this size are forwarded (the server itself answers 413 above 32 KiB)."""

MAX_BODY_MESSAGES: Final = 65_536
"""More ``http.request`` messages than this for one body is treated as too large."""

READY_TIMEOUT_S: Final = 10.0
STOP_TIMEOUT_S: Final = 10.0


def _hop_by_hop(headers: list[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """Hop-by-hop names, plus any header the ``Connection`` header nominates."""
    named = {
        token.strip().lower()
        for name, value in headers
        if name.lower() == b"connection"
        for token in value.split(b",")
        if token.strip()
    }
    return HOP_BY_HOP | named


class ProxyApp:
    """The ASGI application: forwards every HTTP request to ``upstream_origin``."""

    def __init__(self, upstream_origin: str) -> None:
        """Forward to ``upstream_origin`` (``http://host:port``) via ``ClientSentAtTransport``.

        Raises:
            ValueError: ``upstream_origin`` carries credentials (see the module docstring).
        """
        _refuse_credentials(upstream_origin)
        self._origin = upstream_origin.rstrip("/")
        self._client: httpx2.AsyncClient | None = None
        self.forwarded = 0
        """Number of requests forwarded so far (for reports)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point (``lifespan`` and ``http`` scopes)."""
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._forward(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        for _ in range(2):  # startup, then shutdown
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._client = httpx2.AsyncClient(
                    transport=ClientSentAtTransport(),
                    timeout=_UPSTREAM_TIMEOUT,
                    follow_redirects=False,
                    trust_env=False,
                )
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._client is not None:
                    await self._client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _forward(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _read_body(receive)
        if body is None:
            await _plain(send, 413, b"proxy: request body too large")
            return
        incoming: list[tuple[bytes, bytes]] = list(scope["headers"])
        drop = _hop_by_hop(incoming)
        if drop & CHECKED_END_TO_END:
            await _plain(send, 400, b"proxy: Connection must not nominate Host or Origin")
            return
        if not any(name.lower() == b"host" for name, _ in incoming):
            # The HTTP client would fill in the upstream's own name, which the server allows.
            await _plain(send, 400, b"proxy: the request must name its Host")
            return
        # RFC 9110 section 5.5: leading/trailing whitespace (OWS) is not part of a field value,
        # and h11 refuses to serialise it; the value itself is forwarded byte for byte.
        headers = [
            (name, value.strip(b" \t")) for name, value in incoming if name.lower() not in drop
        ]
        raw_path: bytes = scope.get("raw_path") or scope["path"].encode()
        query: bytes = scope.get("query_string", b"")
        target = self._origin + raw_path.decode("latin-1")
        if query:
            target += "?" + query.decode("latin-1")
        request = httpx2.Request(
            scope["method"],
            target,
            headers=headers,  # Host and Origin included, exactly as received
            content=body or None,  # no body: no Content-Length is invented for GET/DELETE
        )
        if self._client is None:
            raise RuntimeError("lifespan startup did not run")
        try:
            response = await self._client.send(request, stream=True)
        except httpx2.HTTPError as exc:
            cause = type(exc).__name__
            logger.warning("upstream %s failed: %s: %s", self._origin, cause, exc)
            await _plain(send, 502, f"proxy: upstream {self._origin} failed: {cause}".encode())
            return
        self.forwarded += 1
        try:
            out = list(response.headers.raw)
            drop_out = _hop_by_hop(out)
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [(n, v) for n, v in out if n.lower() not in drop_out],
                }
            )
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None when it exceeds :data:`MAX_BODY_BYTES`."""
    chunks: list[bytes] = []
    size = 0
    for _ in range(MAX_BODY_MESSAGES):
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    else:
        return None
    return b"".join(chunks)


async def _plain(send: Send, status: int, text: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(text)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": text})


class _Server(uvicorn.Server):
    """A uvicorn server that reports startup through a thread-safe event."""

    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self._ready.set()


class ThreadedServer:
    """An ASGI app served by uvicorn on a loopback port, in a background thread.

    The listening socket is bound before the thread starts, so :attr:`port` is known at once;
    :meth:`start` returns when uvicorn signals that its startup (lifespan included) finished.
    """

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0) -> None:
        """Prepare (not start) serving ``app`` on ``host:port`` (0: a free port)."""
        self.app = app
        self.host = host
        self.port = port
        self._thread: threading.Thread | None = None
        self._server: _Server | None = None
        self._error: BaseException | None = None

    def start(self) -> None:
        """Bind, start serving and wait (bounded) until the server is up.

        Raises:
            RuntimeError: uvicorn failed or did not start within its deadline.
        """
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        ready = threading.Event()
        config = uvicorn.Config(
            self.app,
            loop="asyncio",
            lifespan="auto",
            log_config=None,
            log_level="warning",
            access_log=False,
            server_header=False,
            date_header=False,
        )
        server = self._server = _Server(config, ready)

        def run() -> None:
            try:
                asyncio.run(server.serve(sockets=[sock]))
            except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
                self._error = exc
            finally:
                sock.close()
                ready.set()

        self._thread = threading.Thread(target=run, name=f"asgi-{self.port}", daemon=True)
        self._thread.start()
        if not ready.wait(READY_TIMEOUT_S) or self._error is not None or not server.started:
            self.stop()
            raise RuntimeError(f"server on port {self.port} did not start: {self._error!r}")

    def stop(self) -> None:
        """Ask uvicorn to exit and wait (bounded) for its thread."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(STOP_TIMEOUT_S)
            if self._thread.is_alive():
                raise RuntimeError(f"server on port {self.port} did not stop in time")
            self._thread = None

    @property
    def base_url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"


class StampingProxy:
    """A running proxy: ``url`` is the endpoint to hand to third-party clients."""

    def __init__(self, upstream_url: str, *, host: str = "127.0.0.1", port: int = 0) -> None:
        """Prepare a proxy for ``upstream_url`` (e.g. ``http://127.0.0.1:3000/mcp``)."""
        origin, self._path = split_upstream(upstream_url)
        self.upstream_url = upstream_url
        self.app = ProxyApp(origin)
        self._server = ThreadedServer(self.app, host=host, port=port)
        self.url = ""
        """``http://host:port<upstream path>`` once started."""

    def start(self) -> None:
        """Start serving in a background thread; returns once requests are accepted."""
        self._server.start()
        self.url = self._server.base_url + self._path

    def stop(self) -> None:
        """Stop serving (bounded wait)."""
        self._server.stop()

    @classmethod
    @contextlib.contextmanager
    def running(
        cls, upstream_url: str, *, host: str = "127.0.0.1", port: int = 0
    ) -> Iterator[StampingProxy]:
        """Context manager: a started proxy, stopped on exit."""
        proxy = cls(upstream_url, host=host, port=port)
        proxy.start()
        try:
            yield proxy
        finally:
            proxy.stop()


def split_upstream(upstream_url: str) -> tuple[str, str]:
    """``http://host:port/path`` → (``http://host:port``, ``/path``).

    Raises:
        ValueError: not an ``http://`` URL with a host, or one with credentials; the message
            shows the URL without them.
    """
    parts = urlsplit(upstream_url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"upstream must be an http:// URL, got {shown_url(upstream_url)!r}")
    _refuse_credentials(upstream_url)
    origin = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    return origin, urlunsplit(("", "", parts.path, parts.query, ""))


def _refuse_credentials(url: str) -> None:
    """Raise ValueError when ``url`` has userinfo (``user:password@``, even an empty one)."""
    if urlsplit(url).username is not None:
        raise ValueError(
            "upstream must not carry credentials: the proxy would send them as Basic auth over "
            "plain http, replacing each client's own Authorization, and the server checks none; "
            f"got {shown_url(url)!r}"
        )


def run(upstream_url: str, host: str, port: int) -> int:
    """``expert-booking-mcp proxy``: serve the proxy in the foreground until SIGTERM/SIGINT.

    The ready line is ``MCP endpoint: http://HOST:PORT/<upstream path> (stamping proxy for
    UPSTREAM)`` on stderr. A non-loopback ``host``, a bad upstream URL (credentials included) or a
    busy port is one line and status 2 / 3: the proxy adds no access control, and a server in
    ``AUTH_MODE=none`` trusts it as it trusts every loopback caller.
    """
    from expert_booking.edge.json_logging import startup_line  # noqa: PLC0415 - CLI entry only
    from expert_booking.serving import ListenError, serve  # noqa: PLC0415 - CLI entry only

    if not is_loopback_host(host):  # it would hand any network client to a loopback server
        message = f"--host must be a loopback address (the proxy serves this machine), got {host!r}"
        sys.stderr.write(startup_line(f"{_PREFIX}: {message}") + "\n")
        return 2
    try:
        origin, path = split_upstream(upstream_url)
    except ValueError as exc:
        sys.stderr.write(startup_line(f"{_PREFIX}: {exc}") + "\n")
        return 2
    ready = "MCP endpoint: {base}" + path.replace("{", "{{").replace("}", "}}")
    ready += f" (stamping proxy for {upstream_url})".replace("{", "{{").replace("}", "}}")
    try:
        return serve(ProxyApp(origin), host, port, ready_line=ready)
    except ListenError as exc:
        sys.stderr.write(startup_line(f"{_PREFIX}: {exc}") + "\n")
        return 3
