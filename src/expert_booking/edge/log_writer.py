"""A text stream for the log handler: one write per event-loop iteration instead of per line.

Every action writes a JSON line (CONTRACT section 5), two per ``tools/call``. Written and
flushed one by one, each line is a system call and, on a pipe (a container runtime, systemd,
the test harness), a wake-up of the reader: over HTTP the two lines cost ~170 us of a
~1500 us ``get_booking`` (NOTES.md, Benchmark). ``LoopBatchedWriter`` sits between
``logging.StreamHandler`` and the real stream and keeps the lines that code running on an
event loop flushes, and writes them with one ``write`` and one ``flush`` from a callback on
that loop (``call_soon``): at the end of the current loop iteration, before the loop waits
for I/O again, so a line is never held while the process idles.

A flush from a thread without a running event loop (a worker thread, start-up, shutdown,
``logging.shutdown()`` at exit) writes everything kept at once, so nothing waits on a loop
that is gone. The price: a process killed with SIGKILL loses the lines of the loop
iteration it was in (a few milliseconds at most); a crash that Python sees still writes them.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TextIO


class LoopBatchedWriter:
    """Keeps writes and sends them to ``target`` once per event-loop iteration.

    Use it as the stream of a ``logging.StreamHandler``: the handler calls ``write`` and then
    ``flush`` for every record. Thread-safe.
    """

    def __init__(self, target: TextIO) -> None:
        self.target = target
        self._kept: list[str] = []
        self._lock = threading.Lock()
        # The loop a drain is scheduled on; None when none is pending.
        self._scheduled_on: asyncio.AbstractEventLoop | None = None

    def write(self, text: str) -> int:
        """Keep ``text`` until the next flush that writes (see :meth:`flush`)."""
        with self._lock:
            self._kept.append(text)
        return len(text)

    def flush(self) -> None:
        """Write what is kept: at the end of this loop iteration on a loop, else now."""
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
        if earlier:  # scheduled on a loop that stopped before running it: write those now
            self.drain()
        loop.call_soon(self._drain_scheduled)

    def drain(self) -> None:
        """Write everything kept to the target with one write and one flush."""
        with self._lock:
            text = "".join(self._kept)
            self._kept.clear()
            if text:
                self.target.write(text)
                self.target.flush()

    def _drain_scheduled(self) -> None:
        with self._lock:
            self._scheduled_on = None
        self.drain()
