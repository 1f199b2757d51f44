"""The client side of the wire-timestamp contract: ClientSentAtTransport (CONTRACT section 2)."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2
import pytest
from mcp import MCPError

from expert_booking.client import (
    ClientSentAtTransport,
    ExchangeRecorder,
    ServerConnectionError,
    chain_error,
    open_client,
)

pytestmark = pytest.mark.anyio

T0 = datetime(2030, 9, 1, 8, 30, 0, 123456, tzinfo=UTC)
URL = "http://127.0.0.1:3000/mcp"


class StepClock:
    def __init__(self) -> None:
        self.readings = 0

    def now(self) -> datetime:
        self.readings += 1
        return T0 + timedelta(seconds=self.readings - 1)


class Capture:
    """An inner transport that records what reached it and answers 200."""

    def __init__(self, response_headers: dict[str, str] | None = None) -> None:
        self.requests: list[httpx2.Request] = []
        self.clock_readings_at_send: list[int] = []
        self.response_headers = response_headers or {}
        self.clock: StepClock | None = None

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if self.clock is not None:
            self.clock_readings_at_send.append(self.clock.readings)
        return httpx2.Response(200, headers=self.response_headers, json={"ok": True})


async def send(
    capture: Capture, method: str, content: bytes | None, content_type: str | None, **kw: Any
) -> httpx2.Request:
    clock = StepClock()
    capture.clock = clock
    transport = ClientSentAtTransport(httpx2.MockTransport(capture.handler), clock=clock, **kw)
    headers = {"content-type": content_type} if content_type else {}
    async with httpx2.AsyncClient(transport=transport) as client:
        await client.request(method, URL, content=content, headers=headers)
    return capture.requests[-1]


def rpc(**params: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", **params}).encode()


async def test_stamps_header_and_meta_with_the_same_millisecond_value_at_send_time() -> None:
    capture = Capture()
    sent = await send(capture, "POST", rpc(params={"_meta": {}}), "application/json")
    assert sent.headers["x-mcp-client-sent-at"] == "2030-09-01T08:30:00.123Z"
    assert json.loads(sent.content)["params"]["_meta"]["clientSentAt"] == (
        "2030-09-01T08:30:00.123Z"
    )
    assert capture.clock_readings_at_send == [1]  # read once, before the bytes went out


async def test_rewrites_content_length_for_the_stamped_body() -> None:
    sent = await send(Capture(), "POST", rpc(), "application/json")
    assert int(sent.headers["content-length"]) == len(sent.content)


async def test_creates_params_and_meta_when_absent() -> None:
    sent = await send(Capture(), "POST", rpc(), "application/json; charset=utf-8")
    stamped = sent.headers["x-mcp-client-sent-at"]
    assert json.loads(sent.content)["params"] == {"_meta": {"clientSentAt": stamped}}


async def test_preserves_other_meta_keys_and_params() -> None:
    original: dict[str, Any] = {
        "name": "tool_catalog.search",
        "arguments": {"query": "Léa", "limit": 3},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "traceparent": "00-x"},
    }
    sent = await send(Capture(), "POST", rpc(params=original), "application/json")
    params = json.loads(sent.content)["params"]
    assert params["arguments"] == {"query": "Léa", "limit": 3}
    assert params["_meta"] == {**original["_meta"], "clientSentAt": "2030-09-01T08:30:00.123Z"}


async def test_overwrites_a_stale_client_time_in_meta_and_header() -> None:
    stale = "2000-01-01T00:00:00.000Z"
    capture = Capture()
    clock = StepClock()
    capture.clock = clock
    transport = ClientSentAtTransport(httpx2.MockTransport(capture.handler), clock=clock)
    async with httpx2.AsyncClient(transport=transport) as client:
        await client.post(
            URL,
            content=rpc(params={"_meta": {"clientSentAt": stale}}),
            headers={"content-type": "application/json", "x-mcp-client-sent-at": stale},
        )
    sent = capture.requests[-1]
    assert sent.headers.get_list("x-mcp-client-sent-at") == ["2030-09-01T08:30:00.123Z"]
    assert json.loads(sent.content)["params"]["_meta"]["clientSentAt"] == (
        "2030-09-01T08:30:00.123Z"
    )


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b"plain words", "text/plain"),
        (b"{not json", "application/json"),
        (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', "application/json"),
        (b'{"jsonrpc":"2.0","id":1,"result":{}}', "application/json"),
        (b'{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}', "application/json"),
    ],
)
async def test_leaves_bodies_that_are_not_json_rpc_messages_alone(
    content: bytes, content_type: str
) -> None:
    sent = await send(Capture(), "POST", content, content_type)
    assert sent.content == content
    assert sent.headers["x-mcp-client-sent-at"] == "2030-09-01T08:30:00.123Z"


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_stamps_only_the_header_on_requests_without_a_body(method: str) -> None:
    sent = await send(Capture(), method, None, None)
    assert sent.headers["x-mcp-client-sent-at"] == "2030-09-01T08:30:00.123Z"
    assert sent.content == b""


async def test_reports_each_exchange_with_client_received_after_client_sent() -> None:
    seen: list[tuple[str, str, int]] = []

    def on_exchange(
        request: httpx2.Request, response: httpx2.Response, sent_at: str, received_at: str
    ) -> None:
        seen.append((sent_at, received_at, response.status_code))

    await send(Capture(), "POST", rpc(), "application/json", on_exchange=on_exchange)
    assert seen == [("2030-09-01T08:30:00.123Z", "2030-09-01T08:30:01.123Z", 200)]


async def test_the_exchange_recorder_keeps_the_last_exchanges_with_server_stamps() -> None:
    recorder = ExchangeRecorder(limit=2)
    capture = Capture(
        {
            "x-mcp-server-received-at": "2030-09-01T08:30:00.200Z",
            "x-mcp-server-responded-at": "2030-09-01T08:30:00.300Z",
        }
    )
    transport = ClientSentAtTransport(
        httpx2.MockTransport(capture.handler), clock=StepClock(), on_exchange=recorder
    )
    async with httpx2.AsyncClient(transport=transport) as client:
        for method in ("server/discover", "tools/list", "tools/call"):
            await client.post(URL, content=rpc(), headers={"mcp-method": method})
    assert [e.mcp_method for e in recorder.exchanges] == ["tools/list", "tools/call"]
    assert recorder.exchanges[-1].chain() == [
        "2030-09-01T08:30:04.123Z",
        "2030-09-01T08:30:00.200Z",
        "2030-09-01T08:30:00.300Z",
        "2030-09-01T08:30:05.123Z",
    ]


async def test_open_client_names_the_url_and_the_cause_when_nothing_listens() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    with pytest.raises(ServerConnectionError) as excinfo:
        async with open_client(url):
            pytest.fail("connected to a closed port")
    message = str(excinfo.value)
    assert message.startswith(f"cannot connect to the MCP server at {url}: nothing answers there")
    assert isinstance(excinfo.value.cause, httpx2.ConnectError)


REFUSED_URL = "http://127.0.0.1:1/mcp"
LEGACY_REFUSAL = {"code": -32020, "message": "Missing MCP-Protocol-Version header"}


async def _refused(errors: dict[str, dict[str, Any]]) -> ServerConnectionError:
    """``open_client`` against a server answering each method's error of ``errors`` (HTTP 400);
    a method not named gets the legacy refusal."""

    async def refuse(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        error = errors.get(body["method"], LEGACY_REFUSAL)
        return httpx2.Response(400, json={"jsonrpc": "2.0", "id": body["id"], "error": error})

    with pytest.raises(ServerConnectionError) as excinfo:
        async with open_client(REFUSED_URL, transport=httpx2.MockTransport(refuse)):
            pytest.fail("connected to a refusing server")
    return excinfo.value


async def test_open_client_names_the_url_and_the_servers_refusal() -> None:
    refused = await _refused({"server/discover": LEGACY_REFUSAL})
    assert str(refused) == (
        f"cannot connect to the MCP server at {REFUSED_URL}: the server refused the connection: "
        "Missing MCP-Protocol-Version header (JSON-RPC error -32020)"
    )


async def test_open_client_reports_the_refused_discover_probe_not_the_legacy_fallback() -> None:
    """The SDK's auto mode retries with ``initialize`` after a refused probe; that is no cause."""
    skew = {
        "code": -32600,
        "message": "Client timestamp out of range: 400 s behind the server's clock",
        "data": {"code": "CLIENT_TIMESTAMP_OUT_OF_RANGE"},
    }
    refused = await _refused({"server/discover": skew})
    assert str(refused) == (
        f"cannot connect to the MCP server at {REFUSED_URL}: the server refused the connection: "
        "Client timestamp out of range: 400 s behind the server's clock (JSON-RPC error -32600)"
    )
    assert isinstance(refused.cause, MCPError)
    assert refused.cause.error.data == {"code": "CLIENT_TIMESTAMP_OUT_OF_RANGE"}


