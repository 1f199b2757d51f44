"""The HTTP edge in process: gates, timestamps and the SDK behind them (CONTRACT section 2)."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from expert_booking.bootstrap import build_asgi_app
from expert_booking.client import ExchangeRecorder, chain_error, open_client
from expert_booking.edge import timestamps
from expert_booking.edge.http_app import create_app
from expert_booking.edge.wire_time import SCOPE_CLIENT_SENT_AT, SCOPE_RECEIVED_AT
from expert_booking.settings import Settings
from harness.floor_app import build_floor_server
from harness.inprocess import inprocess_app

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:3000/mcp"
SENT = "2030-09-01T00:00:00.000Z"
T0 = datetime(2030, 9, 1, 0, 0, 1, tzinfo=UTC)
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


class TickingClock:
    """Each reading is one millisecond after the previous one."""

    def __init__(self, start: datetime = T0) -> None:
        self._next = start
        self._lock = threading.Lock()  # read on the event loop and the store's worker

    def now(self) -> datetime:
        with self._lock:
            current = self._next
            self._next += timedelta(milliseconds=1)
        return current


def stamp(n: int) -> str:
    """The n-th reading of a fresh ``TickingClock``."""
    return (T0 + timedelta(milliseconds=n)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


SECRET = "SELECT secret FROM /var/lib/expert-booking.db"


@dataclass
class Spy:
    """What the test server's tool saw."""

    calls: list[dict[str, Any]] = field(default_factory=list)


def spy_server(spy: Spy) -> Server[Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {}}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[types.Tool(name="spy", input_schema=schema)], ttl_ms=0, cache_scope="private"
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        assert ctx.request is not None
        if params.name == "explode":  # a handler failing outside any envelope
            raise RuntimeError(SECRET)
        scope = ctx.request.scope
        spy.calls.append(
            {
                "received_at": scope[SCOPE_RECEIVED_AT],
                "client_sent_at": scope[SCOPE_CLIENT_SENT_AT],
                "host": ctx.request.headers.get("host"),
            }
        )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="ok")],
            structured_content={"ok": True},
            _meta={"com.example/handler": "kept"},
        )

    return Server(
        "spy",
        version="1.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=lambda name: schema if name in {"spy", "explode"} else None,
    )


@asynccontextmanager
async def http(
    settings: Settings | None = None, spy: Spy | None = None
) -> AsyncIterator[httpx2.AsyncClient]:
    settings = settings or Settings()
    app = create_app(mcp_server=spy_server(spy or Spy()), settings=settings, clock=TickingClock())
    with anyio.fail_after(10):
        async with inprocess_app(app) as transport, httpx2.AsyncClient(transport=transport) as c:
            yield c


def rpc(method: str = "tools/call", request_id: Any = 1, **params: Any) -> dict[str, Any]:
    if method == "tools/call":
        params.setdefault("name", "spy")
        params.setdefault("arguments", {})
    params.setdefault("_meta", {**ENVELOPE, "clientSentAt": SENT})
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def headers(method: str = "tools/call", **extra: str) -> dict[str, str]:
    base = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
        "x-mcp-client-sent-at": SENT,
    }
    if method == "tools/call":
        base["mcp-name"] = "spy"
    base.update(extra)
    return base


def without(mapping: dict[str, str], *names: str) -> dict[str, str]:
    return {k: v for k, v in mapping.items() if k not in names}


async def post(
    c: httpx2.AsyncClient,
    body: Any,
    hdrs: dict[str, str] | None = None,
    url: str = URL,
) -> httpx2.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await c.post(url, content=content, headers=headers() if hdrs is None else hdrs)


def error_of(response: httpx2.Response) -> dict[str, Any]:
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    assert body["jsonrpc"] == "2.0"
    return body


def assert_no_client_time(response: httpx2.Response) -> None:
    assert "x-mcp-client-sent-at" not in response.headers
    assert SENT.encode() not in response.content
    assert "result" not in response.json()


