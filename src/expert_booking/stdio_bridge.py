"""``expert-booking-mcp stdio --url URL``: the server for hosts that only start a command.

Desktop hosts configured with a command speak MCP over stdin/stdout, most of them still the
2025-11-25 ``initialize`` lifecycle. The bridge reads their JSON-RPC messages (one per line),
and relays each request to the HTTP server as a 2026-07-28 request: the ``_meta`` envelope
(protocol version, the capabilities and client info the host declared at ``initialize``) is
added when the host did not send one, the routing headers (``MCP-Protocol-Version``,
``Mcp-Method``, ``Mcp-Name``) are set as the SDK sets them, and the client time is stamped at the
real send boundary by the project's client adapter (:class:`ClientSentAtTransport`). The
server's answer, result or error, is written back unchanged, envelopes included.

Answered locally, because 2026-07-28 has no counterpart: ``initialize`` (from the server's
``server/discover``: its capabilities, server info and instructions), ``ping`` (an empty result:
2025-11-25 has every receiver answer it, whatever it declared) and every notification from the host
(``notifications/initialized`` above all; the 2026 HTTP wire carries none from the client).
``logging/setLevel`` is relayed like any other request: 2025-11-25 ties it to the ``logging``
capability, which only the server can declare (``initialize`` passes on what it does), so the host
gets the server's own answer (-32601 Method not found from a server without it), never a success
for log messages nobody will send. A server that cannot be reached gets a JSON-RPC error naming the
URL and the cause; a server's own refusal is passed through as it came. A request the bridge cannot
relay as it is (``params`` or ``_meta`` not an object, a method or protocol version that cannot be
a header) gets -32600 naming the member, and no one message's failure ends the relay of the others
in flight. Lines and the server's answers are parsed as strictly as the server parses bodies
(``edge.json_text.parse_strict``): a lone surrogate or a ``NaN``, which a lax parser takes but no
UTF-8 line can carry, is -32700 from the host and "no JSON-RPC message" from the server.

The bridge stamps on the host's behalf, so the timestamp ordering it lets a host check starts at
the bridge, not at the host (NOTES.md). Messages are framed by hand (one JSON text per line, as
the stdio transport defines) rather than through the SDK's stdio server, which would parse them
into models and re-serialize them: results must reach the host byte for byte as the server meant.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import httpx2
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
)
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    LATEST_MODERN_VERSION,
)

from expert_booking.addresses import shown_url
from expert_booking.client import DEFAULT_TIMEOUT, ClientSentAtTransport
from expert_booking.edge.json_text import parse_strict
from expert_booking.version import DISTRIBUTION

logger = logging.getLogger("expert_booking.stdio")

PROG: Final = f"{DISTRIBUTION} stdio"
UNREACHABLE: Final = INTERNAL_ERROR
"""JSON-RPC "internal error": the bridge could not get an answer from the server."""
LOCAL_EMPTY_RESULTS: Final = frozenset({"ping"})

Message = dict[str, Any]
Post = Callable[[Message, dict[str, str]], Awaitable[httpx2.Response]]


_NOT_JSON: Final = (
    "Parse error: a line was not one JSON text as RFC 8259 defines it (UTF-8; no NaN or "
    "Infinity; no lone surrogate escapes, which no UTF-8 text can carry)"
)


class BridgeError(Exception):
    """The server gave no JSON-RPC answer; ``message`` is what the host is told."""


def _error(request_id: Any, code: int, message: str, data: Any = None) -> Message:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _malformed(message: Message) -> str | None:
    """Why a request cannot be relayed as it is (``None``: it can).

    MCP params are an object, its ``_meta`` an object, and what becomes an HTTP header (the
    method, a protocol version the host sent) is printable ASCII: anything else would make the
    relay itself fail, so the host is told which member is wrong instead.
    """
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    # Absent: the bridge adds its own. Sent, even as null: it becomes the version header.
    version = meta.get(PROTOCOL_VERSION_META_KEY, "") if isinstance(meta, dict) else ""
    problems = (
        (not _header_safe(message["method"]), "method must be printable ASCII"),
        (params is not None and not isinstance(params, dict), "params must be an object"),
        (meta is not None and not isinstance(meta, dict), "params._meta must be an object"),
        (
            not (isinstance(version, str) and _header_safe(version)),
            f"params._meta[{PROTOCOL_VERSION_META_KEY!r}] must be a protocol version string",
        ),
    )
    return next((problem for failed, problem in problems if failed), None)


def _header_safe(text: str) -> bool:
    return text.isascii() and text.isprintable()


def _not_a_request(message: Any) -> Message | None:
    """Answers from the host are dropped (the bridge asks nothing); anything else is invalid."""
    if isinstance(message, dict) and ("result" in message or "error" in message):
        return None
    request_id = message.get("id") if isinstance(message, dict) else None
    return _error(request_id, INVALID_REQUEST, "Invalid Request: one JSON-RPC message per line")


@dataclass
class Bridge:
    """The relay's state: what the host declared at ``initialize``, and how to post upstream."""

    url: str
    post: Post
    client_info: dict[str, Any] | None = None
    client_capabilities: dict[str, Any] = field(default_factory=dict)

    async def handle(self, message: Any) -> Message | None:
        """The answer to one message from the host (``None``: nothing to write)."""
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            return _not_a_request(message)
        method: str = message["method"]
        if "id" not in message:
            return None  # notifications: none has a 2026-07-28 HTTP counterpart
        request_id = message["id"]
        problem = _malformed(message)
        if problem is not None:
            return _error(request_id, INVALID_REQUEST, f"Invalid Request: {problem}")
        if method == "initialize":
            return await self._initialize(request_id, message.get("params") or {})
        if method in LOCAL_EMPTY_RESULTS:
            return {"jsonrpc": "2.0", "id": request_id, "result": {}}
        return await self._answer(message)

    async def _initialize(self, request_id: Any, params: dict[str, Any]) -> Message:
        """The 2025-era handshake, answered from the server's ``server/discover``."""
        info = params.get("clientInfo")
        self.client_info = info if isinstance(info, dict) else None
        capabilities = params.get("capabilities")
        self.client_capabilities = capabilities if isinstance(capabilities, dict) else {}
        discover = {"jsonrpc": "2.0", "id": request_id, "method": "server/discover", "params": {}}
        answer = await self._answer(discover)
        if "result" not in answer:
            return answer
        found = answer["result"]
        server_info = (found.get("_meta") or {}).get(SERVER_INFO_META_KEY)
        requested = params.get("protocolVersion")
        version = (
            requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
        )
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": found.get("capabilities", {}),
            "serverInfo": server_info or {"name": DISTRIBUTION, "version": "unknown"},
        }
        if found.get("instructions") is not None:
            result["instructions"] = found["instructions"]
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    async def _answer(self, message: Message) -> Message:
        """The server's answer to ``message``, or the error telling why there is none."""
        try:
            return await self._relay(message)
        except BridgeError as exc:
            return _error(message["id"], UNREACHABLE, str(exc), {"url": shown_url(self.url)})

    def _enveloped(self, message: Message) -> Message:
        """``message`` with the 2026 ``_meta`` envelope, unless the host sent its own."""
        params = dict(message.get("params") or {})
        meta = dict(params.get("_meta") or {})
        if PROTOCOL_VERSION_META_KEY not in meta:
            meta[PROTOCOL_VERSION_META_KEY] = LATEST_MODERN_VERSION
            meta.setdefault(CLIENT_CAPABILITIES_META_KEY, self.client_capabilities)
            if self.client_info is not None:
                meta.setdefault(CLIENT_INFO_META_KEY, self.client_info)
        params["_meta"] = meta
        return {**message, "params": params}

    async def _relay(self, message: Message) -> Message:
        """POST one request to the server and return its JSON-RPC answer as it came.

        Raises:
            BridgeError: no connection, or an answer that is not a JSON-RPC message.
        """
        body = self._enveloped(message)
        method = body["method"]
        headers = {
            MCP_PROTOCOL_VERSION_HEADER: body["params"]["_meta"][PROTOCOL_VERSION_META_KEY],
            MCP_METHOD_HEADER: method,
        }
        name_key = NAME_BEARING_METHODS.get(method)
        if name_key is not None and isinstance(name := body["params"].get(name_key), str):
            headers[MCP_NAME_HEADER] = encode_header_value(name)
        try:
            response = await self.post(body, headers)
        except httpx2.HTTPError as exc:
            cause = str(exc) or type(exc).__name__
            raise BridgeError(
                f"{PROG}: cannot reach the MCP server at {shown_url(self.url)} ({cause}); is "
                "`expert-booking-mcp serve` running there, and is --url right?"
            ) from exc
        try:
            answer = parse_strict(response.content)
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or not ({"result", "error"} & answer.keys()):
            text = response.text[:200]
            raise BridgeError(
                f"{PROG}: the server at {shown_url(self.url)} answered HTTP {response.status_code} "
                f"without a JSON-RPC message: {text!r}"
            )
        return answer