async def test_open_client_reports_the_fallbacks_refusal_when_it_is_not_about_the_version() -> None:
    """Only a version refusal of the fallback defers to the probe's: anything else is news."""
    probe = {"code": -32600, "message": "Bad Request: Missing session ID"}
    forbidden = {"code": -32001, "message": "Forbidden: scope booking:read required"}
    refused = await _refused({"server/discover": probe, "initialize": forbidden})
    assert str(refused).endswith(
        "the server refused the connection: Forbidden: scope booking:read required "
        "(JSON-RPC error -32001)"
    )


# --- the timestamp chain a client checks (CONTRACT section 2) --------------------------------

IN_ORDER = [
    "2030-09-01T00:00:00.000Z",
    "2030-09-01T00:00:00.001Z",
    "2030-09-01T00:00:00.001Z",
    "2030-09-01T00:00:01.000Z",
]


def test_a_chain_in_order_with_equal_neighbours_holds():
    assert chain_error(IN_ORDER) is None


def test_every_spelling_of_utc_the_server_accepts_is_accepted_and_compared_as_an_instant():
    # IN_ORDER[2] (00:00:00.001Z) in UTC's other spellings; each sorts before "...Z" as text
    for spelling in ("2030-09-01T00:00:00.001+00:00", "2030-09-01t00:00:00.001-00:00"):
        assert chain_error([*IN_ORDER[:2], spelling, *IN_ORDER[3:]]) is None
    later = "2030-09-01T00:00:00.002+00:00"  # as text it sorts before IN_ORDER[2]'s "...001Z"
    assert chain_error([IN_ORDER[0], later, IN_ORDER[2]]) is not None