async def test_a_tool_call_gets_both_server_stamps_as_headers_and_in_result_meta() -> None:
    spy = Spy()
    async with http(spy=spy) as c:
        response = await post(c, rpc())
    assert response.status_code == 200
    assert response.headers["x-mcp-server-received-at"] == stamp(0)
    assert response.headers["x-mcp-server-responded-at"] == stamp(1)
    meta = response.json()["result"]["_meta"]
    assert meta["clientSentAt"] == SENT
    assert meta["serverReceivedAt"] == stamp(0)
    assert meta["serverRespondedAt"] == stamp(1)
    assert meta["com.example/handler"] == "kept"
    assert int(response.headers["content-length"]) == len(response.content)


async def test_tool_handlers_read_both_wire_times_from_the_request_scope() -> None:
    spy = Spy()
    async with http(spy=spy) as c:
        await post(c, rpc())
    assert spy.calls == [
        {"received_at": stamp(0), "client_sent_at": SENT, "host": "127.0.0.1:3000"}
    ]


@pytest.mark.parametrize(
    ("body", "hdrs", "status"),
    [
        pytest.param(rpc(), headers(), 200, id="call"),
        pytest.param(rpc(), headers(host="evil.example"), 421, id="host"),
        pytest.param(rpc(), headers(origin="http://evil.example"), 403, id="origin"),
        pytest.param(rpc(), without(headers(), "mcp-protocol-version"), 400, id="no-version"),
        pytest.param(rpc(), without(headers(), "x-mcp-client-sent-at"), 400, id="no-client-time"),
        pytest.param(b"{", headers(), 400, id="parse-error"),
        pytest.param(rpc("initialize"), headers("initialize"), 404, id="initialize"),
        pytest.param([rpc()], headers(), 400, id="batch"),
        pytest.param(rpc(), headers(accept="text/html"), 406, id="sdk-accept"),
    ],
)
async def test_every_mcp_response_carries_both_server_timestamp_headers(
    body: Any, hdrs: dict[str, str], status: int
) -> None:
    async with http() as c:
        response = await post(c, body, hdrs)
    assert response.status_code == status
    assert response.headers["x-mcp-server-received-at"] == stamp(0)
    assert response.headers["x-mcp-server-responded-at"] == stamp(1)


async def test_refusals_before_any_handler_and_notifications_carry_both_timestamp_headers() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(40):
            yield b" " * 1024

    note = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"_meta": {**ENVELOPE, "clientSentAt": SENT}},
    }
    async with http() as c:
        answered = [
            (await c.get(URL, headers=headers()), 405),
            (await post(c, rpc(arguments={"pad": "x" * (32 * 1024)})), 413),
            (await c.post(URL, content=chunks(), headers=headers()), 413),
            (await post(c, note, headers("notifications/cancelled")), 202),
        ]
    for response, status in answered:
        assert response.status_code == status
        stamps = [
            response.headers["x-mcp-server-received-at"],
            response.headers["x-mcp-server-responded-at"],
        ]
        assert chain_error(stamps) is None, (status, stamps)


async def test_a_handler_failing_outside_the_envelope_leaks_nothing_and_is_stamped() -> None:
    async with http() as c:
        response = await post(c, rpc(name="explode"), headers(**{"mcp-name": "explode"}))
    body = error_of(response)
    assert body["error"]["code"] == types.INTERNAL_ERROR
    for leak in ("secret", "/var/lib", "Traceback", "RuntimeError"):
        assert leak not in response.text
    assert response.headers["x-mcp-server-received-at"] == stamp(0)
    assert response.headers["x-mcp-server-responded-at"] == stamp(1)


async def test_an_error_response_gets_headers_but_no_result_meta() -> None:
    async with http() as c:
        response = await post(c, rpc("initialize"), headers("initialize"))
    body = error_of(response)
    assert (response.status_code, body["error"]["code"]) == (404, -32601)
    assert "result" not in body


