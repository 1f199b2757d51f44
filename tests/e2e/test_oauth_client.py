"""The official Python client's OAuth against the server in ``AUTH_MODE=oauth``, end to end.

The server is the app ``serve`` builds (``bootstrap.build_asgi_app``) under uvicorn on a real
loopback socket bound first, so that ``AUTH_RESOURCE`` can be its own URL (the client checks
that the metadata's ``resource`` is the URL it connects to). The AS is npm ``oidc-provider``
with no default resource: a token is audience-bound only if the client names the resource.

The client starts with no token and no scope of its own: the server's 401 names
``booking:read`` and its metadata, the client finds the AS there, gets a read token, lists the
tools and searches; the hold's 403 ``insufficient_scope`` makes it step up to
``booking:read booking:write`` and the hold succeeds on the retry.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from mcp import Client
from mcp.client.auth import TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from expert_booking.bootstrap import build_asgi_app
from expert_booking.client import open_client
from expert_booking.settings import Settings
from harness.authorization_server import AuthorizationServer, Resource
from harness.mcp_calls import hold_arguments

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class MemoryStorage(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@pytest.fixture
async def listening() -> AsyncIterator[socket.socket]:
    """A bound, listening loopback socket: connections queue until the app serves them."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield sock
    finally:
        sock.close()


async def call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    wrapped = {"name": name, "arguments": arguments, "requestSpanId": str(uuid.uuid4())}
    with anyio.fail_after(30):
        result = await client.call_tool("tool_catalog.call", wrapped)
    envelope = result.structured_content
    assert isinstance(envelope, dict)
    return envelope


async def test_the_official_client_discovers_authorizes_steps_up_and_books(
    listening: socket.socket, tmp_path: Path
) -> None:
    resource = f"http://127.0.0.1:{listening.getsockname()[1]}/mcp"
    with AuthorizationServer(resources=[Resource(resource)], default_resource=None) as auth:
        settings = Settings.from_env(
            {
                "AUTH_MODE": "oauth",
                "AUTH_ISSUER": auth.issuer,
                "AUTH_RESOURCE": resource,
                "BOOKING_DB_PATH": str(tmp_path / "booking.db"),
            }
        )
        server = uvicorn.Server(
            uvicorn.Config(build_asgi_app(settings), lifespan="on", log_level="warning")
        )
        serving = asyncio.create_task(server.serve(sockets=[listening]))
        try:
            provider = ClientCredentialsOAuthProvider(
                server_url=resource,
                storage=MemoryStorage(),
                client_id="booking-agent",
                client_secret="agent-secret",
                issuer=auth.issuer,
            )
            with anyio.fail_after(60):
                async with open_client(resource, auth=provider) as client:
                    tools = await client.list_tools()
                    found = await call(
                        client, "booking.search_available_slots", {"query": "AI", "limit": 5}
                    )
                    slot = found["data"]["slots"][0]["slotId"]
                    held = await call(client, "booking.hold_slot", hold_arguments(slot))
                    read = await call(
                        client, "booking.get_booking", {"bookingId": held["data"]["bookingId"]}
                    )
        finally:
            server.should_exit = True
            await serving
    assert [tool.name for tool in tools.tools] == [
        "tool_catalog.search",
        "tool_catalog.read",
        "tool_catalog.call",
    ]
    assert found["ok"] is True
    assert held["ok"] is True, held
    assert held["data"]["status"] == "HELD"
    assert read["data"]["bookingId"] == held["data"]["bookingId"]
    # What the client asked the AS for: first the 401's scope, then the 403's, both for this
    # resource (RFC 8707), so each token was audience-bound to this server.
    assert [
        (r["grant_type"], r["scope"], r["resource"], r["status"]) for r in auth.token_requests
    ] == [
        ("client_credentials", "booking:read", resource, 200),
        ("client_credentials", "booking:read booking:write", resource, 200),
    ]
