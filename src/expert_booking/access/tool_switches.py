"""What an operator may switch off, and the watcher that brings every change to this process.

Only logical tools can be disabled: the catalog tools are how an agent learns what exists and
reads the refusals, and disabling them would hide the reason along with the tool. A call
checks the switch once, when it is dispatched. A call already past that check runs to its
end (a hold keeps the expiry it was given, a confirmation in flight finishes both of its
transactions); only calls dispatched after the change is seen are refused.

:class:`ToolSwitchWatcher` polls the store's version every ``interval_seconds`` (default 0.5 s)
and reloads the disabled tools only when it moved, so every server process on one database
honours a change within about ``interval_seconds`` plus one read (the issue's bound is 2 s).
Per call the state is an in-memory lookup. A failed poll keeps the last known state and is
retried at the next tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import unicodedata
from collections.abc import Callable, Iterable
from typing import Final

from expert_booking.access.ports import DisabledTool, ToolSwitchState, ToolSwitchStore
from expert_booking.domain.errors import BookingError

logger = logging.getLogger("expert_booking.access")

MAX_REASON_CHARS: Final = 200
DEFAULT_POLL_SECONDS: Final = 0.5


class ToolSwitchError(ValueError):
    """An operator's switch request names a tool that cannot be switched, or a bad reason."""


def check_switchable(name: str, *, logical: Iterable[str], catalog: Iterable[str]) -> None:
    """Refuse a name that is a catalog tool or no tool at all.

    Raises:
        ToolSwitchError: with a sentence for the operator.
    """
    logical_names = tuple(logical)
    if name in tuple(catalog):
        raise ToolSwitchError(
            f"{name} is a catalog tool and cannot be disabled (only logical tools can: "
            f"{', '.join(logical_names)})"
        )
    if name not in logical_names:
        raise ToolSwitchError(f"unknown tool {name!r}; logical tools: {', '.join(logical_names)}")


def clean_reason(reason: str) -> str:
    """The reason callers will be told: one line of 1 to 200 printable characters, trimmed.

    Raises:
        ToolSwitchError: the reason is empty, too long, or holds control characters (the
            message is the rule, to follow the reason's name).
    """
    text = reason.strip()
    if not text:
        raise ToolSwitchError("must say why (callers are told it)")
    if len(text) > MAX_REASON_CHARS:
        raise ToolSwitchError(f"is longer than {MAX_REASON_CHARS} characters")
    if any(unicodedata.category(char).startswith("C") for char in text):
        raise ToolSwitchError("must be one line without control characters")
    return text


class ToolSwitchWatcher:
    """This process's view of the kill switches, kept fresh by polling the store's version."""

    def __init__(
        self,
        store: ToolSwitchStore,
        *,
        interval_seconds: float = DEFAULT_POLL_SECONDS,
        on_change: Callable[[ToolSwitchState, ToolSwitchState], None] | None = None,
    ) -> None:
        """Watch ``store``; ``on_change(old, new)`` runs after each change is taken in."""
        self._store = store
        self._interval = interval_seconds
        self._on_change = on_change or _log_change
        self._state = ToolSwitchState(version=0)
        self._task: asyncio.Task[None] | None = None

    @property
    def state(self) -> ToolSwitchState:
        """The state as last seen."""
        return self._state

    def disabled(self, name: str) -> DisabledTool | None:
        """The switch of ``name`` if it is off (an in-memory lookup, per call)."""
        return self._state.disabled.get(name)

    async def start(self) -> None:
        """Load the current state, then poll in the background until :meth:`stop`."""
        self._state = await self._store.load()
        if self._state.disabled:
            self._on_change(ToolSwitchState(version=0), self._state)
        self._task = asyncio.create_task(self._poll(), name="tool-switch-watcher")

    async def stop(self) -> None:
        """End the polling (idempotent)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def refresh(self) -> None:
        """Poll once: reload the state if the store's version moved."""
        try:
            version = await self._store.version()
            if version == self._state.version:
                return
            fresh = await self._store.load()
        except BookingError as exc:
            logger.warning("tool switches not refreshed (%s); keeping version %d",
                           exc.code, self._state.version)  # fmt: skip
            return
        old, self._state = self._state, fresh
        self._on_change(old, fresh)

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            await self.refresh()


def _log_change(old: ToolSwitchState, new: ToolSwitchState) -> None:
    logger.info(
        "tool switches at version %d: disabled %s (was %s)",
        new.version,
        ",".join(sorted(new.disabled)) or "none",
        ",".join(sorted(old.disabled)) or "none",
    )
