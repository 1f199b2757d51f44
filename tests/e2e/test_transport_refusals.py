"""Every transport refusal over real HTTP against the spawned server (CONTRACT sections 1 and 2)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx2
import pytest

from expert_booking.domain.model import format_instant
from expert_booking.testing.server_process import ServerProcess

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

# One client time for the whole module, taken at import (the server's clock is the real one).
SENT = format_instant(datetime.now(UTC))
# The module's requests all carry SENT, so the server tolerates that much skew, explicitly.
SENT_TOLERANCE_SECONDS = 3600
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
DISCOVER: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "server/discover",
    "params": {"_meta": {**ENVELOPE, "clientSentAt": SENT}},
}


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    env = {**os.environ, "CLIENT_CLOCK_TOLERANCE_SECONDS": str(SENT_TOLERANCE_SECONDS)}
    with ServerProcess(env=env) as running:
        yield running


@pytest.fixture
async def http(server: ServerProcess) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(base_url=server.base_url, timeout=10) as client:
        yield client


def headers(**extra: str) -> dict[str, str]:
    return {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "server/discover",
        "x-mcp-client-sent-at": SENT,
        **extra,
    }


def without(mapping: dict[str, str], name: str) -> dict[str, str]:
    return {k: v for k, v in mapping.items() if k != name}


def refusal(response: httpx2.Response, status: int) -> dict[str, Any]:
    """Assert the common shape of a refusal and return its JSON-RPC error."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert (
        response.headers["x-mcp-server-received-at"]
        <= (response.headers["x-mcp-server-responded-at"])
    )
    assert "x-mcp-client-sent-at" not in response.headers
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert "result" not in body
    error: dict[str, Any] = body["error"]
    error["id"] = body["id"]
    return error


async def post(http: httpx2.AsyncClient, body: Any, hdrs: dict[str, str]) -> httpx2.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    with anyio.fail_after(10):
        return await http.post("/mcp", content=content, headers=hdrs)


async def test_a_valid_discover_passes_and_is_stamped(http: httpx2.AsyncClient) -> None:
    response = await post(http, DISCOVER, headers())
    assert response.status_code == 200, response.text
    meta = response.json()["result"]["_meta"]
    assert meta["clientSentAt"] == SENT
    assert meta["serverReceivedAt"] == response.headers["x-mcp-server-received-at"]
    assert meta["serverRespondedAt"] == response.headers["x-mcp-server-responded-at"]


async def test_a_wrong_host_gets_421(http: httpx2.AsyncClient) -> None:
    error = refusal(await post(http, DISCOVER, headers(host="rebound.example")), 421)
    assert error["data"] == {"code": "HOST_NOT_ALLOWED"}


async def test_a_wrong_origin_gets_403(http: httpx2.AsyncClient) -> None:
    error = refusal(await post(http, DISCOVER, headers(origin="https://evil.example")), 403)
    assert error["data"] == {"code": "ORIGIN_NOT_ALLOWED"}


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_get_and_delete_get_405_with_allow_post(
    http: httpx2.AsyncClient, method: str
) -> None:
    with anyio.fail_after(10):
        response = await http.request(method, "/mcp", headers=headers())
    error = refusal(response, 405)
    assert response.headers["allow"] == "POST"
    assert error["data"] == {"supported": ["2026-07-28"]}


async def test_a_missing_protocol_version_gets_400_naming_2026_07_28(
    http: httpx2.AsyncClient,
) -> None:
    legacy = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
    error = refusal(await post(http, legacy, without(headers(), "mcp-protocol-version")), 400)
    assert (error["id"], error["code"]) == (0, -32020)
    assert "2026-07-28" in error["message"]
    assert error["data"] == {"supported": ["2026-07-28"]}


async def test_protocol_2025_11_25_gets_400_naming_2026_07_28(http: httpx2.AsyncClient) -> None:
    response = await post(http, DISCOVER, headers(**{"mcp-protocol-version": "2025-11-25"}))
    error = refusal(response, 400)
    assert (error["id"], error["code"]) == (1, -32022)
    assert error["data"] == {"supported": ["2026-07-28"], "requested": "2025-11-25"}


