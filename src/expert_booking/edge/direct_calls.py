"""A 2026-era ``tools/call`` of this server's tools, answered inside the SDK's middleware chain.

For a handler the SDK validates the request's params twice (the protocol surface, then
``CallToolRequestParams``) and, on the way out, validates and re-dumps the whole result against
the protocol's result schema (``serialize_server_result``), copies it, and stamps ``serverInfo``
into its ``_meta`` with a deep copy of the server's identity. For ``tools/call`` the result is
the envelope twice (text and ``structuredContent``), so that outbound pass walks the largest
structure of the request two more times, on every call.

``Server.middleware`` is the SDK's public place to answer a request itself ("a middleware
that short-circuits without ``call_next`` owns its result, envelope included"). This one does
so for exactly the requests it can answer as the SDK would:

- ``tools/call`` at a 2026-era protocol version whose params hold only ``name``,
  ``arguments`` and ``_meta``, pass the SDK's own surface validation
  (``mcp_types.methods.validate_client_request``, kept on this path) and name one of this
  server's tools;
- the result is the handler's own wire dict (``envelope.to_call_result``: ``resultType``
  included) with a fresh copy of the ``serverInfo`` stamp added to its ``_meta`` unless the
  handler set one, as the SDK adds it.

Anything else goes to ``call_next``: the SDK's path, its errors and its checks, unchanged.
That includes another method, a legacy version, malformed params, an unknown tool name, and
params with any other member: ``task`` (which the SDK's params model checks and the 2026
surface ignores), an input round's ``requestState`` and ``inputResponses`` (a middleware
such as the SDK's ``RequestStateBoundary``, inserted before this one, judges them; the
registered handler then serves the call). What the skipped result validation guaranteed is a
test instead: every tool's results, successes and failures, are fixed points of
``serialize_server_result`` (``tests/e2e/test_direct_calls.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types import SERVER_INFO_META_KEY
from mcp_types.methods import validate_client_request
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

ServeCall = Callable[[ServerRequestContext[Any], str, Mapping[str, Any]], Awaitable[dict[str, Any]]]
"""``(ctx, tool name, arguments) -> the CallToolResult wire dict``: the server's one call path."""

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
        result = await self._serve(ctx, name, params.get("arguments") or {})
        meta = result.get("_meta") or {}
        if meta.get(SERVER_INFO_META_KEY) is None:
            result["_meta"] = {**meta, SERVER_INFO_META_KEY: dict(self._stamp)}
        return result
