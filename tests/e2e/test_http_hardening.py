"""Hostile HTTP over raw sockets against the spawned server (issue 10 findings 1, 2, 6, 7, 8).

One routing decision for MCP (no spelling of the path reaches the SDK ungated), the bounds below
ASGI (header bytes and count, header and body read deadlines, keep-alive idle, connections), the
client clock tolerance, the gate's JSON-RPC answers, and one JSON line per refusal on stderr.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import select
import socket
import sqlite3
import string
import struct
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from expert_booking.domain.model import format_instant, parse_instant
from expert_booking.edge.http_limits import REFUSING_CONNECTIONS
from expert_booking.testing.server_process import ServerProcess
from tests.e2e.rawhttp import (
    RawResponse,
    closed_by_server,
    connect,
    enveloped,
    exchange,
    now_stamp,
    read_response,
    request,
    stamped_headers,
)

pytestmark = pytest.mark.e2e

MAX_HEADER_BYTES = 8192
MAX_HEADERS = 40
TIMEOUT_SECONDS = 1
MAX_CONNECTIONS = 6


def _env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "HTTP_MAX_HEADER_BYTES": str(MAX_HEADER_BYTES),
        "HTTP_MAX_HEADERS": str(MAX_HEADERS),
        "HTTP_HEADER_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS),
        "HTTP_BODY_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS),
        "HTTP_KEEP_ALIVE_SECONDS": str(TIMEOUT_SECONDS),
        **extra,
    }


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess(env=_env()) as running:
        yield running


@pytest.fixture(scope="module")
def port(server: ServerProcess) -> int:
    return int(server.base_url.rsplit(":", 1)[1])


def _hold(sent: str | None) -> dict[str, Any]:
    arguments = {
        "slotId": "slot-ai-001",
        "customer": {"name": "Ada", "email": "ada@example.com"},
        "idempotencyKey": str(uuid.uuid4()),
    }
    params = {
        "name": "tool_catalog.call",
        "arguments": {
            "name": "booking.hold_slot",
            "arguments": arguments,
            "requestSpanId": str(uuid.uuid4()),
        },
    }
    return enveloped("tools/call", params, sent)


LEGACY_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "legacy", "version": "1"},
    },
}

# Every spelling that a router, a proxy or a decoder could take for the MCP path.
SPELLINGS = [
    "/mcp",
    "/mcp/",
    "//mcp",
    "///mcp",
    "/mcp//",
    "//mcp/",
    "//mcp//",
    "/%2Fmcp",
    "/%2fmcp",
    "/mcp%2F",
    "/mcp%2f",
    "/%2F%2Fmcp",
    "/%6Dcp",
    "/%6dcp",
    "/m%63p",
    "/%252Fmcp",
    "/./mcp",
    "/mcp/.",
    "/mcp/./",
    "/x/../mcp",
    "/mcp/x/..",
    "/%2E/mcp",
    "/%2e%2e/mcp",
    "/MCP",
    "/Mcp",
    "/mCP",
    "/mcp;",
    "/mcp;x=1",
    "/mcp;/",
    "/;/mcp",
    "/mcp?x=1",
    "/mcp?",
    "//mcp?x=1",
    "/mcp%20",
    "/mcp%00",
    "/mcp/x",
    "http://127.0.0.1/mcp",
    "http://127.0.0.1//mcp",
]
_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")


def _names_the_endpoint(target: str) -> bool:
    """Whether ``target`` is ``/mcp`` (or ``/mcp/``) under RFC 3986's safe normalization only.

    Section 6.2.2: percent-encoded unreserved characters decode (``%6D`` is ``m``), nothing
    else does (``%2F`` stays an escaped byte, not a separator); the path is compared as sent
    (no slashes merged, no dot segments removed); the query is not part of it; an
    absolute-form target is read for its path.
    """
    path = target.split("?", 1)[0]
    if path.startswith("http://"):
        path = "/" + path.removeprefix("http://").partition("/")[2]

    def unreserved(escape: re.Match[str]) -> str:
        char = chr(int(escape[1], 16))
        return char if char in _UNRESERVED else escape[0]

    return re.sub("%([0-9A-Fa-f]{2})", unreserved, path) in {"/mcp", "/mcp/"}


GATED = {target for target in SPELLINGS if _names_the_endpoint(target)}


def _gated(response: RawResponse) -> bool:
    """A refusal of the gate: JSON-RPC error and both server time headers."""
    return (
        response.status in {400, 404}
        and "x-mcp-server-received-at" in response.headers
        and "x-mcp-server-responded-at" in response.headers
        and "error" in response.json()
    )


@pytest.mark.parametrize("target", SPELLINGS)
def test_every_spelling_of_the_mcp_path_is_gated_or_not_found(port: int, target: str) -> None:
    legacy = exchange(port, request(target, LEGACY_INITIALIZE, headers={"Mcp-Method": ""}))
    unstamped = exchange(
        port,
        request(
            target,
            _hold(None),
            headers={"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"},
        ),
    )
    stamped = exchange(
        port, request(target, _hold(now_stamp()), headers=stamped_headers(now_stamp(), "x"))
    )
    for response in (legacy, unstamped, stamped):
        assert response is not None
        assert response.status != 200 or target in GATED, (target, response)
    assert legacy is not None
    assert unstamped is not None
    if target in GATED:
        assert _gated(legacy), (target, legacy)
        assert legacy.status == 400
        assert legacy.json()["error"]["data"]["supported"] == ["2026-07-28"]
        assert _gated(unstamped), (target, unstamped)
        assert unstamped.json()["error"]["data"]["code"] == "MISSING_CLIENT_TIMESTAMP"
    else:
        assert legacy.status in {400, 404}, (target, legacy)
        assert unstamped.status in {400, 404}, (target, unstamped)
        assert b"2025-06-18" not in legacy.body


def _discover_bytes(*, extra: dict[str, str] | None = None, sent: str | None = None) -> bytes:
    stamp = sent or now_stamp()
    return request(
        "/mcp",
        enveloped("server/discover", {}, stamp),
        headers={**stamped_headers(stamp, "server/discover"), **(extra or {})},
    )


def test_a_valid_discover_over_a_raw_socket_is_served(port: int) -> None:
    response = exchange(port, _discover_bytes())
    assert response is not None
    assert response.status == 200
    assert "x-mcp-server-responded-at" in response.headers


def assert_server_stamps(response: Any) -> None:
    """CONTRACT section 2: every response carries both server stamps (here: the refusal's time)."""
    received = response.headers["x-mcp-server-received-at"]
    responded = response.headers["x-mcp-server-responded-at"]
    for stamp in (received, responded):  # RFC 3339 UTC at millisecond precision
        assert format_instant(parse_instant(stamp)) == stamp
    assert parse_instant(received) <= parse_instant(responded)
    assert abs(datetime.now(UTC) - parse_instant(responded)) < timedelta(minutes=1)


def test_a_header_section_over_the_byte_limit_gets_431(port: int) -> None:
    big = {"X-Padding": "a" * MAX_HEADER_BYTES}
    response = exchange(port, _discover_bytes(extra=big))
    assert response is not None
    assert response.status == 431
    assert response.headers["connection"] == "close"
    assert_server_stamps(response)


def test_more_header_fields_than_allowed_get_431(port: int) -> None:
    many = {f"X-Field-{n}": "v" for n in range(MAX_HEADERS)}
    response = exchange(port, _discover_bytes(extra=many))
    assert response is not None
    assert response.status == 431


def _flood(port: int, start: bytes, filler: bytes, most: int) -> tuple[int, RawResponse | None]:
    """Send ``start``, then ``filler`` until the server closes or ``most`` bytes went out.

    Returns the filler bytes sent and the answer (None: closed or reset unanswered).
    """
    sent = 0
    with connect(port) as sock:
        sock.sendall(start)
        try:
            while sent < most:
                sock.sendall(filler)
                sent += len(filler)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused and closed while we were still sending
        try:
            return sent, read_response(sock)
        except ConnectionResetError:
            return sent, None


def test_a_header_that_never_ends_is_refused_without_being_buffered_whole(port: int) -> None:
    start = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Endless: "
    sent, response = _flood(port, start, b"a" * 4096, 64 * MAX_HEADER_BYTES)
    assert sent < 64 * MAX_HEADER_BYTES or response is not None
    if response is not None:
        assert response.status == 431


def test_headers_that_stop_arriving_get_408_and_a_close(port: int) -> None:
    with connect(port) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        response = read_response(sock)  # the server answers within its deadline
        assert response is not None
        assert response.status == 408
        assert_server_stamps(response)
        assert closed_by_server(sock)


def test_a_connection_that_sends_nothing_is_closed_after_the_header_deadline(port: int) -> None:
    with connect(port) as sock:
        response = read_response(sock)
        assert response is None or response.status == 408


def test_a_body_that_stops_arriving_gets_408_and_a_close(port: int) -> None:
    whole = _discover_bytes()
    with connect(port) as sock:
        sock.sendall(whole[:-10])  # headers and most of the body, then silence
        response = read_response(sock)
        assert response is not None
        assert response.status == 408
        assert closed_by_server(sock)


def test_an_idle_keep_alive_connection_is_closed(port: int) -> None:
    with connect(port) as sock:
        sock.sendall(_discover_bytes())
        first = read_response(sock)
        assert first is not None
        assert first.status == 200
        assert closed_by_server(sock)  # within the keep-alive time, no request sent


def test_connections_beyond_the_limit_get_503_with_retry_after() -> None:
    env = _env(
        HTTP_MAX_CONNECTIONS=str(MAX_CONNECTIONS),
        HTTP_HEADER_TIMEOUT_SECONDS="30",
        HTTP_KEEP_ALIVE_SECONDS="30",
    )
    with ServerProcess(env=env) as limited, ExitStack() as stack:
        port = int(limited.base_url.rsplit(":", 1)[1])
        idle = [stack.enter_context(connect(port)) for _ in range(MAX_CONNECTIONS)]
        for sock in idle:  # answered, so the server holds each one open (kept alive)
            sock.sendall(_discover_bytes())
            answered = read_response(sock)
            assert answered is not None
            assert answered.status == 200
        extra = stack.enter_context(connect(port))
        extra.sendall(_discover_bytes())
        response = read_response(extra)
        assert response is not None
        assert response.status == 503
        assert response.headers["retry-after"] == "1"
        assert_server_stamps(response)
        for sock in idle:
            sock.close()
        # Capacity is back once the idle connections are gone.
        recovered = None
        for _ in range(50):
            recovered = exchange(port, _discover_bytes())
            if recovered is not None and recovered.status == 200:
                break
        assert recovered is not None
        assert recovered.status == 200


def test_a_client_clock_far_off_is_refused_with_the_id_echoed(port: int) -> None:
    for sent in ("0001-01-01T00:00:00.000Z", "9999-12-31T23:59:59.999Z"):
        response = exchange(port, _discover_bytes(sent=sent))
        assert response is not None
        assert response.status == 400
        error = response.json()
        assert error["id"] == 7
        assert error["error"]["code"] == -32600
        assert error["error"]["data"]["code"] == "CLIENT_TIMESTAMP_OUT_OF_RANGE"
        assert error["error"]["data"]["toleranceSeconds"] == 300
        assert sent not in response.body.decode()


def test_an_unstamped_discover_names_the_stamping_commands(port: int) -> None:
    body = enveloped("server/discover", {}, None)
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}
    response = exchange(port, request("/mcp", body, headers=headers))
    assert response is not None
    assert response.status == 400
    error = response.json()["error"]
    assert error["data"]["code"] == "MISSING_CLIENT_TIMESTAMP"
    assert error["data"]["stampingCommands"] == [
        "expert-booking-mcp stdio --url URL",
        "expert-booking-mcp proxy --upstream URL",
    ]
    assert "expert-booking-mcp proxy --upstream URL" in error["message"]
    assert "expert-booking-mcp stdio --url URL" in error["message"]


