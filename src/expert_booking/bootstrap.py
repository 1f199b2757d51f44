"""Composition root: the one place that builds adapters and wires them into the use cases."""

from __future__ import annotations

import os
import ssl
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

import httpx
from opentelemetry import trace

from expert_booking.access.tool_switches import ToolSwitchWatcher
from expert_booking.adapters.clock import SystemClock
from expert_booking.adapters.jwks import JwksCache
from expert_booking.adapters.jwt_verifier import JwtAccessTokenVerifier, VerifierPolicy
from expert_booking.adapters.payments_http import HttpPaymentQuery
from expert_booking.adapters.quota_memory import InProcessQuotaCounter
from expert_booking.adapters.sqlite_store import SqliteBookingStore
from expert_booking.adapters.sqlite_tool_switches import SqliteToolSwitches
from expert_booking.edge.admission import CallAdmission
from expert_booking.edge.bearer_gate import BearerAuth, ResourceMetadata
from expert_booking.edge.http_app import create_app
from expert_booking.edge.mcp_server import build_mcp_server
from expert_booking.edge.schemas import SchemaRegistry
from expert_booking.policy import BookingPolicy
from expert_booking.services import BookingService
from expert_booking.settings import AuthMode, SettingsError
from expert_booking.telemetry import configure_tracing, tracer_provider_installed
from expert_booking.version import package_version

if TYPE_CHECKING:
    from datetime import datetime

    from litestar import Litestar
    from starlette.types import ASGIApp

    from expert_booking.domain.model import Booking, Money
    from expert_booking.edge.observability import ActionLineSink
    from expert_booking.ports import (
        BookingListQuery,
        BookingListResult,
        BookingStore,
        Clock,
        ListPosition,
        SlotNeighbours,
        SlotQuery,
        SlotSearchResult,
        Transaction,
    )
    from expert_booking.settings import Settings

T = TypeVar("T")


class _StoreOpenedAtStartup:
    """Stands in for the store until the lifespan has opened it (the file is opened async)."""

    def __init__(self) -> None:
        self._store: SqliteBookingStore | None = None

    def bind(self, store: SqliteBookingStore) -> None:
        self._store = store

    async def run(self, work: Callable[[Transaction], T]) -> T:
        return await self._opened().run(work)

    async def peek_booking(self, booking_id: str, *, owner: str) -> Booking | None:
        return await self._opened().peek_booking(booking_id, owner=owner)

    async def peek_free_slots(
        self, query: SlotQuery, now: datetime, offset: int, limit: int
    ) -> SlotSearchResult:
        return await self._opened().peek_free_slots(query, now, offset, limit)

    async def peek_bookings(
        self, query: BookingListQuery, after: ListPosition | None, limit: int
    ) -> BookingListResult:
        return await self._opened().peek_bookings(query, after, limit)

    async def peek_slots_near(
        self, slot_id: str, now: datetime, limit: int, *, price: Money | None = None
    ) -> SlotNeighbours:
        return await self._opened().peek_slots_near(slot_id, now, limit, price=price)

    def _opened(self) -> SqliteBookingStore:
        if self._store is None:
            raise RuntimeError("the booking store is used before the app started")
        return self._store


def payment_tls(base_url: str) -> ssl.SSLContext | bool:
    """TLS settings of the payment client: httpx's default (its CA bundle) for ``https``.

    For an ``http`` payment service no request ever uses TLS (the client only requests paths
    under its base URL and follows no redirects), so instead of loading the CA bundle (~30 ms
    of every cold start) it gets a context that verifies as strictly and trusts no
    certificate: a TLS connection, should one ever be attempted, fails closed.
    """
    if base_url.startswith("https://"):
        return True
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


AUTH_HTTP_TIMEOUT_SECONDS = 5.0
"""Per phase, for the authorization server's metadata and key set (fetched rarely, cached)."""


def bearer_auth(settings: Settings, clock: Clock) -> tuple[BearerAuth, httpx.AsyncClient] | None:
    """In ``AUTH_MODE=oauth``: the request gate's token checks and the HTTP client of its keys.

    The verifier checks tokens against ``AUTH_ISSUER``'s keys (``AUTH_JWKS_URL`` or its
    metadata) for the audience ``AUTH_RESOURCE``; the metadata names that issuer as the one
    authorization server. The caller closes the client. ``None`` in ``AUTH_MODE=none``.

    Raises:
        SettingsError: ``AUTH_ISSUER`` or ``AUTH_RESOURCE`` is missing.
    """
    if settings.auth_mode is not AuthMode.OAUTH:
        return None
    policy = verifier_policy(settings)
    http = httpx.AsyncClient(timeout=httpx.Timeout(AUTH_HTTP_TIMEOUT_SECONDS))
    keys = JwksCache(
        http, issuer=policy.issuer, jwks_url=settings.auth_jwks_url, clock=time.monotonic
    )
    verifier = JwtAccessTokenVerifier(policy, keys, clock)
    metadata = ResourceMetadata(resource=policy.resource, authorization_servers=(policy.issuer,))
    return BearerAuth(verifier, metadata), http


