"""This server's own ``tools/call``, answered without the SDK's generic per-request work.

Two entries, one call path (``ServeCall``) and one eligibility rule:

- **At the HTTP gate** (:class:`DirectHttpCalls`, the hot path): the gate (``edge/gates.py``)
  has read, parsed and checked the request (Host, Origin, media types, size, version, JSON,
  client time, routing headers). For a request the SDK would hand to this server's own call
  handler, the SDK's judgements are run here from its public modules (the JSON-RPC envelope
  model, a repeated routing header, ``classify_inbound_request`` and its modern version, the
  method's params validation, its DNS-rebinding guard), the call is served, and the JSON-RPC
  response written as the SDK writes it: ``application/json``, status 200 or, for an error,
  the SDK's table status (an ``MCPError`` of the call path; any other failure is mapped by the
  tool's own ``envelope.guarded``), the same JSON (msgspec writes non-ASCII as UTF-8 where the SDK
  escapes it: the same value, other bytes). Skipped: the SDK's second parse of the body and
  the per-request objects its generic entry builds (connection, runner, session, context, the
  result's dump and re-encoding); NOTES.md has the measurement.
- **As ``Server.middleware``** (:class:`DirectToolCalls`, for what reaches the SDK: the
  in-process client, and HTTP requests the gate entry declines): ``Server.middleware`` is the
  SDK's public place to answer a request itself ("a middleware that short-circuits without
  ``call_next`` owns its result, envelope included").

Both serve exactly the requests they can answer as the SDK would: ``tools/call`` at a
2026-era protocol version whose params hold only ``name``, ``arguments`` and ``_meta``, pass
the SDK's own surface validation (``mcp_types.methods.validate_client_request``) and name one
of this server's tools; the result is the handler's own wire dict (``envelope.to_call_result``:
``resultType`` included) with a fresh copy of the ``serverInfo`` stamp added to its ``_meta``
unless the handler set one, as the SDK adds it. The gate entry also declines a tool whose input
schema declares ``Mcp-Param-*`` headers (none today: the SDK validates those) and any server
whose middleware is more than :class:`DirectToolCalls` alone (OpenTelemetry's spans, an input
round's ``RequestStateBoundary``): such middleware must see every call.

Anything else goes to the SDK: its path, its errors and its checks, unchanged. That includes
another method, a legacy version, malformed params, an unknown tool name, and params with any
other member (``task``; an input round's ``requestState`` and ``inputResponses``). What the
skipped result validation guaranteed is a test instead: every tool's results, successes and
failures, are fixed points of ``serialize_server_result`` (``tests/e2e/test_direct_calls.py``);
the two entries answer alike (``tests/integration/test_direct_http_calls.py``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.runner import modern_error_data
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp_types import SERVER_INFO_META_KEY, JSONRPCError, JSONRPCRequest
from mcp_types.methods import validate_client_request
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Scope, Send

from expert_booking.edge.json_text import compact_bytes
from expert_booking.edge.request_context import asgi_scope


@dataclass(frozen=True, slots=True)
class CallSource:
    """What the call path reads of a request, whichever entry received it.

    Attributes:
        scope: The ASGI scope of the HTTP request (``{}`` for the SDK's in-process client).
        meta: The request's ``params._meta`` as sent (an object; else ``None``).
        params: The request's params, as sent.
    """

    scope: Mapping[str, Any]
    meta: Mapping[str, Any] | None
    params: Mapping[str, Any] | None

    @classmethod
    def of(cls, ctx: ServerRequestContext[Any]) -> CallSource:
        """The source of a request the SDK dispatched."""
        params = ctx.params
        meta = params.get("_meta") if params is not None else None
        return cls(asgi_scope(ctx), meta if isinstance(meta, Mapping) else None, params)


ServeCall = Callable[[CallSource, str, Mapping[str, Any]], Awaitable[dict[str, Any]]]
"""``(source, tool name, arguments) -> the CallToolResult wire dict``: the one call path."""

_METHOD = "tools/call"
_SERVED_MEMBERS = frozenset({"name", "arguments", "_meta"})


class DirectToolCalls:
    """Server middleware answering well-formed 2026-era calls of ``tools`` with ``serve``."""

    __slots__ = ("_serve", "_stamp", "_tools")

    def __init__(
        self, serve: ServeCall, *, tools: Collection[str], server_info: Mapping[str, Any]
    ) -> None:
        """Answer with ``serve``; ``server_info`` is the SDK's ``Server.server_info_stamp``.

        The stamp is taken once and copied into each result: an in-process client receives
        the result dict itself.
        """
        self._serve = serve
        self._tools = frozenset(tools)
        self._stamp = server_info

    async def __call__(self, ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
        """Answer the call, or pass it on unchanged."""
        params = ctx.params
        if (
            ctx.method != _METHOD
            or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
            or params is None
            or not _SERVED_MEMBERS.issuperset(params)
        ):
            return await call_next(ctx)
        try:
            validate_client_request(_METHOD, ctx.protocol_version, params)
        except (ValidationError, KeyError, ValueError):
            return await call_next(ctx)  # the SDK answers it, with its own error
        name = params["name"]
        if name not in self._tools:
            return await call_next(ctx)
        return await self.serve(CallSource.of(ctx), name, params.get("arguments") or {})

    def serves(self, name: str) -> bool:
        """Whether ``name`` is one of this server's tools."""
        return name in self._tools

    async def serve(
        self, source: CallSource, name: str, arguments: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The call's result, stamped with ``serverInfo`` as the SDK stamps it."""
        result = await self._serve(source, name, arguments)
        meta = result.get("_meta") or {}
        if meta.get(SERVER_INFO_META_KEY) is None:
            result["_meta"] = {**meta, SERVER_INFO_META_KEY: dict(self._stamp)}
        return result


_JSON_CONTENT_TYPE: Final = (b"content-type", b"application/json")
_OK: Final = 200


class DirectHttpCalls:
    """The gate's entry to :class:`DirectToolCalls` (see the module docstring)."""

    __slots__ = ("_calls", "_param_headers", "_security")

    def __init__(
        self,
        calls: DirectToolCalls,
        *,
        security: TransportSecuritySettings | None,
        param_headers: Callable[[str], object] | None,
    ) -> None:
        """Serve through ``calls``.

        Args:
            calls: the server's middleware that answers its calls.
            security: the settings of the SDK's DNS-rebinding guard, as the SDK is given them.
            param_headers: the server's ``get_tool_input_schema`` (a schema only for a tool
                declaring ``Mcp-Param-*`` headers), or ``None``.
        """
        self._calls = calls
        self._security = TransportSecurityMiddleware(security)
        self._param_headers = param_headers

    async def __call__(self, scope: Scope, decoded: Any, send: Send) -> bool:
        """Answer the request and return ``True``, or ``False`` for the SDK to answer it."""
        if type(decoded) is not dict or decoded.get("method") != _METHOD:
            return False
        params = decoded.get("params")
        if type(params) is not dict or not _SERVED_MEMBERS.issuperset(params):
            return False
        name = params.get("name")
        if not isinstance(name, str) or not self._calls.serves(name):
            return False
        if self._param_headers is not None and self._param_headers(name) is not None:
            return False
        request_id = self._request_id(scope, decoded, params)
        if request_id is None or not await self._guard_passes(scope):
            return False
        meta = params.get("_meta")
        source = CallSource(scope, meta if isinstance(meta, dict) else None, params)
        try:
            result = await self._calls.serve(source, name, params.get("arguments") or {})
        except MCPError as exc:  # the call path's own protocol errors; bugs are mapped inside it
            error = JSONRPCError(jsonrpc="2.0", id=request_id, error=modern_error_data(exc))
            wire = error.model_dump(mode="json", by_alias=True, exclude_none=True)
            status = ERROR_CODE_HTTP_STATUS.get(error.error.code, _OK)
            body = json.dumps(wire, separators=(",", ":")).encode()
        else:
            status = _OK
            body = compact_bytes({"jsonrpc": "2.0", "id": request_id, "result": result})
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-length", str(len(body)).encode()), _JSON_CONTENT_TYPE],
            }
        )
        await send({"type": "http.response.body", "body": body})
        return True

    @staticmethod
    def _request_id(scope: Scope, decoded: dict[str, Any], params: dict[str, Any]) -> Any:
        """The request's id if the SDK would dispatch it to the call handler, else ``None``."""
        try:
            request = JSONRPCRequest.model_validate(decoded)
        except ValidationError:
            return None
        raw = scope["headers"]
        pairs = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in raw]
        if find_duplicated_routing_header(pairs) is not None:
            return None
        headers: dict[str, str] = {}
        for key, value in pairs:
            headers.setdefault(key, value)
        verdict = classify_inbound_request(decoded, headers=headers)
        if isinstance(verdict, InboundLadderRejection):
            return None
        if verdict.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return None
        try:
            validate_client_request(_METHOD, verdict.protocol_version, params)
        except (ValidationError, KeyError, ValueError):
            return None
        return request.id

    async def _guard_passes(self, scope: Scope) -> bool:
        """The SDK's own Host/Origin/Content-Type guard, kept as the second one behind the gate."""
        return await self._security.validate_request(Request(scope), is_post=True) is None
