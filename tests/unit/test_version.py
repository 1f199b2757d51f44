"""One version helper for clientInfo and serverInfo."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import pytest

from expert_booking import version as version_module
from expert_booking.version import package_version


def test_the_version_is_the_installed_distributions() -> None:
    assert package_version() == version("expert-booking-mcp")


def test_a_source_tree_that_was_never_installed_reports_a_source_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def not_installed(name: str) -> str:
        raise PackageNotFoundError(name)

    monkeypatch.setattr(version_module, "version", not_installed)
    assert package_version() == "0.0.0+source"
