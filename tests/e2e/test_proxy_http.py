"""``proxy`` over raw sockets: the server's Host and Origin checks hold through it.

The proxy forwards ``Host`` and ``Origin`` exactly as received, so the server judges them. A
``Connection`` header nominating either would have made the proxy drop it as hop-by-hop: the
upstream's own name then filled ``Host`` and a missing ``Origin`` reads as no browser, so a
request the server refuses directly passed through the proxy (security audit F3).
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator

import pytest

from expert_booking.proxy import StampingProxy
from expert_booking.testing.server_process import ServerProcess
from tests.e2e.rawhttp import RawResponse, enveloped, exchange, now_stamp, request, stamped_headers

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def proxy_port() -> Iterator[int]:
    with ServerProcess() as server, StampingProxy.running(server.url) as proxy:
        yield int(proxy.url.removesuffix("/mcp").rsplit(":", 1)[1])


def _discover(port: int, *, host: str | None = None, **headers: str) -> RawResponse:
    stamp = now_stamp()
    data = request(
        "/mcp",
        enveloped("server/discover", {}, stamp),
        headers={**stamped_headers(stamp, "server/discover"), **headers},
        host=host or f"127.0.0.1:{port}",
    )
    response = exchange(port, data)
    assert response is not None
    return response


def test_a_request_through_the_proxy_is_served(proxy_port: int) -> None:
    assert _discover(proxy_port).status == 200


def test_the_server_still_judges_host_and_origin_through_the_proxy(proxy_port: int) -> None:
    assert _discover(proxy_port, host="rebound.example").status == 421
    assert _discover(proxy_port, Origin="http://rebound.example").status == 403


@pytest.mark.parametrize(
    ("nominated", "headers"),
    [
        ("host", {"host": "rebound.example"}),
        ("Origin", {"Origin": "http://rebound.example"}),
        ("keep-alive, HOST", {"host": "rebound.example"}),
    ],
)
def test_a_connection_header_nominating_host_or_origin_is_refused(
    proxy_port: int, nominated: str, headers: dict[str, str]
) -> None:
    response = _discover(proxy_port, Connection=nominated, **headers)
    assert response.status == 400
    assert response.headers["content-type"].startswith("text/plain")  # the proxy's, not JSON-RPC


def test_a_request_without_host_is_refused_not_given_the_upstreams_name(proxy_port: int) -> None:
    stamp = now_stamp()
    body = json.dumps(enveloped("server/discover", {}, stamp)).encode()
    fields = {
        **stamped_headers(stamp, "server/discover"),
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Content-Length": str(len(body)),
    }
    head = "POST /mcp HTTP/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    response = exchange(proxy_port, (head + "\r\n").encode() + body)
    assert response is not None
    assert response.status == 400
    assert response.headers["content-type"].startswith("text/plain")


def test_an_upstream_that_cannot_be_reached_is_502_naming_it_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on once released
        probe.bind(("127.0.0.1", 0))
        closed = int(probe.getsockname()[1])
    upstream = f"http://127.0.0.1:{closed}"
    with (
        caplog.at_level(logging.WARNING, logger="expert_booking.proxy"),
        StampingProxy.running(f"{upstream}/mcp") as proxy,
    ):
        response = _discover(int(proxy.url.removesuffix("/mcp").rsplit(":", 1)[1]))
    assert response.status == 502
    assert response.body == f"proxy: upstream {upstream} failed: ConnectError".encode()
    (record,) = caplog.records
    assert record.getMessage().startswith(f"upstream {upstream} failed: ConnectError: ")
