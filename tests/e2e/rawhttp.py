"""Raw HTTP/1.1 over a socket: the bytes a hostile or careless client sends, nothing normalised."""

from __future__ import annotations

import json
import socket
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from expert_booking.domain.model import format_instant

READ_SECONDS = 10.0


@dataclass(frozen=True)
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def connect(port: int, address: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection((address, port), timeout=READ_SECONDS)
    sock.settimeout(READ_SECONDS)
    return sock


def read_response(sock: socket.socket) -> RawResponse | None:
    """One response, or None when the server closed the connection without answering."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return RawResponse(int(status_line.split()[1]), headers, body[:length])


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes the connection (reads until EOF, within the socket timeout)."""
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    return True


def now_stamp() -> str:
    return format_instant(datetime.now(UTC))


def request(
    target: str,
    body: dict[str, Any] | bytes,
    *,
    method: str = "POST",
    headers: dict[str, str] | None = None,
    host: str = "127.0.0.1",
) -> bytes:
    """The bytes of one request; ``headers`` replace the defaults (a value of "" drops one)."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    fields = {
        "Host": host,
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Content-Length": str(len(content)),
        **(headers or {}),
    }
    lines = [f"{method} {target} HTTP/1.1", *(f"{k}: {v}" for k, v in fields.items() if v)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + content


def exchange(port: int, data: bytes, address: str = "127.0.0.1") -> RawResponse | None:
    with connect(port, address) as sock:
        sock.sendall(data)
        return read_response(sock)


def stamped_headers(sent: str, method: str) -> dict[str, str]:
    return {
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
        "x-mcp-client-sent-at": sent,
    }


def enveloped(method: str, params: dict[str, Any], sent: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    if sent is not None:
        meta["clientSentAt"] = sent
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": meta}}


def call_tool(
    port: int,
    name: str,
    arguments: dict[str, Any],
    *,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One stamped ``tools/call`` over its own connection; the tool result's envelope.

    ``headers`` are added to the stamped ones (``X-Forwarded-For``, ``Forwarded``...).
    """
    sent = now_stamp()
    body = enveloped("tools/call", {"name": name, "arguments": arguments}, sent)
    fields = {**stamped_headers(sent, "tools/call"), "Mcp-Name": name, **(headers or {})}
    response = exchange(port, request("/mcp", body, headers=fields))
    assert response is not None
    assert response.status == 200, response
    envelope: dict[str, Any] = response.json()["result"]["structuredContent"]
    return envelope


def call_logical(
    port: int, name: str, arguments: dict[str, Any], *, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """``tool_catalog.call`` of logical tool ``name`` (see :func:`call_tool`)."""
    call = {"name": name, "arguments": arguments, "requestSpanId": str(uuid.uuid4())}
    return call_tool(port, "tool_catalog.call", call, headers=headers)
