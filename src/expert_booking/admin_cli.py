"""``expert-booking-mcp admin tools disable NAME --reason TEXT`` / ``enable NAME`` / ``list``.

The commands act on the database the servers use: the same ``--db`` flag and environment
(``BOOKING_DB_PATH``, ``BOOKING_DB_BUSY_TIMEOUT_MS``, ``./.env`` included) as ``serve``; like
``serve`` they create and migrate the file when it does not exist yet (a tool can be switched
off before the first start), and then say so on stderr: a mistyped path would otherwise switch
a tool off where no server looks. Every server process on that file sees a change within about
half a second (``access.tool_switches``). Problems are one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any, Final

from expert_booking.access.ports import ToolSwitchState
from expert_booking.access.tool_switches import ToolSwitchError, check_switchable, clean_reason
from expert_booking.adapters.clock import SystemClock
from expert_booking.adapters.sqlite_store import (
    DatabaseFileError,
    SqliteBookingStore,
    check_database_file,
)
from expert_booking.adapters.sqlite_tool_switches import SqliteToolSwitches
from expert_booking.domain.errors import BookingError, StorageBusyError
from expert_booking.domain.model import format_instant
from expert_booking.settings import Settings, SettingsError, load_dotenv_file
from expert_booking.version import DISTRIBUTION

PROG = DISTRIBUTION
EXIT_BUSY: Final = 75
"""Exit status when the database stayed locked (sysexits ``EX_TEMPFAIL``: try again)."""


def add_admin_parser(commands: Any) -> None:
    """Add ``admin tools ...`` to the top-level subcommands (``commands`` of argparse)."""
    admin = commands.add_parser("admin", help="operator commands on the servers' database")
    areas = admin.add_subparsers(dest="admin_area", required=True)
    tools = areas.add_parser(
        "tools",
        help="per-tool kill switches",
        description="Switch logical tools off and on for every server on the database.",
    )
    actions = tools.add_subparsers(dest="admin_action", required=True)
    disable = actions.add_parser("disable", help="switch a logical tool off")
    disable.add_argument("name", help="logical tool, e.g. booking.hold_slot")
    disable.add_argument("--reason", required=True, help="why (callers are told it)")
    enable = actions.add_parser("enable", help="switch a logical tool on again")
    enable.add_argument("name", help="logical tool, e.g. booking.hold_slot")
    actions.add_parser("list", help="the disabled tools and why")
    for command in (disable, enable, actions.choices["list"]):
        command.add_argument("--db", help="SQLite file (as for serve)")


def run_admin(args: argparse.Namespace) -> int:
    """Run an ``admin`` command; its exit status."""
    try:
        load_dotenv_file()
        settings = Settings.from_env().with_overrides(db_path=args.db)
    except SettingsError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_tools(args, settings))
    except (SettingsError, ToolSwitchError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except StorageBusyError:
        print(
            f"{PROG}: nothing was changed: another process held the write lock of "
            f"{settings.db_path} for longer than BOOKING_DB_BUSY_TIMEOUT_MS "
            f"({settings.db_busy_timeout_ms} ms); retry, or raise that timeout",
            file=sys.stderr,
        )
        return EXIT_BUSY
    except BookingError as exc:
        print(f"{PROG}: the database {exc.code}: {exc}", file=sys.stderr)
        return 2


async def _tools(args: argparse.Namespace, settings: Settings) -> int:
    # Imported here: the registry pulls in the whole edge, which serve needs and admin barely.
    from expert_booking.edge.mcp_tools import MCP_TOOLS  # noqa: PLC0415
    from expert_booking.edge.tool_registry import LOGICAL_NAMES  # noqa: PLC0415

    if args.admin_action in {"disable", "enable"}:
        check_switchable(args.name, logical=LOGICAL_NAMES, catalog=MCP_TOOLS)
    reason = ""
    if args.admin_action == "disable":
        try:
            reason = clean_reason(args.reason)
        except ToolSwitchError as exc:
            raise ToolSwitchError(f"--reason {exc}") from None
    created = not settings.db_path.exists()
    try:
        check_database_file(settings.db_path, busy_timeout_ms=settings.db_busy_timeout_ms)
    except DatabaseFileError as exc:
        msg = f"cannot use the database {settings.db_path} (--db / BOOKING_DB_PATH): {exc}"
        raise SettingsError(msg) from exc
    store = await SqliteBookingStore.open(
        settings.db_path, busy_timeout_ms=settings.db_busy_timeout_ms
    )
    await store.close()  # opened for its migrations only
    if created:
        print(
            f"{PROG}: no database was at {settings.db_path}: created it; servers on another "
            "file do not see this change (check --db / BOOKING_DB_PATH)",
            file=sys.stderr,
        )
    switches = SqliteToolSwitches(settings.db_path, busy_timeout_ms=settings.db_busy_timeout_ms)
    if args.admin_action == "disable":
        state = await switches.disable(args.name, reason, SystemClock().now())
        print(f"{args.name} disabled (version {state.version}): {reason}")
    elif args.admin_action == "enable":
        changed = await switches.enable(args.name)
        print(f"{args.name} enabled" if changed else f"{args.name} was not disabled")
    else:
        _print_state(await switches.load())
    return 0


def _print_state(state: ToolSwitchState) -> None:
    if not state.disabled:
        print(f"no tool is disabled (version {state.version})")
        return
    for switch in state.disabled.values():
        print(
            f"{switch.name}\tdisabled since {format_instant(switch.disabled_at)}\t{switch.reason}"
        )
