"""The edge's compact JSON: msgspec output equals the standard library's, fallback included."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from expert_booking.edge.json_text import compact_text, parse_strict

# Every code point, lone surrogates included (they take the fallback path).
_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=20,
)


def _has_lone_surrogate(doc: Any) -> bool:
    if isinstance(doc, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in doc)
    if isinstance(doc, list):
        return any(_has_lone_surrogate(item) for item in doc)
    if isinstance(doc, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in doc.items())
    return False


def _stdlib(doc: Any) -> str:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


@given(_JSON)
def test_compact_text_is_the_standard_library_s_compact_form(doc: Any) -> None:
    assert compact_text(doc) == _stdlib(doc)


def test_a_lone_surrogate_is_written_as_the_standard_library_writes_it() -> None:
    doc = {"name": "a\ud800b", "ok": True}
    assert compact_text(doc) == _stdlib(doc)


@given(_JSON)
def test_parse_strict_reads_what_the_standard_library_writes(doc: Any) -> None:
    text = json.dumps(doc)  # ASCII escapes, as the SDK writes its responses
    try:
        parsed = parse_strict(text.encode())
    except ValueError:
        # Only a lone surrogate may be refused; the caller then takes its slow path.
        assert _has_lone_surrogate(doc)
        return
    assert parsed == json.loads(text)


@pytest.mark.parametrize("data", [b"NaN", b'{"a":1} x', b'{"a":', b"", b'{"a":"\\ud800"}'])
def test_parse_strict_refuses_what_is_not_one_rfc_8259_value(data: bytes) -> None:
    with pytest.raises(ValueError, match=r"malformed|truncated|trailing|invalid"):
        parse_strict(data)
