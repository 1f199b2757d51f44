"""Where the Bearer gate sits and what it hands on, in process with a stand-in token checker.

The real verifier against a real AS is ``tests/e2e/test_oauth_gate.py``; here the checker
accepts exactly one token string, so the tests can look at the order of the gates, the
principal the handler sees, and that the token never reaches it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from expert_booking.call_context import Principal
from expert_booking.edge.bearer_gate import (
    SCOPE_PRINCIPAL,
    BearerAuth,
    ResourceMetadata,
    needed_scope,
)
from expert_booking.edge.http_app import create_app
from expert_booking.settings import Settings
from harness.inprocess import inprocess_app
from tests.integration.test_http_app import ENVELOPE, SENT, TickingClock

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:3000/mcp"
RESOURCE = "https://booking.example/mcp"
ISSUER = "https://login.example"
GOOD = "good-token"


class OneToken:
    """Accepts ``GOOD`` with ``scopes``; refuses everything else as ``SIGNATURE``."""

    def __init__(self, scopes: list[str]) -> None:
        self.scopes = scopes

    async def verify_or_refusal(self, token: str) -> AccessToken | str:
        if token != GOOD:
            return "SIGNATURE"
        return AccessToken(
            token=token,
            client_id="agent",
            scopes=self.scopes,
            subject="alice",
            claims={"iss": ISSUER, "sub": "alice"},
        )


def handler_server(seen: list[dict[str, Any]]) -> Server[Any]:
    schema: dict[str, Any] = {"type": "object"}

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        assert ctx.request is not None
        scope = ctx.request.scope
        seen.append({"principal": scope.get(SCOPE_PRINCIPAL), "headers": scope["headers"]})
        return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])

    return Server(
        "seen",
        version="1.0.0",
        on_call_tool=call_tool,
        get_tool_input_schema=lambda name: schema,
    )


@asynccontextmanager
async def client(
    scopes: list[str],
    seen: list[dict[str, Any]] | None = None,
    *,
    auth: bool = True,
    resource: str = RESOURCE,
) -> AsyncIterator[httpx2.AsyncClient]:
    metadata = ResourceMetadata(resource=resource, authorization_servers=(ISSUER,))
    app = create_app(
        mcp_server=handler_server([] if seen is None else seen),
        settings=Settings(),
        clock=TickingClock(),
        auth=BearerAuth(OneToken(scopes), metadata) if auth else None,
    )
    with anyio.fail_after(10):
        async with inprocess_app(app) as transport, httpx2.AsyncClient(transport=transport) as c:
            yield c


def call(name: str, arguments: dict[str, Any] | None = None) -> bytes:
    params = {
        "name": name,
        "arguments": arguments or {},
        "_meta": {**ENVELOPE, "clientSentAt": SENT},
    }
    return json.dumps(
        {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}
    ).encode()


def headers(name: str = "tool_catalog.search", **extra: str) -> dict[str, str]:
    return {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": name,
        "x-mcp-client-sent-at": SENT,
        **extra,
    }


def test_the_scope_a_request_needs_comes_from_the_registry() -> None:
    assert needed_scope({"method": "tools/list"}) == "booking:read"
    assert needed_scope([1, 2]) == "booking:read"
    search = {"method": "tools/call", "params": {"name": "tool_catalog.search", "arguments": {}}}
    assert needed_scope(search) == "booking:read"
    hold = {"name": "tool_catalog.call", "arguments": {"name": "booking.hold_slot"}}
    assert needed_scope({"method": "tools/call", "params": hold}) == "booking:write"
    odd = {"name": "tool_catalog.call", "arguments": ["booking.hold_slot"]}
    assert needed_scope({"method": "tools/call", "params": odd}) == "booking:read"
    direct = {"name": "booking.confirm_booking"}
    assert needed_scope({"method": "tools/call", "params": direct}) == "booking:write"


def test_the_metadata_keeps_an_issuer_without_a_path_exactly() -> None:
    metadata = ResourceMetadata(resource=RESOURCE, authorization_servers=("http://127.0.0.1:4444",))
    document = metadata.document().model_dump(mode="json")
    assert document["authorization_servers"] == ["http://127.0.0.1:4444"]
    assert (
        metadata.metadata_url == "https://booking.example/.well-known/oauth-protected-resource/mcp"
    )
    assert set(metadata.routes()) == {
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    }


@pytest.mark.parametrize("resource", [RESOURCE, f"{RESOURCE}/", "https://booking.example/"])
async def test_the_challenge_names_a_metadata_url_this_server_answers(resource: str) -> None:
    """RFC 9728 5.1: a client follows ``resource_metadata`` as given, trailing slash and all."""
    async with client(["booking:read"], resource=resource) as c:
        refused = await c.post(URL, content=call("tool_catalog.search"), headers=headers())
        assert refused.status_code == 401
        challenge = refused.headers["www-authenticate"]
        metadata_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
        path = httpx2.URL(metadata_url).path
        published = await c.get(f"http://127.0.0.1:3000{path}")
    assert published.status_code == 200, (path, published.text)
    assert published.json()["resource"] == resource


async def test_an_admitted_request_carries_its_principal_and_not_its_token() -> None:
    seen: list[dict[str, Any]] = []
    async with client(["booking:read"], seen) as c:
        response = await c.post(
            URL,
            content=call("tool_catalog.search"),
            headers=headers(authorization=f"Bearer {GOOD}"),
        )
    assert response.status_code == 200, response.text
    (request,) = seen
    assert request["principal"] == Principal(issuer=ISSUER, subject="alice")
    assert all(name != b"authorization" for name, _ in request["headers"])
    assert GOOD.encode() not in b"".join(value for _, value in request["headers"])


async def test_host_and_malformed_json_are_refused_before_authentication() -> None:
    async with client(["booking:read"]) as c:
        wrong_host = await c.post(
            "http://evil.example/mcp", content=call("tool_catalog.search"), headers=headers()
        )
        not_json = await c.post(URL, content=b"{", headers=headers())
    assert wrong_host.status_code == 421
    assert not_json.status_code == 400
    assert not_json.json()["error"]["code"] == -32700
    assert "www-authenticate" not in wrong_host.headers
    assert "www-authenticate" not in not_json.headers


async def test_authentication_comes_before_the_client_time_check() -> None:
    async with client(["booking:read"]) as c:
        unstamped = await c.post(
            URL,
            content=call("tool_catalog.search"),
            headers={k: v for k, v in headers().items() if k != "x-mcp-client-sent-at"},
        )
    assert unstamped.status_code == 401
    assert unstamped.json()["error"]["data"]["code"] == "AUTHENTICATION_REQUIRED"


async def test_a_scope_refusal_lets_the_handler_not_run() -> None:
    seen: list[dict[str, Any]] = []
    async with client(["booking:read"], seen) as c:
        response = await c.post(
            URL,
            content=call("tool_catalog.call", {"name": "booking.confirm_booking"}),
            headers=headers("tool_catalog.call", authorization=f"Bearer {GOOD}"),
        )
    assert response.status_code == 403
    assert seen == []


async def test_without_oauth_there_is_no_metadata_and_no_token_is_asked_for() -> None:
    seen: list[dict[str, Any]] = []
    async with client([], seen, auth=False) as c:
        metadata = await c.get("http://127.0.0.1:3000/.well-known/oauth-protected-resource/mcp")
        response = await c.post(URL, content=call("tool_catalog.search"), headers=headers())
    assert metadata.status_code == 404
    assert response.status_code == 200
    assert seen[0]["principal"] is None
