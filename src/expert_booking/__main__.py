"""Command line: ``expert-booking-mcp serve`` runs the server, ``... demo`` runs the demo."""

from __future__ import annotations

import argparse
import gc
import importlib.util
import logging
import resource
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn

from expert_booking.admin_cli import add_admin_parser, run_admin
from expert_booking.settings import Settings, SettingsError, parse_port

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from expert_booking.edge.observability import JsonLinesHandler

PROG = "expert-booking-mcp"
GRACEFUL_SHUTDOWN_SECONDS = 10
_server_logger = logging.getLogger("expert_booking.server")


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that prints the ready line once it accepts connections."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.started:
            return
        bound = self.servers[0].sockets[0].getsockname()
        host = self.config.host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        # The heap built while importing and wiring is long-lived: keep gen-2 passes off it
        # (perf-floor section 3.2: c=16 p99 67 ms -> 13 ms). No gc.collect() first: it costs
        # 70-100 ms of cold start and finds about ten unreachable objects here. For the same
        # reason ``expert-booking-mcp serve`` starts with the collector off; it runs from here.
        gc.freeze()
        gc.enable()
        # A JSON line like every other (written at the end of this loop iteration).
        _server_logger.info("MCP endpoint: http://%s:%s/mcp", host, bound[1])


def _port_argument(raw: str) -> int:
    """``--port``: the same parser as ``PORT``, with argparse's error type."""
    try:
        return parse_port(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a TCP port (0-65535)") from exc


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Expert booking MCP server (protocol 2026-07-28)."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="serve POST /mcp over Streamable HTTP",
        description="Serve MCP at http://HOST:PORT/mcp. Flags override the environment "
        "(HOST, PORT, BOOKING_DB_PATH and the variables in .env.example).",
    )
    serve.add_argument("--host", help="bind address (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=_port_argument, help="TCP port, 0 for a free one (default 3000)"
    )
    serve.add_argument("--db", type=Path, help="SQLite file (default ./expert-booking.db)")
    commands.add_parser(
        "demo", help="run the booking flow against a real server process and a payment stub"
    )
    add_admin_parser(commands)
    return parser


def _startup_failure(message: str) -> int:
    """Write a startup failure as one JSON line on stderr (every stderr line is JSON); 2."""
    from expert_booking.edge.observability import startup_line  # noqa: PLC0415 - light

    print(startup_line(f"{PROG}: {message}"), file=sys.stderr, flush=True)
    return 2


def _exit_cleanly(signum: int, frame: FrameType | None) -> None:
    """End the process with status 0 on SIGTERM/SIGINT outside uvicorn's own handling.

    That is before serving starts, and when uvicorn re-raises the signal after its graceful
    shutdown (it restores the previous handler, this one, and raises the signal again).
    """
    del signum, frame
    raise SystemExit(0)


def _exit_cleanly_on_signals() -> None:
    signal.signal(signal.SIGTERM, _exit_cleanly)
    signal.signal(signal.SIGINT, _exit_cleanly)


def serve(app: ASGIApp, settings: Settings, *, log_handler: JsonLinesHandler | None = None) -> int:
    """Serve ``app`` at ``http://{settings.host}:{settings.port}/mcp`` until SIGTERM/SIGINT; 0.

    This is how ``expert-booking-mcp serve`` runs its app, and the one place that says how
    (the harness serves its clock-controlled and floor apps through it): uvloop when installed,
    uvicorn's httptools protocol with the ``HTTP_*`` bounds of
    :class:`~expert_booking.edge.http_limits.BoundedHttpProtocol`, keep-alive idle time
    ``HTTP_KEEP_ALIVE_SECONDS``, no access log, a graceful shutdown of
    ``GRACEFUL_SHUTDOWN_SECONDS``, the JSON logging of :func:`configure_logging` on stderr for
    every logger, uvicorn's and the SDK's included (``log_handler``, when the app was given it
    for its action lines), ``gc.freeze()`` and the collector on after startup, the ready line
    (a JSON line whose ``message`` is ``MCP endpoint: http://HOST:PORT/mcp``, the bound port)
    on stderr once connections are accepted. A signal ends the process with status 0.
    """
    _exit_cleanly_on_signals()
    from expert_booking.edge.http_limits import (  # noqa: PLC0415
        BoundedHttpProtocol,
        HttpLimits,
        connection_cap,
    )
    from expert_booking.edge.observability import configure_logging  # noqa: PLC0415

    # Before uvicorn.Config, which sets uvicorn's logger levels (log_config=None: no handlers
    # of its own, so its records reach the JSON handler on the root logger).
    configure_logging(log_handler or sys.stderr, every_logger=True)
    limits = HttpLimits(
        max_header_bytes=settings.http_max_header_bytes,
        max_headers=settings.http_max_headers,
        header_timeout=settings.http_header_timeout_seconds,
        body_timeout=settings.http_body_timeout_seconds,
        max_connections=connection_cap(
            settings.http_max_connections, resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        ),
    )
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        loop="uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio",
        http=BoundedHttpProtocol.bound(limits),
        lifespan="on",
        access_log=False,
        log_config=None,
        log_level="warning",
        timeout_keep_alive=settings.http_keep_alive_seconds,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
    # uvicorn handles SIGTERM/SIGINT while serving: stop accepting, finish in-flight requests,
    # run the lifespan shutdown (closing the store and HTTP clients), then return here.
    _AnnouncingServer(config).run()
    return 0


def _serve(args: argparse.Namespace) -> int:
    _exit_cleanly_on_signals()  # already while importing and building the app
    # Importing and wiring create ~180,000 tracked objects that live as long as the process
    # (a full collection afterwards finds ~2,000 unreachable): the full collections they would
    # trigger cost ~50 ms of cold start and free next to nothing. Serving turns it back on.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _build_and_serve(args)
    finally:
        if collecting:
            gc.enable()  # on already once serving started; this covers every early exit


def _build_and_serve(args: argparse.Namespace) -> int:
    # Imported here, not at the top: the demo needs none of it.
    from expert_booking.bootstrap import build_asgi_app  # noqa: PLC0415
    from expert_booking.edge.observability import JsonLinesHandler  # noqa: PLC0415
    from expert_booking.edge.schemas import SchemaLoadError  # noqa: PLC0415
    from expert_booking.telemetry import TracingConfigError  # noqa: PLC0415

    # Startup problems are one line on stderr and exit status 2, never a traceback.
    try:
        settings = Settings.from_env().with_overrides(
            host=args.host, port=args.port, db_path=args.db
        )
        settings.check_serving()
        # Installed by serve(); the app writes its action lines straight to it.
        log_handler = JsonLinesHandler(sys.stderr)
        app = build_asgi_app(settings, action_lines=log_handler)
    except (SettingsError, TracingConfigError) as exc:
        return _startup_failure(f"configuration error: {exc}")
    except SchemaLoadError as exc:
        return _startup_failure(f"cannot load the JSON schemas: {exc}")
    return serve(app, settings, log_handler=log_handler)


def _demo() -> int:
    from expert_booking.demo import main as demo_main  # noqa: PLC0415 - serve needs none of it

    return demo_main()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``expert-booking-mcp`` command line; returns the process exit status."""
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "admin":
        return run_admin(args)
    return _demo()


if __name__ == "__main__":
    sys.exit(main())
