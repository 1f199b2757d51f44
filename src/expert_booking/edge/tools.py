"""Dispatch of the three catalog tools and the four logical tools behind ``tool_catalog.call``."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from expert_booking.domain.errors import BookingError, InvalidArgumentsError, ToolNotFoundError
from expert_booking.domain.model import Booking
from expert_booking.edge import wire
from expert_booking.edge.catalog import LOGICAL_TOOLS, ToolCatalog, input_stem
from expert_booking.edge.envelope import guarded
from expert_booking.edge.observability import Action, ActionObserver
from expert_booking.edge.schemas import SchemaDocument, SchemaRegistry
from expert_booking.edge.validation import validate_arguments
from expert_booking.ports import TraceContext
from expert_booking.services import ConfirmBooking, HoldSlot, SearchSlots, SlotPage

CATALOG_SEARCH = "tool_catalog.search"
CATALOG_READ = "tool_catalog.read"
CATALOG_CALL = "tool_catalog.call"
MCP_TOOLS = (CATALOG_SEARCH, CATALOG_READ, CATALOG_CALL)
# Only a name of this shape is echoed back in TOOL_NOT_FOUND details.
_ECHOABLE_NAME = re.compile(r"[a-z_]+\.[a-z_]+")


class BookingUseCases(Protocol):
    """What the edge needs of the booking core (``BookingService`` provides it)."""

    async def search_available_slots(self, command: SearchSlots) -> SlotPage: ...

    async def hold_slot(self, command: HoldSlot) -> Booking: ...

    async def confirm_booking(self, command: ConfirmBooking, trace: TraceContext) -> Booking: ...

    async def get_booking(self, booking_id: str) -> Booking: ...


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """``data`` of a successful envelope and its cache status (HIT, MISS or BYPASS)."""

    data: Mapping[str, Any]
    cache: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a tool call produced, and the action whose ids the envelope's ``meta`` carries.

    For ``tool_catalog.call`` that is the logical action (the child span), once reached.
    """

    action: Action
    result: ToolOutput | BookingError


LogicalHandler = Callable[[Mapping[str, Any], Action], Awaitable[ToolOutput]]


@dataclass(frozen=True, slots=True)
class LogicalTool:
    """A logical tool: its name, input schema document and handler."""

    name: str
    schema: SchemaDocument
    handler: LogicalHandler


class ToolDispatcher:
    """Validates, routes and runs tool calls; every failure comes back as a ``BookingError``."""

    def __init__(
        self,
        *,
        service: BookingUseCases,
        catalog: ToolCatalog,
        registry: SchemaRegistry,
        observer: ActionObserver,
    ) -> None:
        self._service = service
        self._catalog = catalog
        self._observer = observer
        self.inputs = {name: registry[input_stem(name)] for name in MCP_TOOLS}
        handlers: dict[str, LogicalHandler] = {
            "booking.search_available_slots": self._search_slots,
            "booking.hold_slot": self._hold_slot,
            "booking.confirm_booking": self._confirm_booking,
            "booking.get_booking": self._get_booking,
        }
        self.logical = {
            name: LogicalTool(name, registry[input_stem(name)], handlers[name])
            for name in LOGICAL_TOOLS
        }

    async def run(self, tool: str, args: Mapping[str, Any], action: Action) -> Outcome:
        """Run MCP tool ``tool`` (one of ``MCP_TOOLS``) with its raw ``arguments``."""
        if tool == CATALOG_CALL:
            return await self._call(args, action)
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
        return ToolOutput(found.data, "HIT" if found.cache_hit else "MISS")

    async def _call(self, args: Mapping[str, Any], action: Action) -> Outcome:
        resolved = await guarded(lambda: self._resolve(args), operation_id=action.operation_id)
        if isinstance(resolved, BookingError):
            return _record(action, resolved)
        with self._observer.action(
            resolved.name, trace_id=action.trace_id, caller=action.caller, parent=action
        ) as child:
            arguments = args["arguments"]  # passed on untransformed: never copied or merged
            result = await guarded(
                lambda: _run_logical(resolved, arguments, child), operation_id=child.operation_id
            )
            _record(child, result)
        _record(action, result)
        return Outcome(child, result)

    async def _resolve(self, args: Mapping[str, Any]) -> LogicalTool:
        # ``arguments`` is checked against the logical tool's own schema, pointers relative to it.
        _check(self.inputs[CATALOG_CALL], args, opaque=("arguments",))
        name = args["name"]
        tool = self.logical.get(name)
        if tool is None:
            if _ECHOABLE_NAME.fullmatch(name):  # echoed only when shaped like a tool name
                raise ToolNotFoundError(name=name)
            raise ToolNotFoundError
        return tool

    async def _search_slots(self, args: Mapping[str, Any], _action: Action) -> ToolOutput:
        page = await self._service.search_available_slots(wire.search_command(args))
        return ToolOutput(wire.render_slot_page(page), "HIT" if page.cache_hit else "MISS")

    async def _hold_slot(self, args: Mapping[str, Any], _action: Action) -> ToolOutput:
        booking = await self._service.hold_slot(wire.hold_command(args))
        return ToolOutput(wire.render_booking(booking), "BYPASS")

    async def _confirm_booking(self, args: Mapping[str, Any], action: Action) -> ToolOutput:
        command = wire.confirm_command(args)
        booking = await self._service.confirm_booking(command, action.trace_context)
        return ToolOutput(wire.render_booking(booking), "BYPASS")

    async def _get_booking(self, args: Mapping[str, Any], _action: Action) -> ToolOutput:
        booking = await self._service.get_booking(wire.booking_id_of(args))
        return ToolOutput(wire.render_booking(booking), "BYPASS")


async def _run_logical(tool: LogicalTool, arguments: Any, action: Action) -> ToolOutput:
    _check(tool.schema, arguments)
    return await tool.handler(arguments, action)


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