@pytest.mark.parametrize("depth", [66, 990, 5000])
def test_json_nested_beyond_the_limit_is_refused_as_too_deep(port: int, depth: int) -> None:
    stamp = now_stamp()
    body = enveloped(
        "tools/call", {"name": "tool_catalog.search", "arguments": {"query": "DEEP"}}, stamp
    )
    text = json.dumps(body).replace('"DEEP"', "[" * depth + "]" * depth)
    headers = {**stamped_headers(stamp, "tools/call"), "Mcp-Name": "tool_catalog.search"}
    data = request("/mcp", text.encode(), headers=headers)
    response = exchange(port, data)
    assert response is not None
    assert response.status == 400, response
    error = response.json()
    # Past the parser's own recursion limit (~1000) the id cannot be read: then it is null.
    assert error["id"] == (7 if depth < 900 else None)
    assert error["error"]["data"] == {"code": "JSON_TOO_DEEP", "maxDepth": 64}
    assert "64" in error["error"]["message"]


def test_json_at_the_depth_limit_is_not_refused_for_depth(port: int) -> None:
    stamp = now_stamp()
    body = enveloped(
        "tools/call", {"name": "tool_catalog.search", "arguments": {"query": "DEEP"}}, stamp
    )
    # The body object, params, arguments: three levels before the arrays.
    text = json.dumps(body).replace('"DEEP"', "[" * 61 + "]" * 61)
    headers = {**stamped_headers(stamp, "tools/call"), "Mcp-Name": "tool_catalog.search"}
    data = request("/mcp", text.encode(), headers=headers)
    response = exchange(port, data)
    assert response is not None
    assert response.status == 200, response  # an envelope refusing the arguments


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({"Content-Type": "text/plain"}, 400, "UNSUPPORTED_CONTENT_TYPE"),
        ({"Content-Type": ""}, 400, "UNSUPPORTED_CONTENT_TYPE"),
        ({"Accept": "text/html"}, 406, "NOT_ACCEPTABLE"),
        ({"Accept": ""}, 406, "NOT_ACCEPTABLE"),
    ],
)
def test_media_type_refusals_are_json_rpc(
    port: int, headers: dict[str, str], status: int, code: str
) -> None:
    response = exchange(port, _discover_bytes(extra=headers))
    assert response is not None
    assert response.status == status
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["data"]["code"] == code


