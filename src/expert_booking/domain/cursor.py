"""Opaque pagination cursors bound to the query that produced them."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from datetime import datetime
from typing import Any

from expert_booking.domain.errors import InvalidCursorError
from expert_booking.domain.model import canonical_json, format_instant, parse_instant

# Real cursors are ~40 characters (a booking list's, holding its key, ~135). The bound keeps
# hostile tokens from reaching json.loads (deeply nested JSON raises RecursionError) and offsets
# within SQLite's 64-bit integers.
_MAX_TOKEN_LENGTH = 256
_MAX_OFFSET = 2**63 - 1
# Reused: json.dumps with options builds a new encoder per call (every search runs this).
_COMPACT = json.JSONEncoder(separators=(",", ":"))


def query_binding(query: dict[str, Any]) -> str:
    """A short digest of the query's filters; a cursor only works with the same filters."""
    return hashlib.sha256(canonical_json(query)).hexdigest()[:16]


def encode_cursor(offset: int, binding: str) -> str:
    """Opaque, URL-safe token for the page starting at ``offset``."""
    return _encode({"o": offset, "q": binding})


def _encode(doc: dict[str, Any]) -> str:
    raw = _COMPACT.encode(doc).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(token: str, binding: str) -> dict[str, Any]:
    """The cursor document in ``token``, if it was issued for the query of ``binding``."""
    if len(token) > _MAX_TOKEN_LENGTH:
        raise InvalidCursorError
    try:
        padded = token + "=" * (-len(token) % 4)
        doc = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, UnicodeError, binascii.Error) as exc:
        raise InvalidCursorError from exc
    if not isinstance(doc, dict) or doc.get("q") != binding:
        raise InvalidCursorError
    return doc


def encode_key_cursor(held_at: datetime, booking_id: str, binding: str) -> str:
    """Opaque, URL-safe token for the page after the booking ``(held_at, booking_id)``."""
    return _encode({"a": [format_instant(held_at), booking_id], "q": binding})


def decode_key_cursor(token: str, binding: str) -> tuple[datetime, str]:
    """The ``(held_at, booking_id)`` stored in ``token``.

    Raises:
        InvalidCursorError: the token is malformed or was issued for another query.
    """
    after = _decode(token, binding).get("a")
    if not (
        isinstance(after, list)
        and len(after) == 2  # noqa: PLR2004 - the two parts of the key
        and all(isinstance(part, str) for part in after)
    ):
        raise InvalidCursorError
    try:
        after[1].encode("utf-8")  # a lone surrogate (from a JSON escape) is no booking id
        return parse_instant(after[0]), after[1]
    except ValueError as exc:  # UnicodeEncodeError is one
        raise InvalidCursorError from exc


def decode_cursor(token: str, binding: str) -> int:
    """The offset stored in ``token``.

    Raises:
        InvalidCursorError: the token is malformed or was issued for another query.
    """
    offset = _decode(token, binding).get("o")
    if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= _MAX_OFFSET:
        raise InvalidCursorError
    return offset
