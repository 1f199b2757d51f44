"""The per-call access checks of ``tools/call``: quota, kill switch, and the live ``meta``.

A request reaches ``tools/call`` only past the HTTP gate (and, in ``oauth`` mode, past token
verification). Then, in this order:

1. **Quota** (:meth:`CallAdmission.admit`): every ``tools/call`` admitted past authentication
   counts once, whatever it then does: a catalog search or read, a call refused for its
   arguments, a business refusal, a ``TOOL_DISABLED`` refusal. A call over a limit answers
   ``RATE_LIMITED`` (retryable, ``details.retryAfterSeconds``, ``details.limit`` ``CALLER`` or
   ``GLOBAL``) and counts nothing itself: were refusals counted, a caller retrying while over
   its limit would keep its own window full for good, and fill the GLOBAL one for everybody.
   The window is the counter's (``adapters/quota_memory.py``: an exact sliding log, so no 60 s
   span ever admits more than the limit, and no 2x at a fixed window's edge). The caller is
   the verified principal, else the peer's bare host (``scope["client"][0]``, not
   ``CallContext.peer``'s ``host:port``), or the client a ``TRUSTED_PROXIES`` proxy names
   (``access/caller.py``).
2. **Kill switch** (:meth:`CallAdmission.disabled`): judged once, when ``tool_catalog.call``
   has resolved its logical tool, before the arguments are validated. A call already past it
   runs to its end (``access/tool_switches.py``).

The continuation of an ``input_required`` round (the client's retry carrying ``inputResponses``
and the ``requestState`` this server sealed) is the same call and does not count again:
``is_continuation`` tells. No tool of this server asks for input yet, so the default counts
every call; a round that lands installs the SDK's ``RequestStateBoundary`` (it refuses a forged,
altered or expired ``requestState`` before any handler runs, so a client cannot skip its
quota by inventing one) and passes ``lambda params: params.get("requestState") is not None``
(the call's wire params); the round's single use of a state bounds how often a continuation
passes uncounted.

Live state travels in ``meta``, never in ``data`` (so catalog data, its ``sha256`` and
``catalogVersion`` change only with a document): ``quotaRemaining`` while quotas are on,
``disabledTools`` (name and reason) while any tool is off. With quotas off and nothing
disabled, ``meta`` gains nothing. Each ``RATE_LIMITED`` or ``TOOL_DISABLED`` refusal writes one
JSON line (``expert_booking.access``): code, tool, caller (principal or address; never a token
or a customer's data), operation id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

from expert_booking.access.caller import Caller, IpNetwork
from expert_booking.access.ports import DisabledTool, QuotaCounter, ToolSwitchState
from expert_booking.call_context import CallContext
from expert_booking.domain.errors import BookingError, RateLimitedError, ToolDisabledError
from expert_booking.edge.request_context import request_caller

logger = logging.getLogger("expert_booking.access")

QUOTA_REMAINING_META: Final = "quotaRemaining"
DISABLED_TOOLS_META: Final = "disabledTools"
_NOTHING: Final[Mapping[str, Any]] = {}
_LOGGED = frozenset({RateLimitedError.code, ToolDisabledError.code})


class SwitchView(Protocol):
    """This process's view of the kill switches (``ToolSwitchWatcher``)."""

    @property
    def state(self) -> ToolSwitchState: ...


def no_input_rounds(_params: Mapping[str, Any]) -> bool:
    """No call is a continuation: this server asks for no input yet (see the module docstring)."""
    return False


class CallAdmission:
    """Quota and kill switches for every ``tools/call`` (see the module docstring)."""

    def __init__(
        self,
        *,
        quota: QuotaCounter | None,
        switches: SwitchView,
        trusted_proxies: Sequence[IpNetwork] = (),
        is_continuation: Callable[[Mapping[str, Any]], bool] = no_input_rounds,
    ) -> None:
        """Count against ``quota`` (``None``: quotas off) and refuse what ``switches`` disable."""
        self._quota = quota
        self._switches = switches
        self._trusted = tuple(trusted_proxies)
        self._is_continuation = is_continuation
        self._listed_version = -1
        self._listed: list[dict[str, str]] = []

    async def admit(
        self,
        params: Mapping[str, Any],
        scope: Mapping[str, Any],
        context: CallContext,
    ) -> int | RateLimitedError | None:
        """Count this call: the caller's remaining quota, a refusal, or ``None`` (quotas off).

        A continuation of an ``input_required`` round is not counted again; it reports no
        remaining figure (``None``) rather than a stale one.
        """
        if self._quota is None or self._is_continuation(params):
            return None
        decision = await self._quota.admit(self.caller(scope, context).key)
        if decision.refused_by is None:
            return decision.remaining
        return RateLimitedError(
            retry_after_seconds=decision.retry_after_seconds, limit=decision.refused_by.value
        )

    def disabled(self, name: str) -> DisabledTool | None:
        """The switch of logical tool ``name`` if an operator turned it off."""
        return self._switches.state.disabled.get(name)

    def live_meta(self, remaining: int | None) -> Mapping[str, Any]:
        """What ``meta`` adds: ``quotaRemaining`` and ``disabledTools`` when there are any."""
        state = self._switches.state
        if remaining is None and not state.disabled:
            return _NOTHING
        live: dict[str, Any] = {}
        if remaining is not None:
            live[QUOTA_REMAINING_META] = remaining
        if state.disabled:
            live[DISABLED_TOOLS_META] = self._disabled_list(state)
        return live

    def caller(self, scope: Mapping[str, Any], context: CallContext) -> Caller:
        """Who this request counts against: the verified principal, else the client address."""
        return request_caller(scope, context.principal, self._trusted)

    def log_refusal(
        self,
        error: BookingError,
        *,
        tool: str,
        operation_id: str,
        scope: Mapping[str, Any],
        context: CallContext,
    ) -> None:
        """One JSON line for a ``RATE_LIMITED`` or ``TOOL_DISABLED`` refusal (others: nothing)."""
        if error.code not in _LOGGED:
            return
        fields: dict[str, Any] = {
            "code": error.code.value,
            "tool": tool,
            "caller": self.caller(scope, context).log_value(),
            "operationId": operation_id,
        }
        if isinstance(error, RateLimitedError):
            fields["limit"] = error.details["limit"]
            fields["retryAfterSeconds"] = error.details["retry_after_seconds"]
        logger.info("tool call refused: %s %s", error.code.value, tool, extra={"refusal": fields})

    def _disabled_list(self, state: ToolSwitchState) -> list[dict[str, str]]:
        if state.version != self._listed_version:  # built once per change, not per call
            self._listed = [
                {"name": name, "reason": state.disabled[name].reason}
                for name in sorted(state.disabled)
            ]
            self._listed_version = state.version
        return self._listed


def tool_disabled(switch: DisabledTool) -> ToolDisabledError:
    """The refusal of a call of a disabled tool, naming it and the operator's reason."""
    return ToolDisabledError(
        f"{switch.name} is switched off by an operator: {switch.reason}",
        name=switch.name,
        reason=switch.reason,
    )
