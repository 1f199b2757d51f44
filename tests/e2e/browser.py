"""Debian's headless Chromium for the browser tests, installed with apt-get when missing.

Playwright for Python drives it through ``executable_path``: Playwright's own browser download
is never used (and fails on this network). As root, a missing browser is installed from Debian
(``chromium-headless-shell``); anyone else is told the one line to run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Final

import pytest

CANDIDATES: Final = (Path("/usr/bin/chromium-headless-shell"), Path("/usr/bin/chromium"))
APT_PACKAGE: Final = "chromium-headless-shell"
APT_SECONDS: Final = 600
LAUNCH_ARGS: Final = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
"""Without the background-networking flags Chromium keeps trying hosts this machine cannot reach."""

ARTIFACTS: Final = Path(__file__).resolve().parents[2] / "test-artifacts"
"""Screenshots the browser tests keep (git-ignored)."""


def _installed() -> Path | None:
    return next((path for path in CANDIDATES if path.is_file()), None)


def ensure_chromium() -> Path:
    """The Chromium binary, installed from Debian first when it is missing and we are root."""
    found = _installed()
    if found is not None:
        return found
    apt_get = shutil.which("apt-get")
    if apt_get is None or os.geteuid() != 0:
        pytest.fail(f"no Chromium; install it once: sudo apt-get install -y {APT_PACKAGE}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [apt_get, "install", "-y", "--no-install-recommends", APT_PACKAGE]
    done = None
    for command in (install, [apt_get, "update"], install):
        done = subprocess.run(  # noqa: S603 - apt-get with fixed arguments
            command, capture_output=True, text=True, timeout=APT_SECONDS, env=env, check=False
        )
        if command is install and done.returncode == 0:
            break
    found = _installed()
    if found is None:
        output = "" if done is None else f"{done.stdout}\n{done.stderr}"
        pytest.fail(f"apt-get could not install {APT_PACKAGE}:\n{output}")
    return found
