"""The logical tools behind ``tool_catalog.call``: one declarative entry each.

An entry holds everything the server knows about a logical tool: its name and title, the words
``tool_catalog.search`` indexes it by (English, Chinese, German), its input and result schema
files, its annotations, the scope a caller needs, how validated arguments become a command,
the use case that runs it and how its result becomes ``data``. The catalog, the dispatcher,
the instructions, the annotations of ``tool_catalog.call``, the fuzzers' OpenAPI description
and the schema tests all read ``LOGICAL_TOOLS``; nothing else lists the logical tools. Prose
that names them for a model (the instructions' flow, recovery sentences, schema texts) is held
to it by a test; the idempotency scopes of ``replay.IdempotencyScope`` spell four of them, as
persisted names.

Adding a logical tool is its input schema in ``schemas/`` (and, for a new result shape, its
result schema and renderer), one entry here, its use case on ``BookingService`` and its tests,
README's tool table included (NOTES.md, "Adding a logical tool", lists each place).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

from expert_booking.call_context import CallContext
from expert_booking.cancellation import CancelBooking
from expert_booking.confirmation import ConfirmBooking
from expert_booking.domain.errors import InvalidArgumentsError
from expert_booking.domain.intents import ActionIntent
from expert_booking.domain.model import (
    Booking,
    BookingStatus,
    Customer,
    HumanApproval,
    Intent,
    parse_instant,
)
from expert_booking.edge import wire
from expert_booking.edge.mcp_tools import CATALOG_CALL
from expert_booking.edge.observability import CacheStatus
from expert_booking.edge.validation import json_pointer
from expert_booking.ports import SlotQuery
from expert_booking.rescheduling import RescheduleBooking
from expert_booking.services import (
    BookingPage,
    BookingService,
    GetBooking,
    HoldSlot,
    ListBookings,
    SearchSlots,
    SlotPage,
)

C = TypeVar("C")
R = TypeVar("R")

READ_SCOPE = "booking:read"
WRITE_SCOPE = "booking:write"


@dataclass(frozen=True, slots=True)
class ToolHints:
    """The MCP tool annotations of a tool (``readOnlyHint`` ...), as facts about its effects."""

    read_only: bool
    destructive: bool
    idempotent: bool


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """``data`` of a successful envelope and its cache status (HIT, MISS or BYPASS)."""

    data: Mapping[str, Any]
    cache: str


@dataclass(frozen=True, slots=True)
class LogicalTool(Generic[C, R]):
    """One logical tool.

    Attributes:
        name: The name ``tool_catalog.call`` takes (``booking.hold_slot``).
        title: The human title ``tool_catalog.search`` lists.
        intent_words: Words naming the action (the search's heavily weighted field).
        topic_words: Words naming what it acts on, shared with other tools (weighted lightly).
        input_schema: Stem of its input schema file in ``schemas/``.
        result_schema: Stem of the schema of ``data`` in its successful envelope.
        hints: Its annotations.
        scope: The OAuth scope a caller needs (``booking:read`` or ``booking:write``).
        command: Validated arguments to the use case's command.
        use_case: Picks the use case from the booking service.
        render: The use case's result to ``data`` and its cache status.
    """

    name: str
    title: str
    intent_words: str
    topic_words: str
    input_schema: str
    result_schema: str
    hints: ToolHints
    scope: str
    command: Callable[[Mapping[str, Any]], C]
    use_case: Callable[[BookingService], Callable[[C, CallContext], Awaitable[R]]]
    render: Callable[[R], ToolOutput]

    async def run(
        self, service: BookingService, arguments: Mapping[str, Any], context: CallContext
    ) -> ToolOutput:
        """Run the tool on arguments its input schema accepted."""
        command = self.command(arguments)
        return self.render(await self.use_case(service)(command, context))


# ------------------------------------------------------- arguments -> commands


def search_command(args: Mapping[str, Any]) -> SearchSlots:
    """``booking.search_available_slots`` arguments as a command."""
    return SearchSlots(
        query=SlotQuery(
            text=args["query"],
            specialty=args.get("specialty"),
            starts_after=_start_bound(args, "startsAfter"),
            starts_before=_start_bound(args, "startsBefore"),
        ),
        limit=args["limit"],
        cursor=args.get("cursor"),
    )


def hold_command(args: Mapping[str, Any]) -> HoldSlot:
    """``booking.hold_slot`` arguments as a command; the customer is kept exactly as sent."""
    customer = args["customer"]
    return HoldSlot(
        slot_id=args["slotId"],
        customer=Customer(
            name=customer["name"],
            email=customer["email"],
            phone=customer.get("phone"),
            note=customer.get("note"),
        ),
        idempotency_key=args["idempotencyKey"],
    )


def confirm_command(args: Mapping[str, Any]) -> ConfirmBooking:
    """``booking.confirm_booking`` arguments as a command (``humanApproval`` may be absent)."""
    approval = args.get("humanApproval")
    return ConfirmBooking(
        booking_id=args["bookingId"],
        expected_version=args["expectedVersion"],
        idempotency_key=args["idempotencyKey"],
        human_approval=None if approval is None else _approval(approval),
    )


def get_command(args: Mapping[str, Any]) -> GetBooking:
    """``booking.get_booking`` arguments as a command."""
    return GetBooking(booking_id=args["bookingId"])


def list_command(args: Mapping[str, Any]) -> ListBookings:
    """``booking.list_bookings`` arguments as a command (the command canonicalises the key)."""
    return ListBookings(
        limit=args["limit"],
        statuses=frozenset(BookingStatus(status) for status in args.get("status", ())),
        idempotency_key=args.get("idempotencyKey"),
        cursor=args.get("cursor"),
    )


def cancel_command(args: Mapping[str, Any]) -> CancelBooking:
    """``booking.cancel_booking`` arguments as a command (``humanApproval`` may be absent)."""
    approval = args.get("humanApproval")
    return CancelBooking(
        booking_id=args["bookingId"],
        expected_version=args["expectedVersion"],
        idempotency_key=args["idempotencyKey"],
        human_approval=None if approval is None else _action_approval(approval),
    )


def reschedule_command(args: Mapping[str, Any]) -> RescheduleBooking:
    """``booking.reschedule_booking`` arguments as a command (``humanApproval`` may be absent)."""
    approval = args.get("humanApproval")
    return RescheduleBooking(
        booking_id=args["bookingId"],
        new_slot_id=args["newSlotId"],
        expected_version=args["expectedVersion"],
        idempotency_key=args["idempotencyKey"],
        human_approval=None if approval is None else _action_approval(approval),
    )


def _action_approval(approval: Mapping[str, Any]) -> HumanApproval:
    """An approval of a cancel or reschedule intent (its strings compared exactly as sent)."""
    intent = approval["intent"]
    return HumanApproval(
        approval_id=approval["approvalId"],
        decision=approval["decision"],
        approved_at=_instant(approval["approvedAt"], ["humanApproval", "approvedAt"]),
        intent=ActionIntent(
            action=intent["action"],
            booking_id=intent["bookingId"],
            slot_id=intent["slotId"],
            starts_at=intent["startsAt"],
            amount=intent["amount"],
            currency=intent["currency"],
            version=intent["version"],
            new_slot_id=intent.get("newSlotId"),
            new_starts_at=intent.get("newStartsAt"),
        ),
        intent_hash=approval["intentHash"],
    )


def _approval(approval: Mapping[str, Any]) -> HumanApproval:
    intent = approval["intent"]
    return HumanApproval(
        approval_id=approval["approvalId"],
        decision=approval["decision"],
        approved_at=_instant(approval["approvedAt"], ["humanApproval", "approvedAt"]),
        intent=Intent(
            booking_id=intent["bookingId"],
            slot_id=intent["slotId"],
            starts_at=intent["startsAt"],  # compared as the exact string the person approved
            amount=intent["amount"],
            currency=intent["currency"],
            version=intent["version"],
        ),
        intent_hash=approval["intentHash"],
    )


def _optional_instant(args: Mapping[str, Any], key: str) -> datetime | None:
    value = args.get(key)
    return None if value is None else _instant(value, [key])


def _start_bound(args: Mapping[str, Any], key: str) -> datetime | None:
    """A start-window bound, a microsecond later when it has non-zero digits past the microsecond.

    ``datetime`` drops those digits; rounding up keeps the bound's meaning for
    ``SlotQuery.window``, which rounds up to the stored millisecond.
    """
    value = _optional_instant(args, key)
    if value is None:
        return None
    fraction = _FRACTION.search(args[key])
    if fraction is not None and fraction[1][6:].strip("0") and value < _LATEST:
        value += timedelta(microseconds=1)
    return value


_FRACTION = re.compile(r"[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}\.([0-9]+)")
_LATEST = datetime.max.replace(tzinfo=UTC)


def _instant(text: str, path: list[str]) -> datetime:
    """Parse an RFC 3339 string the format check accepted (leap seconds still fail here)."""
    try:
        return parse_instant(text)
    except ValueError as exc:
        raise InvalidArgumentsError(
            violations=[
                {
                    "pointer": json_pointer(path),
                    "message": "must be an RFC 3339 date-time within years 0001-9999 UTC, "
                    "without a leap second.",
                }
            ]
        ) from exc


# ------------------------------------------------------------ results -> data


def _snapshot(booking: Booking) -> ToolOutput:
    return ToolOutput(wire.render_booking(booking), CacheStatus.BYPASS)


def _booking_page(page: BookingPage) -> ToolOutput:
    return ToolOutput(wire.render_booking_page(page), CacheStatus.BYPASS)


def _slot_page(page: SlotPage) -> ToolOutput:
    return ToolOutput(wire.render_slot_page(page), CacheStatus.of(page.cache_hit))


_READ = ToolHints(read_only=True, destructive=False, idempotent=True)
# Writes that an idempotencyKey makes safe to repeat; none undoes or overwrites anything.
_KEYED_WRITE = ToolHints(read_only=False, destructive=False, idempotent=True)
# Keyed writes that end or move what a person booked (cancel, reschedule): destructive.
_KEYED_DESTRUCTIVE = ToolHints(read_only=False, destructive=True, idempotent=True)

# Keywords: first the intent (verbs and the nouns that name the action), then the topic.
# Matching runs on the index's own tokens (folded, lightly stemmed): one spelling per word.
LOGICAL_TOOLS: tuple[LogicalTool[Any, Any], ...] = (
    LogicalTool(
        name="booking.search_available_slots",
        title="Search available expert slots",
        intent_words=(
            "search find browse list available availability free open opening vacant options "
            "which who meet talk consult consultation advice "
            "搜索 查找 寻找 找 空闲 有空 可预约 可用 哪些 列出 档期 空档 "
            "suchen finden zeigen anzeigen freie frei verfügbar Verfügbarkeit offen welche"
        ),
        topic_words=(
            "slot time appointment expert specialist consultant advisor schedule calendar when "
            "sometime 时段 时间 时间段 专家 顾问 老师 日程 什么时候 咨询 "
            "Termin Zeitfenster Zeit Experte Berater Beratung Spezialist Kalender wann"
        ),
        input_schema="booking_search_available_slots_input",
        result_schema="slot_search_result",
        hints=_READ,
        scope=READ_SCOPE,
        command=search_command,
        use_case=lambda core: core.search_available_slots,
        render=_slot_page,
    ),
    LogicalTool(
        name="booking.hold_slot",
        title="Hold a slot for a customer",
        intent_words=(
            "hold reserve book lock secure claim grab take block keep tentative "
            "预约 预订 预定 订下 占用 占住 锁定 锁住 保留 占位 预留 约 订 "
            "reservieren buchen halten vormerken vorläufig blockieren sichern festhalten belegen"
        ),
        topic_words=(
            "slot time reservation appointment 时段 时间 Termin Slot Reservierung Zeitfenster"
        ),
        input_schema="booking_hold_slot_input",
        result_schema="booking_snapshot",
        hints=_KEYED_WRITE,
        scope=WRITE_SCOPE,
        command=hold_command,
        use_case=lambda core: core.hold_slot,
        render=_snapshot,
    ),
    LogicalTool(
        name="booking.confirm_booking",
        title="Confirm a held booking after approval and payment",
        intent_words=(
            "confirm confirmation finalize finalise complete approve approval paid pay payment "
            "checkout finish 确认 确定 支付 付款 付过 付完 已付 完成 完成预约 批准 同意 缴费 "
            "bestätigen Bestätigung bezahlen bezahlt Zahlung gezahlt zahle abschließen freigeben "
            "Genehmigung genehmigt erledigt"
        ),
        topic_words="booking reservation 预约 Buchung Reservierung Termin",
        input_schema="booking_confirm_booking_input",
        result_schema="booking_snapshot",
        hints=_KEYED_WRITE,
        scope=WRITE_SCOPE,
        command=confirm_command,
        use_case=lambda core: core.confirm_booking,
        render=_snapshot,
    ),
    LogicalTool(
        name="booking.get_booking",
        title="Get the current state of a booking",
        intent_words=(
            "get status state check view details lookup retrieve current progress still held "
            "confirmed expire expired valid 查询 状态 订单 详情 查看 进度 情况 怎么样 还在 有效 "
            "过期 Status Stand aktuell abrufen nachsehen nachschlagen Details prüfen gültig "
            "abgelaufen Buchungsstatus Buchungsdetails"
        ),
        topic_words=(
            "booking order reservation version look 信息 我的 版本 Buchung Reservierung Auftrag"
        ),
        input_schema="booking_get_booking_input",
        result_schema="booking_snapshot",
        hints=_READ,
        scope=READ_SCOPE,
        command=get_command,
        use_case=lambda core: core.get_booking,
        render=_snapshot,
    ),
    LogicalTool(
        name="booking.list_bookings",
        title="List my bookings, newest first",
        intent_words=(
            "list bookings reservations history booked made created far timed timeout "
            "committed idempotencyKey key went through happened which "
            "列出 所有 全部 我的预约 我的订单 我的所有 所有预约 查看我的 预约过 约过 订过 "
            "哪些 列表 记录 历史 超时 "
            "auflisten Buchungen gebucht Liste Übersicht welche Verlauf"
        ),
        topic_words=(
            "booking reservation all every 预约 订单 "
            "Buchung Reservierung alle zeigen anzeigen meine"
        ),
        input_schema="booking_list_bookings_input",
        result_schema="booking_list_result",
        hints=_READ,
        scope=READ_SCOPE,
        command=list_command,
        use_case=lambda core: core.list_bookings,
        render=_booking_page,
    ),
    LogicalTool(
        name="booking.cancel_booking",
        title="Cancel a held or confirmed booking",
        intent_words=(
            "cancel cancellation cancelled call off drop abort revoke withdraw refund release "
            "undo no longer want "
            "取消 撤销 退订 退掉 不要了 不去了 作废 退款 "
            "stornieren Stornierung absagen Absage zurücktreten zurücknehmen widerrufen erstatten"
        ),
        topic_words="booking booked reservation appointment 预约 订单 Buchung Termin Reservierung",
        input_schema="booking_cancel_booking_input",
        result_schema="booking_snapshot",
        hints=_KEYED_DESTRUCTIVE,
        scope=WRITE_SCOPE,
        command=cancel_command,
        use_case=lambda core: core.cancel_booking,
        render=_snapshot,
    ),
    LogicalTool(
        name="booking.reschedule_booking",
        title="Move a confirmed booking to another slot",
        intent_words=(
            "reschedule rescheduling move change postpone shift rebook another different "
            "earlier later instead new date "
            "改期 改时间 换时间 调整 推迟 提前 挪到 换到 改到 改约 "
            "verschieben umbuchen verlegen ändern Umbuchung später früher anderen neuen"
        ),
        topic_words=(
            "booking booked slot time appointment 时段 时间 预约 Termin Buchung Zeitfenster"
        ),
        input_schema="booking_reschedule_booking_input",
        result_schema="booking_snapshot",
        hints=_KEYED_DESTRUCTIVE,
        scope=WRITE_SCOPE,
        command=reschedule_command,
        use_case=lambda core: core.reschedule_booking,
        render=_snapshot,
    ),
)

LOGICAL_NAMES: tuple[str, ...] = tuple(tool.name for tool in LOGICAL_TOOLS)
BY_NAME: Mapping[str, LogicalTool[Any, Any]] = {tool.name: tool for tool in LOGICAL_TOOLS}


def call_hints(tools: tuple[LogicalTool[Any, Any], ...] = LOGICAL_TOOLS) -> ToolHints:
    """The annotations ``tool_catalog.call`` can honestly claim: those of every tool it reaches.

    Read-only only if every logical tool is, non-destructive only if none is destructive,
    idempotent only if every one is.
    """
    return ToolHints(
        read_only=all(tool.hints.read_only for tool in tools),
        destructive=any(tool.hints.destructive for tool in tools),
        idempotent=all(tool.hints.idempotent for tool in tools),
    )


def required_scope(mcp_tool: str, arguments: Mapping[str, Any]) -> str:
    """The scope a ``tools/call`` of ``mcp_tool`` needs, judged before it runs.

    The catalog's search and read need ``booking:read``; ``tool_catalog.call`` needs the scope
    of the logical tool its ``arguments.name`` names (``booking:read`` for a name that is none:
    the call then only answers TOOL_NOT_FOUND). A logical tool's name called directly needs its
    own scope too (it is then refused as no MCP tool, but never to a caller lacking the scope).
    """
    if mcp_tool != CATALOG_CALL:
        direct = BY_NAME.get(mcp_tool)
        return READ_SCOPE if direct is None else direct.scope
    name = arguments.get("name")
    tool = BY_NAME.get(name) if isinstance(name, str) else None
    return READ_SCOPE if tool is None else tool.scope
