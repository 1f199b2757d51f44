"""The model-facing budget: what a model reads to book once stays within the committed baseline.

The real app in process (gates, timestamps, the SDK), the loopback payment stub answering PAID,
and the same measurement the benchmark reports (``harness.bench_context.booking_bytes``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from expert_booking.bootstrap import build_asgi_app
from expert_booking.settings import Settings
from expert_booking.testing.payment_stub import PaymentStub
from harness.bench_context import ContextBudget, booking_bytes, budget_problems
from harness.inprocess import inprocess_app
from harness.loadgen import make_http_client

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:3000/mcp"


async def test_one_booking_reads_no_more_than_the_committed_budget(tmp_path: Path) -> None:
    async with PaymentStub.running() as stub:
        settings = Settings(payment_query_base_url=stub.base_url, db_path=tmp_path / "b.db")
        async with (
            inprocess_app(build_asgi_app(settings)) as asgi,
            make_http_client(inner=asgi) as client,
        ):
            measured = await booking_bytes(client, URL, stub)

    assert budget_problems(measured, ContextBudget.load()) == []


def _measured(tools_list: int, booking: int) -> dict[str, int]:
    return {"tools_list_wire_bytes": tools_list, "one_booking_model_bytes": booking}


BUDGET = ContextBudget(
    tools_list_wire_bytes=3900,
    one_booking_model_bytes=20000,
    tools_list_wire_max=4000,
    tolerance=0.05,
)


def test_the_budget_check_allows_moves_within_the_tolerance() -> None:
    assert budget_problems(_measured(3990, 20999), BUDGET) == []
    assert budget_problems(_measured(3706, 19001), BUDGET) == []


@pytest.mark.parametrize(
    ("measured", "words"),
    [
        (_measured(4001, 20000), "over the 4000 B cap"),
        (_measured(3900, 21001), "one_booking_model_bytes grew to 21001 B"),
        (_measured(3704, 20000), "tools_list_wire_bytes shrank to 3704 B"),
        (_measured(3900, 18999), "lower the baseline"),
    ],
)
def test_the_budget_check_refuses_growth_past_the_tolerance_the_cap_and_a_stale_baseline(
    measured: dict[str, int], words: str
) -> None:
    problems = budget_problems(measured, BUDGET)

    assert len(problems) == 1
    assert words in problems[0]