def verifier_policy(settings: Settings) -> VerifierPolicy:
    """The token policy of ``AUTH_ISSUER``, ``AUTH_RESOURCE``, ``AUTH_ALGORITHMS``, the leeway.

    Raises:
        SettingsError: the issuer or the resource is not configured.
    """
    if settings.auth_issuer is None or settings.auth_resource is None:
        raise SettingsError("token verification needs AUTH_ISSUER and AUTH_RESOURCE")
    return VerifierPolicy(
        issuer=settings.auth_issuer,
        resource=settings.auth_resource,
        algorithms=settings.auth_algorithms,
        leeway_seconds=settings.auth_leeway_seconds,
    )


def build_asgi_app(
    settings: Settings,
    *,
    clock: Clock | None = None,
    payments_transport: httpx.AsyncBaseTransport | None = None,
    action_lines: ActionLineSink | None = None,
) -> ASGIApp:
    """Build the whole server; overrides exist for tests and the harness only.

    Args:
        settings: validated configuration (environment plus CLI flags).
        clock: time source; the system clock unless a test controls time.
        payments_transport: an httpx transport to stub the payment service in process.
        action_lines: the handler of ``configure_logging``, to write action lines straight
            to it; without it they go through the ``expert_booking.actions`` logger.
    """
    clock = clock or SystemClock()
    store = _StoreOpenedAtStartup()
    tracer_provider = configure_tracing(os.environ, service_version=package_version())
    # Spans when OTEL_* asks for an exporter, or when the embedding process installed a
    # provider before building the app; else the API would only make no-op spans.
    tracing = tracer_provider is not None or tracer_provider_installed()
    payments_http = httpx.AsyncClient(
        base_url=settings.payment_query_base_url,
        timeout=httpx.Timeout(settings.payment_timeout_seconds),
        transport=payments_transport,
        verify=payment_tls(settings.payment_query_base_url),
    )
    typed_store: BookingStore = store
    auth = bearer_auth(settings, clock)
    registry = SchemaRegistry.load()
    service = BookingService(
        store=typed_store,
        payments=HttpPaymentQuery(
            payments_http,
            clock,
            deadline_seconds=settings.payment_timeout_seconds,
            answer_schema=registry["payment_answer"].validator,
            # Like the actions (ActionObserver(spans=False)): no spans unless tracing is on.
            tracer=None if tracing else trace.NoOpTracer(),
        ),
        clock=clock,
        policy=BookingPolicy(
            hold_ttl=settings.hold_ttl,
            approval_ttl=settings.approval_ttl,
            approval_skew=settings.approval_skew,
            slot_cache_ttl=settings.slot_cache_ttl,
            payment_page_base_url=settings.payment_page_base_url,
        ),
    )
    tool_switches = ToolSwitchWatcher(
        SqliteToolSwitches(settings.db_path, busy_timeout_ms=settings.db_busy_timeout_ms)
    )
    quota_limits = settings.quota_limits
    # In process memory: SQLite's supported deployment is one server process per file.
    admission = CallAdmission(
        quota=InProcessQuotaCounter(quota_limits) if quota_limits is not None else None,
        switches=tool_switches,
        trusted_proxies=settings.trusted_proxies,
    )
    mcp_server = build_mcp_server(
        service=service,
        clock=clock,
        registry=registry,
        version=package_version(),
        tracing_enabled=tracing,
        action_lines=action_lines,
        trusted_proxies=settings.trusted_proxies,
        admission=admission,
    )

    @asynccontextmanager
    async def resources(_app: Litestar) -> AsyncIterator[None]:
        async with AsyncExitStack() as closing:  # each close runs even if a later one raises
            if tracer_provider is not None:
                closing.callback(tracer_provider.shutdown)
            closing.push_async_callback(payments_http.aclose)
            if auth is not None:
                closing.push_async_callback(auth[1].aclose)
            opened = await SqliteBookingStore.open(
                settings.db_path, busy_timeout_ms=settings.db_busy_timeout_ms
            )
            closing.push_async_callback(opened.close)
            store.bind(opened)
            await tool_switches.start()  # after the store opened: it migrated the tables
            closing.push_async_callback(tool_switches.stop)
            yield

    return create_app(
        mcp_server=mcp_server,
        settings=settings,
        clock=clock,
        lifespans=[resources],
        auth=None if auth is None else auth[0],
    )