async def test_healthz_answers_ok() -> None:
    async with http() as c:
        response = await c.get("http://127.0.0.1:3000/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


async def test_a_wrong_host_is_refused_with_421_and_no_handler_runs() -> None:
    spy = Spy()
    async with http(spy=spy) as c:
        response = await post(c, rpc(request_id=5), headers(host="attacker.example:3000"))
    body = error_of(response)
    assert response.status_code == 421
    assert body["error"]["code"] == -32600
    assert body["error"]["data"] == {"code": "HOST_NOT_ALLOWED"}
    assert "ALLOWED_HOSTS" in body["error"]["message"]
    assert spy.calls == []


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "127.0.0.1:3000", "localhost", "LOCALHOST:8080", "[::1]", "[::1]:3000"],
)
async def test_an_allowed_host_passes_with_or_without_a_port(host: str) -> None:
    spy = Spy()
    async with http(spy=spy) as c:
        response = await post(c, rpc(), headers(host=host))
    assert response.status_code == 200, response.text
    assert len(spy.calls) == 1


@pytest.mark.parametrize(("host", "status"), [("example.com:8443", 200), ("example.com", 421)])
async def test_a_configured_host_with_a_port_allows_only_that_port(host: str, status: int) -> None:
    settings = replace(Settings(), allowed_hosts=("127.0.0.1", "example.com:8443"))
    async with http(settings) as c:
        response = await post(c, rpc(), headers(host=host))
    assert response.status_code == status


async def test_a_wrong_origin_is_refused_with_403_and_no_handler_runs() -> None:
    spy = Spy()
    async with http(spy=spy) as c:
        response = await post(c, rpc(), headers(origin="http://attacker.example"))
    body = error_of(response)
    assert response.status_code == 403
    assert body["error"]["data"] == {"code": "ORIGIN_NOT_ALLOWED"}
    assert spy.calls == []


@pytest.mark.parametrize(
    "origin",
    ["http://127.0.0.1", "http://localhost:5173", "http://[::1]:1", "https://localhost:8443"],
)
async def test_an_allowed_origin_passes_with_any_port(origin: str) -> None:
    async with http() as c:
        response = await post(c, rpc(), headers(origin=origin))
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
async def test_anything_but_post_gets_405_with_allow_post(method: str) -> None:
    async with http() as c:
        response = await c.request(method, URL, headers=headers())
    body = error_of(response)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert body["error"]["code"] == -32600
    assert "2026-07-28" in body["error"]["message"]
    assert body["error"]["data"] == {"supported": ["2026-07-28"]}


async def test_a_post_without_protocol_version_gets_400_naming_2026_07_28() -> None:
    async with http() as c:
        response = await post(c, rpc(request_id="a-1"), without(headers(), "mcp-protocol-version"))
    body = error_of(response)
    assert response.status_code == 400
    assert body["id"] == "a-1"
    assert body["error"]["code"] == -32020
    assert "MCP-Protocol-Version: 2026-07-28" in body["error"]["message"]
    assert body["error"]["data"] == {"supported": ["2026-07-28"]}


@pytest.mark.parametrize("version", ["2025-11-25", "2024-11-05", "1900-01-01"])
async def test_a_post_at_an_older_or_unknown_version_gets_400_naming_2026_07_28(
    version: str,
) -> None:
    legacy_initialize = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}},
    }
    async with http() as c:
        response = await post(c, legacy_initialize, headers(**{"mcp-protocol-version": version}))
    body = error_of(response)
    assert response.status_code == 400
    assert body["id"] == 9
    assert body["error"]["code"] == -32022
    assert "2026-07-28" in body["error"]["message"]
    assert body["error"]["data"] == {"supported": ["2026-07-28"], "requested": version}


async def test_an_enveloped_initialize_at_2026_gets_the_sdks_own_404() -> None:
    async with http() as c:
        response = await post(c, rpc("initialize", request_id=3), headers("initialize"))
    body = error_of(response)
    assert response.status_code == 404
    assert (body["id"], body["error"]["code"]) == (3, -32601)


async def test_a_declared_body_over_32_kib_gets_413_without_a_handler() -> None:
    spy = Spy()
    big = rpc(arguments={"pad": "x" * (32 * 1024)})
    async with http(spy=spy) as c:
        response = await post(c, big)
    body = error_of(response)
    assert response.status_code == 413
    assert body["error"]["data"] == {"code": "REQUEST_TOO_LARGE", "maxBytes": 32 * 1024}
    assert spy.calls == []


async def test_a_streamed_body_over_32_kib_gets_413() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(40):
            yield b" " * 1024

    async with http() as c:
        response = await c.post(URL, content=chunks(), headers=headers())
    assert response.status_code == 413
    assert error_of(response)["error"]["data"]["code"] == "REQUEST_TOO_LARGE"


