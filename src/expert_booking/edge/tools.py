"""Dispatch of the three catalog tools and the logical tools behind ``tool_catalog.call``."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from expert_booking.access.ports import DisabledTool
from expert_booking.call_context import CallContext
from expert_booking.domain.errors import (
    BookingError,
    CatalogStaleError,
    InvalidArgumentsError,
    ToolNotFoundError,
)
from expert_booking.edge.admission import tool_disabled
from expert_booking.edge.catalog import ToolCatalog, input_stem
from expert_booking.edge.envelope import guarded
from expert_booking.edge.mcp_tools import CATALOG_CALL, CATALOG_SEARCH, MCP_TOOLS
from expert_booking.edge.observability import Action, ActionObserver, CacheStatus
from expert_booking.edge.schemas import SchemaDocument, SchemaRegistry
from expert_booking.edge.tool_registry import LOGICAL_TOOLS, LogicalTool, ToolOutput
from expert_booking.edge.validation import validate_arguments
from expert_booking.services import BookingService

# Only a name of this shape is echoed back in TOOL_NOT_FOUND details.
_ECHOABLE_NAME = re.compile(r"[a-z_]+\.[a-z_]+")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a tool call produced, and the action whose ids the envelope's ``meta`` carries.

    For ``tool_catalog.call`` that is the logical action (the child span), once reached.
    """

    action: Action
    result: ToolOutput | BookingError


@dataclass(frozen=True, slots=True)
class Routed:
    """A logical tool of the registry with its compiled input schema."""

    tool: LogicalTool[Any, Any]
    schema: SchemaDocument


class ToolDispatcher:
    """Validates, routes and runs tool calls; every failure comes back as a ``BookingError``."""

    def __init__(
        self,
        *,
        service: BookingService,
        catalog: ToolCatalog,
        registry: SchemaRegistry,
        observer: ActionObserver,
        tools: tuple[LogicalTool[Any, Any], ...] = LOGICAL_TOOLS,
        disabled: Callable[[str], DisabledTool | None] = lambda _name: None,
    ) -> None:
        """``disabled(name)`` is the kill switch of a logical tool (``CallAdmission.disabled``)."""
        self._service = service
        self._disabled = disabled
        self._catalog = catalog
        self._observer = observer
        self.inputs = {name: registry[input_stem(name)] for name in MCP_TOOLS}
        self.logical = {tool.name: Routed(tool, registry[tool.input_schema]) for tool in tools}

    async def run(
        self, tool: str, args: Mapping[str, Any], action: Action, context: CallContext
    ) -> Outcome:
        """Run MCP tool ``tool`` (one of ``MCP_TOOLS``) with its raw ``arguments``."""
        if tool == CATALOG_CALL:
            return await self._call(args, action, context)
        result = await guarded(
            lambda: self._catalog_tool(tool, args), operation_id=action.operation_id
        )
        return _record(action, result)

    async def _catalog_tool(self, tool: str, args: Mapping[str, Any]) -> ToolOutput:
        _check(self.inputs[tool], args)
        if tool == CATALOG_SEARCH:
            found = self._catalog.search(args["query"], args["limit"], args.get("cursor"))
        else:
            found = self._catalog.read(args["uri"], args["offset"], args["limit"])
        return ToolOutput(found.data, CacheStatus.of(found.cache_hit))

    async def _call(self, args: Mapping[str, Any], action: Action, context: CallContext) -> Outcome:
        resolved = await guarded(lambda: self._resolve(args), operation_id=action.operation_id)
        if isinstance(resolved, BookingError):
            return _record(action, resolved)
        # The switch is judged once, here: a call past this point runs to its end.
        switch = self._disabled(resolved.tool.name)
        if switch is not None:
            return _record(action, tool_disabled(switch))
        with self._observer.action(
            resolved.tool.name,
            trace_id=action.trace_id,
            caller=action.caller,
            client=action.client,
            parent=action,
        ) as child:
            arguments = args["arguments"]  # passed on untransformed: never copied or merged
            scoped = context.in_span(child.trace_context)
            result = await guarded(
                lambda: self._run_logical(resolved, arguments, scoped),
                operation_id=child.operation_id,
            )
            _record(child, result)
        _record(action, result)
        return Outcome(child, result)

    async def _resolve(self, args: Mapping[str, Any]) -> Routed:
        # ``arguments`` is checked against the logical tool's own schema, pointers relative to it.
        _check(self.inputs[CATALOG_CALL], args, opaque=("arguments",))
        sent = args.get("catalogVersion")
        if sent is not None and sent != self._catalog.version:  # judged before the name
            raise CatalogStaleError(current_version=self._catalog.version)
        name = args["name"]
        tool = self.logical.get(name)
        if tool is None:
            if _ECHOABLE_NAME.fullmatch(name):  # echoed only when shaped like a tool name
                raise ToolNotFoundError(name=name)
            raise ToolNotFoundError
        return tool

    async def _run_logical(
        self, routed: Routed, arguments: Any, context: CallContext
    ) -> ToolOutput:
        _check(routed.schema, arguments)
        return await routed.tool.run(self._service, arguments, context)


def _check(document: SchemaDocument, instance: Any, *, opaque: tuple[str, ...] = ()) -> None:
    violations = validate_arguments(document.validator, instance, fast=document.fast, opaque=opaque)
    if violations:
        raise InvalidArgumentsError(violations=violations)


def _record(action: Action, result: ToolOutput | BookingError) -> Outcome:
    if isinstance(result, BookingError):
        action.fail(result.code)
    else:
        action.succeed(result.cache)
    return Outcome(action, result)