async def test_an_enveloped_initialize_at_2026_gets_404(http: httpx2.AsyncClient) -> None:
    body = {**DISCOVER, "method": "initialize"}
    error = refusal(await post(http, body, headers(**{"mcp-method": "initialize"})), 404)
    assert error["code"] == -32601


async def test_a_body_over_32_kib_gets_413(http: httpx2.AsyncClient) -> None:
    body = {**DISCOVER, "params": {**DISCOVER["params"], "pad": "x" * 33_000}}
    error = refusal(await post(http, body, headers()), 413)
    assert error["data"]["code"] == "REQUEST_TOO_LARGE"


async def test_a_chunked_body_over_32_kib_gets_413(http: httpx2.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(40):
            yield b" " * 1024

    with anyio.fail_after(10):
        response = await http.post("/mcp", content=chunks(), headers=headers())
    refusal(response, 413)


async def test_malformed_json_gets_400_parse_error(http: httpx2.AsyncClient) -> None:
    error = refusal(await post(http, b"{nope", headers()), 400)
    assert (error["id"], error["code"]) == (None, -32700)


async def test_a_missing_client_timestamp_gets_400_with_the_id_echoed(
    http: httpx2.AsyncClient,
) -> None:
    response = await post(http, DISCOVER, without(headers(), "x-mcp-client-sent-at"))
    error = refusal(response, 400)
    assert (error["id"], error["code"]) == (1, -32600)
    assert error["data"]["code"] == "MISSING_CLIENT_TIMESTAMP"
    assert SENT not in response.text


async def test_a_malformed_client_timestamp_gets_400_missing_client_timestamp(
    http: httpx2.AsyncClient,
) -> None:
    bad = "2030-09-01T00:00:00Z"
    body = {**DISCOVER, "params": {"_meta": {**ENVELOPE, "clientSentAt": bad}}}
    error = refusal(await post(http, body, headers(**{"x-mcp-client-sent-at": bad})), 400)
    assert error["data"]["code"] == "MISSING_CLIENT_TIMESTAMP"


async def test_disagreeing_client_timestamps_get_400_mismatch(http: httpx2.AsyncClient) -> None:
    other = "2030-09-01T00:00:00.999Z"
    response = await post(http, DISCOVER, headers(**{"x-mcp-client-sent-at": other}))
    error = refusal(response, 400)
    assert (error["id"], error["code"]) == (1, -32600)
    assert error["data"] == {"code": "CLIENT_TIMESTAMP_MISMATCH"}
    assert SENT not in response.text
    assert other not in response.text


@pytest.mark.parametrize(
    "stop_signal", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name
)
def test_the_server_exits_cleanly_on_a_signal_and_leaves_nothing_behind(
    stop_signal: signal.Signals,
) -> None:
    with ServerProcess() as server:
        pid, db_dir = server.pid, server.db_path.parent
        assert db_dir.is_dir()
        os.kill(pid, stop_signal)
        assert server.wait() == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not db_dir.exists()


HANGUP_WINDOW_SECONDS = 1.5


def test_a_hangup_under_nohup_leaves_the_server_running() -> None:
    """``nohup`` ignores SIGHUP for its command; the server must not undo that."""

    def ignore_hangup() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    with ServerProcess(preexec=ignore_hangup) as server:
        os.kill(server.pid, signal.SIGHUP)
        # The absence of an exit needs a window: a heard hangup ends an idle server in ~0.1 s.
        with pytest.raises(subprocess.TimeoutExpired):
            server.wait(timeout=HANGUP_WINDOW_SECONDS)
        response = httpx2.post(
            server.url, content=json.dumps(DISCOVER).encode(), headers=headers(), timeout=10
        )
        assert response.status_code == 200
        os.kill(server.pid, signal.SIGTERM)
        assert server.wait() == 0