async def test_a_body_of_exactly_32_kib_is_accepted() -> None:
    message = json.dumps(rpc()).encode()
    padded = message[:-1] + b" " * (32 * 1024 - len(message)) + b"}"
    async with http() as c:
        response = await post(c, padded)
    assert response.status_code == 200, response.text


async def test_malformed_json_gets_400_parse_error_with_null_id() -> None:
    async with http() as c:
        response = await post(c, b'{"jsonrpc": "2.0", "id": 1,')
    body = error_of(response)
    assert response.status_code == 400
    assert (body["id"], body["error"]["code"]) == (None, -32700)


@pytest.mark.parametrize(
    "encode",
    [
        lambda text: text.replace('"ping"', "NaN").encode(),  # no JSON value
        lambda text: text.replace('"ping"', "-Infinity").encode(),
        lambda text: text.encode("utf-16"),  # JSON text is UTF-8
        lambda text: text.encode("utf-32"),
        lambda text: text.replace('"ping"', '"\ud800"').encode("utf-8", "surrogatepass"),
    ],
    ids=["nan", "infinity", "utf-16", "utf-32", "encoded-surrogate"],
)
async def test_what_rfc_8259_is_not_gets_400_parse_error(encode: Any) -> None:
    text = json.dumps(rpc(arguments={"limit": "ping"}))  # "ping" becomes each case's value
    async with http() as c:
        response = await post(c, encode(text))
    body = error_of(response)
    assert response.status_code == 400
    assert (body["id"], body["error"]["code"]) == (None, -32700)


async def test_a_batch_array_is_left_to_the_sdk() -> None:
    async with http() as c:
        response = await post(c, [rpc()])
    body = error_of(response)
    assert response.status_code == 400
    assert (body["id"], body["error"]["code"]) == (None, -32600)


def _meta_without_client_time() -> dict[str, Any]:
    return rpc(_meta=dict(ENVELOPE), request_id=11)


def _cases() -> Iterator[Any]:
    yield pytest.param(rpc(request_id=11), without(headers(), "x-mcp-client-sent-at"), id="header")
    yield pytest.param(_meta_without_client_time(), headers(), id="meta")
    yield pytest.param(
        _meta_without_client_time(), without(headers(), "x-mcp-client-sent-at"), id="both"
    )
    for bad in (
        "2030-09-01T00:00:00Z",
        "2030-09-01T00:00:00.000000Z",
        "2030-09-01T00:00:00.000+08:00",
        "2030-09-01T08:00:00.000+0800",
        "2030-09-01T00:00:00.000",
        "2030-09-01 00:00:00.000Z",
        "2030-13-01T00:00:00.000Z",
        "2030-09-01T24:00:00.000Z",
        "yesterday",
    ):
        body = rpc(request_id=11, _meta={**ENVELOPE, "clientSentAt": bad})
        yield pytest.param(body, headers(**{"x-mcp-client-sent-at": bad}), id=f"malformed {bad}")
    yield pytest.param(
        rpc(request_id=11, _meta={**ENVELOPE, "clientSentAt": 1_900_000_000_000}),
        headers(),
        id="meta-number",
    )
    yield pytest.param(
        rpc(request_id=11, _meta={**ENVELOPE, "clientSentAt": SENT}),
        headers(**{"x-mcp-client-sent-at": "soon"}),
        id="header-malformed",
    )


@pytest.mark.parametrize(("body", "hdrs"), list(_cases()))
async def test_a_missing_or_malformed_client_timestamp_gets_400_missing_client_timestamp(
    body: dict[str, Any], hdrs: dict[str, str]
) -> None:
    spy = Spy()
    async with http(spy=spy) as c:
        response = await post(c, body, hdrs)
    payload = error_of(response)
    assert response.status_code == 400
    assert payload["id"] == 11
    assert payload["error"]["code"] == -32600
    assert payload["error"]["data"]["code"] == "MISSING_CLIENT_TIMESTAMP"
    assert "x-mcp-client-sent-at" in payload["error"]["message"]
    assert spy.calls == []
    assert_no_client_time(response)


