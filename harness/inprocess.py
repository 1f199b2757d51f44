"""Serve an ASGI app in process: drive its lifespan, talk to it through ``httpx2.ASGITransport``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
from starlette.types import ASGIApp, Message

STARTUP_TIMEOUT_SECONDS = 10.0


class LifespanError(RuntimeError):
    """The app reported ``lifespan.startup.failed`` or ``lifespan.shutdown.failed``."""


@asynccontextmanager
async def inprocess_app(
    app: ASGIApp, *, timeout_seconds: float = STARTUP_TIMEOUT_SECONDS
) -> AsyncIterator[httpx2.ASGITransport]:
    """Run ``app``'s ASGI lifespan around the block and yield a transport into it.

    ``httpx2.ASGITransport`` sends no lifespan events and the outer wrapper returned by
    ``create_app`` has no ``lifespan()`` helper, so this drives the ASGI lifespan protocol
    itself. Use the transport with ``expert_booking.client.open_client(url, transport=...)``
    or a plain ``httpx2.AsyncClient``; URLs must use an allowed Host (``http://127.0.0.1/mcp``).

    Raises:
        LifespanError: startup or shutdown failed inside the app.
        TimeoutError: startup or shutdown did not finish within ``timeout_seconds``.
    """
    to_app, app_inbox = anyio.create_memory_object_stream[Message](2)
    app_outbox, from_app = anyio.create_memory_object_stream[Message](2)
    scope: dict[str, Any] = {
        "type": "lifespan",
        "asgi": {"version": "3.0", "spec_version": "2.0"},
        "state": {},
    }

    async def run_lifespan() -> None:
        async with app_inbox, app_outbox:
            await app(scope, app_inbox.receive, app_outbox.send)

    async with anyio.create_task_group() as tasks, to_app, from_app:
        tasks.start_soon(run_lifespan)
        await _exchange(to_app, from_app, "startup", timeout_seconds)
        try:
            yield httpx2.ASGITransport(app=app)
        finally:
            await _exchange(to_app, from_app, "shutdown", timeout_seconds)


async def _exchange(
    to_app: anyio.abc.ObjectSendStream[Message],
    from_app: anyio.abc.ObjectReceiveStream[Message],
    phase: str,
    timeout_seconds: float,
) -> None:
    with anyio.fail_after(timeout_seconds):
        await to_app.send({"type": f"lifespan.{phase}"})
        reply = await from_app.receive()
    if reply["type"] != f"lifespan.{phase}.complete":
        raise LifespanError(f"lifespan {phase} failed: {reply.get('message', '')}")
