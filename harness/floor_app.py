"""The benchmark's floor server: the real HTTP stack (gates, SDK, Litestar) with one no-op tool."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from starlette.types import ASGIApp

from expert_booking.adapters.clock import SystemClock
from expert_booking.edge.http_app import create_app
from expert_booking.ports import Clock
from expert_booking.settings import Settings

NOOP_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {},
    "additionalProperties": False,
}
_NOOP_TOOL = types.Tool(
    name="noop",
    description="Does nothing and answers ok (the benchmark floor).",
    input_schema=NOOP_INPUT_SCHEMA,
)


async def _list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    del ctx, params
    return types.ListToolsResult(tools=[_NOOP_TOOL], ttl_ms=0, cache_scope="private")


async def _call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    del ctx, params
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="ok")],
        structured_content={"result": "ok"},
    )


def build_floor_server() -> Server[Any]:
    """A low-level MCP server with the single tool ``noop``."""
    return Server(
        "expert-booking-floor",
        version="0.0.0",
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
        get_tool_input_schema=lambda name: NOOP_INPUT_SCHEMA if name == "noop" else None,
    )


def build_floor_app(settings: Settings, *, clock: Clock | None = None) -> ASGIApp:
    """The floor server's ASGI app, built by the project's ``create_app``."""
    return create_app(
        mcp_server=build_floor_server(), settings=settings, clock=clock or SystemClock()
    )