@pytest.mark.parametrize(
    "sent",
    ["2030-09-01T00:00:00.000+00:00", "2030-09-01T00:00:00.000-00:00", "2030-09-01t00:00:00.000z"],
)
async def test_every_rfc_3339_spelling_of_utc_is_accepted_and_echoed_as_sent(sent: str) -> None:
    """RFC 3339 allows ``+00:00``/``-00:00`` for UTC and lower-case ``t``/``z`` (CONTRACT 2)."""
    spy = Spy()
    async with http(spy=spy) as c:
        response = await post(
            c,
            rpc(_meta={**ENVELOPE, "clientSentAt": sent}),
            headers(**{"x-mcp-client-sent-at": sent}),
        )
    assert response.status_code == 200, response.text
    assert response.json()["result"]["_meta"]["clientSentAt"] == sent
    assert spy.calls[0]["client_sent_at"] == sent


async def test_different_header_and_meta_client_times_get_400_mismatch() -> None:
    spy = Spy()
    other = "2030-09-01T00:00:00.001Z"
    async with http(spy=spy) as c:
        response = await post(c, rpc(request_id="m"), headers(**{"x-mcp-client-sent-at": other}))
    payload = error_of(response)
    assert response.status_code == 400
    assert payload["id"] == "m"
    assert payload["error"]["code"] == -32600
    assert payload["error"]["data"] == {"code": "CLIENT_TIMESTAMP_MISMATCH"}
    assert spy.calls == []
    assert_no_client_time(response)
    assert other.encode() not in response.content


async def test_a_notification_needs_the_client_timestamp_too() -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"_meta": ENVELOPE}}
    async with http() as c:
        refused = await post(c, note, headers("notifications/cancelled"))
        stamped = {**note, "params": {"_meta": {**ENVELOPE, "clientSentAt": SENT}}}
        accepted = await post(c, stamped, headers("notifications/cancelled"))
    assert refused.status_code == 400
    assert error_of(refused)["error"]["data"]["code"] == "MISSING_CLIENT_TIMESTAMP"
    assert accepted.status_code == 202


@pytest.mark.parametrize("padding", [" ", "\t", " \t "])
async def test_header_values_are_compared_after_trimming_optional_whitespace(padding: str) -> None:
    spy = Spy()
    padded = headers(
        **{
            "x-mcp-client-sent-at": f"{padding}{SENT}{padding}",
            "mcp-protocol-version": f"{padding}2026-07-28",
            "host": f"127.0.0.1:3000{padding}",
            "origin": f"{padding}http://localhost:5173",
        }
    )
    async with http(spy=spy) as c:
        response = await post(c, rpc(), padded)
    assert response.status_code == 200, response.text
    assert spy.calls[0]["client_sent_at"] == SENT


async def test_the_official_client_through_the_adapter_sees_an_ordered_chain() -> None:
    recorder = ExchangeRecorder()
    clock = TickingClock()  # one clock for both sides, so the chain is strictly ordered
    with anyio.fail_after(10):
        async with (
            inprocess_app(
                create_app(mcp_server=build_floor_server(), settings=Settings(), clock=clock)
            ) as transport,
            open_client(URL, transport=transport, clock=clock, on_exchange=recorder) as client,
        ):
            discovered = client.session.discover_result
            assert discovered is not None
            discover_meta = discovered.meta
            listed = await client.list_tools()
            called = await client.call_tool("noop", {})
    assert [e.mcp_method for e in recorder.exchanges] == [
        "server/discover",
        "tools/list",
        "tools/call",
    ]
    for exchange, meta in zip(
        recorder.exchanges, [discover_meta, listed.meta, called.meta], strict=True
    ):
        assert meta is not None
        chain = exchange.chain()
        assert chain_error(chain) is None, chain
        assert len(set(chain)) == 4
        assert meta["clientSentAt"] == exchange.client_sent_at
        assert meta["serverReceivedAt"] == exchange.server_received_at
        assert meta["serverRespondedAt"] == exchange.server_responded_at


STAMPS = {
    "clientSentAt": SENT,
    "serverReceivedAt": stamp(0),
    "serverRespondedAt": stamp(1),
}


