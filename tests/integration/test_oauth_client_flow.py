"""The official client's OAuth (client credentials) against the real AS, and what it sends.

A minimal protected resource stands in for the server's gate until the gate lands: the SDK's
RFC 9728 metadata route and bearer middleware around this project's JWT verifier, on a real
loopback socket. The point here is the client and the verifier: the client finds the AS through
the metadata, gets a token, and (checked on the AS's side) names this resource in the token
request, so its token is audience-bound without any default resource on the AS.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import httpx
import httpx2
import pytest
import uvicorn
from mcp.client.auth import TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.routes import create_protected_resource_routes
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken, ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from expert_booking.adapters.clock import SystemClock
from expert_booking.adapters.jwks import JwksCache
from expert_booking.adapters.jwt_verifier import JwtAccessTokenVerifier, VerifierPolicy
from harness.authorization_server import AuthorizationServer, Resource

pytestmark = pytest.mark.anyio


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


async def whoami(scope: Scope, receive: Receive, send: Send) -> None:
    request = Request(scope, receive)
    access = request.user.access_token
    body = {"subject": access.subject, "issuer": access.claims["iss"], "aud": access.claims["aud"]}
    await JSONResponse(body)(scope, receive, send)


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


async def test_the_official_client_discovers_the_as_and_sends_the_resource(
    listening: socket.socket,
) -> None:
    port = listening.getsockname()[1]
    resource = f"http://127.0.0.1:{port}/mcp"
    with AuthorizationServer(resources=[Resource(resource)], default_resource=None) as auth:
        async with httpx.AsyncClient(timeout=10) as http:
            keys = JwksCache(http, issuer=auth.issuer, clock=asyncio.get_running_loop().time)
            verifier = JwtAccessTokenVerifier(
                VerifierPolicy(auth.issuer, resource, ("RS256", "ES256"), 10), keys, SystemClock()
            )
            # Built through the metadata model: it keeps an issuer without a path exactly as
            # written, where a bare AnyHttpUrl("http://host:port") gains a "/" and the client
            # then refuses the AS's metadata (issuer mismatch, RFC 8414 section 3.3).
            prm = ProtectedResourceMetadata.model_validate(
                {"resource": resource, "authorization_servers": [auth.issuer]}
            )
            metadata_url = AnyHttpUrl(
                f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"
            )
            app = Starlette(
                routes=[
                    *create_protected_resource_routes(
                        prm.resource, prm.authorization_servers, ["booking:read"]
                    ),
                    Route("/mcp", RequireAuthMiddleware(whoami, ["booking:read"], metadata_url)),
                ],
                middleware=[
                    Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(verifier))
                ],
            )
            server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning"))
            serving = asyncio.create_task(server.serve(sockets=[listening]))
            try:
                provider = ClientCredentialsOAuthProvider(
                    server_url=resource,
                    storage=MemoryStorage(),
                    client_id="booking-agent",
                    client_secret="agent-secret",
                    scope="booking:read",
                    issuer=auth.issuer,
                )
                async with httpx2.AsyncClient(auth=provider, timeout=30) as client:
                    answer = await client.get(resource)
            finally:
                server.should_exit = True
                await serving
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"subject": "booking-agent", "issuer": auth.issuer, "aud": resource}
    (request,) = auth.token_requests
    assert request["grant_type"] == "client_credentials"
    assert request["resource"] == resource
    assert request["status"] == 200
