"""Packaging smoke: the wheel alone, in a fresh venv, starts every command (``nox -s package``).

The session builds the wheel, installs it with its pinned dependencies into a new venv and
names that venv in ``EXPERT_BOOKING_SMOKE_VENV``. Every command runs from that venv's console
script in a directory outside the source tree, so a missing entry point, module or package-data
file (schemas, migrations) fails here.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client, StdioServerParameters

from expert_booking.client import open_client
from expert_booking.testing.server_process import SANDBOX_READY_LINE, ServerProcess

pytestmark = [pytest.mark.package, pytest.mark.anyio]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def program() -> Path:
    venv = os.environ.get("EXPERT_BOOKING_SMOKE_VENV")
    if not venv:
        pytest.fail("run through `nox -s package`, which builds and installs the wheel")
    path = Path(venv) / "bin" / "expert-booking-mcp"
    assert path.is_file(), f"the wheel installed no console script at {path}"
    return path


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory without the source tree (and without a .env)."""
    return tmp_path_factory.mktemp("outside")


@pytest.fixture(scope="module")
def server(program: Path, outside: Path) -> Iterator[ServerProcess]:
    with ServerProcess(command=[str(program), "serve"], cwd=outside) as running:
        yield running


def test_the_installed_command_reports_its_version(program: Path) -> None:
    done = subprocess.run(  # noqa: S603 - the installed console script
        [str(program), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "expert-booking-mcp 0.1.0"


async def test_serve_from_the_wheel_answers_tools_list(server: ServerProcess) -> None:
    async with open_client(server.url) as client:
        tools = await client.list_tools()
    assert [tool.name for tool in tools.tools] == [
        "tool_catalog.search",
        "tool_catalog.read",
        "tool_catalog.call",
    ]


def test_payment_sandbox_from_the_wheel_serves_its_pages(
    program: Path, outside: Path, server: ServerProcess
) -> None:
    command = [str(program), "payment-sandbox"]
    with ServerProcess(
        command=command, cwd=outside, db_path=server.db_path, ready_line=SANDBOX_READY_LINE
    ) as sandbox:
        page = httpx2.get(f"{sandbox.url}/mailbox")
        assert page.status_code == 200
        assert "SANDBOX" in page.text
        assert httpx2.get(f"{sandbox.url}/payments/booking-none").status_code == 404


async def test_proxy_from_the_wheel_stamps_for_a_client(
    program: Path, outside: Path, server: ServerProcess
) -> None:
    command = [str(program), "proxy", "--upstream", server.url]
    with ServerProcess(command=command, cwd=outside, db_flag=False) as proxy:
        async with open_client(proxy.url) as client:
            assert len((await client.list_tools()).tools) == 3


async def test_stdio_from_the_wheel_relays_for_a_stdio_host(
    program: Path, outside: Path, server: ServerProcess
) -> None:
    bridge = StdioServerParameters(
        command=str(program), args=["stdio", "--url", server.url], cwd=outside
    )
    async with Client(bridge, mode="legacy", cache=None) as client:
        assert len((await client.list_tools()).tools) == 3
