"""A real loopback payment status service (CONTRACT section 4) for tests and the demo."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, Final

import anyio
import uvicorn
from litestar import Litestar, Request, get
from litestar.params import FromPath
from litestar.response import Response

from expert_booking.adapters.clock import SystemClock
from expert_booking.adapters.payments_http import PAYMENT_RESPONDED_HEADER, PAYMENTS_PATH
from expert_booking.domain.model import format_instant
from expert_booking.ports import Clock


class _Unset:
    """Marks ``paid_at`` as not given (``None`` means "send null")."""


UNSET: Final = _Unset()


@dataclass(frozen=True, slots=True)
class PaymentAnswer:
    """What the stub answers for one booking."""

    http_status: int
    body: bytes
    delay_seconds: float


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the stub received; header names are lower-case."""

    method: str
    path: str
    booking_id: str
    headers: Mapping[str, str]


class PaymentStub:
    """``GET /payments/{bookingId}`` on 127.0.0.1, answered as set by :meth:`set_answer`.

    Start it inside the caller's event loop::

        async with PaymentStub.running() as stub:
            stub.set_answer("bk-1", status="PAID")
            ... PAYMENT_QUERY_BASE_URL=stub.base_url ...

    An unknown booking gets 404. Every request is recorded in :attr:`requests` (with its
    ``traceparent`` and ``x-mcp-server-request-sent-at`` headers); every answer carries header
    ``x-payment-responded-at``.
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        """Create a stopped stub; use :meth:`running` to serve it."""
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._answers: dict[str, PaymentAnswer] = {}
        self._closing: anyio.Event | None = None
        self.requests: list[RecordedRequest] = []
        self.base_url = ""

    def set_answer(
        self,
        booking_id: str,
        *,
        status: str = "PAID",
        amount: str = "500.00",
        currency: str = "CNY",
        paid_at: str | _Unset | None = UNSET,
        http_status: int = 200,
        raw_body: bytes | str | None = None,
        delay_seconds: float = 0,
    ) -> None:
        """Set what ``GET /payments/{booking_id}`` answers from now on.

        Args:
            booking_id: the booking the answer is for (echoed as ``bookingId``).
            status: ``PENDING``, ``PAID``, ``FAILED`` or ``CLOSED`` (anything, for bad answers).
            amount: the exact amount string.
            currency: the currency code.
            paid_at: ``paidAt``; by default the stub clock's now for ``PAID``, else null.
            http_status: the HTTP status (e.g. 500 for an unavailable service).
            raw_body: sent verbatim instead of the JSON answer (malformed answers).
            delay_seconds: wait this long before answering (a slow service, for timeouts).
        """
        if isinstance(paid_at, _Unset):
            paid_at = format_instant(self._clock.now()) if status == "PAID" else None
        if raw_body is None:
            body = json.dumps(
                {
                    "bookingId": booking_id,
                    "status": status,
                    "amount": amount,
                    "currency": currency,
                    "paidAt": paid_at,
                }
            ).encode()
        else:
            body = raw_body.encode() if isinstance(raw_body, str) else raw_body
        self._answers[booking_id] = PaymentAnswer(http_status, body, delay_seconds)

    def requests_for(self, booking_id: str) -> list[RecordedRequest]:
        """The recorded requests that asked about ``booking_id``."""
        return [request for request in self.requests if request.booking_id == booking_id]

    @classmethod
    @asynccontextmanager
    async def running(cls, *, clock: Clock | None = None) -> AsyncIterator[PaymentStub]:
        """Serve a new stub on a free loopback port for the duration of the block."""
        stub = cls(clock=clock)
        async with stub.serve():
            yield stub

    @asynccontextmanager
    async def serve(self) -> AsyncIterator[None]:
        """Serve this stub on a free loopback port; sets :attr:`base_url`."""
        config = uvicorn.Config(
            self._app(),
            host="127.0.0.1",
            port=0,
            lifespan="off",
            access_log=False,
            log_level="warning",
            timeout_graceful_shutdown=1,
        )
        server = _InProcessServer(config)
        closing = self._closing = anyio.Event()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(server.serve)
            try:
                with anyio.fail_after(10):
                    await server.ready.wait()
                if not server.started:
                    raise RuntimeError("the payment stub could not start")
                port = server.servers[0].sockets[0].getsockname()[1]
                self.base_url = f"http://127.0.0.1:{port}"
                yield
            finally:
                closing.set()  # releases delayed answers at once
                server.should_exit = True

    def _app(self) -> Litestar:
        @get(PAYMENTS_PATH + "{booking_id:str}")
        async def payment(
            booking_id: FromPath[str], request: Request[Any, Any, Any]
        ) -> Response[bytes]:
            self.requests.append(
                RecordedRequest(
                    method=request.method,
                    path=request.url.path,
                    booking_id=booking_id,
                    headers={name.lower(): value for name, value in request.headers.items()},
                )
            )
            answer = self._answers.get(booking_id)
            if answer is None:
                answer = PaymentAnswer(404, b'{"error":"payment not found"}', 0)
            if answer.delay_seconds > 0 and self._closing is not None:
                with anyio.move_on_after(answer.delay_seconds):
                    await self._closing.wait()
            return Response(
                answer.body,
                status_code=answer.http_status,
                media_type="application/json",
                headers={PAYMENT_RESPONDED_HEADER: format_instant(self._clock.now())},
            )

        return Litestar(
            route_handlers=[payment], debug=False, logging_config=None, openapi_config=None
        )


class _InProcessServer(uvicorn.Server):
    """uvicorn inside someone else's event loop: no signal handlers, a readiness event."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = anyio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        finally:
            self.ready.set()

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Leave the host process's signal handlers alone."""
        yield
