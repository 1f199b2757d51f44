"""The benchmark's child processes: the real and the floor server, pinned to the server CPU."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from expert_booking.testing.server_process import SERVE_COMMAND, ServerProcess
from harness.serve_controlled import harness_server

SERVER_CPU = 1
LOADGEN_CPU = 0

# The CPUs this process may use before it pins itself to the load generator's CPU: a child
# may be pinned to any of them even after this process's own affinity was narrowed.
_USABLE_CPUS = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def pin_to(cpu: int) -> Callable[[], None] | None:
    """A preexec function pinning the child to ``cpu`` (None where that is impossible)."""
    if _USABLE_CPUS is None or cpu not in _USABLE_CPUS:
        return None

    def pin() -> None:
        os.sched_setaffinity(0, {cpu})

    return pin


# The three servers start at once on one CPU; in a fresh virtualenv without bytecode (uv
# compiles none) each compiles every module it imports, on a shared box under load.
START_SECONDS = 90.0


def _server(command: list[str], db_path: Path, env: dict[str, str], *, pin: bool) -> ServerProcess:
    preexec = pin_to(SERVER_CPU) if pin else None
    return harness_server(
        command,
        db_path=db_path,
        env=env,
        preexec=preexec,
        keep_stderr=False,
        start_seconds=START_SECONDS,
    )


def cli_server(
    db_path: Path, env: dict[str, str], *, pin: bool, python: str | None = None
) -> ServerProcess:
    """The CLI of this environment, or of the environment of the interpreter ``python``."""
    command = list(SERVE_COMMAND) if python is None else [python, *SERVE_COMMAND[1:]]
    return _server(command, db_path, env, pin=pin)


def floor_server(db_path: Path, env: dict[str, str], *, pin: bool) -> ServerProcess:
    """The bare-SDK floor (``harness.floor_app``); ``db_path`` only completes the common flags."""
    return _server([sys.executable, "-m", "harness.floor_app"], db_path, env, pin=pin)


def check_pinned(pid: int) -> None:
    """Every thread of ``pid`` may run on the server CPU only (else the figures are void)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        allowed = os.sched_getaffinity(int(task.name))
        if allowed != {SERVER_CPU}:
            msg = f"server thread {task.name} is not pinned to CPU {SERVER_CPU}: {allowed}"
            raise RuntimeError(msg)


def peak_rss_kib(pid: int) -> int | None:
    """``VmHWM`` (peak resident set) of ``pid`` in KiB, from ``/proc``."""
    try:
        text = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return None
