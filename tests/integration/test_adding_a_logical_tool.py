"""Adding a logical tool is a schema, a registry entry, a use case and tests: nothing else.

The tool below exists only in this test: its input schema file (written next to copies of the
real ones), its ``LogicalTool`` entry and its use case (a ``BookingService`` method). Handed
the extended registry, the catalog finds and reads it, ``tool_catalog.call`` validates its
arguments against its own schema and runs its use case, and ``tool_catalog.call``'s
annotations take its hints into account.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any, cast

import pytest

from expert_booking.call_context import CallContext
from expert_booking.domain.model import Booking
from expert_booking.edge import wire
from expert_booking.edge.catalog import ToolCatalog
from expert_booking.edge.observability import ActionObserver
from expert_booking.edge.schemas import SchemaRegistry, locate_schema_directory
from expert_booking.edge.tool_registry import (
    LOGICAL_TOOLS,
    WRITE_SCOPE,
    LogicalTool,
    ToolHints,
    ToolOutput,
    call_hints,
)
from expert_booking.edge.tools import ToolDispatcher
from expert_booking.services import BookingService
from tests.fakes import CONTEXT, MutableClock, make_booking

pytestmark = pytest.mark.anyio

NAME = "booking.forget_booking"
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "urn:expert-booking:schema:booking_forget_booking_input:v1",
    "title": "booking.forget_booking input",
    "description": "Erase a booking's customer data for good. Irreversible.",
    "type": "object",
    "required": ["bookingId"],
    "properties": {
        "bookingId": {"type": "string", "minLength": 1, "description": "The booking to erase."}
    },
    "additionalProperties": False,
}


class ServiceWithForget(BookingService):
    """The booking service plus the new use case (as ``services.py`` would gain it)."""

    def __init__(self, booking: Booking) -> None:
        self.booking = booking
        self.forgotten: list[tuple[str, CallContext]] = []

    async def forget_booking(self, booking_id: str, context: CallContext) -> Booking:
        self.forgotten.append((booking_id, context))
        return self.booking


FORGET: LogicalTool[str, Booking] = LogicalTool(
    name=NAME,
    title="Erase a booking's customer data",
    intent_words="erase forget delete wipe gdpr 删除 忘记 löschen vergessen",
    topic_words="booking customer data 预约 Buchung",
    input_schema="booking_forget_booking_input",
    result_schema="booking_snapshot",
    hints=ToolHints(read_only=False, destructive=True, idempotent=True),
    scope=WRITE_SCOPE,
    command=lambda arguments: str(arguments["bookingId"]),
    use_case=lambda core: cast("ServiceWithForget", core).forget_booking,
    render=lambda booking: ToolOutput(wire.render_booking(booking), "BYPASS"),
)
TOOLS = (*LOGICAL_TOOLS, FORGET)


@pytest.fixture
def registry(tmp_path: Path) -> SchemaRegistry:
    folder = tmp_path / "schemas"
    shutil.copytree(Path(str(locate_schema_directory())), folder)
    text = json.dumps(SCHEMA, indent=2, ensure_ascii=False) + "\n"
    (folder / "booking_forget_booking_input.json").write_text(text, encoding="utf-8")
    return SchemaRegistry.load(folder)


async def test_a_new_entry_is_found_read_called_and_annotated(registry: SchemaRegistry) -> None:
    catalog = ToolCatalog(registry, tools=TOOLS)
    assert catalog.rank("erase the customer's data")[0] == NAME
    page = catalog.read(f"tool://{NAME}", 0, 100).data
    assert "\n".join(page["lines"]) + "\n" == registry["booking_forget_booking_input"].text

    booking = make_booking()
    service = ServiceWithForget(booking)
    observer = ActionObserver(MutableClock(), spans=False)
    dispatcher = ToolDispatcher(
        service=service, catalog=catalog, registry=registry, observer=observer, tools=TOOLS
    )

    async def call(arguments: dict[str, Any]) -> Any:
        request = {"name": NAME, "arguments": arguments, "requestSpanId": str(uuid.uuid4())}
        with observer.action(
            "tool_catalog.call", trace_id=CONTEXT.trace.trace_id, caller={"address": "test"}
        ) as action:
            return (await dispatcher.run("tool_catalog.call", request, action, CONTEXT)).result

    done = await call({"bookingId": booking.booking_id})
    assert isinstance(done, ToolOutput)
    assert done.data == wire.render_booking(booking)
    ((forgotten, context),) = service.forgotten
    assert forgotten == booking.booking_id
    assert context.principal == CONTEXT.principal
    refused = await call({"bookingId": ""})
    assert not isinstance(refused, ToolOutput)
    assert refused.code == "INVALID_ARGUMENTS"
    assert len(service.forgotten) == 1

    assert call_hints(TOOLS).destructive
    assert not call_hints(
        tuple(tool for tool in TOOLS if tool.name != NAME and not tool.hints.destructive)
    ).destructive
