"""Async load generator for the MCP endpoint: N requests at concurrency C, per-request latency.

Every request is a real MCP 2026-07-28 JSON-RPC POST (``MCP-Protocol-Version``, ``Mcp-Method``,
``Mcp-Name`` headers and the ``_meta`` envelope) sent through ``httpx2`` and the project's
``ClientSentAtTransport``, so ``x-mcp-client-sent-at`` and ``_meta.clientSentAt`` are stamped
at the send boundary exactly as for the official client. Bodies are templated: ``make_call(i)``
builds request ``i`` (``harness.mcp_calls``), so each hold can target its own slot and key.

A run stops at ``requests`` requests or at ``time_limit_s``, whichever comes first; latency is
measured from just before the POST until the whole response body has been read. Optionally
the server process's CPU time (utime + stime from ``/proc/<pid>/stat``) is sampled around the
run, which gives the noise-robust "server CPU per request" figure of perf-floor section 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import socket
import ssl
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

import httpx2

from expert_booking.client import ClientSentAtTransport
from expert_booking.domain.model import format_instant
from expert_booking.edge.wire_time import CLIENT_SENT_HEADER
from harness.mcp_calls import McpCall, encode

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def make_http_client(
    *,
    connections: int = 16,
    timeout_s: float = 30.0,
    inner: httpx2.AsyncBaseTransport | None = None,
) -> httpx2.AsyncClient:
    """An ``httpx2`` client with the stamping transport and a pool of ``connections``."""
    limits = httpx2.Limits(max_connections=connections, max_keepalive_connections=connections)
    # One shared TLS context: building one per transport loads the CA bundle (tens of ms each),
    # which dominates when a test creates hundreds of clients. Traffic is plain HTTP anyway.
    if inner is None:
        inner = httpx2.AsyncHTTPTransport(limits=limits, verify=_tls_context(), trust_env=False)
    transport = ClientSentAtTransport(inner)
    return httpx2.AsyncClient(transport=transport, timeout=httpx2.Timeout(timeout_s))


@functools.cache
def _tls_context() -> ssl.SSLContext:
    return ssl.create_default_context()


@dataclass(frozen=True, slots=True)
class Reply:
    """A decoded reply: HTTP status, the JSON-RPC message, and the body size in bytes."""

    status_code: int
    message: dict[str, Any]
    size: int

    @property
    def result(self) -> dict[str, Any]:
        result = self.message.get("result")
        if not isinstance(result, dict):
            msg = f"not a JSON-RPC result (HTTP {self.status_code}): {self.message}"
            raise TypeError(msg)
        return result

    @property
    def envelope(self) -> dict[str, Any]:
        """The tool envelope (``structuredContent``) of a ``tools/call`` result."""
        content = self.result.get("structuredContent")
        if not isinstance(content, dict):
            msg = f"no structuredContent: {self.message}"
            raise TypeError(msg)
        return content


class RawResponse:
    """The part of an HTTP response the load generator reads."""

    __slots__ = ("content", "status_code")

    def __init__(self, status_code: int, content: bytes) -> None:
        self.status_code = status_code
        self.content = content


class RawHttpClient:
    """A minimal HTTP/1.1 keep-alive client for timed runs: one write and no parser library.

    ``httpx2`` (h11, pure Python) costs the load generator about as much CPU per request as the
    floor server spends answering it, so at concurrency 16 the load generator's core saturates
    first and throughput ratios collapse towards 1. This client stamps exactly like
    ``ClientSentAtTransport``: the same ``YYYY-MM-DDTHH:MM:SS.mmmZ`` string, taken just before
    the bytes are written, goes into header ``x-mcp-client-sent-at`` and into
    ``params._meta.clientSentAt`` (spliced into the first ``"_meta":{``, which ``encode`` puts
    first in ``params``). It sends the request line, headers and body in one ``write``, and
    reads ``Content-Length`` bodies only (what the server sends for JSON). Connections are
    pooled: at most one per concurrent request.
    """

    def __init__(self, *, timeout_s: float = 30.0) -> None:
        self._idle: dict[tuple[str, int], list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]
        self._idle = {}
        self._open: list[asyncio.StreamWriter] = []
        self._timeout_s = timeout_s

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for writer in self._open:
            writer.close()
        for writer in self._open:
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        self._open.clear()
        self._idle.clear()

    async def post(self, url: str, *, content: bytes, headers: dict[str, str]) -> RawResponse:
        parsed = httpx2.URL(url)
        host, port = parsed.host, parsed.port or 80
        idle = self._idle.setdefault((host, port), [])
        if idle:
            reader, writer = idle.pop()
        else:
            reader, writer = await asyncio.open_connection(host, port)
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._open.append(writer)
        async with asyncio.timeout(self._timeout_s):
            stamp = format_instant(datetime.now(UTC)).encode()
            body = content.replace(b'"_meta":{', b'"_meta":{"clientSentAt":"' + stamp + b'",', 1)
            head = [f"POST {parsed.raw_path.decode()} HTTP/1.1", f"host: {host}:{port}"]
            head += [f"{name}: {value}" for name, value in headers.items()]
            head += [f"{CLIENT_SENT_HEADER}: {stamp.decode()}", f"content-length: {len(body)}"]
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
            raw_head = await reader.readuntil(b"\r\n\r\n")
            status, length = _status_and_length(raw_head)
            payload = await reader.readexactly(length)
        idle.append((reader, writer))
        return RawResponse(status, payload)


def _status_and_length(raw_head: bytes) -> tuple[int, int]:
    lines = raw_head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return status, int(value)
    msg = "response without Content-Length"
    raise httpx2.RemoteProtocolError(msg)


HttpClient = httpx2.AsyncClient | RawHttpClient


class AsgiCaller:
    """Sends an encoded MCP request straight into an ASGI app (no sockets, no HTTP client)."""

    def __init__(self, app: Any) -> None:
        self._app = app

    async def send(self, call: McpCall) -> Reply:
        headers, body = encode(call)
        stamp = format_instant(datetime.now(UTC))
        message = json.loads(body)
        message["params"]["_meta"]["clientSentAt"] = stamp
        payload = json.dumps(message, separators=(",", ":")).encode()
        raw = [(name.encode(), value.encode()) for name, value in headers.items()]
        raw += [
            (b"host", b"127.0.0.1:3000"),
            (b"x-mcp-client-sent-at", stamp.encode()),
            (b"content-length", str(len(payload)).encode()),
        ]
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "root_path": "",
            "query_string": b"",
            "headers": raw,
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 3000),
            "state": {},
        }
        chunks: list[bytes] = []
        status = 0
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                await asyncio.Event().wait()  # no disconnect while the app works
            sent = True
            return {"type": "http.request", "body": payload, "more_body": False}

        async def send(event: dict[str, Any]) -> None:
            nonlocal status
            if event["type"] == "http.response.start":
                status = event["status"]
            elif event["type"] == "http.response.body":
                chunks.append(event.get("body", b""))

        await self._app(scope, receive, send)
        data = b"".join(chunks)
        return Reply(status, json.loads(data), len(data))


async def send(client: HttpClient, url: str, call: McpCall) -> Reply:
    """Send one MCP request and decode the reply."""
    headers, body = encode(call)
    response = await client.post(url, content=body, headers=headers)
    return Reply(response.status_code, json.loads(response.content), len(response.content))


Check = Callable[[int, Reply], str | None]
"""``(index, reply) -> None`` when the reply is as expected, else a short failure label."""


def envelope_ok(_index: int, reply: Reply) -> str | None:
    """Expect HTTP 200 and a successful tool envelope."""
    if reply.status_code != 200:
        return f"http-{reply.status_code}"
    envelope = reply.envelope
    if envelope.get("ok") is True:
        return None
    return str(envelope.get("error", {}).get("code", "not-ok"))


def jsonrpc_ok(_index: int, reply: Reply) -> str | None:
    """Expect HTTP 200 and a JSON-RPC result that is not a tool error."""
    if reply.status_code != 200:
        return f"http-{reply.status_code}"
    result = reply.message.get("result")
    if not isinstance(result, dict):
        return "jsonrpc-error"
    return "tool-error" if result.get("isError") else None


@dataclass(slots=True)
class LoadResult:
    """Latencies and counts of one run."""

    label: str
    concurrency: int
    latencies_s: list[float] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0
    server_cpu_s: float | None = None
    client_cpu_s: float = 0.0
    system_busy_s: float | None = None
    exhausted: bool = False  # the supply of calls ran out before the window or the count

    @property
    def count(self) -> int:
        return len(self.latencies_s)

    @property
    def ok_count(self) -> int:
        return self.count - sum(self.failures.values())

    @property
    def throughput(self) -> float:
        return self.count / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def percentile_ms(self, q: float) -> float:
        return percentile(self.latencies_s, q) * 1000.0

    @property
    def server_cpu_us_per_request(self) -> float | None:
        if self.server_cpu_s is None or not self.count:
            return None
        return self.server_cpu_s / self.count * 1e6

    @property
    def client_cpu_share(self) -> float:
        """The load generator's own CPU use over the run (1.0 = one core saturated)."""
        return self.client_cpu_s / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def foreign_cpu(self) -> float | None:
        """Cores busy with neither the server nor the load generator (other tenants: noise)."""
        if self.system_busy_s is None or self.elapsed_s <= 0:
            return None
        own = self.client_cpu_s + (self.server_cpu_s or 0.0)
        return max(0.0, (self.system_busy_s - own) / self.elapsed_s)

    def summary(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "concurrency": self.concurrency,
            "requests": self.count,
            "ok": self.ok_count,
            "failures": dict(self.failures),
            "elapsed_s": round(self.elapsed_s, 4),
            "p50_ms": round(self.percentile_ms(50), 3) if self.count else None,
            "p99_ms": round(self.percentile_ms(99), 3) if self.count else None,
            "mean_ms": round(statistics.fmean(self.latencies_s) * 1000, 3) if self.count else None,
            "req_per_s": round(self.throughput, 1),
            "server_cpu_us_per_req": _round(self.server_cpu_us_per_request),
            "loadgen_cpu_share": round(self.client_cpu_share, 3),
            "foreign_cpu_cores": _round(self.foreign_cpu, 2),
            "exhausted": self.exhausted,
        }


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of ``values``; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100.0 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def process_cpu_seconds(pid: int) -> float | None:
    """utime + stime of ``pid`` in seconds, from ``/proc``; ``None`` where unavailable."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    # After the ")" of comm: state is field 3, utime 14 and stime 15 (1-based, proc(5)).
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def system_busy_seconds() -> float | None:
    """CPU seconds all CPUs spent busy since boot (``/proc/stat``: all but idle and iowait)."""
    try:
        first = Path("/proc/stat").read_text(encoding="ascii").split("\n", 1)[0]
    except OSError:
        return None
    # cpu user nice system idle iowait irq softirq steal guest guest_nice
    values = [int(value) for value in first.split()[1:9]]
    return (sum(values) - values[3] - values[4]) / _CLOCK_TICKS


async def run_load(
    client: HttpClient,
    url: str,
    make_call: Callable[[int], McpCall | None],
    *,
    requests: int,
    concurrency: int,
    time_limit_s: float,
    label: str = "",
    check: Check | None = None,
    server_pid: int | None = None,
    on_reply: Callable[[int, Reply], Awaitable[None] | None] | None = None,
) -> LoadResult:
    """Send up to ``requests`` requests with ``concurrency`` workers for at most ``time_limit_s``.

    Requests are numbered 0..requests-1 and handed out in order; ``make_call(i)`` is called
    just before request ``i`` is sent (outside the timed part). A finite supply of calls (each
    confirm needs a hold made beforehand) says it ran out by returning ``None``: the run ends
    there, ``exhausted`` set, its figures over the requests sent. A transport error counts as a
    failure labelled with the exception's class name. ``on_reply`` sees every decoded reply.
    """
    if requests < 0 or concurrency < 1 or time_limit_s <= 0:
        msg = "requests >= 0, concurrency >= 1 and time_limit_s > 0 are required"
        raise ValueError(msg)
    result = LoadResult(label=label, concurrency=concurrency)
    next_index = iter(range(requests))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + time_limit_s

    async def worker() -> None:
        for index in next_index:
            if loop.time() >= deadline:
                return
            call = make_call(index)
            if call is None:
                result.exhausted = True
                return
            headers, body = encode(call)
            started = time.perf_counter()
            try:
                response = await client.post(url, content=body, headers=headers)
            except (httpx2.HTTPError, OSError, asyncio.IncompleteReadError) as exc:
                result.latencies_s.append(time.perf_counter() - started)
                _count(result.failures, type(exc).__name__)
                continue
            result.latencies_s.append(time.perf_counter() - started)
            reply = Reply(response.status_code, json.loads(response.content), len(response.content))
            await _judge(result, index, reply, check, on_reply)

    cpu_before = process_cpu_seconds(server_pid) if server_pid else None
    own_before = time.process_time()
    busy_before = system_busy_seconds()
    started = time.perf_counter()
    async with asyncio.timeout(time_limit_s + 30.0):  # a hung server cannot hang the run
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    result.elapsed_s = time.perf_counter() - started
    result.client_cpu_s = time.process_time() - own_before
    busy_after = system_busy_seconds()
    if busy_before is not None and busy_after is not None:
        result.system_busy_s = busy_after - busy_before
    if server_pid and cpu_before is not None:
        cpu_after = process_cpu_seconds(server_pid)
        result.server_cpu_s = None if cpu_after is None else cpu_after - cpu_before
    return result


async def _judge(
    result: LoadResult,
    index: int,
    reply: Reply,
    check: Check | None,
    on_reply: Callable[[int, Reply], Awaitable[None] | None] | None,
) -> None:
    if check is not None:
        failure = check(index, reply)
        if failure is not None:
            _count(result.failures, failure)
    if on_reply is not None:
        pending = on_reply(index, reply)
        if pending is not None:
            await pending


def _count(counter: dict[str, int], key: str) -> None:
    counter[key] = counter.get(key, 0) + 1


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)
