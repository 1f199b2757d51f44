"""The installed distribution's version, for clientInfo and serverInfo (no other imports)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "expert-booking-mcp"
"""The name it is installed, run (the command) and known by (serverInfo, logs, traces)."""
SOURCE_VERSION = "0.0.0+source"


def package_version() -> str:
    """The version of the installed ``expert-booking-mcp`` distribution.

    Returns:
        The version string, or ``"0.0.0+source"`` when running from a source tree that was
        never installed.
    """
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return SOURCE_VERSION