def test_a_bare_ipv6_host_is_refused_by_the_gate(port: int) -> None:
    stamp = now_stamp()
    body = enveloped("server/discover", {}, stamp)
    data = request("/mcp", body, headers=stamped_headers(stamp, "server/discover"), host="::1")
    response = exchange(port, data)
    assert response is not None
    assert response.status == 421
    assert response.json()["error"]["data"]["code"] == "HOST_NOT_ALLOWED"


def _names_reason(reason: str, line: str) -> bool:
    return f'"reason":"{reason}"' in line


def test_every_stderr_line_is_json_and_refusals_are_logged(
    server: ServerProcess, port: int
) -> None:
    exchange(port, request("/mcp", _hold(now_stamp()), host="evil.example"))
    exchange(port, _discover_bytes(extra={"X-Padding": "a" * MAX_HEADER_BYTES}))
    with connect(port) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        read_response(sock)
    for reason in ("HOST_NOT_ALLOWED", "HEADERS_TOO_LARGE", "HEADER_TIMEOUT"):
        server.wait_for_stderr(functools.partial(_names_reason, reason))
    lines = list(server.stderr_lines)
    records = [json.loads(line) for line in lines]  # raises on any plain-text line
    ready = [r for r in records if "MCP endpoint: http://127.0.0.1:" in r.get("message", "")]
    assert len(ready) == 1
    refusals = [r["refusal"] for r in records if "refusal" in r]
    host = next(r for r in reversed(refusals) if r["reason"] == "HOST_NOT_ALLOWED")
    assert host["status"] == 421
    assert host["refusedValue"] == "evil.example"
    assert host["httpMethod"] == "POST"
    assert "rpcMethod" not in host  # the body is not read before the Host is judged
    assert host["peer"].startswith("127.0.0.1:")
    assert all("ada@example.com" not in line for line in lines)
    assert all("a" * 300 not in line for line in lines)  # no header value beyond 200 chars


