"""Context bytes: what a model must read to make one booking, and the committed budget for it.

``booking_bytes`` measures; ``budget_problems`` compares a measurement with
``harness/context-budget.json``, the committed baseline that the default ``nox`` run enforces
(``tests/integration/test_context_budget.py``) and the benchmark reports.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2

from expert_booking.testing.payment_stub import PaymentStub
from harness.loadgen import Reply, send
from harness.mcp_calls import (
    McpCall,
    confirm_arguments,
    hold_arguments,
    logical,
    tools_call,
    tools_list,
)


def _model_text(reply: Reply) -> int:
    """Bytes of what a host shows the model for a tool result: its text content (the envelope)."""
    content = reply.result.get("content") or []
    return sum(len(item.get("text", "").encode()) for item in content if isinstance(item, dict))


async def booking_bytes(client: httpx2.AsyncClient, url: str, stub: PaymentStub) -> dict[str, Any]:
    """The bytes a model reads to make one booking with this server, step by step.

    Steps: ``server/discover`` (model-visible: the ``instructions`` text, which a host may put
    in the system prompt); ``tools/list`` (model-visible: the ``tools`` array as JSON, what a
    host puts in the prompt); one ``tool_catalog.search``; every page of ``tool_catalog.read``
    (limit 100 lines) for the three schemas the booking needs (search_available_slots,
    hold_slot, confirm_booking); then the results of search slots, hold and confirm. For tool
    results the model-visible bytes are the text content (the envelope JSON;
    ``structuredContent`` repeats it for programs). ``wire`` counts whole HTTP response bodies.
    """
    steps: list[dict[str, Any]] = []

    async def step(label: str, call: McpCall, visible: Callable[[Reply], int]) -> Reply:
        reply = await send(client, url, call)
        assert reply.status_code == 200, reply.message
        steps.append({"step": label, "model_bytes": visible(reply), "wire_bytes": reply.size})
        return reply

    def tools_array(reply: Reply) -> int:
        return len(json.dumps(reply.result["tools"], separators=(",", ":")).encode())

    def instructions(reply: Reply) -> int:
        return len(str(reply.result.get("instructions") or "").encode())

    await step("server/discover", McpCall("server/discover", {}), instructions)
    listed = await step("tools/list", tools_list(), tools_array)
    found = await step(
        "tool_catalog.search 'book an expert slot'",
        tools_call("tool_catalog.search", {"query": "book an expert slot", "limit": 5}),
        _model_text,
    )
    names = {item["name"] for item in found.envelope["data"]["items"]}
    needed = ["booking.search_available_slots", "booking.hold_slot", "booking.confirm_booking"]
    for name in needed:
        if name not in names:
            await step(
                f"tool_catalog.search '{name}'",
                tools_call("tool_catalog.search", {"query": name, "limit": 1}),
                _model_text,
            )
        offset: int | None = 0
        while offset is not None:
            page = await step(
                f"tool_catalog.read {name} @{offset}",
                tools_call(
                    "tool_catalog.read", {"uri": f"tool://{name}", "offset": offset, "limit": 100}
                ),
                _model_text,
            )
            following = page.envelope["data"]["next"]
            offset = following["offset"] if following else None
    slots = await step(
        "call search_available_slots",
        logical("booking.search_available_slots", {"query": "AI", "limit": 5}),
        _model_text,
    )
    slot_id = slots.envelope["data"]["slots"][0]["slotId"]
    held = await step(
        "call hold_slot", logical("booking.hold_slot", hold_arguments(slot_id)), _model_text
    )
    booking = held.envelope["data"]
    stub.set_answer(booking["bookingId"], status="PAID", amount=booking["payment"]["amount"])
    confirmed = await step(
        "call confirm_booking",
        logical(
            "booking.confirm_booking", confirm_arguments(booking, approved_at=datetime.now(UTC))
        ),
        _model_text,
    )
    assert confirmed.envelope["ok"], confirmed.message
    return {
        "tools_list_wire_bytes": listed.size,
        "tools_list_model_bytes": steps[1]["model_bytes"],
        "instructions_bytes": steps[0]["model_bytes"],
        "one_booking_model_bytes": sum(s["model_bytes"] for s in steps),
        "one_booking_wire_bytes": sum(s["wire_bytes"] for s in steps),
        "steps": steps,
    }


BUDGET_FILE = Path(__file__).resolve().with_name("context-budget.json")


@dataclass(frozen=True, slots=True)
class ContextBudget:
    """The committed baseline (``context-budget.json``) and its limits."""

    tools_list_wire_bytes: int
    one_booking_model_bytes: int
    tools_list_wire_max: int
    tolerance: float

    @classmethod
    def load(cls, path: Path = BUDGET_FILE) -> ContextBudget:
        document = json.loads(path.read_text(encoding="utf-8"))
        return cls(
            tools_list_wire_bytes=int(document["baseline"]["tools_list_wire_bytes"]),
            one_booking_model_bytes=int(document["baseline"]["one_booking_model_bytes"]),
            tools_list_wire_max=int(document["tools_list_wire_max"]),
            tolerance=float(document["tolerance"]),
        )


def budget_problems(measured: dict[str, Any], budget: ContextBudget) -> list[str]:
    """What is wrong with ``measured`` (a ``booking_bytes`` result); empty when within budget.

    Each figure may move by at most ``tolerance`` either way from its baseline: growth beyond
    it is a regression, and shrinking beyond it leaves a stale baseline that would let the next
    growth pass unseen. A deliberate change updates ``context-budget.json`` in the same commit
    and says why. ``tools/list`` must also stay within ``tools_list_wire_max`` bytes.
    """
    problems = []
    listed = measured["tools_list_wire_bytes"]
    if listed > budget.tools_list_wire_max:
        problems.append(
            f"tools/list response body is {listed} B, over the {budget.tools_list_wire_max} B cap"
        )
    for key, baseline in (
        ("tools_list_wire_bytes", budget.tools_list_wire_bytes),
        ("one_booking_model_bytes", budget.one_booking_model_bytes),
    ):
        value = measured[key]
        if value > baseline * (1 + budget.tolerance):
            problems.append(
                f"{key} grew to {value} B, more than {budget.tolerance:.0%} over the baseline "
                f"{baseline} B: shorten it, or raise the baseline in the same commit and say why"
            )
        elif value < baseline * (1 - budget.tolerance):
            problems.append(
                f"{key} shrank to {value} B, more than {budget.tolerance:.0%} under the baseline "
                f"{baseline} B: lower the baseline in {BUDGET_FILE.name} to keep it enforced"
            )
    return problems
