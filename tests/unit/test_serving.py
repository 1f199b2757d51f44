"""The serving loop's rules that need no socket."""

from __future__ import annotations

import pytest

from expert_booking.serving import GRACEFUL_SHUTDOWN_SECONDS, graceful_shutdown_seconds
from expert_booking.settings import Settings


@pytest.mark.parametrize(
    ("payment_timeout", "grace"),
    [(3.0, GRACEFUL_SHUTDOWN_SECONDS), (8.0, GRACEFUL_SHUTDOWN_SECONDS), (30.0, 32), (14.5, 17)],
)
def test_a_stopping_server_waits_out_a_payment_query_in_flight(
    payment_timeout: float, grace: int
) -> None:
    """A confirm cut off mid-query would answer a bare 500 instead of its envelope."""
    settings = Settings(payment_timeout_seconds=payment_timeout)
    assert graceful_shutdown_seconds(settings) == grace