@pytest.mark.parametrize(
    ("call", "dropped", "code", "message"),
    [
        (
            ("tools/list", {}),
            "Mcp-Method",
            "MISSING_MCP_METHOD",
            "Missing Mcp-Method header: send Mcp-Method: tools/list (the body's method)",
        ),
        (
            ("tools/call", {"name": "tool_catalog.search", "arguments": {"query": "x"}}),
            "Mcp-Name",
            "MISSING_MCP_NAME",
            "Missing Mcp-Name header: send Mcp-Name: the body's params.name",
        ),
    ],
)
def test_a_missing_routing_header_is_named_missing(
    port: int, call: tuple[str, dict[str, Any]], dropped: str, code: str, message: str
) -> None:
    """The SDK would call it a header that 'does not match', without ``data.code``."""
    method, params = call
    stamp = now_stamp()
    headers = {**stamped_headers(stamp, method), "Mcp-Name": "tool_catalog.search", dropped: ""}
    response = exchange(port, request("/mcp", enveloped(method, params, stamp), headers=headers))
    assert response is not None
    assert response.status == 400
    error = response.json()["error"]
    assert error == {"code": -32020, "message": message, "data": {"code": code}}


def test_a_notification_without_routing_headers_is_still_acknowledged(port: int) -> None:
    """The SDK acknowledges a notification without Mcp-Method; the gate leaves it so."""
    stamp = now_stamp()
    body = enveloped("notifications/initialized", {}, stamp)
    del body["id"]
    headers = {**stamped_headers(stamp, "notifications/initialized"), "Mcp-Method": ""}
    response = exchange(port, request("/mcp", body, headers=headers))
    assert response is not None
    assert response.status == 202, response.body


