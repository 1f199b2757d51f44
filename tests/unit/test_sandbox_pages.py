"""The payment pages' texts: every language says the same things with the same placeholders."""

from __future__ import annotations

import string

import pytest

from expert_booking.domain.model import BookingStatus, PaymentStatus
from expert_booking.sandbox import pages
from expert_booking.sandbox.ledger import Payment


def _placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def test_every_language_has_every_text_with_the_same_placeholders() -> None:
    english = pages.TEXT[pages.DEFAULT_LANGUAGE]
    assert set(pages.TEXT) == set(pages.LANGUAGES)
    for language, texts in pages.TEXT.items():
        assert set(texts) == set(english), language
        for key, text in texts.items():
            assert _placeholders(text) == _placeholders(english[key]), (language, key)


@pytest.mark.parametrize("language", pages.LANGUAGES)
def test_every_booking_and_payment_status_has_a_word_in_every_language(language: str) -> None:
    for status in [*BookingStatus, *PaymentStatus]:
        word = pages.status_word(language, status.value)
        assert word != status.value, (language, status)


def test_no_two_buttons_read_like_a_status() -> None:
    """A button names an action: none shares its label with a status word or another button."""
    for language, texts in pages.TEXT.items():
        buttons = [texts[action] for action in ("pay", "fail", "close")]
        statuses = {pages.status_word(language, s.value) for s in [*BookingStatus, *PaymentStatus]}
        assert len(set(buttons)) == len(buttons), language
        assert not set(buttons) & statuses, language


def test_a_chinese_notice_joins_its_sentences_without_a_space() -> None:
    paid = Payment(status="PAID", paid_at="2030-09-01T00:00:00.000Z")
    assert "。请回到" in pages.result_notice("zh", paid)
    assert "PAID. Go back" not in pages.result_notice("en", paid)
    assert "paid. Go back" in pages.result_notice("en", paid)
