"""A test clock for a spawned server: system time plus an offset that a test writes to a file.

The test process moves a child server's time forward without sleeping: it calls
``write_offset(path, seconds)``, and the server's next ``now()`` sees the new offset. The file is
replaced atomically (write to a sibling, then ``os.replace``), so a reader never sees a half-written
value, and the clock re-reads it only when the file's identity (inode, mtime, size) changed: one
``os.stat`` per call, no read on the hot path. From a shell (a host builder driving
``harness.serve_controlled``): ``python -m harness.clock FILE SECONDS``.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

MAX_OFFSET_SECONDS = 10 * 366 * 86_400
"""The command's bound: ten years either way, far inside what a ``datetime`` can add."""


def write_offset(path: Path, seconds: float) -> None:
    """Set the offset (seconds, may be negative) that every ``OffsetFileClock`` on ``path`` adds."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{seconds!r}\n", encoding="ascii")
    tmp.replace(path)


def read_offset(path: Path) -> float:
    """The offset currently stored in ``path`` (0 when the file does not exist)."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return 0.0
    return float(text) if text else 0.0


class OffsetFileClock:
    """Implements the ``Clock`` port: ``datetime.now(UTC) + offset``, offset read from a file."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._identity: tuple[int, int, int] | None = None
        self._offset = timedelta(0)
        self._lock = threading.Lock()  # read on the event loop and the store's worker

    @property
    def path(self) -> Path:
        return self._path

    def now(self) -> datetime:
        with self._lock:
            self._refresh()
            offset = self._offset
        return datetime.now(UTC) + offset

    def _refresh(self) -> None:
        try:
            stat = self._path.stat()
        except FileNotFoundError:
            self._identity = None
            self._offset = timedelta(0)
            return
        identity = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if identity != self._identity:
            self._offset = timedelta(seconds=read_offset(self._path))
            self._identity = identity


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.clock FILE SECONDS``: set the offset; prints the clock it gives."""
    args = sys.argv[1:] if argv is None else argv
    try:
        path, seconds = Path(args[0]), float(args[1])
    except (IndexError, ValueError):
        path, seconds = Path(), math.nan
    if len(args) != 2:
        seconds = math.nan
    if not abs(seconds) <= MAX_OFFSET_SECONDS:  # NaN too: every now() of a server would fail
        print(
            "usage: python -m harness.clock OFFSET_FILE SECONDS "
            f"(a number of seconds within ±{MAX_OFFSET_SECONDS:,}, may be negative)",
            file=sys.stderr,
        )
        return 2
    write_offset(path, seconds)
    now = OffsetFileClock(path).now()
    print(f"offset {seconds:+g} s: the server's clock reads {now.isoformat()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