@pytest.mark.parametrize(
    ("call", "rpc_error_code", "detail"),
    [
        (("booking.nope", {}, "booking.nope"), -32602, "Unknown tool: booking.nope"),
        (("tool_catalog.search", {"query": "x"}, "tool_catalog.read"), -32020, "mcp-name header"),
    ],
    ids=["unknown-tool", "header-contradicts-body"],
)
def test_a_call_the_sdk_refuses_writes_one_refusal_line(
    server: ServerProcess,
    port: int,
    call: tuple[str, dict[str, Any], str],
    rpc_error_code: int,
    detail: str,
) -> None:
    """Past the gate, a 4xx the SDK answers is logged as the gate's own refusals are."""
    name, arguments, mcp_name = call
    stamp = now_stamp()
    body = enveloped("tools/call", {"name": name, "arguments": arguments}, stamp)
    headers = {**stamped_headers(stamp, "tools/call"), "Mcp-Name": mcp_name}
    before = set(server.stderr_lines)
    response = exchange(port, request("/mcp", body, headers=headers))
    assert response is not None
    assert response.status == 400
    assert response.json()["error"]["code"] == rpc_error_code
    line = server.wait_for_stderr(
        lambda text: text not in before and f'"rpcErrorCode":{rpc_error_code}' in text
    )
    refusal = json.loads(line)["refusal"]
    assert refusal["status"] == 400
    assert refusal["reason"] == "SDK_REFUSED"
    assert refusal["rpcMethod"] == "tools/call"
    assert refusal["detail"].startswith(detail)
    assert refusal["peer"].startswith("127.0.0.1:")
    # A call that succeeds after it writes its action line and no refusal line; by then the
    # refused call's lines are all written: one refusal line, not more.
    span = uuid.uuid4()
    search = {"query": "after a refusal", "limit": 1, "requestSpanId": str(span)}
    stamp = now_stamp()
    body = enveloped("tools/call", {"name": "tool_catalog.search", "arguments": search}, stamp)
    headers = {**stamped_headers(stamp, "tools/call"), "Mcp-Name": "tool_catalog.search"}
    ok = exchange(port, request("/mcp", body, headers=headers))
    assert ok is not None
    assert ok.status == 200
    server.wait_for_stderr(lambda text: f'"trace_id":"{span.hex}"' in text)
    new = [text for text in server.stderr_lines if text not in before]
    assert sum('"SDK_REFUSED"' in text for text in new) == 1, new


def test_every_action_line_carries_the_observed_client_clock_skew(
    server: ServerProcess, port: int
) -> None:
    stamp = now_stamp()
    span = uuid.uuid4()
    arguments = {"query": "skew probe", "limit": 1, "requestSpanId": str(span)}
    body = enveloped("tools/call", {"name": "tool_catalog.search", "arguments": arguments}, stamp)
    headers = {**stamped_headers(stamp, "tools/call"), "Mcp-Name": "tool_catalog.search"}
    response = exchange(port, request("/mcp", body, headers=headers))
    assert response is not None
    assert response.status == 200
    received = response.headers["x-mcp-server-received-at"]
    line = server.wait_for_stderr(lambda text: f'"trace_id":"{span.hex}"' in text)
    skew = json.loads(line)["clientSkewMs"]
    assert isinstance(skew, int)
    expected = (datetime.fromisoformat(received) - datetime.fromisoformat(stamp)) // timedelta(
        milliseconds=1
    )
    assert skew == expected


def test_a_request_answered_before_its_body_gets_no_second_answer(port: int) -> None:
    head = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json\r\nContent-Length: 40000\r\n\r\n{"
    )
    with connect(port) as sock:
        sock.sendall(head)  # declared over the 32 KiB body limit, then silence
        first = read_response(sock)
        assert first is not None
        assert first.status == 413
        rest = b""
        try:
            while chunk := sock.recv(65536):
                rest += chunk
        except ConnectionResetError:
            pass
        assert rest == b""  # closed at the body deadline, no 408 after the 413


# --- below ASGI: trailers, pipelining, unread answers, descriptors, malformed HTTP -------------


def _chunked_discover(
    *, trailers: bytes, drop: tuple[str, ...] = (), coding: str = "chunked"
) -> bytes:
    """A discover whose body is one chunk, then ``trailers`` (whole lines) and the final CRLF."""
    stamp = now_stamp()
    body = json.dumps(enveloped("server/discover", {}, stamp)).encode()
    headers = {
        **stamped_headers(stamp, "server/discover"),
        "Content-Length": "",
        "Transfer-Encoding": coding,
        **dict.fromkeys(drop, ""),
    }
    head = request("/mcp", b"", headers=headers, host="" if "Host" in drop else "127.0.0.1")
    return head + b"%x\r\n%s\r\n0\r\n" % (len(body), body) + trailers + b"\r\n"


