"""Serve the REAL app with a test-controlled clock, in a child process; plus the parent's spawner.

Child side (runs inside the spawned process)::

    python -m harness.serve_controlled --db PATH --port 0 --clock-offset-file F [--host H]

builds ``bootstrap.build_asgi_app(Settings.from_env() + flags, clock=OffsetFileClock(F))``
and serves it through ``expert_booking.__main__.serve``, the function ``expert-booking-mcp
serve`` calls. Nothing is monkeypatched: the only difference from the CLI is the injected clock,
whose offset the test moves with ``harness.clock.write_offset`` (no sleeps). Settings come from
the environment the parent passes (``HOLD_TTL_SECONDS``, ``PAYMENT_QUERY_BASE_URL``, ...).

Parent side: :func:`controlled_server` is a (not yet started)
:class:`~expert_booking.testing.server_process.ServerProcess` running this module.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from expert_booking.testing.server_process import DEFAULT_START_SECONDS, ServerProcess

ROOT = Path(__file__).resolve().parent.parent


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.serve_controlled")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--clock-offset-file", type=Path, required=True)
    args = parser.parse_args(argv)

    from expert_booking.bootstrap import build_asgi_app
    from expert_booking.edge.json_logging import JsonLinesHandler
    from expert_booking.serving import serve
    from expert_booking.settings import Settings
    from harness.clock import OffsetFileClock

    settings = Settings.from_env().with_overrides(host=args.host, port=args.port, db_path=args.db)
    log_handler = JsonLinesHandler(sys.stderr)  # as the CLI does: action lines straight to it
    clock = OffsetFileClock(args.clock_offset_file)
    app = build_asgi_app(settings, clock=clock, action_lines=log_handler)
    return serve(
        app, settings.host, settings.port, log_handler=log_handler, limits=settings, clock=clock
    )


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

    Run from the repository root (so ``harness`` imports), killed when the thread that starts
    it ends (a test runner killed by a timeout leaves no server behind). ``start_seconds``
    overrides how long to wait for its ready line.
    """
    return ServerProcess(
        start_seconds=DEFAULT_START_SECONDS if start_seconds is None else start_seconds,
        command=command,
        db_path=db_path,
        extra_args=extra_args,
        env=env,
        cwd=ROOT,
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
