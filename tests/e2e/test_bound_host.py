"""The address ``serve`` binds is a Host its clients may name (operator audit, ALLOWED_HOSTS).

With the default ``ALLOWED_HOSTS``, a server bound to another loopback address than
``127.0.0.1`` answered 421 to every client that called the address it listens on. An IP
literal cannot be rebound by DNS, so the default list now includes it; an ``ALLOWED_HOSTS``
the operator set is used exactly as set.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from expert_booking.testing.server_process import ServerProcess
from tests.e2e.rawhttp import RawResponse, enveloped, exchange, now_stamp, request, stamped_headers

pytestmark = pytest.mark.e2e

ADDRESS = "127.0.0.2"


def _discover(port: int, host: str) -> RawResponse:
    stamp = now_stamp()
    data = request(
        "/mcp",
        enveloped("server/discover", {}, stamp),
        headers=stamped_headers(stamp, "server/discover"),
        host=host,
    )
    response = exchange(port, data, ADDRESS)
    assert response is not None
    return response


def _port(server: ServerProcess) -> int:
    return int(server.base_url.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def default_hosts() -> Iterator[ServerProcess]:
    env = {k: v for k, v in os.environ.items() if k != "ALLOWED_HOSTS"}
    with ServerProcess(env=env, extra_args=["--host", ADDRESS]) as running:
        yield running


def test_the_bound_address_is_served_with_the_default_host_list(
    default_hosts: ServerProcess,
) -> None:
    assert default_hosts.base_url.startswith(f"http://{ADDRESS}:")
    port = _port(default_hosts)
    response = _discover(port, f"{ADDRESS}:{port}")
    assert response.status == 200, response.body
    assert "supportedVersions" in response.json()["result"]


def test_other_names_are_still_refused_with_the_default_host_list(
    default_hosts: ServerProcess,
) -> None:
    port = _port(default_hosts)
    assert _discover(port, f"rebind.example:{port}").status == 421
    assert _discover(port, f"127.0.0.3:{port}").status == 421


def test_an_allowed_hosts_the_operator_set_is_used_exactly() -> None:
    env = {**os.environ, "ALLOWED_HOSTS": "localhost"}
    with ServerProcess(env=env, extra_args=["--host", ADDRESS]) as server:
        port = _port(server)
        assert _discover(port, f"{ADDRESS}:{port}").status == 421
        assert _discover(port, f"localhost:{port}").status == 200