def test_trailer_fields_are_never_read_as_headers(port: int) -> None:
    """RFC 9110 6.5.1: a trailer cannot supply a field the gate checks in the header section."""
    versioned = _chunked_discover(
        trailers=b"MCP-Protocol-Version: 2026-07-28\r\n", drop=("MCP-Protocol-Version",)
    )
    response = exchange(port, versioned)
    assert response is not None
    assert (response.status, response.json()["error"]["code"]) == (400, -32020)

    hosted = _chunked_discover(trailers=b"Host: 127.0.0.1\r\n", drop=("Host",))
    response = exchange(port, hosted)
    assert response is not None
    assert response.status == 421

    plain = exchange(port, _chunked_discover(trailers=b"Host: evil.example\r\n"))
    assert plain is not None
    assert plain.status == 200  # dropped, not judged: the header section's Host stands


@pytest.mark.parametrize(
    ("tail", "filler", "status"),
    [
        (b"", b"X-Trailer: " + b"a" * 1000 + b"\r\n", 431),  # more fields than allowed
        (b"X-Endless: ", b"a" * 4096, 413),  # one value that never ends
    ],
)
def test_trailers_without_end_are_refused_before_they_are_held(
    port: int, tail: bytes, filler: bytes, status: int
) -> None:
    start = _chunked_discover(trailers=b"")[:-2] + tail  # the final CRLF never comes
    sent, response = _flood(port, start, filler, 64 * 1024 * 1024)
    assert sent < 8 * 1024 * 1024
    assert response is None or response.status == status


def _responses(sock: socket.socket, count: int) -> list[RawResponse]:
    """``count`` responses read off one connection in order (each with Content-Length)."""
    data = b""
    found: list[RawResponse] = []
    while len(found) < count:
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0:
            head = data[:head_end].decode("latin-1").split("\r\n")
            fields = dict(line.lower().split(": ", 1) for line in head[1:])
            end = head_end + 4 + int(fields["content-length"])
            if len(data) >= end:
                status = int(head[0].split()[1])
                found.append(RawResponse(status, fields, data[head_end + 4 : end]))
                data = data[end:]
                continue
        chunk = sock.recv(65536)
        assert chunk, f"closed after {len(found)} of {count} responses"
        data += chunk
    return found


def _tools_list(identifier: int) -> bytes:
    stamp = now_stamp()
    body = enveloped("tools/list", {}, stamp) | {"id": identifier}
    return request("/mcp", body, headers=stamped_headers(stamp, "tools/list"))


def test_pipelined_requests_are_all_answered_in_order(port: int) -> None:
    count = 200  # more than one parsing slice holds
    with connect(port) as sock:
        sock.sendall(b"".join(_tools_list(n) for n in range(count)))
        answers = _responses(sock, count)
    assert [a.status for a in answers] == [200] * count
    assert [a.json()["id"] for a in answers] == list(range(count))


