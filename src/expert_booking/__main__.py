"""Command line: ``expert-booking-mcp serve`` runs the server, ``... demo`` the demo, and so on.

``serve`` (and every command that reads the server's configuration) first reads ``.env`` in
the working directory: a variable already set in the environment wins over ``.env``, and a
flag wins over both.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence
from pathlib import Path

from expert_booking.admin_cli import add_admin_parser, run_admin
from expert_booking.ports import Clock
from expert_booking.serving import ListenError, exit_cleanly_on_signals, listen, serve
from expert_booking.setting_values import parse_port
from expert_booking.settings import (
    PROXY_PORT,
    SANDBOX_PORT,
    Settings,
    SettingsError,
    load_dotenv_file,
)
from expert_booking.version import DISTRIBUTION, package_version

PROG = DISTRIBUTION


def _port_argument(raw: str) -> int:
    """``--port``: the same parser as ``PORT``, with argparse's error type."""
    try:
        return parse_port(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a TCP port (0-65535)") from exc


def _bind_flags(parser: argparse.ArgumentParser, *, host_help: str, default_port: int) -> None:
    """``--host`` (default 127.0.0.1) and ``--port`` of a command with fixed defaults."""
    parser.add_argument("--host", default="127.0.0.1", help=f"{host_help} (default 127.0.0.1)")
    parser.add_argument(
        "--port",
        type=_port_argument,
        default=default_port,
        help=f"TCP port, 0 for a free one (default {default_port})",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Expert booking MCP server (protocol 2026-07-28)."
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_command = commands.add_parser(
        "serve",
        help="serve POST /mcp over Streamable HTTP",
        description="Serve MCP at http://HOST:PORT/mcp. Flags override the environment, "
        "which overrides ./.env (HOST, PORT, BOOKING_DB_PATH and the variables in .env.example).",
    )
    defaults = Settings()
    serve_command.add_argument("--host", help=f"bind address (default {defaults.host})")
    serve_command.add_argument(
        "--port", type=_port_argument, help=f"TCP port, 0 for a free one (default {defaults.port})"
    )
    serve_command.add_argument("--db", help=f"SQLite file (default ./{defaults.db_path})")
    commands.add_parser(
        "demo", help="run the booking flow against a real server process and the payment sandbox"
    )
    proxy = commands.add_parser(
        "proxy",
        help="an HTTP proxy that stamps the client time for clients that cannot (MCP Inspector)",
        description="Forward every request to UPSTREAM, stamping x-mcp-client-sent-at and "
        "params._meta.clientSentAt at the proxy's send boundary.",
    )
    proxy.add_argument(
        "--upstream", required=True, help="the server, e.g. http://127.0.0.1:3000/mcp"
    )
    _bind_flags(proxy, host_help="bind address", default_port=PROXY_PORT)
    stdio = commands.add_parser(
        "stdio",
        help="an MCP server on stdin/stdout for hosts that start a command (desktop apps)",
        description="Relay MCP over stdio (2025-11-25 initialize lifecycle or 2026-07-28) to "
        "the HTTP server at URL, stamping each request's client time at the bridge.",
    )
    stdio.add_argument("--url", required=True, help="the server, e.g. http://127.0.0.1:3000/mcp")
    sandbox = commands.add_parser(
        "payment-sandbox",
        help="a loopback payment service with a payment page, to try the server (SANDBOX)",
        description="Answer GET /payments/{bookingId} and serve the payment page at "
        "/pay/{bookingId} and a mailbox at /mailbox. Reads bookings read-only from the "
        "server's database (the same --db / BOOKING_DB_PATH / ./.env as serve).",
    )
    _bind_flags(sandbox, host_help="loopback bind address", default_port=SANDBOX_PORT)
    sandbox.add_argument("--db", help="the server's SQLite file (as for serve)")
    sandbox.add_argument(
        "--ledger", type=Path, help="the sandbox's own file (default: <db>.payments.json beside it)"
    )
    add_admin_parser(commands)
    return parser


def _payment_sandbox(args: argparse.Namespace) -> int:
    from expert_booking.sandbox.app import run  # noqa: PLC0415 - per command

    try:
        load_dotenv_file()
        settings = Settings.from_env().with_overrides(db_path=args.db)
    except SettingsError as exc:
        _startup_failure(f"configuration error: {exc}")
        return 2
    return run(args.host, args.port, settings.db_path, args.ledger)


def _startup_failure(message: str) -> None:
    """Write a startup failure as one JSON line on stderr (every stderr line is JSON)."""
    from expert_booking.edge.json_logging import startup_line  # noqa: PLC0415 - light

    print(startup_line(f"{PROG}: {message}"), file=sys.stderr, flush=True)


def run_serve(args: argparse.Namespace, *, clock: Clock | None = None) -> int:
    """``serve``: check the configuration, build the app and serve it until a signal.

    ``args`` carries ``host``, ``port`` and ``db`` (``None``: from the settings); ``clock``
    replaces the system clock (``harness.serve_controlled``'s, which a test moves).
    """
    exit_cleanly_on_signals()  # already while importing and building the app
    # Importing and wiring create ~180,000 tracked objects that live as long as the process
    # (a full collection afterwards finds ~2,000 unreachable): the full collections they would
    # trigger cost ~50 ms of cold start and free next to nothing. Serving turns it back on.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _build_and_serve(args, clock)
    finally:
        if collecting:
            gc.enable()  # on already once serving started; this covers every early exit


def _build_and_serve(args: argparse.Namespace, clock: Clock | None) -> int:
    # Imported here, not at the top: the demo needs none of it.
    from expert_booking.adapters.clock import SystemClock  # noqa: PLC0415
    from expert_booking.adapters.sqlite_store import (  # noqa: PLC0415
        DatabaseFileError,
        check_database_file,
    )
    from expert_booking.bootstrap import build_asgi_app  # noqa: PLC0415
    from expert_booking.edge.json_logging import JsonLinesHandler  # noqa: PLC0415
    from expert_booking.edge.schemas import SchemaLoadError  # noqa: PLC0415
    from expert_booking.telemetry import TracingConfigError  # noqa: PLC0415

    # Startup problems are one line on stderr and exit status 2 (3: the port), never a traceback.
    try:
        load_dotenv_file()
        settings = Settings.from_env().with_overrides(
            host=args.host, port=args.port, db_path=args.db
        )
        settings.check_serving()
    except SettingsError as exc:
        _startup_failure(f"configuration error: {exc}")
        return 2
    try:
        sock = listen(settings.host, settings.port)  # before the database is touched
    except ListenError as exc:
        _startup_failure(f"{exc}")
        return 3
    try:
        # Installed by serve(); the app writes its action lines straight to it.
        log_handler = JsonLinesHandler(sys.stderr)
        if clock is None:
            clock = SystemClock()
        app = build_asgi_app(settings, clock=clock, action_lines=log_handler)
    except (SettingsError, TracingConfigError) as exc:
        sock.close()
        _startup_failure(f"configuration error: {exc}")
        return 2
    except SchemaLoadError as exc:
        sock.close()
        _startup_failure(f"cannot load the JSON schemas: {exc}")
        return 2
    try:  # last: the configuration is valid, so a database file made here is the one served
        busy = check_database_file(settings.db_path, busy_timeout_ms=settings.db_busy_timeout_ms)
    except DatabaseFileError as exc:
        sock.close()
        _startup_failure(
            f"cannot use the database {settings.db_path} (--db / BOOKING_DB_PATH): {exc}"
        )
        return 2
    notes = (settings.payment_sandbox_warning, settings.auth_unused_warning, busy)
    warnings = tuple(note for note in notes if note)
    return serve(
        app,
        settings.host,
        settings.port,
        sock=sock,
        log_handler=log_handler,
        warnings=warnings,
        limits=settings,
        clock=clock,
    )


def _demo() -> int:
    from expert_booking.demo import main as demo_main  # noqa: PLC0415 - serve needs none of it

    return demo_main()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``expert-booking-mcp`` command line; returns the process exit status."""
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return run_serve(args)
    if args.command == "stdio":
        from expert_booking.stdio_bridge import run as run_stdio  # noqa: PLC0415 - per command

        return run_stdio(args.url)
    if args.command == "payment-sandbox":
        return _payment_sandbox(args)
    if args.command == "proxy":
        from expert_booking.proxy import run as run_proxy  # noqa: PLC0415 - per command

        return run_proxy(args.upstream, args.host, args.port)
    if args.command == "admin":
        return run_admin(args)
    return _demo()


if __name__ == "__main__":
    sys.exit(main())