@pytest.mark.parametrize(
    ("position", "stamp", "problem"),
    [
        (1, "2029-12-31T23:59:59.999Z", "is before 2030-09-01T00:00:00.000Z"),
        # the same instant as IN_ORDER[1] in another offset: sorted as text it would pass
        (2, "2030-09-01T05:30:00.001+05:30", "is not RFC 3339 UTC with milliseconds"),
        (3, "2030-09-01T00:00:01Z", "is not RFC 3339 UTC with milliseconds"),
        (3, "2030-09-01T0x", "is not RFC 3339 UTC with milliseconds"),
        (0, None, "is missing"),
    ],
)
def test_a_chain_out_of_order_or_out_of_form_is_named(position, stamp, problem):
    chain: list[str | None] = list(IN_ORDER)
    chain[position] = stamp
    error = chain_error(chain)
    assert error is not None
    assert error.startswith(f"stamp {position}")
    assert error.endswith(problem)


async def test_a_404_probe_defers_to_a_fallback_refusal_that_says_more() -> None:
    """The 404 explains only the fallback's "method not found"; another refusal is news."""

    async def answer(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        if body["method"] == "server/discover":
            return httpx2.Response(404, text="Not Found")
        forbidden = {"code": -32001, "message": "Forbidden: scope booking:read required"}
        return httpx2.Response(400, json={"jsonrpc": "2.0", "id": body["id"], "error": forbidden})

    with pytest.raises(ServerConnectionError) as excinfo:
        async with open_client(REFUSED_URL, transport=httpx2.MockTransport(answer)):
            pytest.fail("connected to a refusing server")
    assert str(excinfo.value).endswith(
        "the server refused the connection: Forbidden: scope booking:read required "
        "(JSON-RPC error -32001)"
    )
