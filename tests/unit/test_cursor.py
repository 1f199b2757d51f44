"""Opaque pagination cursors: bound to their query, tamper-evident enough to refuse garbage."""

from __future__ import annotations

import base64
import json

import pytest

from expert_booking.domain.cursor import decode_cursor, encode_cursor, query_binding
from expert_booking.domain.errors import BookingError

QUERY = {"text": "AI", "specialty": None, "startsAfter": None, "startsBefore": None}


def _token(doc: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")


def _refusal_code(token: str, binding: str) -> str:
    with pytest.raises(BookingError) as excinfo:
        decode_cursor(token, binding)
    return excinfo.value.code


def test_a_cursor_decodes_to_its_offset_with_the_same_query() -> None:
    binding = query_binding(QUERY)
    assert decode_cursor(encode_cursor(4, binding), binding) == 4


def test_a_cursor_is_url_safe_and_unpadded() -> None:
    token = encode_cursor(123456, query_binding(QUERY))
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_the_binding_ignores_key_order_but_not_values() -> None:
    reordered = dict(reversed(list(QUERY.items())))
    assert query_binding(reordered) == query_binding(QUERY)
    assert query_binding({**QUERY, "text": "ai"}) != query_binding(QUERY)
    assert query_binding({**QUERY, "specialty": "AI"}) != query_binding(QUERY)


def test_a_cursor_reused_with_another_query_is_invalid() -> None:
    token = encode_cursor(2, query_binding(QUERY))
    assert _refusal_code(token, query_binding({**QUERY, "text": "law"})) == "INVALID_CURSOR"


@pytest.mark.parametrize(
    "token",
    [
        "",
        "not base64 !!",
        "é",
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
        base64.urlsafe_b64encode(b"not json").decode(),
        _token([0, "binding"]),
        _token({"q": "BINDING"}),
        _token({"o": -1, "q": "BINDING"}),
        _token({"o": True, "q": "BINDING"}),
        _token({"o": "2", "q": "BINDING"}),
        _token({"o": 1.0, "q": "BINDING"}),
        _token({"o": 2**63, "q": "BINDING"}),
        base64.urlsafe_b64encode(b"[" * 20000).decode(),
    ],
)
def test_a_malformed_cursor_is_invalid(token: str) -> None:
    assert _refusal_code(token, "BINDING") == "INVALID_CURSOR"


def test_the_largest_sqlite_offset_is_still_a_valid_cursor() -> None:
    assert decode_cursor(_token({"o": 2**63 - 1, "q": "BINDING"}), "BINDING") == 2**63 - 1


@pytest.mark.parametrize("offset", [9, 10, 11, 99, 100, 1000, 12345, 10**9])
def test_cursors_for_offsets_of_ten_and_more_decode_to_their_offset(offset: int) -> None:
    binding = query_binding({"text": "x"})
    token = encode_cursor(offset, binding)
    assert decode_cursor(token, binding) == offset
    assert "=" not in token


@pytest.mark.parametrize("digits", range(1, 20))
def test_every_offset_width_round_trips(digits: int) -> None:
    """The padding restored before decoding fits every token length an offset can give."""
    binding = query_binding(QUERY)
    for offset in (10 ** (digits - 1), min(10**digits - 1, 2**63 - 1)):
        assert decode_cursor(encode_cursor(offset, binding), binding) == offset


def test_offset_zero_is_a_valid_cursor() -> None:
    binding = query_binding(QUERY)
    assert decode_cursor(encode_cursor(0, binding), binding) == 0


def test_a_token_exactly_at_the_length_bound_is_still_read() -> None:
    binding = query_binding(QUERY)
    compact = f'{{"o":7,"q":"{binding}"}}'
    raw = compact[:-1] + " " * (192 - len(compact)) + "}"  # JSON whitespace: 192 bytes
    token = base64.urlsafe_b64encode(raw.encode()).decode()
    assert len(token) == 256
    assert decode_cursor(token, binding) == 7
    longer = base64.urlsafe_b64encode((raw[:-1] + "   }").encode()).decode()
    assert len(longer) == 260
    assert _refusal_code(longer, binding) == "INVALID_CURSOR"
