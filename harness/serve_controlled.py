"""Serve the REAL app with a test-controlled clock, in a child process; plus the parent's spawner.

Child side (runs inside the spawned process)::

    python -m harness.serve_controlled --db PATH --port 0 --clock-offset-file F [--host H]

runs ``expert-booking-mcp serve``'s own path (``expert_booking.__main__.run_serve``: ``./.env``,
the start-up checks, the app, the server) with one difference: the clock is
``OffsetFileClock(F)``, whose offset a test moves with ``harness.clock.write_offset`` (no
sleeps). Settings come from the environment the parent passes (``HOLD_TTL_SECONDS``,
``PAYMENT_QUERY_BASE_URL``, ...).

Parent side: :func:`controlled_server` is a (not yet started)
:class:`~expert_booking.testing.server_process.ServerProcess` running this module.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from expert_booking.setting_values import parse_port
from expert_booking.testing.server_process import DEFAULT_START_SECONDS, ServerProcess

ROOT = Path(__file__).resolve().parent.parent


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.serve_controlled")
    parser.add_argument("--host")  # as serve: HOST, else 127.0.0.1
    parser.add_argument("--port", type=parse_port)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--clock-offset-file", type=Path, required=True)
    args = parser.parse_args(argv)

    from expert_booking.__main__ import run_serve
    from harness.clock import OffsetFileClock

    serve_args = argparse.Namespace(host=args.host, port=args.port, db=str(args.db))
    return run_serve(serve_args, clock=OffsetFileClock(args.clock_offset_file))


def harness_server(
    command: Sequence[str],
    *,
    db_path: Path | None = None,
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    preexec: Callable[[], None] | None = None,
    keep_stderr: bool = True,
    start_seconds: float | None = None,
) -> ServerProcess:
    """A (not yet started) ``<command> --host 127.0.0.1 --port 0 --db ...`` child.

    The repository root leads its ``PYTHONPATH`` (so ``harness`` imports) while it runs in the
    database's directory (no ``./.env`` of the checkout reaches it), killed when the thread that
    starts it ends (a test runner killed by a timeout leaves no server behind).
    ``start_seconds`` overrides how long to wait for its ready line.
    """
    child_env = dict(os.environ if env is None else env)
    child_env["PYTHONPATH"] = os.pathsep.join(
        part for part in (str(ROOT), child_env.get("PYTHONPATH", "")) if part
    )
    return ServerProcess(
        start_seconds=DEFAULT_START_SECONDS if start_seconds is None else start_seconds,
        command=command,
        db_path=db_path,
        extra_args=extra_args,
        env=child_env,
        preexec=preexec,
        die_with_parent=True,
        keep_stderr=keep_stderr,
    )


def controlled_server(
    *, db_path: Path, offset_file: Path, env: Mapping[str, str] | None = None
) -> ServerProcess:
    """A (not yet started) ``python -m harness.serve_controlled`` child on a free loopback port."""
    return harness_server(
        [sys.executable, "-m", "harness.serve_controlled"],
        db_path=db_path,
        extra_args=["--clock-offset-file", str(offset_file)],
        env=env,
    )


if __name__ == "__main__":
    sys.exit(main())
