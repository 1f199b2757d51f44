"""The CallContext the edge builds once per request: principal, trace, times, locale, peer."""

from __future__ import annotations

from datetime import UTC, datetime

from expert_booking.call_context import LOCAL, Principal
from expert_booking.edge.request_context import call_context
from tests.fakes import TRACE


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
