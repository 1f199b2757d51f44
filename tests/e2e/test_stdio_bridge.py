"""``expert-booking-mcp stdio``: the official Python client over stdio, in both eras, to the server.

The client starts the bridge as a host would (a command), the bridge relays to a spawned HTTP
server. A 2025-11-25 host gets ``initialize`` and ``ping`` answered by the bridge, and the
server's own answer to ``logging/setLevel``; a 2026-07-28 host probes ``server/discover`` through
it. Either way the three tools, their schemas, the instructions and the envelopes are the
server's own. The bridge runs with this process's ``PYTHONPATH`` (a source-tree run tests the
source, not the installed copy).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio
import pytest
from mcp import Client, MCPDeprecationWarning, MCPError, StdioServerParameters
from mcp_types import METHOD_NOT_FOUND

from expert_booking.client import chain_error, open_client
from expert_booking.testing.server_process import ServerProcess
from tests.e2e.rawhttp import enveloped, exchange, now_stamp, request, stamped_headers

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

TOOLS = ["tool_catalog.search", "tool_catalog.read", "tool_catalog.call"]
BRIDGE = (sys.executable, "-m", "expert_booking", "stdio", "--url")
# The SDK passes a bridge only a few named variables; PYTHONPATH is kept so that a run against
# the source tree (PYTHONPATH=src) spawns that source, not the copy installed in the venv.
SOURCE_PATH = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess() as running:
        yield running


@asynccontextmanager
async def over_stdio(url: str, mode: Literal["legacy", "auto"]) -> AsyncIterator[Client]:
    command, *args = BRIDGE
    bridge = StdioServerParameters(command=command, args=[*args, url], env=SOURCE_PATH)
    with anyio.fail_after(60):
        async with Client(bridge, mode=mode, cache=None) as client:
            yield client


async def http_view(url: str) -> tuple[list[dict[str, Any]], str | None]:
    async with open_client(url) as client:
        listed = await client.list_tools()
        tools = [tool.model_dump(mode="json", exclude={"meta"}) for tool in listed.tools]
        return tools, client.instructions


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_stdio_host_sees_the_servers_tools_schemas_and_instructions(
    server: ServerProcess, mode: Literal["legacy", "auto"]
) -> None:
    tools, instructions = await http_view(server.url)
    async with over_stdio(server.url, mode) as client:
        expected = "2025-11-25" if mode == "legacy" else "2026-07-28"
        assert client.protocol_version == expected
        assert client.instructions == instructions
        assert client.server_info is not None
        assert client.server_info.name == "expert-booking-mcp"
        listed = await client.list_tools()
        assert [tool.name for tool in listed.tools] == TOOLS
        assert [t.model_dump(mode="json", exclude={"meta"}) for t in listed.tools] == tools


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_stdio_host_books_through_the_bridge_with_stamped_envelopes(
    server: ServerProcess, mode: Literal["legacy", "auto"]
) -> None:
    async with over_stdio(server.url, mode) as client:
        found = await client.call_tool("tool_catalog.search", {"query": "hold a slot", "limit": 2})
        envelope = found.structured_content
        assert envelope is not None
        assert envelope["ok"] is True
        assert envelope["data"]["items"][0]["name"] == "booking.hold_slot"
        meta = envelope["meta"]
        stamps = [meta["clientSentAt"], meta["serverReceivedAt"], meta["serverResultCreatedAt"]]
        assert chain_error(stamps) is None, stamps
        assert found.meta is not None
        assert found.meta["clientSentAt"] == meta["clientSentAt"]

        refused = await client.call_tool(
            "tool_catalog.call",
            {
                "name": "booking.get_booking",
                "arguments": {"bookingId": "booking-unknown"},
                "requestSpanId": str(uuid.uuid4()),
            },
        )
        assert refused.is_error is True
        assert refused.structured_content is not None
        assert refused.structured_content["error"]["code"] == "BOOKING_NOT_FOUND"


async def test_the_bridge_answers_ping_and_relays_set_level_for_2025_hosts(
    server: ServerProcess,
) -> None:
    async with over_stdio(server.url, "legacy") as client:
        with warnings.catch_warnings():
            # Both are deprecated as of 2026-07-28; ping is every receiver's to answer.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.send_ping()
            with pytest.raises(MCPError) as refused:
                await client.set_logging_level("info")
        assert refused.value.error.code == METHOD_NOT_FOUND
        assert [tool.name for tool in (await client.list_tools()).tools] == TOOLS


async def test_set_level_gets_the_servers_own_answer_as_the_server_declares_no_logging(
    server: ServerProcess,
) -> None:
    """2025-11-25 ties ``logging/setLevel`` to the ``logging`` capability the server declares.

    The server declares none and answers the request -32601, so the bridge must not fake a
    success for log messages that never come (it once answered ``{}`` itself).
    """
    port = urlsplit(server.url).port
    assert port is not None
    stamp = now_stamp()
    body = enveloped("logging/setLevel", {"level": "info"}, stamp)
    direct = exchange(
        port, request("/mcp", body, headers=stamped_headers(stamp, "logging/setLevel"))
    )
    assert direct is not None
    lines: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "desk", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "info"}},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
    ]
    answers = await _over_raw_stdio(server.url, lines, expected=3)
    assert "logging" not in answers[1]["result"]["capabilities"]
    assert answers[2] == {"jsonrpc": "2.0", "id": 2, "error": direct.json()["error"]}
    assert answers[2]["error"]["code"] == METHOD_NOT_FOUND
    assert answers[3] == {"jsonrpc": "2.0", "id": 3, "result": {}}


async def _over_raw_stdio(
    url: str, lines: list[dict[str, Any]], *, expected: int
) -> dict[Any, dict[str, Any]]:
    """Write ``lines`` to a spawned bridge; its ``expected`` answers by id, then stdin closes."""
    async with await anyio.open_process([*BRIDGE, url]) as bridge:
        assert bridge.stdin is not None
        assert bridge.stdout is not None
        await bridge.stdin.send(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
        answers: dict[Any, dict[str, Any]] = {}
        buffered = b""
        with anyio.fail_after(60):
            while len(answers) < expected:
                buffered += await bridge.stdout.receive()
                *complete, buffered = buffered.split(b"\n")
                answers.update((answer["id"], answer) for answer in map(json.loads, complete))
        await bridge.stdin.aclose()
        with anyio.fail_after(30):
            assert await bridge.wait() == 0
    return answers


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_stopped_server_is_named_with_its_url(mode: Literal["legacy", "auto"]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    refusal = pytest.RaisesExc(
        MCPError, match=rf"cannot reach the MCP server at {url} .*`expert-booking-mcp serve`"
    )
    with pytest.RaisesGroup(refusal, flatten_subgroups=True, allow_unwrapped=True):
        async with over_stdio(url, mode):
            pytest.fail("connected to a stopped server")


def test_a_url_refused_at_start_is_named_without_its_credentials() -> None:
    """A ``--url`` typo (one slash) carrying a password: refused, and the password not echoed."""
    done = subprocess.run(  # noqa: S603 - our own interpreter and fixed arguments
        [*BRIDGE, "https:/user:secret@127.0.0.1:3000/mcp"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "expert-booking-mcp stdio: --url must be the server's http(s) MCP URL, "
        "got 'https:/***@127.0.0.1:3000/mcp'\n"
    )


async def test_a_malformed_message_is_answered_and_the_relay_goes_on(
    server: ServerProcess,
) -> None:
    """One bad message from a host gets its error; the requests around it are still relayed.

    A lone surrogate escape (here in the id) or a ``NaN`` is no JSON text a reply could carry
    back: refused as unparseable, instead of ending the bridge when its answer is written.
    """
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]},
        {"jsonrpc": "2.0", "id": "\ud800", "method": "ping"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": []}},
        {"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"n": float("nan")}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
    ]
    command = [*BRIDGE, server.url]
    async with await anyio.open_process(command) as bridge:
        assert bridge.stdin is not None
        assert bridge.stdout is not None
        await bridge.stdin.send(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
        answers: dict[int, dict[str, Any]] = {}
        unparsed: list[dict[str, Any]] = []
        buffered = b""
        with anyio.fail_after(60):
            while len(answers) + len(unparsed) < len(lines):
                buffered += await bridge.stdout.receive()
                *complete, buffered = buffered.split(b"\n")
                for line in complete:
                    answer = json.loads(line)
                    if answer["id"] is None:
                        unparsed.append(answer)
                    else:
                        answers[answer["id"]] = answer
        await bridge.stdin.aclose()
        with anyio.fail_after(30):
            assert await bridge.wait() == 0
    assert [answer["error"]["code"] for answer in unparsed] == [-32700, -32700]
    assert sorted(answers) == [1, 2, 3]
    assert answers[1]["error"]["code"] == -32600
    assert "params must be an object" in answers[1]["error"]["message"]
    assert answers[2]["error"]["code"] == -32600
    assert [tool["name"] for tool in answers[3]["result"]["tools"]] == TOOLS
