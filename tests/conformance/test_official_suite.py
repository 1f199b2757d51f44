"""The official MCP conformance suite (Node) against a spawned server behind the stamping proxy.

The suite run happens once per module (``suite_run``); each test then judges one aspect of it.
The per-scenario table is printed even when everything passes. Results stay in
``conformance-results/<stamp>-2026-07-28/`` (git-ignored): ``summary.md`` and raw ``checks.json``.
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest

from expert_booking.client import ClientSentAtTransport
from expert_booking.proxy import StampingProxy, ThreadedServer
from expert_booking.testing.server_process import ServerProcess
from harness.conformance import (
    GENERIC_SCENARIOS,
    STATELESS_FIXTURE_CHECKS,
    Check,
    Expectation,
    ScenarioResult,
    SuiteRun,
    assess,
    default_out_dir,
    load_expected_failures,
    run_suite,
    summary_table,
)

pytestmark = pytest.mark.conformance

SUITE_DEADLINE_SECONDS = 330.0
"""Installs (empty cache in CI) plus the whole requirement set; the job budget is 6 minutes."""

PROTOCOL = "2026-07-28"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess() as spawned:
        yield spawned


@pytest.fixture(scope="module")
def suite_run(server: ServerProcess) -> SuiteRun:
    with StampingProxy.running(server.url) as proxy:
        return run_suite(proxy.url, default_out_dir(), deadline_seconds=SUITE_DEADLINE_SECONDS)


def test_official_suite_passes_every_generic_scenario(
    suite_run: SuiteRun, capsys: pytest.CaptureFixture[str]
) -> None:
    """Generic scenarios pass; every other failure is an expected one, with its reason."""
    with capsys.disabled():
        sys.stdout.write(f"\n{summary_table(suite_run.results)}\n")
        sys.stdout.write(f"results: {suite_run.out_dir} ({suite_run.seconds:.1f} s)\n")
    problems = assess(suite_run.results, load_expected_failures())
    assert problems == [], "\n".join(problems)
    assert set(GENERIC_SCENARIOS) <= set(suite_run.results)
    stateless = suite_run.results["server-stateless"]
    assert {check.id for check in stateless.failing()} <= STATELESS_FIXTURE_CHECKS


def test_suite_baseline_check_accepts_the_expected_failures_file(suite_run: SuiteRun) -> None:
    """The suite's own --expected-failures verdict agrees: no regression, no stale entry."""
    tail = "\n".join(suite_run.output.splitlines()[-40:])
    assert suite_run.returncode == 0, tail


def test_assessment_refuses_generic_failures_unexplained_failures_and_stale_entries() -> None:
    """The verdict logic itself, on made-up results."""

    def scenario(name: str, *checks: tuple[str, str]) -> ScenarioResult:
        return ScenarioResult(name, [Check(i, status, "msg") for i, status in checks])

    fixture_check = min(STATELESS_FIXTURE_CHECKS)
    passing = {name: scenario(name, ("c", "SUCCESS")) for name in GENERIC_SCENARIOS}
    passing["server-stateless"] = scenario("server-stateless", (fixture_check, "FAILURE"))
    passing["tools-call-image"] = scenario("tools-call-image", ("tools-call-image", "FAILURE"))
    baseline = [
        Expectation("server-stateless", fixture_check, "fixture"),
        Expectation("tools-call-image", None, "fixture tool"),
    ]
    assert assess(passing, baseline) == []
    broken = {
        **passing,
        "caching": scenario("caching", ("sep-2549-x", "FAILURE")),
        "tools-list": scenario("tools-list", ("w", "WARNING")),
        "prompts-get-simple": scenario("prompts-get-simple", ("p", "FAILURE")),
        "tools-call-image": scenario("tools-call-image", ("tools-call-image", "SUCCESS")),
    }
    stale_and_whole = [*baseline, Expectation("caching", None, "no")]
    assert assess(broken, stale_and_whole) == [
        "generic scenario caching must not be baselined as a whole",
        "generic scenario caching fails sep-2549-x: msg",
        "unexpected FAILURE prompts-get-simple:p: msg",
        "stale expected failure tools-call-image: it passes now",
    ]
    del broken["resources-list"]
    assert "generic scenario resources-list did not run" in assess(broken, baseline)


def test_expected_failures_file_gives_every_entry_a_reason() -> None:
    """Each entry parses as the suite's format and carries a reason comment."""
    entries = load_expected_failures()
    assert entries
    assert all(len(entry.reason) > 20 for entry in entries)
    assert not {entry.scenario for entry in entries if entry.check is None} & set(GENERIC_SCENARIOS)