def _reading_little(port: int) -> socket.socket:
    """A connection whose receive buffer (4 KiB) fills at once: a client that does not read."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    return sock


def test_a_client_that_never_reads_its_answers_is_disconnected(
    server: ServerProcess, port: int
) -> None:
    """Pipelined requests from a client that reads nothing: bounded, then closed."""
    blob = b"".join(_tools_list(n) for n in range(2000))
    with _reading_little(port) as sock:
        sock.settimeout(0.2)
        deadline = time.monotonic() + 20
        closed = False
        while not closed and time.monotonic() < deadline:
            try:
                sock.send(blob)
            except TimeoutError:
                continue  # buffers full: the server reads nothing more until we read
            except (BrokenPipeError, ConnectionResetError):
                closed = True
        assert closed
    assert server.wait_for_stderr(functools.partial(_names_reason, "RESPONSE_UNREAD"))


def test_connections_beyond_the_refusal_band_are_closed_at_once() -> None:
    env = _env(HTTP_MAX_CONNECTIONS=str(MAX_CONNECTIONS), HTTP_HEADER_TIMEOUT_SECONDS="30")
    hard = MAX_CONNECTIONS + REFUSING_CONNECTIONS
    with ServerProcess(env=env) as limited, ExitStack() as stack:
        port = int(limited.base_url.rsplit(":", 1)[1])
        opened = [stack.enter_context(connect(port)) for _ in range(hard + 5)]
        closed: set[int] = set()
        deadline = time.monotonic() + 10
        while len(closed) < 5 and time.monotonic() < deadline:
            readable, _, _ = select.select([s for s in opened if id(s) not in closed], [], [], 1)
            for sock in readable:
                with contextlib.suppress(ConnectionResetError):
                    assert sock.recv(1) == b""  # closed unanswered
                closed.add(id(sock))
        assert len(closed) == 5
        readable, _, _ = select.select([s for s in opened if id(s) not in closed], [], [], 0.2)
        assert readable == []  # the others wait for their request (or their 503)
        limited.wait_for_stderr(functools.partial(_names_reason, "TOO_MANY_CONNECTIONS"))


def test_malformed_http_gets_a_stamped_400_logged_as_a_refusal(
    server: ServerProcess, port: int
) -> None:
    responses = [exchange(port, b"FOO / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") for _ in range(30)]
    for response in responses:
        assert response is not None
        assert response.status == 400
        assert response.headers["connection"] == "close"
        assert_server_stamps(response)
    server.wait_for_stderr(functools.partial(_names_reason, "MALFORMED_HTTP"))
    assert not [line for line in server.stderr_lines if "Invalid HTTP request" in line]


def test_an_absolute_form_target_is_judged_by_its_authority(port: int) -> None:
    """RFC 9112 3.2.2: the target's authority is the host, whatever the Host field says."""
    stamp = now_stamp()
    body = enveloped("server/discover", {}, stamp)
    headers = stamped_headers(stamp, "server/discover")
    foreign = exchange(port, request("http://evil.example/mcp", body, headers=headers))
    assert foreign is not None
    assert foreign.status == 421
    own = request(f"http://127.0.0.1:{port}/mcp", body, headers=headers, host="evil.example")
    answered = exchange(port, own)
    assert answered is not None
    assert answered.status == 200


def test_a_client_resetting_mid_answer_is_no_application_error(
    server: ServerProcess, port: int
) -> None:
    blob = b"".join(_tools_list(n) for n in range(300))
    for _ in range(5):
        sock = _reading_little(port)
        sock.settimeout(0.5)
        with contextlib.suppress(TimeoutError):
            sock.sendall(blob)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # a reset while answers are being written
    answered = exchange(port, _discover_bytes())  # the server went on
    assert answered is not None
    assert answered.status == 200
    assert not [line for line in server.stderr_lines if "Exception in ASGI" in line]


def test_a_request_answered_before_its_body_still_ends_with_the_keep_alive(port: int) -> None:
    """The app's 413 comes before the body; once the body is in, the connection idles out."""
    stamp = now_stamp()
    headers = {**stamped_headers(stamp, "server/discover"), "Content-Length": "40000"}
    with connect(port) as sock:
        sock.sendall(request("/mcp", b"", headers=headers))
        refused = read_response(sock)
        assert refused is not None
        assert refused.status == 413
        sock.sendall(b" " * 40000)  # the announced body, after its answer
        assert closed_by_server(sock)  # within the keep-alive time, not never


def test_a_late_pipelined_body_never_answers_in_an_earlier_requests_place(
    server: ServerProcess, port: int
) -> None:
    """Request A waits for the database; B's body is late: B's 408 must not become A's answer."""
    stamp = now_stamp()
    named = {**stamped_headers(stamp, "tools/call"), "Mcp-Name": "tool_catalog.call"}
    hold = request("/mcp", _hold(stamp), headers=named)
    unfinished = {**stamped_headers(stamp, "tools/list"), "Content-Length": "5"}
    late = request("/mcp", b"", headers=unfinished)
    writer = sqlite3.connect(server.db_path, isolation_level=None, timeout=5)
    try:
        writer.execute("BEGIN IMMEDIATE")  # A's write waits for this lock
        with connect(port) as sock:
            sock.sendall(hold + late)  # B's body never comes: its deadline passes first
            server.wait_for_stderr(functools.partial(_names_reason, "BODY_TIMEOUT"))
            writer.execute("ROLLBACK")  # A goes on; its answer has nowhere to go
            first = read_response(sock)
    finally:
        writer.close()
    assert first is None or first.status == 200  # never a 408 in A's place


