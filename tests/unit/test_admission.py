"""CallAdmission: whose quota a call spends, what a continuation spends, what meta gains."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from expert_booking.access.ports import DisabledTool, QuotaLimits, ToolSwitchState
from expert_booking.adapters.quota_memory import InProcessQuotaCounter
from expert_booking.call_context import Principal
from expert_booking.domain.errors import RateLimitedError
from expert_booking.edge.admission import CallAdmission, tool_disabled
from tests.fakes import CONTEXT

pytestmark = pytest.mark.anyio

T = datetime(2030, 9, 1, tzinfo=UTC)
CALL = {"name": "tool_catalog.search", "arguments": {}}
CONTINUATION = {**CALL, "requestState": "sealed-by-the-boundary"}
ALICE = replace(CONTEXT, principal=Principal(issuer="https://issuer.example", subject="alice"))
BOB = replace(CONTEXT, principal=Principal(issuer="https://issuer.example", subject="bob"))


class Switches:
    def __init__(self, state: ToolSwitchState) -> None:
        self.state = state


NOTHING_OFF = Switches(ToolSwitchState(version=0))


def _scope(host: str = "127.0.0.1", *headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"client": (host, 50000), "headers": list(headers)}


def _admission(per_caller: int, *, continuation: bool = False) -> CallAdmission:
    quota = InProcessQuotaCounter(QuotaLimits(per_caller, 100), clock=lambda: 0.0)
    return CallAdmission(
        quota=quota,
        switches=NOTHING_OFF,
        is_continuation=(lambda params: params.get("requestState") is not None)
        if continuation
        else (lambda _params: False),
    )


async def test_quotas_off_and_nothing_disabled_add_nothing_to_meta() -> None:
    admission = CallAdmission(quota=None, switches=NOTHING_OFF)
    assert await admission.admit(CALL, _scope(), CONTEXT) is None
    assert admission.live_meta(None) == {}


async def test_each_principal_has_its_own_bucket_whatever_its_address() -> None:
    admission = _admission(1)
    assert await admission.admit(CALL, _scope(), ALICE) == 0
    assert await admission.admit(CALL, _scope(), BOB) == 0
    refused = await admission.admit(CALL, _scope("10.0.0.9"), ALICE)
    assert isinstance(refused, RateLimitedError)
    assert refused.details == {"retry_after_seconds": 60, "limit": "CALLER"}


async def test_unauthenticated_callers_count_by_bare_host_also_for_ipv6() -> None:
    admission = _admission(1)
    assert await admission.admit(CALL, _scope("2001:db8::1"), CONTEXT) == 0
    # Another port of the same host is the same caller; another host is not.
    again = {"client": ("2001:db8::1", 50001), "headers": []}
    assert isinstance(await admission.admit(CALL, again, CONTEXT), RateLimitedError)
    assert await admission.admit(CALL, _scope("2001:db8::2"), CONTEXT) == 0
    assert admission.caller(again, CONTEXT).log_value() == {"address": "2001:db8::1"}


async def test_a_continuation_of_an_input_round_does_not_count_again() -> None:
    admission = _admission(1, continuation=True)
    assert await admission.admit(CALL, _scope(), CONTEXT) == 0
    assert await admission.admit(CONTINUATION, _scope(), CONTEXT) is None
    assert isinstance(await admission.admit(CALL, _scope(), CONTEXT), RateLimitedError)


async def test_without_an_input_round_a_request_state_is_no_way_around_the_quota() -> None:
    admission = _admission(1)
    assert await admission.admit(CALL, _scope(), CONTEXT) == 0
    assert isinstance(await admission.admit(CONTINUATION, _scope(), CONTEXT), RateLimitedError)


async def test_disabled_tools_and_the_remaining_quota_are_meta() -> None:
    switch = DisabledTool("booking.hold_slot", "payment provider outage", T)
    other = DisabledTool("booking.confirm_booking", "audit", T)
    switches = Switches(ToolSwitchState(version=3, disabled={s.name: s for s in (switch, other)}))
    admission = CallAdmission(quota=None, switches=switches)

    assert admission.disabled("booking.hold_slot") == switch
    assert admission.disabled("booking.get_booking") is None
    assert admission.live_meta(7) == {
        "quotaRemaining": 7,
        "disabledTools": [
            {"name": "booking.confirm_booking", "reason": "audit"},
            {"name": "booking.hold_slot", "reason": "payment provider outage"},
        ],
    }
    switches.state = ToolSwitchState(version=4)
    assert admission.live_meta(None) == {}
    refusal = tool_disabled(switch)
    assert refusal.code == "TOOL_DISABLED"
    assert refusal.details == {"name": "booking.hold_slot", "reason": "payment provider outage"}
