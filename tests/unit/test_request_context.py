"""The CallContext the edge builds once per request: principal, trace, times, locale, peer."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from expert_booking.call_context import LOCAL, Principal
from expert_booking.edge.request_context import call_context, preferred_language
from tests.fakes import TRACE


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


def test_the_context_of_an_http_request_carries_its_peer_locale_and_times() -> None:
    scope = {
        "type": "http",
        "client": ("127.0.0.1", 51234),
        "headers": [(b"accept-language", b"de-DE,de;q=0.9"), (b"host", b"127.0.0.1")],
    }
    context = call_context(scope, TRACE, "2030-09-01T00:00:00.000Z", "2030-09-01T00:00:00.002Z")
    assert context.principal == LOCAL == Principal(issuer=None, subject="local")
    assert context.trace == TRACE
    assert context.client_sent_at == datetime(2030, 9, 1, tzinfo=UTC)
    assert context.server_received_at == datetime(2030, 9, 1, 0, 0, 0, 2000, tzinfo=UTC)
    assert (context.locale, context.peer) == ("de-DE", "127.0.0.1:51234")


def test_a_request_without_a_socket_or_headers_has_no_peer_and_no_locale() -> None:
    context = call_context({}, TRACE, "2030-09-01T00:00:00Z", "2030-09-01T00:00:00.000Z")
    assert (context.locale, context.peer) == (None, None)
    narrowed = context.in_span(TRACE.__class__(trace_id=TRACE.trace_id, span_id="1" * 16))
    assert narrowed.trace.span_id == "1" * 16
    assert narrowed.client_sent_at == context.client_sent_at