def test_an_upgrade_request_is_refused_in_plain_words_without_warnings(
    server: ServerProcess, port: int
) -> None:
    """httptools cannot parse past an upgrade: the body would be lost, so no request runs."""
    upgrade = {"Connection": "Upgrade", "Upgrade": "h2c"}
    for _ in range(3):
        refused = exchange(port, _discover_bytes(extra=upgrade))
        assert refused is not None
        assert refused.status == 400
        assert (
            refused.body
            == b"Protocol upgrades are not supported: send the request without Upgrade."
        )
        assert_server_stamps(refused)
    server.wait_for_stderr(functools.partial(_names_reason, "UPGRADE_UNSUPPORTED"))
    assert not [line for line in server.stderr_lines if "Unsupported upgrade" in line]


def test_a_target_uvicorn_cannot_parse_never_answers_in_an_earlier_requests_place(
    port: int,
) -> None:
    """llhttp takes ``http://a:99999999/mcp``; uvicorn's URL parser refuses it afterwards."""
    bad = b"GET http://a:99999999/mcp HTTP/1.1\r\nHost: a\r\n\r\n"
    with connect(port) as sock:
        sock.sendall(_tools_list(41) + bad)
        first = read_response(sock)
    assert first is None or (first.status, first.json()["id"]) == (200, 41)


def _server_send_queue(port: int, client_port: int) -> int | None:
    """Unsent bytes of the server's end of a loopback connection; None once it is closed."""
    local, remote = f"0100007F:{port:04X}", f"0100007F:{client_port:04X}"
    for line in Path("/proc/net/tcp").read_text(encoding="ascii").splitlines()[1:]:
        fields = line.split()
        if fields[1] == local and fields[2] == remote and fields[3] == "01":  # ESTABLISHED
            return int(fields[4].split(":")[0], 16)
    return None


def _settled_send_queue(port: int, client_port: int, before: int) -> int | None:
    """The send queue once it stops moving after a request (1 s without change: no growth).

    Polled with a deadline: a kernel counter has no event to wait on.
    """
    deadline = time.monotonic() + 10
    last: int | None = before
    still_since = time.monotonic()
    while time.monotonic() < deadline:
        now = _server_send_queue(port, client_port)
        if now != last:
            last, still_since = now, time.monotonic()
        elif time.monotonic() - still_since > (0.05 if now != before else 1.0):
            return now
        time.sleep(0.01)
    return last


def test_a_close_that_cannot_drain_to_a_client_reading_nothing_is_dropped(
    server: ServerProcess, port: int
) -> None:
    """An answer stuck below the write buffer's high-water mark: the idle close must not wait
    for it forever (the connection stayed open and counted)."""
    stamp = now_stamp()
    read = {"uri": "tool://booking.confirm_booking", "offset": 0, "limit": 200}
    params = {"name": "tool_catalog.read", "arguments": read}
    headers = {**stamped_headers(stamp, "tools/call"), "Mcp-Name": "tool_catalog.read"}
    ask = request("/mcp", enveloped("tools/call", params, stamp), headers=headers)
    with _reading_little(port) as sock:
        client_port = sock.getsockname()[1]
        queued = _server_send_queue(port, client_port) or 0
        for _ in range(1000):  # until an answer stays in the server's own buffer (~4 MB kernel)
            sock.sendall(ask)
            settled = _settled_send_queue(port, client_port, queued)
            if settled is None or settled == queued:
                break
            queued = settled
        else:
            pytest.fail("the server's socket kept taking answers: its send buffer never filled")
        assert _server_send_queue(port, client_port) is not None  # open, answer unread
        # Keep-alive 1 s, then the close's 1 s: the drop's line, and the connection is gone.
        peer = f'"peer":"127.0.0.1:{client_port}"'
        server.wait_for_stderr(
            lambda line: _names_reason("RESPONSE_UNREAD", line) and peer in line, timeout=15
        )
        assert _server_send_queue(port, client_port) is None


def test_a_version_other_than_http_1_is_refused_with_505(port: int) -> None:
    discover = _discover_bytes().replace(b" HTTP/1.1\r\n", b" HTTP/2.0\r\n", 1)
    response = exchange(port, discover)
    assert response is not None
    assert response.status == 505
    assert_server_stamps(response)


def test_a_transfer_coding_other_than_chunked_is_refused_with_501(port: int) -> None:
    """RFC 9112 6.1: llhttp decodes "gzip, chunked" as chunked, gzip bytes and all."""
    response = exchange(port, _chunked_discover(trailers=b"", coding="gzip, chunked"))
    assert response is not None
    assert response.status == 501
    assert_server_stamps(response)
    plain = exchange(port, _chunked_discover(trailers=b""))  # chunked alone is served
    assert plain is not None
    assert plain.status == 200