def test_stamping_proxy_passes_requests_through_and_adds_only_the_stamp() -> None:
    """Method, raw path, query, body and every header (Host, Origin too) reach the upstream."""
    seen: list[dict[str, Any]] = []

    async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        seen.append(
            {
                "method": scope["method"],
                "raw_path": scope["raw_path"],
                "query": scope["query_string"],
                "headers": [(k.decode(), v.decode()) for k, v in scope["headers"]],
                "body": body,
            }
        )
        await send(
            {
                "type": "http.response.start",
                "status": 418,
                "headers": [
                    (b"content-type", b"text/plain"),
                    (b"content-length", b"15"),
                    (b"x-upstream", b"yes"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b"short and stout"})

    upstream = ThreadedServer(echo)
    upstream.start()
    try:
        with StampingProxy.running(upstream.base_url + "/mcp") as proxy:
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
            headers = [
                ("Host", "evil.example.com"),
                ("Origin", "http://evil.example.com"),
                ("mcp-method", "tools/list"),
                ("X-Twice", "a"),
                ("X-Twice", "b"),
                ("Content-Type", "application/json"),
            ]
            address = urlsplit(proxy.url)
            assert address.hostname is not None
            assert address.port is not None
            with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
                request = "POST /mcp/a%2Fb?x=1&y=%20 HTTP/1.1\r\n"
                request += "".join(f"{k}: {v}\r\n" for k, v in headers)
                request += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}"
                sock.sendall(request.encode())
                reply = _read_all(sock)
    finally:
        upstream.stop()
    head, _, payload = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 418"), head
    assert b"x-upstream: yes" in head.lower()
    assert payload == b"short and stout"
    assert len(seen) == 1
    got = seen[0]
    assert got["method"] == "POST"
    assert got["raw_path"] == b"/mcp/a%2Fb"
    assert got["query"] == b"x=1&y=%20"
    names = [name.lower() for name, _ in got["headers"]]
    assert "connection" not in names  # hop-by-hop
    stamp = dict(got["headers"])["x-mcp-client-sent-at"]
    forwarded = [(k, v) for k, v in got["headers"] if k.lower() != "x-mcp-client-sent-at"]
    expected = [(k.lower(), v) for k, v in headers]
    assert [(k.lower(), v) for k, v in forwarded if k.lower() != "content-length"] == expected
    sent = json.loads(got["body"])
    assert sent["params"]["_meta"] == {"clientSentAt": stamp}
    assert {k: v for k, v in sent.items() if k != "params"} == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
    }


class _Capture(httpx2.AsyncBaseTransport):
    """Keeps the request the stamping transport would send, and sends nothing."""

    def __init__(self) -> None:
        self.request: httpx2.Request | None = None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await request.aread()
        self.request = request
        return httpx2.Response(204)


@pytest.fixture
async def stamped_search(server: ServerProcess) -> httpx2.Request:
    capture = _Capture()
    async with httpx2.AsyncClient(transport=ClientSentAtTransport(capture)) as client:
        await client.post(
            server.url,
            headers={
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": PROTOCOL,
                "mcp-method": "tools/call",
                "mcp-name": "tool_catalog.search",
            },
            json={
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {
                    "name": "tool_catalog.search",
                    "arguments": {"query": "hold", "limit": 1},
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                        "io.modelcontextprotocol/clientCapabilities": {},
                    },
                },
            },
        )
    assert capture.request is not None
    return capture.request


@pytest.mark.anyio
@pytest.mark.parametrize("padded", [b"  tool_catalog.search  ", b"\ttool_catalog.search "])
async def test_server_itself_ignores_whitespace_around_mcp_name(
    server: ServerProcess, stamped_search: httpx2.Request, padded: bytes
) -> None:
    """http-header-validation's OWS check, sent straight to the server.

    The proxy cannot forward optional whitespace (RFC 9110 section 5.5; h11 refuses it), so the
    suite's ``sep-2243-server-accepts-whitespace-header-value`` is repeated here byte for byte.
    """
    request = stamped_search
    lines = [b"POST " + request.url.raw_path + b" HTTP/1.1"]
    for name, value in request.headers.raw:
        if name.lower() == b"connection":
            continue
        lines.append(name + b": " + (padded if name.lower() == b"mcp-name" else value))
    lines.append(b"Connection: close")
    raw = b"\r\n".join(lines) + b"\r\n\r\n" + request.content
    host, port = request.url.host, request.url.port
    assert port is not None
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(raw)
        reply = _read_all(sock)
    head, _, payload = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), reply[:600]
    message = json.loads(payload)
    assert message["id"] == 7
    assert message["result"]["structuredContent"]["ok"] is True


def _read_all(sock: socket.socket) -> bytes:
    chunks: list[bytes] = []
    for _ in range(10_000):  # bounded; the peer closes (Connection: close)
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)