async def serve_stdio(bridge: Bridge) -> None:
    """Relay host messages from stdin, writing answers to stdout, until stdin closes."""
    stdin = anyio.wrap_file(sys.stdin.buffer)
    stdout = anyio.wrap_file(sys.stdout.buffer)
    writing = anyio.Lock()

    async def answer(message: Any) -> None:
        request_id = message.get("id") if isinstance(message, dict) else None
        try:
            reply = await bridge.handle(message)
        except Exception:  # one message's failure must not end the relay of all the others
            logger.exception("%s: a message could not be relayed", PROG)
            reply = _error(request_id, UNREACHABLE, f"{PROG}: the message could not be relayed")
        if reply is None:
            return
        try:
            line = _line(reply)
        except (TypeError, ValueError):  # both directions are parsed strictly: a bug
            logger.exception("%s: an answer could not be written", PROG)
            line = _line(_error(request_id, UNREACHABLE, f"{PROG}: an answer could not be written"))
        async with writing:
            await stdout.write(line)
            await stdout.flush()

    async with anyio.create_task_group() as tasks:
        async for raw in stdin:
            if not raw.strip():
                continue
            try:
                message = parse_strict(raw)
            except ValueError:
                tasks.start_soon(_write_parse_error, stdout, writing)
                continue
            tasks.start_soon(answer, message)


def _line(message: Message) -> bytes:
    """One message as the stdio transport frames it: compact UTF-8 JSON and a newline."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


async def _write_parse_error(stdout: Any, writing: anyio.Lock) -> None:
    line = _line(_error(None, PARSE_ERROR, _NOT_JSON))
    async with writing:
        await stdout.write(line)
        await stdout.flush()


def run(url: str) -> int:
    """``expert-booking-mcp stdio``: relay between this process's stdio and ``url``."""
    if not url.startswith(("http://", "https://")):
        sys.stderr.write(
            f"{PROG}: --url must be the server's http(s) MCP URL, got {shown_url(url)!r}\n"
        )
        return 2

    async def main() -> None:
        async with httpx2.AsyncClient(
            transport=ClientSentAtTransport(), timeout=DEFAULT_TIMEOUT, trust_env=False
        ) as http:

            async def post(body: Message, headers: dict[str, str]) -> httpx2.Response:
                return await http.post(
                    url,
                    json=body,
                    headers={**headers, "accept": "application/json, text/event-stream"},
                )

            sys.stderr.write(f"{PROG}: relaying stdio to {shown_url(url)}\n")
            sys.stderr.flush()
            await serve_stdio(Bridge(url, post))

    anyio.run(main)
    return 0
