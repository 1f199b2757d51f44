"""The refusal log: one JSON line per refusal, capped per second, the overflow counted."""

from __future__ import annotations

import io
import json
import logging
import warnings
from collections.abc import Iterator

import pytest

from expert_booking.edge.http_limits import FD_RESERVE, connection_cap
from expert_booking.edge.json_logging import JsonLinesHandler, configure_logging
from expert_booking.edge.refusals import RefusalLog


class Seconds:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    handler = configure_logging(out)
    try:
        yield out
    finally:
        logging.getLogger("expert_booking").removeHandler(handler)


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    logging.getLogger("expert_booking").handlers[0].flush()
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def _refuse(log: RefusalLog, reason: str = "HOST_NOT_ALLOWED") -> None:
    log.refused(
        status=421,
        reason=reason,
        http_method="POST",
        peer=("127.0.0.1", 5555),
        refused_value="evil.example" + "x" * 500,
    )


def test_a_refusal_is_one_json_line_naming_status_reason_method_and_peer(
    stream: io.StringIO,
) -> None:
    _refuse(RefusalLog(per_second=20, monotonic=Seconds()))
    (line,) = _lines(stream)
    assert line["logger"] == "expert_booking.refusals"
    refusal = line["refusal"]
    assert isinstance(refusal, dict)
    assert refusal["status"] == 421
    assert refusal["reason"] == "HOST_NOT_ALLOWED"
    assert refusal["httpMethod"] == "POST"
    assert refusal["peer"] == "127.0.0.1:5555"
    assert len(str(refusal["refusedValue"])) == 200  # truncated


def test_a_flood_is_capped_per_second_and_the_rest_is_counted(stream: io.StringIO) -> None:
    seconds = Seconds()
    log = RefusalLog(per_second=3, monotonic=seconds)
    for _ in range(10):
        _refuse(log)
    assert len(_lines(stream)) == 3
    seconds.now += 1
    _refuse(log)
    last = _lines(stream)[-1]["refusal"]
    assert isinstance(last, dict)
    assert last["suppressed"] == 7
    _refuse(log)
    after = _lines(stream)[-1]["refusal"]
    assert isinstance(after, dict)
    assert "suppressed" not in after


def test_in_the_server_every_logger_writes_json_lines() -> None:
    out = io.StringIO()
    root = logging.getLogger()
    uvicorn_error = logging.getLogger("uvicorn.error")
    before = (list(root.handlers), root.level)
    uvicorn_before = (list(uvicorn_error.handlers), uvicorn_error.propagate)
    # As uvicorn's own dictConfig leaves it: a plain-text handler, not propagating.
    uvicorn_error.addHandler(logging.StreamHandler(io.StringIO()))
    uvicorn_error.propagate = False
    handler = configure_logging(out, every_logger=True)
    try:
        logging.getLogger("uvicorn.error").error("[Errno 98] address already in use")
        logging.getLogger("mcp.server.transport_security").warning("Invalid Host header: x")
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("a library warning", DeprecationWarning, stacklevel=1)
        handler.stream.drain()
        lines = [json.loads(line) for line in out.getvalue().splitlines()]
    finally:
        logging.captureWarnings(capture=False)
        logging.getLogger("expert_booking").removeHandler(handler)
        root.removeHandler(handler)
        root.handlers[:] = before[0]
        root.setLevel(before[1])
        uvicorn_error.handlers[:] = uvicorn_before[0]
        uvicorn_error.propagate = uvicorn_before[1]
    assert [line["logger"] for line in lines] == [
        "uvicorn.error",
        "mcp.server.transport_security",
        "py.warnings",
    ]
    assert isinstance(handler, JsonLinesHandler)


def test_the_connection_cap_leaves_descriptors_free() -> None:
    assert connection_cap(1024, 20000) == 1024
    assert connection_cap(1024, 256) == 256 - FD_RESERVE
    assert connection_cap(1024, 10) == 1
