"""Checks of the JSON-RPC message behind the gate: protocol version, JSON, routing headers.

Pure functions of the headers the gate read (``edge.gates``, trimmed; ``None`` marks a repeated
header) and the body; each answers a ``Refusal`` or ``None``.
"""

from __future__ import annotations

import json
from typing import Any, Final

from mcp.shared.inbound import MCP_METHOD_HEADER, MCP_NAME_HEADER, NAME_BEARING_METHODS
from mcp_types import HEADER_MISMATCH, INVALID_REQUEST, PARSE_ERROR, UNSUPPORTED_PROTOCOL_VERSION

from expert_booking.edge.refusals import Refusal
from expert_booking.edge.wire_time import SUPPORTED_PROTOCOL_VERSION

VERSION_HEADER: Final = b"mcp-protocol-version"
METHOD_HEADER: Final = MCP_METHOD_HEADER.encode()
NAME_HEADER: Final = MCP_NAME_HEADER.encode()
MAX_JSON_DEPTH: Final = 64
"""Deepest nesting of objects and arrays a request body may have (the top level is 1)."""


_UNPARSEABLE: Final = object()
_TOO_DEEP: Final = object()
SUPPORTED_VERSIONS: Final = (SUPPORTED_PROTOCOL_VERSION,)
"""The ``supported`` list of a version refusal's ``data``."""
SEND_VERSION = (
    f"Send MCP-Protocol-Version: {SUPPORTED_PROTOCOL_VERSION}; "
    f"this server supports only {SUPPORTED_PROTOCOL_VERSION}"
)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is no JSON value (RFC 8259)")


_DECODER: Final = json.JSONDecoder(parse_constant=_no_constant)
"""Made once: ``json.loads`` with a keyword builds a decoder per call."""


def check_message(headers: dict[bytes, str | None], body: bytes) -> tuple[Any, Refusal | None]:
    """Version and JSON checks: the parsed body (or ``_UNPARSEABLE``) and any refusal.

    JSON is RFC 8259's: UTF-8 only (``json.loads`` of bytes would also take UTF-16 and UTF-32,
    and surrogates encoded in UTF-8), no ``NaN`` or ``Infinity``.
    """
    try:
        decoded: Any = _DECODER.decode(body.decode("utf-8"))
    except RecursionError:
        decoded = _TOO_DEEP
    except ValueError:
        decoded = _UNPARSEABLE
    request_id = request_id_of(decoded)
    refusal = _check_version(headers, request_id)
    if refusal is not None:
        return decoded, refusal
    if decoded is _UNPARSEABLE:
        return decoded, Refusal(
            400,
            PARSE_ERROR,
            "Parse error: the body is not valid JSON; send one JSON-RPC request object",
            "PARSE_ERROR",
        )
    if decoded is _TOO_DEEP or _deeper_than(body, decoded, MAX_JSON_DEPTH):
        return decoded, Refusal(
            400,
            INVALID_REQUEST,
            f"Invalid Request: the JSON body is nested deeper than {MAX_JSON_DEPTH} levels of "
            "objects and arrays; send a flatter request",
            "JSON_TOO_DEEP",
            {"code": "JSON_TOO_DEEP", "maxDepth": MAX_JSON_DEPTH},
            request_id,
        )
    return decoded, None


def check_routing_headers(headers: dict[bytes, str | None], decoded: Any) -> Refusal | None:
    """A request's missing ``Mcp-Method`` (or ``Mcp-Name`` of a named call) is said to be missing.

    The SDK refuses it too, as a header that "does not match" the body, without ``data.code``;
    what a present, non-empty header must equal stays the SDK's judgement
    (``mcp.shared.inbound``). A notification (no ``id``) is the SDK's alone: it acknowledges one
    without these headers; so is a body that is no well-formed request (the SDK's -32600 first).
    """
    method, request_id = rpc_method(decoded), request_id_of(decoded)
    if method is None or request_id is None or decoded.get("jsonrpc") != "2.0":
        return None
    if headers.get(METHOD_HEADER, "") == "":  # absent or empty (None: repeated, the SDK's case)
        return _missing_header("Mcp-Method", f"{method} (the body's method)", request_id)
    name_key = NAME_BEARING_METHODS.get(method)
    params = decoded.get("params")
    named = name_key and isinstance(params, dict) and isinstance(params.get(name_key), str)
    if named and headers.get(NAME_HEADER, "") == "":
        return _missing_header("Mcp-Name", f"the body's params.{name_key}", request_id)
    return None


def _missing_header(header: str, value: str, request_id: Any) -> Refusal:
    code = f"MISSING_{header.upper().replace('-', '_')}"
    return Refusal(
        400,
        HEADER_MISMATCH,
        f"Missing {header} header: send {header}: {value}",
        code,
        {"code": code},
        request_id,
    )


def _deeper_than(body: bytes, decoded: Any, limit: int) -> bool:
    """Whether objects and arrays nest more than ``limit`` deep (the top level is 1).

    A body with at most ``limit`` opening brackets cannot nest deeper (strings may hold
    brackets too, which only overcounts), so almost every request skips the walk.
    """
    if body.count(b"{") + body.count(b"[") <= limit:
        return False
    pending: list[tuple[Any, int]] = [(decoded, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


def rpc_method(decoded: Any) -> str | None:
    """The JSON-RPC ``method`` of a parsed body, if it has a string one."""
    method = decoded.get("method") if isinstance(decoded, dict) else None
    return method if isinstance(method, str) else None


def request_id_of(decoded: Any) -> Any:
    """The JSON-RPC ``id`` of a parsed body if it is a string or an integer, else ``None``."""
    if isinstance(decoded, dict):
        request_id = decoded.get("id")
        if isinstance(request_id, str) or (
            isinstance(request_id, int) and not isinstance(request_id, bool)
        ):
            return request_id
    return None


def _check_version(headers: dict[bytes, str | None], request_id: Any) -> Refusal | None:
    requested = headers.get(VERSION_HEADER, "")
    if requested == SUPPORTED_PROTOCOL_VERSION:
        return None
    if requested is None:
        return Refusal(
            400,
            HEADER_MISMATCH,
            f"MCP-Protocol-Version header appears more than once. {SEND_VERSION}",
            "PROTOCOL_VERSION_REPEATED",
            {"supported": SUPPORTED_VERSIONS},
            request_id,
        )
    if not requested:
        return Refusal(
            400,
            HEADER_MISMATCH,
            f"Missing MCP-Protocol-Version header. {SEND_VERSION}",
            "MISSING_PROTOCOL_VERSION",
            {"supported": SUPPORTED_VERSIONS},
            request_id,
        )
    return Refusal(
        400,
        UNSUPPORTED_PROTOCOL_VERSION,
        f"Unsupported protocol version. {SEND_VERSION}",
        "UNSUPPORTED_PROTOCOL_VERSION",
        {"supported": SUPPORTED_VERSIONS, "requested": requested},
        request_id,
        refused_value=requested,
    )
