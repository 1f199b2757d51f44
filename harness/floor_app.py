"""The benchmark's floor: the bare SDK (low-level ``Server``, one async no-op tool) on Litestar.

Nothing of this project runs in it, so a ratio to it shows our whole request path: gates,
timestamps, dispatch, envelope, use case, store. It is tuned as ``expert-booking-mcp serve`` is
(perf-floor section 3): uvicorn with uvloop and httptools, no access log, the collector off
while importing and building, ``gc.freeze()`` and the collector on once serving, the SDK's
OpenTelemetry middleware removed (ours is removed when nothing exports), ``json_response=True``
and stateless, the SDK's DNS-rebinding guard on for loopback hosts (ours keeps it on too).

Child entry (``harness.bench_servers.floor_server``)::

    python -m harness.floor_app --host 127.0.0.1 --port 0 [--db IGNORED]

prints the same ready line as the CLI (``MCP endpoint: http://HOST:PORT/mcp``) on stderr.
This module imports only the SDK, Litestar and uvicorn (never ``expert_booking``).
"""

from __future__ import annotations

import argparse
import gc
import signal
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from types import FrameType
from typing import Any, cast

import mcp_types as types
import uvicorn
from litestar import Litestar
from litestar.handlers import asgi
from litestar.types import Receive, Scope, Send
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

NOOP_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {},
    "additionalProperties": False,
}
LOOPBACK_HOSTS = ("127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]", "[::1]:*")
LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")


def build_floor_server() -> Server[Any]:
    """The SDK's low-level ``Server`` with one async no-op tool and no OpenTelemetry middleware."""
    tool = types.Tool(name="noop", description="Does nothing.", input_schema=NOOP_INPUT_SCHEMA)

    async def list_tools(
        _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(
        _ctx: ServerRequestContext[Any], _params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="ok")],
            structured_content={"result": "ok"},
        )

    server: Server[Any] = Server(
        "floor",
        version="0.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=lambda name: NOOP_INPUT_SCHEMA if name == "noop" else None,
    )
    server.middleware[:] = [
        m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)
    ]
    return server


def build_floor_app(server: Server[Any] | None = None) -> Litestar:
    """Litestar mounting the SDK's stateless JSON Streamable HTTP manager at ``/mcp``."""
    manager = StreamableHTTPSessionManager(
        app=server if server is not None else build_floor_server(),
        json_response=True,
        stateless=True,
        security_settings=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=list(LOOPBACK_HOSTS),
            allowed_origins=list(LOOPBACK_ORIGINS),
        ),
    )

    @asgi("/mcp", is_mount=False, copy_scope=False)
    async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        await manager.handle_request(cast("Any", scope), cast("Any", receive), cast("Any", send))

    @asynccontextmanager
    async def run_manager(_app: Litestar) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Litestar(
        route_handlers=[mcp_endpoint],
        lifespan=[run_manager],
        debug=False,
        logging_config=None,
        openapi_config=None,
    )


def _stop(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    raise SystemExit(0)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the floor until SIGTERM/SIGINT; 0."""
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    parser = argparse.ArgumentParser(prog="python -m harness.floor_app")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--db", help="ignored: the floor has no database")
    args = parser.parse_args(argv)
    gc.disable()  # as the CLI: building the app makes long-lived objects only

    class AnnouncingServer(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                gc.freeze()
                gc.enable()
                port = self.servers[0].sockets[0].getsockname()[1]
                print(f"MCP endpoint: http://{args.host}:{port}/mcp", file=sys.stderr, flush=True)

    config = uvicorn.Config(
        build_floor_app(),
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
    )
    AnnouncingServer(config).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
