"""The gate's direct entry to this server's calls answers as the SDK's path does.

The same requests go to two in-process apps on one kind of database: the real one, whose gate
answers this server's own ``tools/call`` itself (``edge.direct_calls.DirectHttpCalls``), and
one whose gate hands every request to the SDK. Status, media type and the JSON (ids and times
aside) must agree; the direct entry must have answered exactly the calls it is meant for.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from expert_booking.bootstrap import build_asgi_app
from expert_booking.edge import direct_calls, http_app
from expert_booking.settings import Settings
from harness.inprocess import inprocess_app
from tests.integration.test_http_app import TickingClock, headers, post, rpc

pytestmark = pytest.mark.anyio

SPAN = "6f9619ff-8b86-4d01-b42d-00cf4fc964ff"
_VOLATILE = frozenset(
    {
        "operationId",
        "traceId",
        "spanId",
        "serverReceivedAt",
        "serverRespondedAt",
        "serverResultCreatedAt",
        "clientSentAt",
    }
)


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {"name": name, "arguments": arguments, "requestSpanId": SPAN}
    return rpc(name="tool_catalog.call", arguments=call)


_SEARCH = {"query": "x", "limit": 1}
_CHINESE = {"query": "预约", "limit": 2}
_SEARCH_CALL: dict[str, Any] = {"name": "tool_catalog.search", "arguments": _SEARCH}
_READ = {"uri": "tool://booking.get_booking", "offset": 0, "limit": 3}
CASES: list[tuple[str, dict[str, Any], bool]] = [
    (
        "catalog search",
        rpc(name="tool_catalog.search", arguments={"query": "预约", "limit": 2}),
        True,
    ),
    ("catalog read", rpc(name="tool_catalog.read", arguments=_READ), True),
    ("slot search", _call("booking.search_available_slots", {"query": "AI", "limit": 2}), True),
    ("not found, non-ASCII echoed", _call("booking.get_booking", {"bookingId": "预约-ü"}), True),
    ("invalid arguments", _call("booking.hold_slot", {"slotId": 7}), True),
    ("unknown logical tool", _call("booking.forget_booking", {}), True),
    ("catalog error", rpc(name="tool_catalog.read", arguments={"uri": "nope", "limit": 1}), True),
    ("unknown MCP tool", rpc(name="nope", arguments={}), False),
    ("another params member", rpc(name="tool_catalog.search", arguments=_SEARCH, task={}), False),
    ("arguments not an object", rpc(name="tool_catalog.search", arguments=[1]), False),
    ("a string id", rpc("tools/call", "id-1", **_SEARCH_CALL), True),
    ("a lone surrogate id", rpc("tools/call", "\ud800", **_SEARCH_CALL), True),
    ("a non-ASCII id", rpc("tools/call", "é\u2028", **_SEARCH_CALL), True),
    ("a big id", rpc("tools/call", 2**70, **_SEARCH_CALL), True),
]


def _normalised(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "*" if k in _VOLATILE else _normalised(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalised(item) for item in value]
    if isinstance(value, str) and value.startswith("{"):
        try:
            return _normalised(json.loads(value))
        except ValueError:
            return value
    return value


@asynccontextmanager
async def _client(tmp_path: Path, name: str) -> AsyncIterator[httpx2.AsyncClient]:
    app = build_asgi_app(Settings(db_path=tmp_path / f"{name}.db"), clock=TickingClock())
    with anyio.fail_after(30):
        async with inprocess_app(app) as transport, httpx2.AsyncClient(transport=transport) as c:
            yield c


async def _answers(c: httpx2.AsyncClient) -> list[tuple[int, str, Any]]:
    answers = []
    for _, body, _ in CASES:
        mcp_name = body["params"]["name"]
        response = await post(c, body, headers(**{"mcp-name": mcp_name}))
        kind = response.headers["content-type"]
        answers.append((response.status_code, kind, _normalised(response.json())))
    return answers


def _differences(mine: Any, theirs: Any, path: str = "") -> list[str]:
    """Where two JSON values differ (for the failure message)."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        keys = sorted(set(mine) | set(theirs))
        return [d for k in keys for d in _differences(mine.get(k), theirs.get(k), f"{path}.{k}")]
    if isinstance(mine, list) and isinstance(theirs, list) and len(mine) == len(theirs):
        pairs = enumerate(zip(mine, theirs, strict=True))
        return [d for i, (a, b) in pairs for d in _differences(a, b, f"{path}[{i}]")]
    return [] if mine == theirs else [f"{path}: {mine!r} != {theirs!r}"]


async def test_the_direct_entry_answers_its_calls_as_the_sdk_path_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answered: list[bool] = []
    entry = direct_calls.DirectHttpCalls.__call__

    async def recording(self: direct_calls.DirectHttpCalls, *args: Any) -> bool:
        answered.append(await entry(self, *args))
        return answered[-1]

    monkeypatch.setattr(direct_calls.DirectHttpCalls, "__call__", recording)
    async with _client(tmp_path, "direct") as c:
        direct = await _answers(c)
    assert answered == [meant for _, _, meant in CASES]

    monkeypatch.setattr(http_app, "_direct_entry", lambda *_args: None)
    async with _client(tmp_path, "sdk") as c:
        through_sdk = await _answers(c)
    assert len(answered) == len(CASES)  # the second app had no direct entry

    for (case, _, _), mine, theirs in zip(CASES, direct, through_sdk, strict=True):
        assert mine == theirs, (case, _differences(list(mine), list(theirs)))