async def test_the_meta_merge_adds_the_stamps_and_changes_nothing_else_on_real_responses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real server's tools/list and tools/call bodies: the same JSON plus the stamps."""
    bodies: list[bytes] = []
    merge = timestamps._merge_result_meta

    def recording(body: bytes, *stamps: Any) -> bytes:
        bodies.append(body)
        return merge(body, *stamps)

    monkeypatch.setattr(timestamps, "_merge_result_meta", recording)
    app = build_asgi_app(Settings(db_path=tmp_path / "booking.db"), clock=TickingClock())
    listing = rpc("tools/list")
    call = rpc(name="tool_catalog.search", arguments={"query": "预约 buchen", "limit": 2})
    with anyio.fail_after(20):
        async with inprocess_app(app) as transport, httpx2.AsyncClient(transport=transport) as c:
            listed = await post(c, listing, without(headers("tools/list"), "mcp-name"))
            called = await post(c, call, headers(**{"mcp-name": "tool_catalog.search"}))
    assert listed.status_code == called.status_code == 200
    assert len(bodies) == 2
    for body in bodies:
        expected = json.loads(body)
        expected["result"]["_meta"].update(STAMPS)
        assert json.loads(merge(body, SENT, stamp(0), stamp(1))) == expected
    assert listed.json()["result"]["_meta"]["serverRespondedAt"] == stamp(1)
    assert called.json()["result"]["structuredContent"]["ok"] is True


class SteppingBackClock:
    """Each reading a millisecond before the previous one: a wall clock stepped back, again and
    again, while requests are served (NTP stepping, a VM restored)."""

    def __init__(self) -> None:
        self._next = T0
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            current = self._next
            self._next -= timedelta(milliseconds=1)
        return current


async def test_a_clock_stepped_back_mid_request_never_orders_its_stamps_backwards(
    tmp_path: Path,
) -> None:
    """CONTRACT 2: serverReceivedAt <= serverResultCreatedAt <= serverRespondedAt, whatever
    the clock does."""
    app = build_asgi_app(Settings(db_path=tmp_path / "booking.db"), clock=SteppingBackClock())
    call = rpc(name="tool_catalog.search", arguments={"query": "buchen", "limit": 1})
    with anyio.fail_after(20):
        async with inprocess_app(app) as transport, httpx2.AsyncClient(transport=transport) as c:
            response = await post(c, call, headers(**{"mcp-name": "tool_catalog.search"}))
    result = response.json()["result"]
    received = response.headers["x-mcp-server-received-at"]
    created = result["structuredContent"]["meta"]["serverResultCreatedAt"]
    responded = response.headers["x-mcp-server-responded-at"]
    assert received <= created <= responded  # one text format, so text order is time order
    assert result["_meta"]["serverReceivedAt"] == received
    assert result["_meta"]["serverRespondedAt"] == responded


@pytest.mark.parametrize(
    ("body", "stamped"),
    [
        (b'{"jsonrpc":"2.0","id":1,"result":{}}', True),
        (b'{"jsonrpc":"2.0","id":"a","result":{"x":1}}', True),
        (b'{"jsonrpc":"2.0","id":-3,"result":{"_meta":{}}}\n', True),
        (b'{"jsonrpc":"2.0","id":1,"result":{"x":{"_meta":{}},"_meta":{"k":"\xc3\xa9"}}}', True),
        (b'{"jsonrpc":"2.0","id":1,"result":{"_meta":{"k":1},"_meta":{"j":2}}}', True),
        # A stamp key already there: overwritten, never duplicated.
        (b'{"jsonrpc":"2.0","id":1,"result":{"_meta":{"serverReceivedAt":"old"}}}', True),
        (b'{"jsonrpc":"2.0","id":1,"result":{"_meta":{},"x":1}}', True),
        (b'{"jsonrpc":"2.0","id":1,"result":{"_meta":{} }}', True),
        (b'{"jsonrpc":"2.0","id":1,"result":{"x":1,"_meta":{"a":1},"x":{}}}', True),
        # A lone surrogate escape: msgspec refuses it, the standard library stamps it.
        (b'{"jsonrpc":"2.0","id":1,"result":{"x":"\\ud800"}}', True),
        (b'{"jsonrpc":"2.0","id":1,"result":{"_meta":null}}', True),
        (b'{"jsonrpc":"2.0","id":1.5,"result":{}}', True),
        # Out of range for a float: it could only be written back as Infinity, not JSON.
        (b'{"jsonrpc":"2.0","id":1,"result":{"x":1e400}}', False),
        (b'{"jsonrpc":"2.0","id":1,"result":{"_meta":{}}},"x":{"_meta":{}}}', False),
        (b'{"jsonrpc":"2.0","id":1,"result":{"_meta":{}}', False),
        (b'{"jsonrpc":"2.0","id":"\x01","result":{}}', False),
        (b'{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m"}}', False),
    ],
)
def test_the_meta_merge_stamps_every_result_object_and_leaves_anything_else_alone(
    body: bytes, stamped: bool
) -> None:
    merged = timestamps._merge_result_meta(body, SENT, stamp(0), stamp(1))

    if not stamped:
        assert merged == body
        return
    expected = json.loads(body)
    if not isinstance(expected["result"].get("_meta"), dict):
        expected["result"]["_meta"] = {}
    expected["result"]["_meta"].update(STAMPS)
    assert json.loads(merged) == expected


