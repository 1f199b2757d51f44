"""Refusals before any handler runs: the JSON-RPC error answer and its bounded log line.

The gate's own refusals (``edge.gates``) and the ones the SDK answers past it (a tool it does not
know, params it cannot parse, a header that contradicts the body: a 4xx JSON-RPC error) write the
same line, so a host failing at the protocol level shows in the log as one failing at the gate.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Final

from starlette.types import Message, Scope, Send

logger = logging.getLogger("expert_booking.refusals")

_VALUE_LIMIT: Final = 200


@dataclass(frozen=True, slots=True)
class Refusal:
    """One refused request: HTTP status, JSON-RPC error and the reason code of its log line."""

    status: int
    code: int
    message: str
    reason: str
    data: dict[str, Any] | None = None
    request_id: Any = None
    allow_post: bool = False
    refused_value: str | None = None
    headers: tuple[tuple[bytes, bytes], ...] = ()
    detail: str | None = None
    caller: Mapping[str, str | None] | None = None


async def send_jsonrpc_error(
    send: Send,
    *,
    status: int,
    code: int,
    message: str,
    data: dict[str, Any] | None = None,
    request_id: Any = None,
    extra_headers: tuple[tuple[bytes, bytes], ...] = (),
) -> None:
    """Send ``{"jsonrpc":"2.0","id":..,"error":{..}}`` as ``application/json`` with ``status``."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "error": error}, separators=(",", ":")
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *extra_headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class RefusalLog:
    """Writes one JSON line per refused request, at most ``per_second`` lines per second.

    A line names the status, the reason code, the HTTP method (and the JSON-RPC method when
    known), the peer address, for a refusal about one header that header's value (truncated),
    a ``detail`` (e.g. why a token was refused) and the verified ``caller`` when known; never
    the body, a token or other headers. Past the cap, refusals are counted and the
    next line written carries ``suppressed``: how many were left out since the last line, so a
    flood of bad requests costs at most ``per_second`` lines a second and still shows.
    Thread-safe (the HTTP protocol layer and the ASGI gate share the event loop, but a test
    or an embedding may not).
    """

    def __init__(
        self,
        *,
        per_second: int,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """Cap lines at ``per_second``; ``monotonic`` is the window's time source."""
        self._per_second = per_second
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._window = -1
        self._written = 0
        self._suppressed = 0

    def refused(
        self,
        *,
        status: int,
        reason: str,
        http_method: str | None,
        peer: tuple[str, int] | None,
        rpc_method: str | None = None,
        refused_value: str | None = None,
        detail: str | None = None,
        caller: Mapping[str, str | None] | None = None,
        rpc_error_code: int | None = None,
    ) -> None:
        """Log one refusal (or count it, past the cap)."""
        with self._lock:
            window = int(self._monotonic())
            if window != self._window:
                self._window, self._written = window, 0
            if self._written >= self._per_second:
                self._suppressed += 1
                return
            self._written += 1
            suppressed, self._suppressed = self._suppressed, 0
        fields: dict[str, Any] = {
            "status": status,
            "reason": reason,
            "httpMethod": http_method,
            "peer": None if peer is None else f"{peer[0]}:{peer[1]}",
        }
        if rpc_method is not None:
            fields["rpcMethod"] = rpc_method[:_VALUE_LIMIT]
        if rpc_error_code is not None:
            fields["rpcErrorCode"] = rpc_error_code
        if refused_value is not None:
            fields["refusedValue"] = refused_value[:_VALUE_LIMIT]
        if detail is not None:
            fields["detail"] = detail[:_VALUE_LIMIT]
        if caller is not None:
            fields["caller"] = dict(caller)
        if suppressed:
            fields["suppressed"] = suppressed
        logger.info("request refused: %s %s", status, reason, extra={"refusal": fields})


SDK_REFUSED: Final = "SDK_REFUSED"
"""The reason of a line for a 4xx the SDK answered (its JSON-RPC code and message follow)."""


def sdk_refusals_logged(send: Send, log: RefusalLog, scope: Scope, rpc_method: str | None) -> Send:
    """``send``, writing one ``log`` line when the app behind the gate answers 4xx.

    The line names the status, ``SDK_REFUSED``, the JSON-RPC error code and, as ``detail``, the
    SDK's message (bounded like every value; it may quote the request, never a header or token).
    """
    status = 0

    async def logged(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif HTTPStatus.BAD_REQUEST <= status < HTTPStatus.INTERNAL_SERVER_ERROR:
            code, text = _jsonrpc_error(message.get("body", b""))
            log.refused(
                status=status,
                reason=SDK_REFUSED,
                http_method=scope.get("method"),
                peer=scope.get("client"),
                rpc_method=rpc_method,
                rpc_error_code=code,
                detail=text,
            )
            status = 0  # one line per response, whatever its body's chunks
        await send(message)

    return logged


def _jsonrpc_error(body: bytes) -> tuple[int | None, str | None]:
    """The code and message of a JSON-RPC error body; ``None`` for what it does not hold."""
    try:
        document = json.loads(body)
    except ValueError:
        return None, None
    error = document.get("error") if isinstance(document, dict) else None
    if not isinstance(error, dict):
        return None, None
    code, message = error.get("code"), error.get("message")
    return (
        code if isinstance(code, int) and not isinstance(code, bool) else None,
        message if isinstance(message, str) else None,
    )
