"""The low-level MCP server: exactly three catalog tools whose input schemas are the files."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import mcp_types as types
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import x_mcp_header_map

from expert_booking.access.caller import IpNetwork
from expert_booking.domain.errors import BookingError, RateLimitedError
from expert_booking.edge.admission import CallAdmission
from expert_booking.edge.catalog import ToolCatalog
from expert_booking.edge.client_time import skew_ms
from expert_booking.edge.direct_calls import CallSource, DirectToolCalls
from expert_booking.edge.envelope import build_meta, failure, success, to_call_result
from expert_booking.edge.mcp_tools import CATALOG_CALL, CATALOG_READ, CATALOG_SEARCH
from expert_booking.edge.observability import (
    ActionLineSink,
    ActionObserver,
    caller_of,
    derive_trace_id,
)
from expert_booking.edge.request_context import (
    asgi_scope,
    call_context,
    request_caller,
    request_principal,
    request_times,
)
from expert_booking.edge.schemas import SchemaRegistry
from expert_booking.edge.timestamps import reserved_stamps, result_created_at
from expert_booking.edge.tool_registry import BY_NAME, LOGICAL_TOOLS, ToolHints, call_hints
from expert_booking.edge.tools import Outcome, ToolDispatcher
from expert_booking.edge.wire import render_booking
from expert_booking.ports import Clock
from expert_booking.services import BookingService
from expert_booking.version import DISTRIBUTION

SERVER_NAME = DISTRIBUTION
# tools/list and server/discover only change with the server version. One hour bounds how long
# a client keeps an old list after an upgrade; "public": identical for every caller.
LIST_CACHE_HINT = CacheHint(ttl_ms=3_600_000, scope="public")

_INSTRUCTIONS = """\
Expert booking: find an expert's free time slot, hold it, and confirm it after the person \
approved and paid. Three tools give progressive access to {count} logical tools ({names}):
1. tool_catalog.search - find the logical tool for the task (English, Chinese or German words).
2. tool_catalog.read - read that tool's complete input schema page by page until next is null; \
keep it in context and do not read it again.
3. tool_catalog.call - call it by name with arguments exactly as the schema describes (validated \
strictly, never converted) and a requestSpanId UUID per user request.
Flow: booking.search_available_slots -> booking.hold_slot -> the person approves -> the person \
pays -> booking.confirm_booking; booking.get_booking reads the current state at any time. \
booking.cancel_booking and booking.reschedule_booking answer HUMAN_APPROVAL_REQUIRED with \
details.intent first: show it, and retry with the person's approval of it.
Rules: a hold is not a booking; it expires at expiresAt. Show the person the exact \
confirmationIntent (booking, expert, time, amount, currency, version) and copy intent and \
intentHash unchanged into humanApproval; never build or edit them. Payment happens outside the \
agent, by the person, at paymentPageUrl; never pay for them. Call booking.confirm_booking only \
after the person approved and paid. Use a new UUID idempotencyKey per intended hold or \
confirmation and retry a failed or timed-out call with the same key and arguments. Every result \
is an envelope: act on error.code and error.recovery.action."""
INSTRUCTIONS = _INSTRUCTIONS.format(
    count=len(LOGICAL_TOOLS), names=", ".join(tool.name for tool in LOGICAL_TOOLS)
)

_DESCRIPTIONS = {
    CATALOG_SEARCH: (
        "Step 1 of 3: find the logical tool for a task (search, hold, confirm, read, cancel or "
        "move a booking): items {name, title, uri, summary}, best first, then nextCursor."
    ),
    CATALOG_READ: (
        "Step 2 of 3: read a logical tool's input schema page by page until next is null; keep "
        "the joined document, do not read it again."
    ),
    CATALOG_CALL: (
        "Step 3 of 3: run a logical tool. A hold is not a booking: confirm only after the "
        "person approved the exact confirmationIntent and paid at paymentPageUrl. Result: "
        "{ok, data | error{code, message, retryable, details, recovery.action}, meta}."
    ),
}
_TITLES = {
    CATALOG_SEARCH: "Find a booking tool",
    CATALOG_READ: "Read a tool's input schema",
    CATALOG_CALL: "Call a booking tool",
}


def build_mcp_server(
    *,
    service: BookingService,
    clock: Clock,
    registry: SchemaRegistry,
    version: str,
    tracing_enabled: bool = False,
    action_lines: ActionLineSink | None = None,
    trusted_proxies: Sequence[IpNetwork] = (),
    admission: CallAdmission | None = None,
) -> Server[Any]:
    """The MCP server with ``tool_catalog.search``, ``.read`` and ``.call``.

    No tool declares an ``outputSchema``: the SDK client would send an extra ``tools/list``
    after every call to validate it (SDK pitfall 3), and ``data`` varies per logical tool.

    Args:
        service: The booking use cases.
        clock: The injected clock (envelope and log timestamps).
        registry: The loaded schema documents.
        version: The server version reported in ``serverInfo``.
        tracing_enabled: Whether a tracer provider receives spans (one ``OTEL_*`` set up, or
            the embedding application's); without one the SDK's
            OpenTelemetry middleware is removed, as it costs ~60 us per request for nothing,
            and actions make no spans (``ActionObserver(spans=False)``).
        action_lines: Where action log lines go (``configure_logging``'s handler); without
            it they go through the ``expert_booking.actions`` logger.
        trusted_proxies: ``TRUSTED_PROXIES``: peers whose forwarding headers name the caller.
        admission: Quotas and kill switches (``edge/admission.py``); without it, neither.
    """
    observer = ActionObserver(clock, lines=action_lines, spans=tracing_enabled)
    dispatcher = ToolDispatcher(
        service=service,
        catalog=ToolCatalog(registry),
        registry=registry,
        observer=observer,
        disabled=admission.disabled if admission is not None else lambda _name: None,
    )
    schemas = {name: document.schema for name, document in dispatcher.inputs.items()}
    # The SDK's only use of get_tool_input_schema is Mcp-Param-* header validation, which walks
    # the schema on every tools/call; a schema without x-mcp-header has nothing to validate
    # (``None`` says so), so only annotated schemas are handed out (none today).
    header_schemas = {name: schema for name, schema in schemas.items() if x_mcp_header_map(schema)}
    # Dumped once: the SDK dumps a model result on every request before validating it. Without
    # the cache fields, which the SDK fills from ``cache_hints`` (a dict's own would win).
    listed = types.ListToolsResult(
        tools=[
            types.Tool(
                name=name,
                title=_TITLES[name],
                description=_DESCRIPTIONS[name],
                input_schema=dict(schema),
                annotations=_annotations(name),
            )
            for name, schema in schemas.items()
        ]
    ).model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"ttl_ms", "cache_scope"})

    async def list_tools(
        ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams
    ) -> dict[str, Any]:
        return _with_stamps(listed, asgi_scope(ctx))

    async def serve_call(source: CallSource, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
        if name not in schemas:
            raise _unknown_tool(name)
        scope = source.scope
        client_sent_at, server_received_at = request_times(source.meta, scope, clock)
        span_id = args.get("requestSpanId")
        trace_id = derive_trace_id(span_id if isinstance(span_id, str) else None)
        with observer.action(
            name,
            trace_id=trace_id,
            caller=request_caller(scope, request_principal(scope), trusted_proxies).log_value(),
            client=caller_of(source.meta),
            client_skew_ms=skew_ms(client_sent_at, server_received_at),
        ) as action:
            context = call_context(scope, action.trace_context, client_sent_at, server_received_at)
            if admission is None:
                outcome = await dispatcher.run(name, args, action, context)
                envelope = _envelope(outcome, client_sent_at, server_received_at, scope, clock)
                return _with_stamps(to_call_result(envelope), scope)
            admitted = await admission.admit(source.params or {}, scope, context)
            if isinstance(admitted, RateLimitedError):
                action.fail(admitted.code)
                outcome = Outcome(action, admitted)
                remaining: int | None = 0
            else:
                outcome = await dispatcher.run(name, args, action, context)
                remaining = admitted
            if isinstance(outcome.result, BookingError):
                admission.log_refusal(
                    outcome.result,
                    tool=outcome.result.details.get("name", name),
                    operation_id=outcome.action.operation_id,
                    scope=scope,
                    context=context,
                )
            envelope = _envelope(
                outcome,
                client_sent_at,
                server_received_at,
                scope,
                clock,
                live=admission.live_meta(remaining),
            )
        return _with_stamps(to_call_result(envelope), scope)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> dict[str, Any]:
        return await serve_call(CallSource.of(ctx), params.name, params.arguments or {})

    server: Server[Any] = Server(
        SERVER_NAME,
        version=version,
        instructions=INSTRUCTIONS,
        cache_hints=dict.fromkeys(_LISTED_METHODS, LIST_CACHE_HINT),
        get_tool_input_schema=header_schemas.get,
        on_list_prompts=_no_prompts,
        on_list_resources=_no_resources,
        on_list_resource_templates=_no_resource_templates,
        on_read_resource=_read_resource,
    )
    # Registered as plain request handlers (``on_call_tool`` and ``on_list_tools`` must return
    # models): the results go out as wire dicts (envelope.to_call_result, the listing dumped
    # at startup) with the stamps reserved in ``_meta`` (``timestamps.reserved_stamps``), and
    # the SDK validates them against the protocol's result schemas like any handler result.
    server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    server.add_request_handler("tools/list", types.PaginatedRequestParams, list_tools)
    if not tracing_enabled:
        server.middleware[:] = [
            m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)
        ]
    # Innermost: the OpenTelemetry middleware, when on, still spans every call.
    server.middleware.append(
        DirectToolCalls(serve_call, tools=schemas, server_info=server.server_info_stamp)
    )
    return server


# No prompts or resources exist, but their listings answer (empty, cacheable) rather than
# -32601: hosts probe them, and the official suite's generic caching and listing scenarios
# require them (harness/conformance.py GENERIC_SCENARIOS).
_LISTED_METHODS: tuple[CacheableMethod, ...] = (
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
)


async def _no_prompts(
    _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[])


async def _no_resources(
    _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[])


async def _no_resource_templates(
    _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(resource_templates=[])


async def _read_resource(
    _ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    """Every uri is unknown: -32602 with ``data.uri`` (SEP-2164, 2026-07-28)."""
    raise MCPError(
        code=types.INVALID_PARAMS, message="Resource not found", data={"uri": params.uri}
    )


def _annotations(name: str) -> types.ToolAnnotations:
    """The catalog tools read the fixed catalog; ``tool_catalog.call`` is what it reaches.

    ``tool_catalog.call`` claims only what holds for every logical tool behind it
    (``call_hints``): it proxies writes, so it is not read-only; it reaches the payment
    service, an open world.
    """
    hints = (
        call_hints()
        if name == CATALOG_CALL
        else ToolHints(read_only=True, destructive=False, idempotent=True)
    )
    return types.ToolAnnotations(
        read_only_hint=hints.read_only,
        destructive_hint=hints.destructive,
        idempotent_hint=hints.idempotent,
        open_world_hint=name == CATALOG_CALL,
    )


def _unknown_tool(name: str) -> MCPError:
    """-32602 for a name that is not one of the three tools; a logical tool's names the way."""
    if name in BY_NAME:
        return MCPError(
            code=types.INVALID_PARAMS,
            message=(
                f"Unknown tool: {name} is a logical tool, not an MCP tool. Call it through "
                f'tool_catalog.call with {{"name": "{name}", "arguments": {{...}}, '
                '"requestSpanId": "<uuid>"}.'
            ),
            data={"name": name, "callThrough": CATALOG_CALL},
        )
    return MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")


def _with_stamps(result: Mapping[str, Any], scope: Mapping[str, Any]) -> dict[str, Any]:
    """``result`` with the wire stamps reserved in its ``_meta`` when the HTTP edge fills them."""
    reserved = reserved_stamps(scope)
    if reserved is None:
        return dict(result)
    return {**result, "_meta": dict(reserved)}


def _envelope(
    outcome: Outcome,
    client_sent_at: str,
    server_received_at: str,
    scope: Mapping[str, Any],
    clock: Clock,
    *,
    live: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    action = outcome.action
    meta = build_meta(
        trace_id=action.trace_id,
        span_id=action.span_id,
        operation_id=action.operation_id,
        client_sent_at=client_sent_at,
        server_received_at=server_received_at,
        server_result_created_at=result_created_at(scope, server_received_at, clock),
        cache=action.cache,
    )
    if live:
        meta.update(live)
    if isinstance(outcome.result, BookingError):
        return failure(outcome.result, meta, render_booking)
    return success(outcome.result.data, meta)
