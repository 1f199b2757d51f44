"""Debian's headless Chromium for the browser tests, installed with apt-get when missing.

Playwright for Python drives it through ``executable_path``: Playwright's own browser download
is never used (and fails on this network). As root, a missing browser is installed from Debian
(``chromium-headless-shell``); anyone else is told the one line to run.
"""

from __future__ import annotations

import ctypes.util
import os
import shutil
import subprocess
from pathlib import Path
from typing import Final

import pytest

CANDIDATES: Final = (Path("/usr/bin/chromium-headless-shell"), Path("/usr/bin/chromium"))
APT_PACKAGE: Final = "chromium-headless-shell"
DRIVER_LIBRARY: Final = ("atomic", "libatomic1")
"""Playwright's bundled Node driver links ``libatomic.so.1``, which a minimal Debian lacks."""
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


def _missing_packages() -> list[str]:
    missing = [] if _installed() is not None else [APT_PACKAGE]
    if ctypes.util.find_library(DRIVER_LIBRARY[0]) is None:
        missing.append(DRIVER_LIBRARY[1])
    return missing


def ensure_chromium() -> Path:
    """The Chromium binary (and the driver's library), installed from Debian first when missing.

    Installing needs root; anyone else is told the one ``sudo apt-get`` line.
    """
    missing = _missing_packages()
    found = _installed()
    if not missing and found is not None:
        return found
    apt_get = shutil.which("apt-get")
    if apt_get is None or os.geteuid() != 0:
        pytest.fail(
            f"missing browser packages; install once: sudo apt-get install -y {' '.join(missing)}"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [apt_get, "install", "-y", "--no-install-recommends", *missing]
    done = None
    for command in (install, [apt_get, "update"], install):
        done = subprocess.run(  # noqa: S603 - apt-get with fixed arguments
            command, capture_output=True, text=True, timeout=APT_SECONDS, env=env, check=False
        )
        if command is install and done.returncode == 0:
            break
    found = _installed()
    if found is None or _missing_packages():
        output = "" if done is None else f"{done.stdout}\n{done.stderr}"
        pytest.fail(f"apt-get could not install {' '.join(missing)}:\n{output}")
    return found