def _reserving_app(content_type: bytes, *, client_time: bool) -> Any:
    """An inner app that answers one result the way this server's handlers do (reserving)."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if client_time:
            scope[SCOPE_CLIENT_SENT_AT] = SENT  # what the gate does once it validated one
        reserved = timestamps.reserved_stamps(scope)
        result = {
            "x": 'a "clientSentAt" inside a string',
            **({"_meta": reserved} if reserved else {}),
        }
        text = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}, separators=(",", ":"))
        body = (
            text.encode() if content_type == b"application/json" else f"data: {text}\n\n".encode()
        )
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", content_type)],
            }
        )
        await send({"type": "http.response.body", "body": body, "more_body": False})

    return app


async def _through_layer(inner: Any) -> tuple[dict[bytes, bytes], bytes]:
    sent: list[MutableMapping[str, Any]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    layer = timestamps.TimestampLayer(inner, clock=TickingClock())
    await layer({"type": "http", "headers": []}, receive, send)
    return dict(sent[0]["headers"]), b"".join(m.get("body", b"") for m in sent[1:])


@pytest.mark.parametrize("content_type", [b"application/json", b"text/event-stream"])
async def test_a_reserved_result_is_stamped_in_place_with_the_headers_times(
    content_type: bytes,
) -> None:
    headers, body = await _through_layer(_reserving_app(content_type, client_time=True))
    message = json.loads(body.decode().removeprefix("data: "))
    assert message["result"]["_meta"] == {
        "clientSentAt": SENT,
        "serverReceivedAt": headers[b"x-mcp-server-received-at"].decode(),
        "serverRespondedAt": headers[b"x-mcp-server-responded-at"].decode(),
    }
    assert message["result"]["x"] == 'a "clientSentAt" inside a string'


async def test_without_a_validated_client_time_nothing_is_reserved_or_invented() -> None:
    headers, body = await _through_layer(_reserving_app(b"application/json", client_time=False))
    assert json.loads(body)["result"]["_meta"] == {
        "serverReceivedAt": headers[b"x-mcp-server-received-at"].decode(),
        "serverRespondedAt": headers[b"x-mcp-server-responded-at"].decode(),
    }


def test_a_reservation_the_boundary_cannot_fill_is_dropped_never_sent() -> None:
    """A reserved body met without a client time (or in another spelling): no placeholder out."""
    reserved = timestamps._RESERVED_META
    spaced = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"_meta": reserved}}).encode()
    for client_sent_at in (None, SENT):
        merged = timestamps._merge_result_meta(spaced, client_sent_at, stamp(0), stamp(1))
        meta = json.loads(merged)["result"]["_meta"]
        assert timestamps._PLACEHOLDER.encode() not in merged
        assert meta == {
            **({"clientSentAt": SENT} if client_sent_at else {}),
            "serverReceivedAt": stamp(0),
            "serverRespondedAt": stamp(1),
        }
