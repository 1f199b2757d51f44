"""``harness/bootstrap.py``: what it does when Debian's python3 cannot make a venv yet."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
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


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A scratch checkout and venv; the pip installs ``install_server`` asks for are recorded."""
    root = tmp_path / "checkout"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "module.py").write_text("X = 1\n")
    (root / "pyproject.toml").write_text("[project]\n")
    venv = root / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "expert-booking-mcp").write_text("")
    monkeypatch.setattr(bootstrap, "ROOT", root)
    monkeypatch.setattr(bootstrap, "VENV", venv)
    monkeypatch.setattr(bootstrap, "SERVE_STAMP", venv / ".serve-sources.sha256")
    installs: list[str] = []
    monkeypatch.setattr(bootstrap, "pip_install", lambda _python, *reqs: installs.extend(reqs))
    return installs


def test_serve_reinstalls_only_when_the_servers_sources_changed(
    checkout: list[str], tmp_path: Path
) -> None:
    python = bootstrap.VENV / "bin" / "python"
    bootstrap.install_server(python)
    bootstrap.install_server(python)  # a restart: nothing changed, no package index needed
    assert checkout == [str(bootstrap.ROOT)]
    (bootstrap.ROOT / "src" / "pkg" / "module.py").write_text("X = 2\n")
    bootstrap.install_server(python)
    assert checkout == [str(bootstrap.ROOT)] * 2


@pytest.mark.parametrize(("command", "in_checkout"), [("serve", False), ("test", True)])
def test_serve_runs_where_it_was_started_and_test_in_the_checkout(
    checkout: list[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    command: str,
    *,
    in_checkout: bool,
) -> None:
    """A relative ``--db`` and ``./.env`` of ``serve`` are the caller's, not the checkout's."""
    started_in = tmp_path / "elsewhere"
    started_in.mkdir()
    monkeypatch.chdir(started_in)
    monkeypatch.setattr(bootstrap, "ensure_venv", lambda: bootstrap.VENV / "bin" / "python")
    ran: list[tuple[str, list[str]]] = []

    def execv(program: str, arguments: list[str]) -> None:
        ran.append((str(Path.cwd()), arguments))

    monkeypatch.setattr(os, "execv", execv)
    bootstrap.main([command, "--db", "here.db"])
    ((cwd, arguments),) = ran
    assert cwd == str(bootstrap.ROOT if in_checkout else started_in)
    assert arguments[1:] == (["serve"] if command == "serve" else []) + ["--db", "here.db"]
