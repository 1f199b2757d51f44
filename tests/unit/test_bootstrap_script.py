"""``harness/bootstrap.py``: what it does when Debian's python3 cannot make a venv yet."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from typing import Any

import pytest

from harness import bootstrap


@pytest.fixture
def no_ensurepip(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "ensurepip" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    return monkeypatch


def test_a_user_who_is_not_root_is_told_the_one_sudo_line(no_ensurepip: pytest.MonkeyPatch) -> None:
    no_ensurepip.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(bootstrap.BootstrapError) as excinfo:
        bootstrap.ensure_venv_module()
    assert "sudo apt-get update && sudo apt-get install -y python3-venv" in str(excinfo.value)


def test_root_installs_python3_venv_with_apt_get(no_ensurepip: pytest.MonkeyPatch) -> None:
    ran: list[list[str]] = []

    def run(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        ran.append(command)
        return subprocess.CompletedProcess(command, 0)

    no_ensurepip.setattr(os, "geteuid", lambda: 0)
    no_ensurepip.setattr(subprocess, "run", run)
    bootstrap.ensure_venv_module()
    assert ran == [
        ["/usr/bin/apt-get", "update"],
        ["/usr/bin/apt-get", "install", "-y", "python3-venv"],
    ]


def test_with_ensurepip_nothing_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess, "run", pytest.fail)
    bootstrap.ensure_venv_module()
