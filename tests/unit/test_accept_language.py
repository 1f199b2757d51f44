"""``Accept-Language``: one reading for the MCP edge's locale and the payment pages' language."""

from __future__ import annotations

import pytest

from expert_booking.accept_language import negotiate, preferred_language


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("", None),
        ("de", "de"),
        ("zh-CN,zh;q=0.9,en;q=0.8", "zh-CN"),
        ("en;q=0.5, de-CH;q=0.9, fr", "fr"),
        ("en;q=0.8, de;q=0.8", "en"),
        ("*;q=1, de;q=0.1", "de"),
        ("de;q=0, en;q=0.1", "en"),
        ("de;q=abc, en", "en"),
        ("de;q=2, en;q=0.3", "en"),
        ("de;level=1", None),
        ("<script>, en-US", "en-US"),
        ("x" * 40, None),
        ("12-de", None),
    ],
)
def test_the_preferred_language_is_the_best_weighted_valid_tag(
    header: str | None, expected: str | None
) -> None:
    assert preferred_language(header) == expected


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, "en"),
        ("*", "en"),
        ("fr", "en"),
        ("zh-TW", "zh"),
        ("DE-at", "de"),
        ("fr, de;q=0.9, zh;q=0.8", "de"),
        # The parameter name is case-insensitive; q outside 0-1 or not finite is malformed.
        ("de;Q=0, en;q=0.5", "en"),
        ("en, de;q=inf", "en"),
        ("en;q=0.9, de;q=nan", "en"),
        ("de;q=2, en;q=0.3", "en"),
    ],
)
def test_a_page_is_in_the_best_language_it_has(header: str | None, expected: str) -> None:
    assert negotiate(header, ("en", "zh", "de"), "en") == expected
