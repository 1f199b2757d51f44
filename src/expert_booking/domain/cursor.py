"""Opaque pagination cursors bound to the query that produced them."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

from expert_booking.domain.errors import InvalidCursorError
from expert_booking.domain.model import canonical_json

# Real cursors are ~40 characters. The bound keeps hostile tokens from reaching json.loads
# (deeply nested JSON raises RecursionError) and offsets within SQLite's 64-bit integers.
_MAX_TOKEN_LENGTH = 256
_MAX_OFFSET = 2**63 - 1
# Reused: json.dumps with options builds a new encoder per call (every search runs this).
_COMPACT = json.JSONEncoder(separators=(",", ":"))


def query_binding(query: dict[str, Any]) -> str:
    """A short digest of the query's filters; a cursor only works with the same filters."""
    return hashlib.sha256(canonical_json(query)).hexdigest()[:16]


def encode_cursor(offset: int, binding: str) -> str:
    """Opaque, URL-safe token for the page starting at ``offset``."""
    raw = _COMPACT.encode({"o": offset, "q": binding}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(token: str, binding: str) -> int:
    """The offset stored in ``token``.

    Raises:
        InvalidCursorError: the token is malformed or was issued for another query.
    """
    if len(token) > _MAX_TOKEN_LENGTH:
        raise InvalidCursorError
    try:
        padded = token + "=" * (-len(token) % 4)
        doc = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, UnicodeError, binascii.Error) as exc:
        raise InvalidCursorError from exc
    if not isinstance(doc, dict) or doc.get("q") != binding:
        raise InvalidCursorError
    offset = doc.get("o")
    if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= _MAX_OFFSET:
        raise InvalidCursorError
    return offset
