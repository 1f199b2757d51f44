"""``proxy --upstream`` with credentials in the URL: refused at start, the password never shown.

The HTTP client sends URL userinfo as Basic auth, in place of each client's own
``Authorization`` and over plain http, to a server that checks no Basic auth: an operator who
wrote them is told at start instead. Start-up errors show the URL with its userinfo as ``***``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import pytest

from expert_booking.proxy import ProxyApp, StampingProxy
from expert_booking.testing.server_process import ServerProcess, ServerStartError

pytestmark = pytest.mark.e2e

PROXY = (sys.executable, "-m", "expert_booking", "proxy", "--upstream")
CREDENTIALS = (
    "expert-booking-mcp proxy: upstream must not carry credentials: the proxy would send them as "
    "Basic auth over plain http, replacing each client's own Authorization, and the server checks "
    "none; got "
)


def _refusal(upstream: str) -> tuple[int | None, list[str]]:
    """Start the ``proxy`` command, which must exit before its ready line: status and stderr."""
    proxy = ServerProcess(command=(*PROXY, upstream), db_flag=False)
    try:
        with pytest.raises(ServerStartError):
            proxy.start()
        return proxy.returncode, proxy.stderr_lines
    finally:
        proxy.close()


@pytest.mark.parametrize(
    ("upstream", "shown"),
    [
        ("http://user:secret@127.0.0.1:3000/mcp", "http://***@127.0.0.1:3000/mcp"),
        ("http://:secret@[::1]:3000/mcp?x=1", "http://***@[::1]:3000/mcp?x=1"),
        ("http://secret@localhost/mcp", "http://***@localhost/mcp"),
        ("http://@127.0.0.1:3000/mcp", "http://***@127.0.0.1:3000/mcp"),
    ],
)
def test_an_upstream_with_credentials_is_refused_at_start_in_one_line_without_them(
    upstream: str, shown: str
) -> None:
    status, stderr = _refusal(upstream)
    assert status == 2
    (line,) = stderr
    assert json.loads(line)["message"] == f"{CREDENTIALS}{shown!r}"


def test_an_upstream_that_is_not_http_is_named_without_its_credentials() -> None:
    status, stderr = _refusal("https://user:secret@127.0.0.1:3000/mcp")
    assert status == 2
    (line,) = stderr
    assert json.loads(line)["message"] == (
        "expert-booking-mcp proxy: upstream must be an http:// URL, "
        "got 'https://***@127.0.0.1:3000/mcp'"
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda: StampingProxy("http://user:secret@127.0.0.1:3000/mcp"),
        lambda: ProxyApp("http://user:secret@127.0.0.1:3000"),
    ],
    ids=["StampingProxy", "ProxyApp"],
)
def test_the_proxy_classes_refuse_credentials_too(make: Callable[[], object]) -> None:
    with pytest.raises(ValueError) as refused:  # noqa: PT011 - the message is checked below
        make()
    message = str(refused.value)
    assert message.startswith(CREDENTIALS.removeprefix("expert-booking-mcp proxy: "))
    assert "secret" not in message
