"""The HTTP application: Litestar hosting the SDK's Streamable HTTP endpoint behind our gates."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final, cast

from litestar import Litestar, get
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from expert_booking.edge.allow_lists import HostAllowList, OriginAllowList
from expert_booking.edge.bearer_gate import BearerAuth
from expert_booking.edge.direct_calls import DirectHttpCalls, DirectToolCalls
from expert_booking.edge.gates import GateLimits, McpRequestGate
from expert_booking.edge.refusals import RefusalLog
from expert_booking.edge.timestamps import TimestampLayer
from expert_booking.ports import Clock
from expert_booking.settings import Settings

Lifespan = Callable[[Litestar], AbstractAsyncContextManager[None]]
MCP_PATHS: Final = frozenset({"/mcp", "/mcp/"})
"""The decoded request paths that are the MCP endpoint (a trailing slash is the same one)."""


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
    auth: BearerAuth | None = None,
) -> ASGIApp:
    """Build the ASGI application that uvicorn serves.

    The outermost callable is :class:`McpRouter`. ``/mcp`` goes through
    :class:`~expert_booking.edge.timestamps.TimestampLayer` (ingress time first; every MCP
    response, refusals included, carries both server timestamps) and
    :class:`~expert_booking.edge.gates.McpRequestGate` (the contract's refusals as JSON-RPC
    errors) straight to the SDK's ``StreamableHTTPSessionManager`` (stateless, JSON
    responses, its own DNS-rebinding guard and body limit kept on as defence in depth). Every
    other path goes to Litestar: ``GET /healthz`` answers ``{"status": "ok"}``, the rest 404.
    With ``auth`` (``AUTH_MODE=oauth``) the gate demands Bearer tokens and the router serves the
    RFC 9728 metadata (``/.well-known/oauth-protected-resource/mcp`` and the root form) with
    the SDK's handler; neither it nor ``/healthz`` needs a token.
    Litestar's lifespan opens ``lifespans`` and runs the session manager.

    Each call builds a new session manager (it can run only once), so build one app per server
    or test. Drive its lifespan (uvicorn does; in process see ``harness.inprocess``).

    Args:
        mcp_server: the low-level MCP server with the tools.
        settings: host/origin allow-lists, the body limit and the client clock tolerance.
        clock: the source of the server wire timestamps.
        lifespans: resources to open before the MCP session manager starts and close after it
            stops, in this order.
        auth: Bearer authentication and scopes for ``/mcp`` (``None``: ``AUTH_MODE=none``).

    Raises:
        SettingsError: an ``ALLOWED_HOSTS`` / ``ALLOWED_ORIGINS`` entry is malformed.
    """
    hosts = HostAllowList.from_entries(settings.host_allow_list)
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

    @asynccontextmanager
    async def run_session_manager(_app: Litestar) -> AsyncIterator[None]:
        async with session_manager.run():
            yield

    app = Litestar(
        route_handlers=[healthz],
        lifespan=[*lifespans, run_session_manager],
        debug=False,
        logging_config=None,
        openapi_config=None,
    )
    gate = McpRequestGate(
        cast("ASGIApp", session_manager.handle_request),
        hosts=hosts,
        origins=origins,
        limits=GateLimits(
            max_body_bytes=settings.max_body_bytes,
            client_clock_tolerance=settings.client_clock_tolerance,
        ),
        auth=auth,
        refusal_log=RefusalLog(per_second=settings.refusal_log_lines_per_second),
        direct=_direct_entry(mcp_server, session_manager.security_settings),
    )
    return McpRouter(
        mcp=TimestampLayer(gate, clock=clock),
        other=cast("ASGIApp", app),
        metadata={} if auth is None else auth.metadata.routes(),
    )


class McpRouter:
    """The one routing decision for MCP: exactly the paths in ``MCP_PATHS`` reach it.

    An HTTP request whose decoded path is ``/mcp`` (or ``/mcp/``) goes to the MCP chain
    (timestamps, gate, SDK); everything else, lifespan included, goes to Litestar, which has
    no MCP route, so ``//mcp``, ``/mcp//``, ``/%2Fmcp``, ``/MCP`` or ``/mcp;x`` are its 404.
    Deciding before the framework matters: Litestar's router drops empty path segments, so
    a path-based check behind it could be skipped by a spelling it routes to the same handler.
    """

    __slots__ = ("_mcp", "_metadata", "_other")

    def __init__(
        self, *, mcp: ASGIApp, other: ASGIApp, metadata: Mapping[str, ASGIApp] | None = None
    ) -> None:
        """Send MCP requests to ``mcp``, metadata paths to theirs, the rest to ``other``."""
        self._mcp = mcp
        self._other = other
        self._metadata = dict(metadata or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Route one ASGI connection."""
        if scope["type"] == "http":
            path = scope["path"]
            if path in MCP_PATHS:
                await self._mcp(scope, receive, send)
                return
            metadata = self._metadata.get(path)
            if metadata is not None:
                await metadata(scope, receive, send)
                return
        await self._other(scope, receive, send)


def _direct_entry(
    server: Server[Any], security: TransportSecuritySettings | None
) -> DirectHttpCalls | None:
    """The gate's entry to the server's own calls, when its only middleware answers them.

    Any other middleware (OpenTelemetry's spans, an input round's boundary) must see every
    call, so the SDK then serves them all (``edge.direct_calls``).
    """
    middleware = server.middleware
    if len(middleware) != 1 or not isinstance(middleware[0], DirectToolCalls):
        return None
    return DirectHttpCalls(
        middleware[0], security=security, param_headers=server.get_tool_input_schema
    )
