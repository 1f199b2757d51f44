"""A text stream for the log handler: one write per event-loop iteration instead of per line.

Every action writes a JSON line (CONTRACT section 5), two per ``tools/call``. Written and
flushed one by one, each line is a system call and, on a pipe (a container runtime, systemd,
the test harness), a wake-up of the reader: ~20 us of server CPU per line here (NOTES.md, The
MCP edge). ``LoopBatchedWriter`` sits between ``logging.StreamHandler`` and the real stream,
keeps the lines that code running on an event loop flushes, and writes them with one
``write`` and one ``flush`` from a callback on that loop (``call_soon``): at the end of the
current loop iteration, before the loop waits for I/O again.

A line is therefore held only as long as the loop iteration runs. If the loop thread stalls
(a hang, a deadlock) or the process dies without Python seeing it (SIGKILL, OOM kill,
``os._exit``), the lines of that iteration are late or lost; ``JsonLinesHandler`` writes
warnings and errors at once (``drain``) for that reason, so only INFO and action lines wait.
A flush from a thread without a running event loop (a worker thread, start-up, shutdown,
``logging.shutdown()`` at exit) writes everything kept at once, so nothing waits on a loop
that is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from typing import TextIO


class LoopBatchedWriter:
    """Keeps writes and sends them to ``target`` once per event-loop iteration.

    Use it as the stream of a ``logging.StreamHandler``: the handler calls ``write`` and then
    ``flush`` for every record. Thread-safe; re-entrant (a target that logs cannot deadlock).
    """

    def __init__(self, target: TextIO) -> None:
        self.target = target
        self._kept: list[str] = []
        self._lock = threading.RLock()
        # The loop a drain is scheduled on; None when none is pending.
        self._scheduled_on: asyncio.AbstractEventLoop | None = None

    def write(self, text: str) -> int:
        """Keep ``text`` until the next flush that writes (see :meth:`flush`)."""
        with self._lock:
            self._kept.append(text)
        return len(text)

    def flush(self) -> None:
        """Write what is kept: at the end of this loop iteration on a loop, else now.

        Raises:
            OSError, ValueError: writing to the target failed (outside a loop, or while writing
                what a loop that stopped left kept).
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop runs in this thread
            self.drain()
            return
        with self._lock:
            if self._scheduled_on is loop:
                return
            earlier = self._scheduled_on is not None
            self._scheduled_on = loop
        if earlier:  # scheduled on a loop that stopped, or runs elsewhere: write those now
            self.drain()
        loop.call_soon(self._drain_scheduled, loop)

    def drain(self) -> None:
        """Write everything kept to the target with one write and one flush.

        Raises:
            OSError, ValueError: writing to the target failed (a closed or broken stream);
                the kept lines are dropped, never retried forever.
        """
        with self._lock:
            text = "".join(self._kept)
            self._kept.clear()
            if text:
                self.target.write(text)
                self.target.flush()

    def _drain_scheduled(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            if self._scheduled_on is loop:
                self._scheduled_on = None
        try:
            self.drain()
        except (OSError, ValueError) as exc:
            # As logging.Handler.handleError does: say so on the process's stderr if it can,
            # never raise into the event loop (its "Exception in callback" is not a JSON line).
            if sys.__stderr__ is not None:
                with contextlib.suppress(OSError, ValueError):
                    sys.__stderr__.write(f"--- log lines lost: {type(exc).__name__} ---\n")
