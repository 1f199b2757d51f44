"""Which ``tools/call`` requests ``DirectToolCalls`` answers itself, and which go to the SDK."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import mcp_types
import pytest
from mcp.server.context import HandlerResult, ServerRequestContext

from expert_booking.edge.direct_calls import CallSource, DirectToolCalls

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
STAMP = {"name": "expert-booking-mcp", "version": "1.2.3"}
META = {
    mcp_types.PROTOCOL_VERSION_META_KEY: MODERN,
    mcp_types.CLIENT_INFO_META_KEY: {"name": "test", "version": "0"},
    mcp_types.CLIENT_CAPABILITIES_META_KEY: {},
}
CALL = {"name": "tool_catalog.search", "arguments": {"query": "hold"}, "_meta": META}
SDK_ANSWER = {"answeredBy": "sdk"}


class Recorder:
    """The served calls and the requests passed on."""

    def __init__(self) -> None:
        self.served: list[tuple[str, Mapping[str, Any]]] = []
        self.passed_on = 0

    async def serve(
        self, _source: CallSource, name: str, arguments: Mapping[str, Any]
    ) -> dict[str, Any]:
        self.served.append((name, arguments))
        return {"content": [], "resultType": "complete", "_meta": {"clientSentAt": "t"}}

    async def call_next(self, _ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        self.passed_on += 1
        return SDK_ANSWER


def _ctx(params: Mapping[str, Any] | None, *, method: str = "tools/call", version: str = MODERN):
    return ServerRequestContext(
        session=cast("Any", None),
        lifespan_context=None,
        protocol_version=version,
        method=method,
        params=params,
    )


async def _run(recorder: Recorder, ctx: ServerRequestContext[Any]) -> HandlerResult:
    middleware = DirectToolCalls(recorder.serve, tools={"tool_catalog.search"}, server_info=STAMP)
    return await middleware(ctx, recorder.call_next)


async def test_a_well_formed_call_of_one_of_its_tools_is_answered_with_the_stamp() -> None:
    recorder = Recorder()
    first = await _run(recorder, _ctx(CALL))
    second = await _run(recorder, _ctx({**CALL, "arguments": None}))
    assert recorder.served == [
        ("tool_catalog.search", {"query": "hold"}),
        ("tool_catalog.search", {}),
    ]
    assert recorder.passed_on == 0
    assert isinstance(first, dict)
    assert isinstance(second, dict)
    assert first["_meta"] == {"clientSentAt": "t", mcp_types.SERVER_INFO_META_KEY: STAMP}
    # Each result owns its stamp: an in-process client gets the dict itself.
    assert (
        first["_meta"][mcp_types.SERVER_INFO_META_KEY]
        is not second["_meta"][mcp_types.SERVER_INFO_META_KEY]
    )


@pytest.mark.parametrize(
    ("params", "method", "version"),
    [
        pytest.param(CALL, "tools/list", MODERN, id="another method"),
        pytest.param(CALL, "tools/call", "2025-11-25", id="a legacy version"),
        pytest.param(None, "tools/call", MODERN, id="no params"),
        pytest.param({**CALL, "arguments": [1]}, "tools/call", MODERN, id="malformed arguments"),
        pytest.param({**CALL, "_meta": {}}, "tools/call", MODERN, id="no 2026 envelope"),
        pytest.param(
            {**CALL, "name": "booking.get_booking"}, "tools/call", MODERN, id="not its tool"
        ),
        pytest.param({**CALL, "task": {"ttl": 1000}}, "tools/call", MODERN, id="a task"),
        pytest.param({**CALL, "requestState": "s"}, "tools/call", MODERN, id="an input round"),
        pytest.param({**CALL, "inputResponses": {}}, "tools/call", MODERN, id="input responses"),
    ],
)
async def test_everything_else_goes_to_the_sdk(
    params: Mapping[str, Any] | None, method: str, version: str
) -> None:
    recorder = Recorder()
    assert await _run(recorder, _ctx(params, method=method, version=version)) == SDK_ANSWER
    assert recorder.served == []
    assert recorder.passed_on == 1
