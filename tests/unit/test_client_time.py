"""The client time rule (CONTRACT section 2): its form, its skew and the tolerance, to the ms."""

from __future__ import annotations

from datetime import timedelta

import pytest

from expert_booking.edge.client_time import check_client_sent_at, skew_ms
from expert_booking.edge.refusals import Refusal

RECEIVED = "2030-09-01T00:05:00.456Z"
TOLERANCE = timedelta(seconds=300)


def _checked(sent: str) -> str | Refusal:
    message = {"params": {"_meta": {"clientSentAt": sent}}}
    return check_client_sent_at(sent, message, 7, received_at=RECEIVED, tolerance=TOLERANCE)


@pytest.mark.parametrize(
    "sent",
    ["2030-09-01T00:00:00.123Z", "2030-09-01T00:00:00.123+00:00", "2030-09-01t00:00:00.123z"],
)
def test_the_skew_counts_milliseconds_in_every_spelling_of_utc(sent: str) -> None:
    assert skew_ms(sent, RECEIVED) == 300_333


def test_a_client_clock_ahead_gives_a_negative_skew() -> None:
    assert skew_ms("2030-09-01T00:05:01.000-00:00", RECEIVED) == -544


@pytest.mark.parametrize(
    ("sent", "accepted"),
    [
        ("2030-09-01T00:00:00.456Z", True),  # exactly the tolerance before the receipt
        ("2030-09-01T00:00:00.455+00:00", False),  # one millisecond more
        ("2030-09-01T00:10:00.456z", True),  # exactly the tolerance after
        ("2030-09-01T00:10:00.457Z", False),
    ],
)
def test_the_tolerance_holds_to_the_millisecond(sent: str, accepted: bool) -> None:
    checked = _checked(sent)
    if accepted:
        assert checked == sent  # echoed as sent
    else:
        assert isinstance(checked, Refusal)
        assert checked.reason == "CLIENT_TIMESTAMP_OUT_OF_RANGE"
