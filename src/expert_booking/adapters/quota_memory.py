"""The exact in-process quota counter: a sliding log per caller and one over all callers.

A call at time ``t`` is admitted when fewer than the limit were admitted in ``(t - 60 s, t]``,
for the caller and in total; an admission made at ``t0`` stops counting at ``t0 + 60 s``
exactly. So no 60-second span ever holds more than the limit, wherever it starts: a fixed
window would let twice the limit through across its edge, and GCRA (the usual O(1) choice)
admits the limit as a burst plus one call per ``60 s / limit`` afterwards, about 2x in the
first minute. The logs cost memory for admitted calls only: the global log holds at most
``global_per_minute`` instants, a caller's at most ``per_caller_per_minute``, and callers whose
newest admission left the window are dropped once more than ``global_per_minute`` callers have
a log, so memory stays under global x per-caller instants (9,000 floats at the defaults).
Expired instants leave from the front of a deque (amortised O(1)) when their caller calls.

A refused call counts nothing: a client that keeps retrying while refused would otherwise
never get in again. It runs on the event loop only (no ``await`` inside), so it needs no lock.
The clock is monotonic: a wall-clock step neither frees nor blocks calls.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

from expert_booking.access.ports import QuotaDecision, QuotaLimit, QuotaLimits

WINDOW_SECONDS = 60.0


class InProcessQuotaCounter:
    """``QuotaCounter`` in this process's memory (exact; SQLite's one process per file)."""

    def __init__(self, limits: QuotaLimits, *, clock: Callable[[], float] = time.monotonic) -> None:
        """Count against ``limits``; ``clock`` gives monotonic seconds (tests inject one)."""
        self._per_caller = limits.per_caller_per_minute
        self._global_limit = limits.global_per_minute
        self._clock = clock
        self._global: deque[float] = deque()
        self._callers: dict[str, deque[float]] = {}

    async def admit(self, caller: str) -> QuotaDecision:
        """Count one call of ``caller`` if both limits allow it (see the module docstring)."""
        return self.admit_now(caller)

    def admit_now(self, caller: str) -> QuotaDecision:
        """:meth:`admit` without the coroutine, for callers on the event loop."""
        now = self._clock()
        horizon = now - WINDOW_SECONDS
        _expire(self._global, horizon)
        log = self._callers.get(caller)
        if log is not None:
            _expire(log, horizon)
            if not log:
                del self._callers[caller]
                log = None
        used = 0 if log is None else len(log)
        caller_full = used >= self._per_caller
        global_full = len(self._global) >= self._global_limit
        if caller_full or global_full:
            waits = []
            if caller_full and log is not None:
                waits.append(log[0] + WINDOW_SECONDS - now)
            if global_full:
                waits.append(self._global[0] + WINDOW_SECONDS - now)
            return QuotaDecision(
                remaining=0,
                refused_by=QuotaLimit.CALLER if caller_full else QuotaLimit.GLOBAL,
                retry_after_seconds=max(1, math.ceil(max(waits))),
            )
        if log is None:
            log = self._callers[caller] = deque()
        log.append(now)
        self._global.append(now)
        self._forget_idle_callers(horizon)
        return QuotaDecision(
            remaining=min(self._per_caller - len(log), self._global_limit - len(self._global)),
        )

    def _forget_idle_callers(self, horizon: float) -> None:
        """Drop callers whose newest admission left the window (bounded by the global log)."""
        if len(self._callers) <= self._global_limit:
            return
        idle = [key for key, log in self._callers.items() if log[-1] <= horizon]
        for key in idle:
            del self._callers[key]


def _expire(log: deque[float], horizon: float) -> None:
    while log and log[0] <= horizon:
        log.popleft()
