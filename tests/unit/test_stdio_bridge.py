"""The bridge's relay rules with a fake upstream: envelope, headers, local answers, failures."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from typing import Any

import httpx2
import pytest

from expert_booking.stdio_bridge import Bridge, serve_stdio

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:3000/mcp"
PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"


class Upstream:
    """Records what the bridge posts and answers with a fixed response."""

    def __init__(self, response: httpx2.Response | Exception) -> None:
        self.response = response
        self.posted: list[tuple[dict[str, Any], dict[str, str]]] = []

    async def __call__(self, body: dict[str, Any], headers: dict[str, str]) -> httpx2.Response:
        self.posted.append((body, headers))
        if isinstance(self.response, Exception):
            raise self.response
        return self.response


def ok(result: dict[str, Any], request_id: int = 1) -> httpx2.Response:
    return httpx2.Response(200, json={"jsonrpc": "2.0", "id": request_id, "result": result})


async def test_a_2025_hosts_request_gets_the_envelope_it_declared_at_initialize() -> None:
    upstream = Upstream(ok({"capabilities": {"tools": {}}, "_meta": {}}))
    bridge = Bridge(URL, upstream)
    capabilities: dict[str, Any] = {"elicitation": {}}
    await bridge.handle(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": capabilities,
                "clientInfo": {"name": "desk", "version": "1"},
            },
        }
    )
    upstream.response = ok({"content": []}, 2)
    call = {"name": "tool_catalog.search", "arguments": {"query": "x", "limit": 1}}
    answer = await bridge.handle(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}
    )
    assert answer == {"jsonrpc": "2.0", "id": 2, "result": {"content": []}}
    body, headers = upstream.posted[-1]
    assert body["params"]["arguments"] == call["arguments"]
    assert body["params"]["_meta"] == {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "desk", "version": "1"},
    }
    assert headers == {
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "tool_catalog.search",
    }


async def test_a_2026_hosts_own_envelope_is_forwarded_untouched() -> None:
    upstream = Upstream(ok({"tools": []}))
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
        "com.example/note": "kept",
    }
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
    await Bridge(URL, upstream).handle(message)
    assert upstream.posted[0][0]["params"]["_meta"] == meta


async def test_initialize_echoes_a_handshake_version_and_takes_the_rest_from_discover() -> None:
    discover = {
        "capabilities": {"tools": {"listChanged": False}},
        "instructions": "Use the catalog.",
        "_meta": {
            "io.modelcontextprotocol/serverInfo": {"name": "expert-booking-mcp", "version": "9"}
        },
    }
    upstream = Upstream(ok(discover, 7))
    for requested, expected in (("2025-03-26", "2025-03-26"), ("2099-01-01", "2025-11-25")):
        answer = await Bridge(URL, upstream).handle(
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "initialize",
                "params": {"protocolVersion": requested},
            }
        )
        assert answer == {
            "jsonrpc": "2.0",
            "id": 7,
            "result": {
                "protocolVersion": expected,
                "capabilities": discover["capabilities"],
                "serverInfo": {"name": "expert-booking-mcp", "version": "9"},
                "instructions": "Use the catalog.",
            },
        }
    assert upstream.posted[0][0]["method"] == "server/discover"


async def test_ping_and_notifications_never_reach_the_server() -> None:
    upstream = Upstream(ok({}))
    bridge = Bridge(URL, upstream)
    answer = await bridge.handle({"jsonrpc": "2.0", "id": "a", "method": "ping"})
    assert answer == {"jsonrpc": "2.0", "id": "a", "result": {}}
    for method in ("notifications/initialized", "notifications/cancelled"):
        assert await bridge.handle({"jsonrpc": "2.0", "method": method}) is None
    assert upstream.posted == []


async def test_set_level_is_relayed_and_the_servers_refusal_comes_back() -> None:
    """Only the server can declare the ``logging`` capability that ``logging/setLevel`` needs."""
    refusal = {
        "jsonrpc": "2.0",
        "id": "a",
        "error": {"code": -32601, "message": "Method not found", "data": "logging/setLevel"},
    }
    upstream = Upstream(httpx2.Response(404, json=refusal))
    message = {
        "jsonrpc": "2.0",
        "id": "a",
        "method": "logging/setLevel",
        "params": {"level": "info"},
    }
    assert await Bridge(URL, upstream).handle(message) == refusal
    ((body, headers),) = upstream.posted
    assert body["params"]["level"] == "info"
    assert headers["mcp-method"] == "logging/setLevel"


async def test_a_servers_refusal_passes_through_unchanged() -> None:
    refusal = {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32600, "message": "no", "data": {"code": "MISSING_CLIENT_TIMESTAMP"}},
    }
    upstream = Upstream(httpx2.Response(400, json=refusal))
    answer = await Bridge(URL, upstream).handle({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    assert answer == refusal


async def test_no_connection_and_non_json_answers_are_errors_naming_the_url() -> None:
    for response, words in (
        (httpx2.ConnectError("connection refused"), "cannot reach the MCP server at"),
        (httpx2.Response(502, text="proxy: upstream failed"), "answered HTTP 502"),
    ):
        answer = await Bridge(URL, Upstream(response)).handle(
            {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}
        )
        assert answer is not None
        assert answer["id"] == 4
        assert answer["error"]["code"] == -32603
        assert words in answer["error"]["message"]
        assert URL in answer["error"]["message"]
        assert answer["error"]["data"] == {"url": URL}


async def test_errors_naming_the_url_never_show_its_credentials() -> None:
    """A ``--url`` with userinfo (Basic auth to a reverse proxy) is sent as it is, but what a host
    (and its model) reads names the server with ``***`` in place of the credentials."""
    with_credentials = "https://user:secret@mcp.example/mcp"
    for response in (httpx2.ConnectError("refused"), httpx2.Response(502, text="no")):
        answer = await Bridge(with_credentials, Upstream(response)).handle(
            {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}
        )
        assert answer is not None
        assert "secret" not in json.dumps(answer)
        assert "https://***@mcp.example/mcp" in answer["error"]["message"]
        assert answer["error"]["data"] == {"url": "https://***@mcp.example/mcp"}


async def test_what_is_not_a_request_is_invalid_and_host_answers_are_dropped() -> None:
    bridge = Bridge(URL, Upstream(ok({})))
    assert await bridge.handle({"jsonrpc": "2.0", "id": 9, "result": {}}) is None
    answer = await bridge.handle([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    assert answer is not None
    assert answer["error"]["code"] == -32600


MALFORMED: dict[str, tuple[dict[str, Any], str]] = {
    "params as a list": ({"method": "tools/list", "params": [1]}, "params must be an object"),
    "params as a string": ({"method": "tools/list", "params": "x"}, "params must be an object"),
    "initialize with list params": (
        {"method": "initialize", "params": [1]},
        "params must be an object",
    ),
    "_meta as a list": (
        {"method": "tools/list", "params": {"_meta": []}},
        "params._meta must be an object",
    ),
    "a numeric protocol version": (
        {"method": "tools/list", "params": {"_meta": {PROTOCOL_VERSION: 2026}}},
        "protocol version string",
    ),
    "a protocol version with a line break": (
        {"method": "tools/list", "params": {"_meta": {PROTOCOL_VERSION: "2026-07-28\r\nX: y"}}},
        "protocol version string",
    ),
    "a method outside ASCII": ({"method": "tools/lïst"}, "method must be printable ASCII"),
    "a null protocol version": (
        {"method": "tools/list", "params": {"_meta": {PROTOCOL_VERSION: None}}},
        "protocol version string",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
async def test_a_request_that_cannot_be_relayed_is_invalid_and_never_posted(case: str) -> None:
    message, words = MALFORMED[case]
    upstream = Upstream(ok({}))
    answer = await Bridge(URL, upstream).handle({"jsonrpc": "2.0", "id": 5, **message})
    assert answer is not None
    assert answer["id"] == 5
    assert answer["error"]["code"] == -32600
    assert words in answer["error"]["message"]
    assert upstream.posted == []


class _Failing(Bridge):
    """A bridge whose relay of request 1 fails unexpectedly (a bug, not a refusal)."""

    async def handle(self, message: Any) -> dict[str, Any] | None:
        if message.get("id") == 1:
            raise RuntimeError("boom")
        return await super().handle(message)


class _Unwritable(Bridge):
    """A bridge whose answer to request 1 cannot be encoded (a bug, not a refusal)."""

    async def handle(self, message: Any) -> dict[str, Any] | None:
        if message.get("id") == 1:
            return {"jsonrpc": "2.0", "id": 1, "result": {"x": "\ud800"}}
        return await super().handle(message)


async def _answers_to_list_then_ping(
    monkeypatch: pytest.MonkeyPatch, bridge: Bridge
) -> dict[Any, dict[str, Any]]:
    """Run ``serve_stdio`` over a tools/list (id 1) and a ping (id 2); the answers by id."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
    ]
    stdin = io.TextIOWrapper(io.BytesIO(b"".join(json.dumps(m).encode() + b"\n" for m in lines)))
    stdout = io.TextIOWrapper(io.BytesIO())
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stdout", stdout)
    await serve_stdio(bridge)
    written = stdout.buffer.getvalue().decode().splitlines()
    answers = {answer["id"]: answer for answer in map(json.loads, written)}
    assert len(answers) == len(written) == len(lines)  # one answer each, none doubled
    assert answers[2] == {"jsonrpc": "2.0", "id": 2, "result": {}}  # the other one still is
    return answers


_LONE_SURROGATE = httpx2.Response(200, content=b'{"jsonrpc":"2.0","id":1,"result":{"x":"\\ud800"}}')


@pytest.mark.parametrize(
    ("bridge", "said"),
    [
        # a message failing unexpectedly inside the bridge
        (lambda: _Failing(URL, Upstream(ok({}))), "could not be relayed"),
        # a server answer holding a lone surrogate escape: no UTF-8 line can carry it
        (lambda: Bridge(URL, Upstream(_LONE_SURROGATE)), "without a JSON-RPC message"),
        # an answer that cannot be written to the host
        (lambda: _Unwritable(URL, Upstream(ok({}))), "could not be written"),
    ],
)
async def test_one_message_that_fails_is_answered_with_an_error_and_the_others_still_are(
    monkeypatch: pytest.MonkeyPatch, bridge: Callable[[], Bridge], said: str
) -> None:
    answers = await _answers_to_list_then_ping(monkeypatch, bridge())
    assert answers[1]["error"]["code"] == -32603
    assert said in answers[1]["error"]["message"]
