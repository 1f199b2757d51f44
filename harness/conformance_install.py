"""Node 22 and the official conformance suite, installed from npm into a cache directory."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import time
from pathlib import Path
from typing import Final

SUITE_PACKAGE: Final = "@modelcontextprotocol/conformance"
SUITE_VERSION: Final = "0.2.0-alpha.12"
NODE_MAJOR: Final = 22
REQUIREMENTS: Final = "2026-07-28"
CACHE_ENV: Final = "EXPERT_BOOKING_CONFORMANCE_CACHE"
NPM_INSTALL_SECONDS: Final = 180


class ConformanceError(RuntimeError):
    """Installing or running the suite failed (not a conformance verdict)."""


def cache_dir() -> Path:
    """Where Node and the suite are installed (created on demand)."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "expert-booking-mcp" / "conformance"


def _node_major(node: str) -> int:
    try:
        done = subprocess.run(
            [node, "-p", "process.versions.node.split('.')[0]"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return 0
    text = done.stdout.strip()
    return int(text) if done.returncode == 0 and text.isdigit() else 0


def _npm_install(prefix: Path, spec: str, cache: Path, log: list[str], deadline: float) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise ConformanceError(f"npm is needed to install {spec} but is not on PATH")
    prefix.mkdir(parents=True, exist_ok=True)
    command = [
        npm,
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
        )
    except subprocess.TimeoutExpired as exc:
        raise ConformanceError(f"npm install {spec} timed out") from exc
    log.append(done.stdout + done.stderr)
    if done.returncode != 0:
        raise ConformanceError(f"npm install {spec} failed:\n{done.stdout}{done.stderr}")


def ensure_node(cache: Path, log: list[str], deadline: float) -> Path:
    """A Node >= 22 binary: the one on PATH if new enough, else installed from npm."""
    on_path = shutil.which("node")
    if on_path and _node_major(on_path) >= NODE_MAJOR:
        return Path(on_path)
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine)
    if arch is None:
        raise ConformanceError(f"no Node {NODE_MAJOR} npm package for architecture {machine}")
    prefix = cache / f"node{NODE_MAJOR}"
    node = prefix / "node_modules" / f"node-linux-{arch}" / "bin" / "node"
    if not node.is_file():
        _npm_install(prefix, f"node-linux-{arch}@{NODE_MAJOR}", cache, log, deadline)
    if _node_major(str(node)) < NODE_MAJOR:
        raise ConformanceError(f"{node} is not a working Node {NODE_MAJOR}")
    return node


def ensure_suite(cache: Path, log: list[str], deadline: float) -> Path:
    """The suite's package directory (``.../@modelcontextprotocol/conformance``)."""
    prefix = cache / f"conformance-{SUITE_VERSION}"
    package = prefix / "node_modules" / "@modelcontextprotocol" / "conformance"
    if not (package / "dist" / "index.js").is_file():
        _npm_install(prefix, f"{SUITE_PACKAGE}@{SUITE_VERSION}", cache, log, deadline)
    if not (package / "requirements" / f"{REQUIREMENTS}.yaml").is_file():
        raise ConformanceError(f"{SUITE_PACKAGE}@{SUITE_VERSION} has no {REQUIREMENTS} set")
    return package
