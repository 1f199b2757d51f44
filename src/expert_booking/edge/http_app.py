"""The HTTP application: Litestar hosting the SDK's Streamable HTTP endpoint behind our gates."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, cast

from litestar import Litestar, get
from litestar.handlers import asgi
from litestar.types import Receive, Scope, Send
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

from expert_booking.edge.gates import HostAllowList, McpRequestGate, OriginAllowList
from expert_booking.edge.timestamps import TimestampLayer
from expert_booking.ports import Clock
from expert_booking.settings import Settings

Lifespan = Callable[[Litestar], AbstractAsyncContextManager[None]]


@get("/healthz", sync_to_thread=False)
def healthz() -> dict[str, str]:
    """Liveness: the process serves HTTP (``ping`` no longer exists at 2026-07-28)."""
    return {"status": "ok"}


def create_app(
    *,
    mcp_server: Server[Any],
    settings: Settings,
    clock: Clock,
    lifespans: Sequence[Lifespan] = (),
) -> ASGIApp:
    """Build the ASGI application that uvicorn serves.

    ``POST /mcp`` reaches ``mcp_server`` through the SDK's ``StreamableHTTPSessionManager``
    (stateless, JSON responses, its own DNS-rebinding guard and body limit kept on as defence in
    depth); ``GET /healthz`` answers ``{"status": "ok"}``. Around Litestar sit, outermost first,
    :class:`~expert_booking.edge.timestamps.TimestampLayer` (ingress time taken before routing;
    every ``/mcp`` response, refusals included, carries both server timestamps) and
    :class:`~expert_booking.edge.gates.McpRequestGate` (the contract's refusals as JSON-RPC
    errors, before Litestar or the SDK sees the request). The returned callable is the outermost.

    Each call builds a new session manager (it can run only once), so build one app per server
    or test. Drive its lifespan (uvicorn does; in process see ``harness.inprocess``).

    Args:
        mcp_server: the low-level MCP server with the tools.
        settings: host/origin allow-lists and the body limit are read from here.
        clock: the source of the server wire timestamps.
        lifespans: resources to open before the MCP session manager starts and close after it
            stops, in this order.

    Raises:
        SettingsError: an ``ALLOWED_HOSTS`` / ``ALLOWED_ORIGINS`` entry is malformed.
    """
    hosts = HostAllowList.from_entries(settings.allowed_hosts)
    origins = OriginAllowList.from_entries(settings.allowed_origins)
    session_manager = StreamableHTTPSessionManager(
        app=mcp_server,
        json_response=True,
        stateless=True,
        security_settings=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=hosts.sdk_patterns(),
            allowed_origins=origins.sdk_patterns(),
        ),
        max_request_body_size=settings.max_body_bytes,
    )
    forward = session_manager.handle_request

    @asgi("/mcp", is_mount=False, copy_scope=False)
    async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        # copy_scope=False: the scope dict the outer layers wrote into is the one the SDK's
        # Request (ctx.request) holds, which is how tool handlers read the wire timestamps.
        await forward(cast("Any", scope), cast("Any", receive), cast("Any", send))

    @asynccontextmanager
    async def run_session_manager(_app: Litestar) -> AsyncIterator[None]:
        async with session_manager.run():
            yield

    app = Litestar(
        route_handlers=[mcp_endpoint, healthz],
        lifespan=[*lifespans, run_session_manager],
        debug=False,
        logging_config=None,
        openapi_config=None,
    )
    gated = McpRequestGate(
        cast("ASGIApp", app),
        hosts=hosts,
        origins=origins,
        max_body_bytes=settings.max_body_bytes,
    )
    return TimestampLayer(gated, clock=clock)
